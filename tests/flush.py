"""The flush that ends every transactional test, retried when PostgreSQL ends a deadlock with it.

Django's flush is one `TRUNCATE` of every table, which takes its exclusive locks one table after
another, in an order that changes from run to run (Django lists the tables from a set). The live
processes some tests start (chat stream servers, Celery workers) go on reading the test
database meanwhile: a read that holds one table and waits for another the `TRUNCATE` holds is a
deadlock, and PostgreSQL fails whichever side waited first, often the `TRUNCATE`. That is a race
of the test harness, never of the code under test, so the flush runs again (its transaction was
rolled back whole).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from unittest import mock

from django.core.management.base import CommandError
from django.test import TransactionTestCase
from psycopg.errors import DeadlockDetected

FLUSH_ATTEMPTS = 3


def ended_by_deadlock(exc: BaseException) -> bool:
    """Whether a deadlock is among the causes (flush's CommandError wraps Django's wrapper)."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, DeadlockDetected):
            return True
        cause = cause.__cause__
    return False


def flush_retrying_deadlocks(flush: Callable[[], None], *, attempts: int = FLUSH_ATTEMPTS) -> int:
    """Runs `flush` until it is not ended by a deadlock, at most `attempts` times; returns how
    many runs it took. Any other error, or a deadlock on the last run, is raised."""
    for attempt in range(1, attempts + 1):
        try:
            flush()
        except CommandError as exc:
            if attempt == attempts or not ended_by_deadlock(exc):
                raise
        else:
            return attempt
    raise AssertionError("unreachable")


@contextmanager
def transactional_teardown_retrying_deadlocks() -> Iterator[None]:
    """Every transactional test's closing flush (pytest-django runs TransactionTestCase's)
    retried as above."""
    original = TransactionTestCase._fixture_teardown

    def fixture_teardown(self: TransactionTestCase) -> None:
        flush_retrying_deadlocks(lambda: original(self))

    with mock.patch.object(TransactionTestCase, "_fixture_teardown", fixture_teardown):
        yield
