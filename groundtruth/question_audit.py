"""The audit of questions: every /search, /ask and MCP search_docs/ask call is recorded (who
asked, by key prefix, what, over which repositories, whether the sources were missing), kept for
QUESTION_AUDIT_RETENTION_DAYS, and read in the admin, where the questions the documentation could
not answer, most frequent first per repository, tell the teams that own the docs what to write.

The record is written off the request thread (QUESTION_AUDIT_BACKGROUND, the default): the call
only queues the row, and a writer thread of the process inserts what is queued every
QUESTION_AUDIT_FLUSH_SECONDS (or once BATCH_ROWS wait) as one multi-row INSERT,
on a connection of its own (agentplatform/plumbing/background_batches.py). A gunicorn thread is
therefore free for the next request as soon as the response is sent, instead of waiting for an
INSERT's round trip (39 ms under load, docs/inference.md). The REST endpoints queue it once the
response has been sent (when the server closes it); MCP's tools as they return.

Durability, the price of that: a record waits in the process's memory for up to
QUESTION_AUDIT_FLUSH_SECONDS. A normal stop writes what is pending (gunicorn's `worker_exit`,
atexit elsewhere, for at most EXIT_FLUSH_SECONDS); a worker killed with SIGKILL (or
by the OOM killer) loses the records of its last fraction of a second. When the database is so slow
that QUEUE_ROWS records wait, further ones are dropped and the count logged, so a
hung database neither grows memory nor holds a request. Each INSERT's transaction does not wait
for its WAL flush: a PostgreSQL crash may lose the last fraction of a second too, never half a
record. The audit is an operator's view of what the docs lack, not an access log of record.

With QUESTION_AUDIT_BACKGROUND false (the tests, which read the record back inside their own
transaction) the INSERT runs in the caller's thread, as before. Either way a failure of it is
logged and never fails the answer (an audit that cannot be written must not take search down
with it).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection, transaction
from django.http.response import HttpResponseBase
from django.utils import timezone

from agentplatform.plumbing.background_batches import BackgroundBatchWriter
from groundtruth.models import AskedQuestion

logger = logging.getLogger(__name__)


def asker_label(caller: object) -> str:
    """Who asked, as the audit names them: a bearer credential's prefix (`sk_<lookup>`, never the
    secret), or `staff:<username>` for a signed-in staff session."""
    prefix = getattr(caller, "key_prefix", "")
    if prefix:
        return str(prefix)
    username = getattr(caller, "get_username", None)
    return f"staff:{username()}" if callable(username) else "unknown"


# At most this many records wait in a process: some tens of MB at worst (questions of up to 2,000
# characters), minutes of the web tier's peak rate, so only a database that stopped answering
# fills it.
QUEUE_ROWS = 10_000
# One INSERT of this many rows at most (6 parameters each, well under PostgreSQL's 65,535).
BATCH_ROWS = 500
# A stopping worker writes what is pending within this, well inside gunicorn's graceful timeout.
EXIT_FLUSH_SECONDS = 5.0


def _records_insert(rows: list[AskedQuestion]) -> None:
    """One multi-row INSERT in a transaction of its own (a savepoint inside a caller's, so that a
    failed INSERT leaves it usable) that does not wait for its WAL flush (see the module
    docstring); inside a caller's transaction (tests) the setting lasts until that one ends."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO OFF")
        AskedQuestion.objects.bulk_create(rows)


def _records_insert_in_writer_thread(rows: list[AskedQuestion]) -> None:
    # The writer thread's own connection: replaced when it broke (a failed batch, a restarted
    # server) or outlived CONN_MAX_AGE, before and after each batch as Django does around each request.
    close_old_connections()
    try:
        _records_insert(rows)
    finally:
        close_old_connections()


question_audit_writer: BackgroundBatchWriter[AskedQuestion] = BackgroundBatchWriter(
    name="Question audit",
    write=_records_insert_in_writer_thread,
    capacity=QUEUE_ROWS,
    batch_size=BATCH_ROWS,
    interval_seconds=lambda: settings.QUESTION_AUDIT_FLUSH_SECONDS,
    exit_timeout_seconds=EXIT_FLUSH_SECONDS,
    logger=logger,
)


def asked_question_record(
    *, caller: object, via: str, question: str, repository_names: Iterable[str], sources_missing: bool
) -> None:
    """Records one question: queued for the writer thread, or (QUESTION_AUDIT_BACKGROUND false)
    inserted now; never raises for the database (see the module docstring)."""
    row = AskedQuestion(
        asked_at=timezone.now(),
        key_prefix=asker_label(caller)[:40],
        via=via,
        question=question,
        repositories=list(repository_names),
        sources_missing=sources_missing,
    )
    if settings.QUESTION_AUDIT_BACKGROUND:
        question_audit_writer.submit(row)
        return
    try:
        _records_insert([row])
    except DatabaseError:
        logger.exception("Question audit not written (%s by %s)", via, row.key_prefix)


def asked_question_record_when_sent(
    response: HttpResponseBase,
    *,
    caller: object,
    via: str,
    question: str,
    repository_names: Iterable[str],
    sources_missing: bool,
) -> None:
    """`asked_question_record` run when `response` is closed, after its body was sent and before
    the request's end closes the database connection. Django calls a response's resource closers
    from close() (as FileResponse closes its file); the WSGI server and the test client call it."""
    names = list(repository_names)
    response._resource_closers.append(  # type: ignore[attr-defined]  # Django's, untyped in the stubs
        lambda: asked_question_record(
            caller=caller, via=via, question=question, repository_names=names, sources_missing=sources_missing
        )
    )


def asked_questions_purge(*, now: datetime | None = None) -> int:
    """Deletes the records older than QUESTION_AUDIT_RETENTION_DAYS; returns how many."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.QUESTION_AUDIT_RETENTION_DAYS)
    deleted, _ = AskedQuestion.objects.filter(asked_at__lt=cutoff).delete()
    return deleted


@dataclass(frozen=True)
class UnansweredQuestion:
    repository: str
    question: str
    times: int
    last_asked_at: datetime


def unanswered_questions_frequent(*, per_repository: int = 10) -> list[UnansweredQuestion]:
    """The questions asked with sources missing, per repository searched, the most frequent
    first (the same question in any letter case and spacing counts once), `per_repository` at
    most for each; ordered by repository. One query."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT repository, question, times, last_asked_at FROM (
                SELECT repository, min(question) AS question, count(*) AS times, max(asked_at) AS last_asked_at,
                       row_number() OVER (
                           PARTITION BY repository ORDER BY count(*) DESC, max(asked_at) DESC
                       ) AS place
                FROM groundtruth_askedquestion, unnest(repositories) AS repository
                WHERE sources_missing
                GROUP BY repository, lower(regexp_replace(btrim(question), '\\s+', ' ', 'g'))
            ) ranked
            WHERE place <= %s
            ORDER BY repository, place
            """,
            [per_repository],
        )
        return [UnansweredQuestion(*row) for row in cursor.fetchall()]
