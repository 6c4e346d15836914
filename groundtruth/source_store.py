"""The source store: the text of every indexed file in PostgreSQL, once per git blob SHA
(SourceBlob), so that GET /sources, every citation's `source_url` and MCP `read_source` read
from the database and a web host needs no git cache, no git token and no network egress.

What is stored. An ingest stores the text of each file it indexes (a SourceFile row) before
the transaction that writes those rows: `source_blobs_store`. Rows are keyed by blob SHA alone,
so a file that two repositories, two paths or a hundred commits share is stored once. Binary
files and files over INGEST_MAX_FILE_BYTES are never stored (the index holds no text of them).

Which commits it answers for ("stored commits"). A repository's stored commits are the commits
its SourceFile rows record (the commit at which each file's current blob was indexed: the
commit every chunk of that file, and so every citation, names) and its `last_commit` (the
commit the whole index reflects: every SourceFile's blob is the file at that commit). A file at
another commit an ingest once saw (an older version that a later ingest replaced) is not
stored: GET /sources answers it 503 `source_unavailable`, saying so.

When a blob goes. A SourceBlob lives while a SourceFile row of any repository names its SHA.
`source_blobs_collect` deletes the others after every successful ingest (and from
`manage.py source_store --collect`): the blobs of files changed or removed by the ingest, of
repositories deleted, of an ingest that died after storing its blobs.

Why the lock. Blobs are stored in short transactions of their own before the ingest's long
index transaction, so two ingests sharing blobs never wait on each other's uncommitted rows
(nor deadlock on them). Between the two, a stored blob is not yet cited: an ingest holds
the store's advisory lock in shared mode from before it stores its first blob until its index
transaction has ended, and the collection runs only when it gets the lock exclusively (it is
skipped, not waited for, while any ingest writes: the last one to finish collects).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from groundtruth.models import SourceBlob

# The advisory lock of the store: one key pair, namespaced like groundtruth/ingest/index_lock.py.
_LOCK_NAMESPACE = "groundtruth.source_store"
_LOCK_KEY = 0
# SHAs asked about per query.
_LOOKUP_BATCH = 1000


@dataclass(frozen=True)
class BlobText:
    sha: str
    text: str
    size: int  # bytes of the file


@contextlib.contextmanager
def source_store_writing() -> Iterator[None]:
    """Holds the store's lock in shared mode (on this session, across transactions) while an
    ingest stores blobs and writes the SourceFile rows that cite them: no collection runs
    meanwhile. A worker that dies releases it with its connection."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock_shared(hashtext(%s), %s)", [_LOCK_NAMESPACE, _LOCK_KEY])
    try:
        yield
    finally:
        # A connection that broke mid-ingest took the lock with it: the ingest's own error is
        # the one to raise, not this one.
        with contextlib.suppress(DatabaseError), connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock_shared(hashtext(%s), %s)", [_LOCK_NAMESPACE, _LOCK_KEY])


def source_blobs_missing(*, shas: Iterable[str]) -> set[str]:
    """Of the blob SHAs given, those the store does not hold."""
    wanted = sorted(set(shas))
    stored: set[str] = set()
    for start in range(0, len(wanted), _LOOKUP_BATCH):
        batch = wanted[start : start + _LOOKUP_BATCH]
        stored.update(SourceBlob.objects.filter(sha__in=batch).values_list("sha", flat=True))
    return set(wanted) - stored


def source_blobs_store(*, blobs: Iterable[BlobText]) -> int:
    """Stores the texts of these blobs (those already stored are left alone: storing is
    idempotent); returns how many rows were new. In SHA order, so that two ingests storing
    overlapping sets take their row locks in one order and never deadlock."""
    now = timezone.now()
    rows = [
        SourceBlob(sha=blob.sha, text=blob.text, size=blob.size, stored_at=now)
        for blob in sorted({blob.sha: blob for blob in blobs}.values(), key=lambda blob: blob.sha)
    ]
    if not rows:
        return 0
    before = len(source_blobs_missing(shas=[row.sha for row in rows]))
    with transaction.atomic():
        SourceBlob.objects.bulk_create(rows, ignore_conflicts=True)
    return before


def source_blobs_collect() -> int | None:
    """Deletes every blob no SourceFile of any repository names; returns how many, or None when
    an ingest was writing (it collects when it is done)."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(hashtext(%s), %s)", [_LOCK_NAMESPACE, _LOCK_KEY])
        if not cursor.fetchone()[0]:
            return None
        cursor.execute(
            """
            DELETE FROM groundtruth_source_blob AS blob
            WHERE NOT EXISTS (SELECT 1 FROM groundtruth_sourcefile AS file WHERE file.blob_sha = blob.sha)
            """
        )
        return cursor.rowcount


@dataclass(frozen=True)
class StoreSummary:
    blobs: int  # rows of the store
    text_bytes: int  # the files' bytes they hold
    files_without_text: int  # indexed files (SourceFile rows) whose blob the store lacks


def source_store_summary() -> StoreSummary:
    """What the store holds, and how many indexed files it lacks (an index built before the
    store, until its next ingest)."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT (SELECT count(*) FROM groundtruth_source_blob),
                   (SELECT coalesce(sum(size), 0) FROM groundtruth_source_blob),
                   (SELECT count(*) FROM groundtruth_sourcefile AS file
                    WHERE NOT EXISTS (SELECT 1 FROM groundtruth_source_blob AS blob WHERE blob.sha = file.blob_sha))
            """
        )
        blobs, text_bytes, files_without_text = cursor.fetchone()
    return StoreSummary(blobs=blobs, text_bytes=int(text_bytes), files_without_text=files_without_text)


def source_blob_text(*, sha: str) -> str | None:
    """The stored text of a blob, or None when the store does not hold it."""
    return SourceBlob.objects.filter(sha=sha).values_list("text", flat=True).first()
