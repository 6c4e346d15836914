"""One ingest run of one repository: registry, fetch, select, chunk, embed, swap.

`ingest_run_execute(run=...)` takes a run already claimed (status running, see
`groundtruth.ingest.runs.ingest_run_claim`) and carries it to `succeeded` or `failed`, through
the transitions of `groundtruth.ingest.runs`.

Atomicity. Everything that changes the repository's index (new chunks, deleted chunks, commit
updates, lexical columns, repository counts, the run's final status) happens in ONE database
transaction, opened after the fetch and file selection. Readers (READ COMMITTED) keep seeing the
previous commit's chunks until it commits, then the new commit's: never a mix. Chunks are
written in batches of INGEST_FILE_BATCH_SIZE files as they are embedded, so the worker holds one
batch in memory whatever the repository's size. If the worker dies, PostgreSQL rolls the
transaction back when the connection drops: the previous index stays served, and the run, left
`running` without heartbeats, is marked failed by `ingest_runs_stale_clear`.

Source store. Before that transaction, the text of every file it will index goes into the
source store (groundtruth/source_store.py, one row per blob SHA, in short transactions of their
own): what GET /sources serves on any host. A worker that dies after storing leaves only blobs
nothing cites, which the next successful ingest collects.

Incremental. Files are compared by blob SHA with the SourceFile rows of the last ingest:
unchanged files are not read, chunked or embedded (their chunks only get the new commit SHA);
changed, added, removed and renamed files are handled as such. A chunk's `commit` is the commit at
which its file's blob was (re)indexed; `Repository.last_commit` is the commit the whole index
reflects (an unchanged file has the same blob at both, so its lines cite exactly). Embeddings are reused by content
hash within the repository, so a renamed file, or the untouched sections of an edited file, are
not embedded again.

Liveness. A heartbeat thread (own DB connection) stamps `heartbeat_at` and the progress counts
every INGEST_HEARTBEAT_SECONDS; if it finds the run no longer running (stale detection marked it
failed), the ingest stops at the next batch and rolls back.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from groundtruth.embeddings import EmbeddingBackend, EmbeddingUnavailable, embedding_backend
from groundtruth.ingest.chunking import ChunkDraft, file_chunk
from groundtruth.ingest.git_access import GitNetworkError, GitRepository
from groundtruth.ingest.index_lock import repository_index_lock
from groundtruth.ingest.index_text import INDEX_VERSION, content_hash, heading_text, passage_text
from groundtruth.ingest.runs import (
    ingest_run_commit_record,
    ingest_run_fail,
    ingest_run_heartbeat,
    ingest_run_ref_follow,
    ingest_run_succeed,
)
from groundtruth.ingest.selection import SelectedFile, files_select, text_problem
from groundtruth.models import Chunk, IngestRun, Repository, SourceFile
from groundtruth.registry_files import RegistryInvalid
from groundtruth.search.everyday_words import everyday_shares_refresh
from groundtruth.search.lexical_index import lexical_index_refresh, lexical_statistics_refresh
from groundtruth.services import registry_load
from groundtruth.source_store import (
    BlobText,
    source_blobs_collect,
    source_blobs_missing,
    source_blobs_store,
    source_store_writing,
)
from groundtruth.vector_index import vector_index_ensure, vector_store_check

logger = logging.getLogger(__name__)

ProgressCallback = Callable[[str, int, int], None]  # (phase, done, total)
MAX_SKIPPED_RECORDED = 200


class IngestError(Exception):
    """The run cannot complete for a reason that retrying will not fix."""


class IngestAborted(IngestError):
    """The run was marked failed elsewhere (stale detection) while this worker still ran it."""


@dataclass
class IngestCounts:
    files_added: int = 0
    files_updated: int = 0
    files_removed: int = 0
    files_unchanged: int = 0
    chunks_added: int = 0
    chunks_updated: int = 0
    chunks_removed: int = 0
    chunks_unchanged: int = 0
    chunks_embedded: int = 0

    def as_fields(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass
class _Progress:
    phase: str = "starting"
    files_total: int = 0
    files_processed: int = 0
    chunks_embedded: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                "phase": self.phase,
                "files_total": self.files_total,
                "files_processed": self.files_processed,
                "chunks_embedded": self.chunks_embedded,
            }


# How often the heartbeat thread looks at the progress: a change is written at once (the run's
# admin page polls it every second), an unchanged run only every INGEST_HEARTBEAT_SECONDS.
PROGRESS_CHECK_SECONDS = 1.0


class _Heartbeat(threading.Thread):
    """Stamps the run's heartbeat and progress from its own connection until stopped: within
    PROGRESS_CHECK_SECONDS of a change of the progress, else every INGEST_HEARTBEAT_SECONDS."""

    def __init__(self, run_id: int, progress: _Progress) -> None:
        super().__init__(name=f"ingest-heartbeat-{run_id}", daemon=True)
        self.run_id = run_id
        self.progress = progress
        self.lost = False
        self._stop_event = threading.Event()

    def run(self) -> None:
        try:
            interval = settings.INGEST_HEARTBEAT_SECONDS
            written: dict[str, Any] | None = None
            due = time.monotonic() + interval
            while not self._stop_event.wait(min(PROGRESS_CHECK_SECONDS, interval)):
                progress = self.progress.snapshot()
                if progress == written and time.monotonic() < due:
                    continue
                if not ingest_run_heartbeat(run_id=self.run_id, progress=progress):
                    self.lost = True
                    return
                written, due = progress, time.monotonic() + interval
        except Exception:  # the heartbeat must never kill the ingest; stale detection covers it
            logger.exception("Heartbeat of ingest run %s failed", self.run_id)
        finally:
            connection.close()

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=30)


@dataclass
class _Plan:
    commit: str
    to_chunk: list[SelectedFile]  # added or changed, in path order
    existing: dict[str, tuple[int, str]]  # path -> (SourceFile id, blob SHA)
    removed_ids: list[int]
    unchanged_paths: list[str]
    skipped: list[tuple[str, str]]
    files_total: int


def ingest_run_execute(*, run: IngestRun, progress: ProgressCallback | None = None, full: bool = False) -> IngestRun:
    """Carries a claimed run to completion. Returns the finished run.

    `full=True` re-chunks every selected file even when its blob did not change (after a change
    of chunk sizes); embeddings are still reused by content hash. Raises IngestError (and
    subclasses; an invalid registry is one), EmbeddingError or GitError after marking the run failed,
    except GitNetworkError and EmbeddingUnavailable, which leave the run running so that the
    caller can requeue it for a retry or fail it (`ingest_run_fail`).
    """
    state = _Progress()
    heartbeat = _Heartbeat(run.pk, state)
    heartbeat.start()
    timings: dict[str, float] = {}
    started = time.monotonic()
    try:
        finished = _execute(run, state, heartbeat, timings, progress, full=full)
    except (GitNetworkError, EmbeddingUnavailable):
        heartbeat.stop()
        raise
    except Exception as exc:
        heartbeat.stop()
        ingest_run_fail(run=run, error=_error_text(exc))
        raise
    elapsed = time.monotonic() - started
    logger.info("Ingest run %s of %s at %s done in %.1f s", run.pk, run.repository.name, finished.commit[:12], elapsed)
    return finished


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:4000]


def _phase(state: _Progress, timings: dict[str, float], name: str, started: float) -> float:
    now = time.monotonic()
    with state.lock:
        timings[state.phase] = round(timings.get(state.phase, 0.0) + now - started, 3)
        state.phase = name
    return now


def _execute(
    run: IngestRun,
    state: _Progress,
    heartbeat: _Heartbeat,
    timings: dict[str, float],
    progress: ProgressCallback | None,
    *,
    full: bool,
) -> IngestRun:
    mark = time.monotonic()
    state.phase = "registry"
    # The run was accepted from the registry as last synced (a web host reads no git): sources.yml
    # is re-read here, so a repository removed, disabled or changed since is handled with what it
    # says now, and the reason is the run's error.
    try:
        registry_load()
    except RegistryInvalid as exc:
        raise IngestError(
            f"the source registry is invalid, so this run did not start (the last good registry and the "
            f"index stay served): {exc}"
        ) from exc
    repository = Repository.objects.get(pk=run.repository_id)
    if not repository.enabled:
        raise IngestError(f"repository {repository.name} is disabled or no longer listed in the registry")
    if run.follows_registry_ref and run.ref != repository.ref:
        ingest_run_ref_follow(run=run, ref=repository.ref)

    backend = embedding_backend(fresh=True)
    if backend.enabled:
        vector_store_check(backend)
        vector_index_ensure(model_name=backend.model_name, dimension=backend.dimension)

    mark = _phase(state, timings, "fetch", mark)
    git = GitRepository(repository.url)
    git.fetch()
    commit = git.resolve(run.ref or repository.ref)
    ingest_run_commit_record(run=run, commit=commit)

    mark = _phase(state, timings, "select", mark)
    # An index built by another recipe (index_text.INDEX_VERSION) is rebuilt whole: unchanged
    # files are re-chunked too, and embeddings are reused only where their text is the same.
    plan = _plan(git, repository, commit, full=full or repository.index_version != INDEX_VERSION)
    counts = IngestCounts(
        files_removed=len(plan.removed_ids),
        files_unchanged=len(plan.unchanged_paths),
    )
    state.files_total = len(plan.to_chunk)
    if progress:
        progress("select", 0, len(plan.to_chunk))

    # The texts go into the source store (groundtruth/source_store.py) before the index
    # transaction cites them, under the store's shared lock so that no collection removes them
    # in between; the files' texts are then all in the database when the new index shows.
    with source_store_writing():
        mark = _phase(state, timings, "store", mark)
        _blobs_store(git, plan)
        mark = _phase(state, timings, "chunk_embed_write", mark)
        new_chunk_ids: list[int] = []
        with transaction.atomic():
            # Serialises with anything else rewriting this repository's chunks (reembed), without
            # locking the Repository row: the registry re-read of a request writes that row and must
            # not wait for this transaction. (Two ingests of one repository cannot overlap: it has at
            # most one active run.)
            repository_index_lock(repository_id=repository.pk)
            # A switch to an adapted encoder may have committed while this run waited for the lock
            # (groundtruth/adaptation/switching.py): it writes in the space the index is in now.
            if backend.enabled and (current := embedding_backend(fresh=True)).model_name != backend.model_name:
                backend = current
                vector_index_ensure(model_name=backend.model_name, dimension=backend.dimension)
            for batch in _batches(plan.to_chunk, settings.INGEST_FILE_BATCH_SIZE):
                if heartbeat.lost:
                    raise IngestAborted(f"run {run.pk} was marked failed while running (no heartbeat in time)")
                new_chunk_ids.extend(_batch_write(git, repository, commit, batch, plan, backend, counts))
                with state.lock:
                    state.files_processed += len(batch)
                    state.chunks_embedded = counts.chunks_embedded
                if progress:
                    progress("chunk_embed_write", state.files_processed, state.files_total)

            mark = _phase(state, timings, "swap", mark)
            if plan.removed_ids:
                counts.chunks_removed += Chunk.objects.filter(source_file_id__in=plan.removed_ids).delete()[0]
                SourceFile.objects.filter(pk__in=plan.removed_ids).delete()
            if plan.unchanged_paths:
                # Unchanged chunks keep the commit at which their blob was indexed: the same blob sits
                # at the same path in the new commit, so their citations stay exact. Rewriting the
                # commit of every row would re-insert each into the vector and text indexes (a
                # non-HOT update): most of the cost of a small re-ingest, for nothing.
                counts.chunks_unchanged = Chunk.objects.filter(
                    repository=repository, path__in=plan.unchanged_paths
                ).count()
            if new_chunk_ids:
                lexical_index_refresh(chunk_ids=new_chunk_ids)
            if new_chunk_ids or plan.removed_ids or repository.index_version != INDEX_VERSION:
                lexical_statistics_refresh(repository_ids=[repository.pk])
                everyday_shares_refresh(repository_ids=[repository.pk])
            heartbeat.stop()
            if heartbeat.lost:
                raise IngestAborted(f"run {run.pk} was marked failed while running (no heartbeat in time)")
            # The Repository row is written last, so the transaction holds its row lock only for
            # the moment it takes to commit (a registry re-read writing the row waits that long).
            now = timezone.now()
            Repository.objects.filter(pk=repository.pk).update(
                last_commit=commit,
                last_ingested_at=now,
                index_version=INDEX_VERSION,
                file_count=SourceFile.objects.filter(repository=repository).count(),
                chunk_count=Chunk.objects.filter(repository=repository).count(),
            )
            _phase(state, timings, "done", mark)
            timings["total"] = round(sum(value for key, value in timings.items() if key != "total"), 3)
            succeeded = ingest_run_succeed(
                run=run,
                finished_at=now,
                files_total=plan.files_total,
                files_processed=state.files_processed,
                files_skipped=[list(item) for item in plan.skipped[:MAX_SKIPPED_RECORDED]],
                timings=timings,
                counts=counts.as_fields(),
            )
            if not succeeded:
                raise IngestAborted(f"run {run.pk} was marked failed while running (no heartbeat in time)")
    # Whatever this ingest stopped citing (and whatever an ingest that died had stored).
    source_blobs_collect()
    run.refresh_from_db()
    return run


def _blobs_store(git: GitRepository, plan: _Plan) -> None:
    """Stores the text of every file this ingest indexes, and of every unchanged file whose text
    the store lacks (an index built before the store existed: its first ingest fills it)."""
    unchanged = [plan.existing[path][1] for path in plan.unchanged_paths]
    shas = sorted(source_blobs_missing(shas=[*unchanged, *(item.blob_sha for item in plan.to_chunk)]))
    for start in range(0, len(shas), settings.INGEST_FILE_BATCH_SIZE):
        blobs: list[BlobText] = []
        with git.blob_reader() as read:
            for blob_sha in shas[start : start + settings.INGEST_FILE_BATCH_SIZE]:
                data = read(blob_sha)
                if text_problem(data) is None:  # a binary is skipped by the chunking too
                    blobs.append(BlobText(sha=blob_sha, text=data.decode("utf-8"), size=len(data)))
        source_blobs_store(blobs=blobs)


def _batches(items: list[SelectedFile], size: int) -> Iterator[list[SelectedFile]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _plan(git: GitRepository, repository: Repository, commit: str, *, full: bool) -> _Plan:
    entries = git.list_files(commit)
    with git.blob_reader() as read:
        selection = files_select(
            entries,
            include=repository.include,
            exclude=repository.exclude,
            max_bytes=settings.INGEST_MAX_FILE_BYTES,
            read_blob=read,
        )
    existing = {
        path: (file_id, blob_sha)
        for file_id, path, blob_sha in SourceFile.objects.filter(repository=repository).values_list(
            "id", "path", "blob_sha"
        )
    }
    selected_paths = {item.path for item in selection.files}
    to_chunk: list[SelectedFile] = []
    unchanged: list[str] = []
    for item in selection.files:
        known = existing.get(item.path)
        if known is not None and known[1] == item.blob_sha and not full:
            unchanged.append(item.path)
        else:
            to_chunk.append(item)
    removed_ids = [file_id for path, (file_id, _) in existing.items() if path not in selected_paths]
    return _Plan(
        commit=commit,
        to_chunk=to_chunk,
        existing=existing,
        removed_ids=removed_ids,
        unchanged_paths=unchanged,
        skipped=list(selection.skipped),
        files_total=len(selection.files),
    )


def _batch_write(
    git: GitRepository,
    repository: Repository,
    commit: str,
    batch: list[SelectedFile],
    plan: _Plan,
    backend: EmbeddingBackend,
    counts: IngestCounts,
) -> list[int]:
    """Reads, chunks and embeds one batch of files and writes them; returns the new chunk ids."""
    drafts_by_file: list[tuple[SelectedFile, list[ChunkDraft]]] = []
    with git.blob_reader() as read:
        for item in batch:
            data = read(item.blob_sha)
            if problem := text_problem(data):
                plan.skipped.append((item.path, problem))
                if item.path in plan.existing:  # it was text before: its chunks go
                    plan.removed_ids.append(plan.existing[item.path][0])
                    counts.files_removed += 1
                continue
            drafts = file_chunk(
                path=item.path,
                text=data.decode("utf-8"),
                max_chars=settings.CHUNK_MAX_CHARS,
                config_whole_max_chars=settings.CONFIG_WHOLE_FILE_MAX_CHARS,
            )
            drafts_by_file.append((item, drafts))

    vectors = _embeddings_for(repository, [d for _, drafts in drafts_by_file for d in drafts], backend, counts)

    updated_file_ids = [plan.existing[item.path][0] for item, _ in drafts_by_file if item.path in plan.existing]
    old_counts: dict[int, int] = {}
    if updated_file_ids:
        for source_file_id in Chunk.objects.filter(source_file_id__in=updated_file_ids).values_list(
            "source_file_id", flat=True
        ):
            old_counts[source_file_id] = old_counts.get(source_file_id, 0) + 1
        Chunk.objects.filter(source_file_id__in=updated_file_ids).delete()

    new_files: list[SourceFile] = []
    for item, _ in drafts_by_file:
        if item.path in plan.existing:
            file_id = plan.existing[item.path][0]
            SourceFile.objects.filter(pk=file_id).update(blob_sha=item.blob_sha, commit=commit, size=item.size)
        else:
            new_files.append(
                SourceFile(repository=repository, path=item.path, blob_sha=item.blob_sha, commit=commit, size=item.size)
            )
    created = {source.path: source.pk for source in SourceFile.objects.bulk_create(new_files)}

    chunks: list[Chunk] = []
    for item, drafts in drafts_by_file:
        if item.path in plan.existing:
            file_id = plan.existing[item.path][0]
            before = old_counts.get(file_id, 0)
            counts.files_updated += 1
            counts.chunks_updated += min(before, len(drafts))
            counts.chunks_added += max(len(drafts) - before, 0)
            counts.chunks_removed += max(before - len(drafts), 0)
        else:
            file_id = created[item.path]
            counts.files_added += 1
            counts.chunks_added += len(drafts)
        for ordinal, draft in enumerate(drafts):
            draft_hash = content_hash(repository_name=repository.name, heading=draft.heading, text=draft.text)
            vector, heading_vector = vectors.get(draft_hash, (None, None))
            chunks.append(
                Chunk(
                    repository=repository,
                    source_file_id=file_id,
                    path=item.path,
                    commit=commit,
                    start_line=draft.start_line,
                    end_line=draft.end_line,
                    heading=list(draft.heading),
                    text=draft.text,
                    content_hash=draft_hash,
                    trust=repository.trust,
                    ordinal=ordinal,
                    embedding=vector,
                    heading_embedding=heading_vector,
                    embedding_model=backend.model_name if vector is not None else "",
                )
            )
    return [chunk.pk for chunk in Chunk.objects.bulk_create(chunks, batch_size=500)]


def _embeddings_for(
    repository: Repository, drafts: list[ChunkDraft], backend: EmbeddingBackend, counts: IngestCounts
) -> dict[str, tuple[Any, Any]]:
    """content hash -> (passage vector, heading vector or None) for every draft: reused from
    stored chunks when the same content was embedded by the same model, computed otherwise
    (each distinct title once)."""
    if not backend.enabled or not drafts:
        return {}
    wanted: dict[str, ChunkDraft] = {}
    for draft in drafts:
        wanted.setdefault(content_hash(repository_name=repository.name, heading=draft.heading, text=draft.text), draft)
    vectors: dict[str, tuple[Any, Any]] = {}
    hashes = list(wanted)
    for start in range(0, len(hashes), 1000):
        rows = (
            Chunk.objects.filter(
                repository=repository,
                embedding_model=backend.model_name,
                content_hash__in=hashes[start : start + 1000],
                embedding__isnull=False,
            )
            .order_by()
            .distinct("content_hash")
            .values_list("content_hash", "embedding", "heading_embedding")
        )
        for stored_hash, embedding, heading_embedding in rows:
            # A stored chunk of an older recipe may lack its heading vector: embed it anew.
            if heading_embedding is not None or heading_text(wanted[stored_hash].heading) is None:
                vectors[stored_hash] = (embedding, heading_embedding)
    missing = [draft_hash for draft_hash in hashes if draft_hash not in vectors]
    if missing:
        titles = sorted({title for draft_hash in missing if (title := heading_text(wanted[draft_hash].heading))})
        texts = [
            passage_text(
                repository_name=repository.name, heading=wanted[draft_hash].heading, text=wanted[draft_hash].text
            )
            for draft_hash in missing
        ]
        embedded = backend.embed(texts + titles)
        title_vectors = dict(zip(titles, embedded[len(texts) :], strict=True))
        for draft_hash, vector in zip(missing, embedded[: len(texts)], strict=True):
            title = heading_text(wanted[draft_hash].heading)
            vectors[draft_hash] = (vector, title_vectors[title] if title else None)
        counts.chunks_embedded += len(missing)
    return vectors
