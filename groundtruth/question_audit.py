"""The audit of questions: every /search, /ask and MCP search_docs/ask call is recorded (who
asked, by key prefix, what, over which repositories, whether the sources were missing), kept for
QUESTION_AUDIT_RETENTION_DAYS, and read in the admin, where the questions the documentation could
not answer, most frequent first per repository, tell the teams that own the docs what to write.

The write is one INSERT, in a transaction that does not wait for its WAL flush; the REST
endpoints make it once the response has been sent (when the server closes it), so that it adds
nothing measurable to the answer's latency (benchmarks/question_audit.py).
A failure of it is logged and never fails the answer (an audit that cannot be written must not
take search down with it).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.http.response import HttpResponseBase
from django.utils import timezone

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


def asked_question_record(
    *, caller: object, via: str, question: str, repository_names: Iterable[str], sources_missing: bool
) -> None:
    """Records one question; logs and swallows a database error (see the module docstring)."""
    row = AskedQuestion(
        asked_at=timezone.now(),
        key_prefix=asker_label(caller)[:40],
        via=via,
        question=question,
        repositories=list(repository_names),
        sources_missing=sources_missing,
    )
    try:
        # A transaction of its own (a savepoint inside a caller's, so that a failed INSERT leaves
        # it usable) that does not wait for its WAL flush: a record may be lost if PostgreSQL
        # crashes within the next fraction of a second, never half-written; that wait was most
        # of what the write cost (benchmarks/question_audit.py). Inside a caller's transaction
        # (tests) the setting lasts until that one ends.
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL synchronous_commit TO OFF")
            row.save(force_insert=True)
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
