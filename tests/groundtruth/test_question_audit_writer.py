"""The question audit's writer thread (QUESTION_AUDIT_BACKGROUND, the default outside the tests):
a record queued by a request is in the table after a flush, a full queue drops and counts, a
failing write is logged and the thread carries on, and a stopping process writes what it holds,
in process and through a real gunicorn stopped with SIGTERM.

The thread writes on a connection of its own, outside any test transaction, hence
`transaction=True` (tables emptied after each test)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from django.db import connection, transaction
from django.utils import timezone

from agentplatform.plumbing.background_batches import BackgroundBatchWriter
from groundtruth.models import AskedQuestion
from groundtruth.question_audit import _records_insert_in_writer_thread, logger, question_audit_writer
from tests import celeryworker
from tests.groundtruth.factories import RepositoryFactory, bearer, service_key
from tests.liveserver import gunicorn_server

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _writer_connections_closed_after_each_batch(monkeypatch) -> None:
    # The writer thread closes its connection after a batch once CONN_MAX_AGE has passed: at 0,
    # right away, so that no connection of a test's thread outlives it (and holds the test
    # database open). Every thread's connection reads this same settings dict.
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 0)


@pytest.fixture
def writer() -> Iterator[BackgroundBatchWriter[AskedQuestion]]:
    """A writer of the audit's own kind and write function, with a small queue: one row a batch."""
    made = BackgroundBatchWriter(
        name="Question audit",
        write=_records_insert_in_writer_thread,
        capacity=3,
        batch_size=1,
        interval_seconds=lambda: 0.0,
        exit_timeout_seconds=10.0,
        logger=logger,
    )
    yield made
    made.close()


def record(question: str) -> AskedQuestion:
    return AskedQuestion(
        asked_at=timezone.now(),
        key_prefix="sk_000000000000",
        via="search",
        question=question,
        repositories=["acme/handbook"],
        sources_missing=False,
    )


def questions() -> list[str]:
    return list(AskedQuestion.objects.order_by("id").values_list("question", flat=True))


def test_a_search_queues_its_record_and_the_writer_thread_inserts_it_on_flush(api_client, settings):
    settings.QUESTION_AUDIT_BACKGROUND = True
    settings.QUESTION_AUDIT_FLUSH_SECONDS = 3600  # written by the flush below, not by the interval
    RepositoryFactory(name="acme/handbook")
    secret = service_key("read")
    written_before = question_audit_writer.written

    response = api_client.get("/search", {"q": "broker"}, **bearer(secret))

    assert response.status_code == 200
    assert AskedQuestion.objects.count() == 0  # queued in memory, not written by the request
    assert question_audit_writer.flush(timeout=30) is True
    assert list(AskedQuestion.objects.values_list("via", "question", "repositories", "sources_missing")) == [
        ("search", "broker", ["acme/handbook"], True)
    ]
    assert question_audit_writer.written - written_before == 1


def written_reaches(writer: BackgroundBatchWriter[AskedQuestion], count: int) -> bool:
    deadline = time.monotonic() + 30
    while writer.written < count and time.monotonic() < deadline:
        time.sleep(0.01)
    return writer.written == count


def test_without_a_flush_each_row_is_written_once_its_interval_has_passed():
    # interval 0, batches far from full: written as soon as the thread sees it; a second row,
    # after the thread went idle again, wakes it too.
    idle = BackgroundBatchWriter(
        name="Question audit",
        write=_records_insert_in_writer_thread,
        capacity=100,
        batch_size=100,
        interval_seconds=lambda: 0.0,
        exit_timeout_seconds=10.0,
        logger=logger,
    )
    try:
        idle.submit(record("first"))
        first_written = written_reaches(idle, 1)
        idle.submit(record("second"))
        second_written = written_reaches(idle, 2)
    finally:
        idle.close()

    assert (first_written, second_written) == (True, True)
    assert questions() == ["first", "second"]


