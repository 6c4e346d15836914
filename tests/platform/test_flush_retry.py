"""tests/flush.py: a transactional test's closing flush, ended by a deadlock with a reader of
the test database (as live stream servers and workers are), runs again and succeeds."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future

import psycopg
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from tests import celeryworker
from tests.flush import ended_by_deadlock, flush_retrying_deadlocks

pytestmark = pytest.mark.django_db(transaction=True)


def flush() -> None:
    call_command("flush", verbosity=0, interactive=False)


def flush_in_thread(attempts: int) -> Future[int]:
    result: Future[int] = Future()

    def run() -> None:
        try:
            result.set_result(flush_retrying_deadlocks(flush, attempts=attempts))
        except BaseException as exc:  # handed to the test, which asserts on it
            result.set_exception(exc)
        finally:
            connection.close()

    threading.Thread(target=run, daemon=True).start()
    return result


def wait_until_flush_waits_for(table: str, observer: psycopg.Connection) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        waiting = observer.execute(
            "SELECT count(*) FROM pg_locks"
            " WHERE relation = %s::regclass AND mode = 'AccessExclusiveLock' AND NOT granted",
            [table],
        ).fetchone()
        if waiting and waiting[0]:
            return
        time.sleep(0.02)
    raise AssertionError(f"the flush never waited for {table}")


def deadlock_a_flush(attempts: int) -> Future[int]:
    """A reader holds the last table the flush locks, then asks for the first, which the flush
    already holds: a deadlock, of which the flush (it waited first) is the victim."""
    tables = connection.introspection.django_table_names(only_existing=True, include_views=False)
    first, last = (connection.ops.quote_name(name) for name in (tables[0], tables[-1]))
    url = celeryworker.test_database_url()
    with psycopg.connect(url) as reader, psycopg.connect(url, autocommit=True) as observer:
        reader.execute(f"SELECT 1 FROM {last} LIMIT 1")  # its lock is held until the commit
        flushed = flush_in_thread(attempts)
        wait_until_flush_waits_for(last, observer)
        reader.execute(f"SELECT 1 FROM {first} LIMIT 1")  # returns once the deadlock has ended
        reader.commit()
        return flushed


def test_a_flush_ended_by_a_deadlock_runs_again_and_succeeds():
    assert deadlock_a_flush(attempts=3).result(timeout=30) == 2


def test_with_one_attempt_the_deadlock_is_raised():
    with pytest.raises(CommandError) as raised:
        deadlock_a_flush(attempts=1).result(timeout=30)

    assert ended_by_deadlock(raised.value)


def test_an_error_that_is_not_a_deadlock_is_raised_at_once():
    runs = []

    def failing_flush() -> None:
        runs.append(1)
        raise CommandError("Database test couldn't be flushed.")

    with pytest.raises(CommandError):
        flush_retrying_deadlocks(failing_flush, attempts=3)
    assert runs == [1]