def test_rows_are_written_in_batches_of_one_insert_each(settings):
    settings.QUESTION_AUDIT_FLUSH_SECONDS = 3600
    batches: list[int] = []

    def counted(rows: list[AskedQuestion]) -> None:
        batches.append(len(rows))
        _records_insert_in_writer_thread(rows)

    batched = BackgroundBatchWriter(
        name="Question audit",
        write=counted,
        capacity=100,
        batch_size=4,
        interval_seconds=lambda: 3600.0,
        exit_timeout_seconds=10.0,
        logger=logger,
    )
    try:
        accepted = [batched.submit(record(f"q{number}")) for number in range(6)]
        assert batched.flush(timeout=30) is True
    finally:
        batched.close()

    assert accepted == [True] * 6
    assert batches == [4, 2]  # a full batch at once, the rest at the flush
    assert questions() == [f"q{number}" for number in range(6)]


def test_a_full_queue_drops_rows_counts_them_and_logs_the_count(writer, caplog):
    with caplog.at_level(logging.WARNING, logger="groundtruth.question_audit"):
        with transaction.atomic():
            with connection.cursor() as cursor:
                # The database stops answering the writer: its INSERT waits on this lock.
                cursor.execute("LOCK TABLE groundtruth_askedquestion IN EXCLUSIVE MODE")
            assert writer.submit(record("in flight")) is True
            deadline = time.monotonic() + 30
            while writer.pending_count() and time.monotonic() < deadline:
                time.sleep(0.01)  # until the thread has taken it (and waits on the lock)
            accepted = [writer.submit(record(f"queued {number}")) for number in range(5)]
            assert writer.pending_count() == 3
        assert writer.flush(timeout=30) is True

    assert accepted == [True, True, True, False, False]
    assert (writer.dropped, writer.written, writer.failed) == (2, 4, 0)
    assert questions() == ["in flight", "queued 0", "queued 1", "queued 2"]
    assert [record.getMessage() for record in caplog.records] == [
        "Question audit: queue full (3 rows), dropping rows until the writer catches up",
        "Question audit: 2 rows dropped while the queue was full",
    ]


def test_a_failing_write_is_logged_and_the_thread_writes_the_next_batch(writer, caplog):
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION audit_refuse() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'audit table refuses writes'; END $$"
        )
        cursor.execute(
            "CREATE TRIGGER audit_refuse BEFORE INSERT ON groundtruth_askedquestion "
            "FOR EACH ROW EXECUTE FUNCTION audit_refuse()"
        )
    try:
        with caplog.at_level(logging.ERROR, logger="groundtruth.question_audit"):
            writer.submit(record("refused"))
            assert writer.flush(timeout=30) is True
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER audit_refuse ON groundtruth_askedquestion")
            cursor.execute("DROP FUNCTION audit_refuse()")

    writer.submit(record("after"))
    assert writer.flush(timeout=30) is True

    assert [record.getMessage() for record in caplog.records] == ["Question audit: a batch of 1 rows not written"]
    assert "audit table refuses writes" in caplog.records[0].exc_text
    assert (writer.failed, writer.written) == (1, 1)
    assert questions() == ["after"]


def test_close_writes_what_is_pending_and_later_rows_are_dropped():
    slow = BackgroundBatchWriter(
        name="Question audit",
        write=_records_insert_in_writer_thread,
        capacity=100,
        batch_size=100,
        interval_seconds=lambda: 3600.0,  # nothing would be written before the close
        exit_timeout_seconds=10.0,
        logger=logger,
    )
    slow.submit(record("first"))
    slow.submit(record("second"))
    assert AskedQuestion.objects.count() == 0

    slow.close()

    assert questions() == ["first", "second"]
    assert slow.submit(record("too late")) is False
    assert (slow.written, slow.dropped) == (2, 1)


def test_a_gunicorn_worker_stopped_with_sigterm_writes_the_records_it_held(tmp_path: Path):
    RepositoryFactory(name="acme/handbook")
    secret = service_key("read")
    environment = {
        "DATABASE_URL": celeryworker.test_database_url(),
        "EMBEDDING_BACKEND": "none",
        "QUESTION_AUDIT_FLUSH_SECONDS": "3600",  # held in the worker's memory until it stops
    }
    with gunicorn_server(environment=environment, log_path=tmp_path / "web.log") as base_url:
        with httpx.Client(base_url=base_url, timeout=30, headers={"Authorization": f"Bearer {secret}"}) as client:
            statuses = [client.get("/search", params={"q": question}).status_code for question in ("one", "two")]
        held = AskedQuestion.objects.count()
    # Leaving the block stopped gunicorn with SIGTERM: the worker's exit wrote its queue.

    assert statuses == [200, 200]
    assert held == 0
    assert questions() == ["one", "two"]
