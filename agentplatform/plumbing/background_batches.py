"""Rows written off the request thread: a per-process writer thread fed by a bounded queue, writing
in batches.

A request hands its row to `submit`, which only appends to an in-memory queue (microseconds, never
a database round trip) and returns; a daemon thread of the process takes what is queued every
`interval_seconds` (sooner once `batch_size` rows wait, or when someone `flush`es) and writes it
with one call of `write` (a multi-row INSERT), on a database connection of its own (Django's
connections are per thread).

What it guarantees and what it does not:
- A request never waits on the write. When the queue holds `capacity` rows (the database is slow
  or hung and the thread is stuck in a write, bounded by the process's statement deadline), further
  rows are dropped and counted; the count is logged once the writer catches up. Memory stays
  bounded whatever the database does.
- A failed write is logged with how many rows it lost, and the thread carries on with the next
  batch (the failed batch is not retried: a batch that failed on a constraint would fail again).
- Rows wait in memory for up to `interval_seconds` before they are written. A normal exit (gunicorn's
  `worker_exit` hook, or `atexit` in any process) writes what is pending, waiting at most
  `exit_timeout_seconds`. A process killed with SIGKILL (or the OOM killer, or a power cut) loses
  the rows queued in its last `interval_seconds`, and the batch being written if its transaction
  had not committed.

The thread starts with the first `submit` in each process; a forked child (a gunicorn worker)
starts with an empty queue and a thread of its own.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

Row = TypeVar("Row")


class BackgroundBatchWriter(Generic[Row]):
    def __init__(
        self,
        *,
        name: str,
        write: Callable[[list[Row]], None],
        capacity: int,
        batch_size: int,
        interval_seconds: Callable[[], float],
        exit_timeout_seconds: float,
        logger: logging.Logger,
    ) -> None:
        self.name = name
        self._write = write
        self._capacity = capacity
        self._batch_size = batch_size
        # Read on every batch, so that a setting (and a test's override of it) is followed.
        self._interval_seconds = interval_seconds
        self._exit_timeout_seconds = exit_timeout_seconds
        self._logger = logger
        self._reset()
        # A child inherits the parent's queue and a lock another thread may have held at the fork;
        # it starts afresh instead (the parent writes its own rows).
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._condition = threading.Condition()
        self._pending: deque[Row] = deque()
        self._thread: threading.Thread | None = None
        self._closing = False
        self._submitted = 0  # rows accepted into the queue, ever
        self._handled = 0  # of those, written or lost to a failed write
        self._flush_upto = 0  # a flush waits for _handled to reach this
        self._dropped_unlogged = 0
        # Totals since the process started, for tests and operators.
        self.dropped = 0
        self.failed = 0
        self.written = 0

    def pending_count(self) -> int:
        """Rows queued and not yet taken by the thread (a batch being written is not counted)."""
        with self._condition:
            return len(self._pending)

    def submit(self, row: Row) -> bool:
        """Queues `row` for the writer thread; False if the queue was full and it was dropped."""
        with self._condition:
            if self._closing:
                self.dropped += 1
                return False
            if len(self._pending) >= self._capacity:
                self.dropped += 1
                self._dropped_unlogged += 1
                if self._dropped_unlogged == 1:
                    self._logger.warning(
                        "%s: queue full (%d rows), dropping rows until the writer catches up", self.name, self._capacity
                    )
                return False
            self._pending.append(row)
            self._submitted += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
                atexit.register(self.close)
            # The thread waits for a first row (then for the interval) or for a full batch.
            if len(self._pending) in (1, self._batch_size):
                self._condition.notify_all()
            return True

    def flush(self, timeout: float) -> bool:
        """Waits (at most `timeout` seconds) until every row submitted so far is written or lost
        to a failed write; True if it got there."""
        with self._condition:
            target = self._submitted
            self._flush_upto = max(self._flush_upto, target)
            self._condition.notify_all()
            return self._condition.wait_for(lambda: self._handled >= target, timeout=timeout)

    def close(self) -> None:
        """At exit: writes what is pending (at most `exit_timeout_seconds`) and stops the thread;
        later rows are dropped. What could not be written in time is logged as lost."""
        with self._condition:
            if self._closing:
                return
            self._closing = True
        if not self.flush(self._exit_timeout_seconds):
            with self._condition:
                lost = self._submitted - self._handled
            self._logger.error("%s: %d rows not written at exit (the database did not answer in time)", self.name, lost)
        with self._condition:
            self._condition.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=1.0)

    def _batch_take(self) -> tuple[list[Row], int] | None:
        """Waits for rows, then for a full batch, a flush, the exit or the interval, whichever
        comes first; None once closing with nothing left."""
        with self._condition:
            while not self._pending:
                if self._closing:
                    return None
                self._condition.wait()
            deadline = time.monotonic() + self._interval_seconds()
            while (
                len(self._pending) < self._batch_size
                and self._flush_upto <= self._handled
                and not self._closing
                and (remaining := deadline - time.monotonic()) > 0
            ):
                self._condition.wait(remaining)
            batch = [self._pending.popleft() for _ in range(min(self._batch_size, len(self._pending)))]
            dropped, self._dropped_unlogged = self._dropped_unlogged, 0
            return batch, dropped

    def _run(self) -> None:
        while (taken := self._batch_take()) is not None:
            batch, dropped = taken
            if dropped:
                self._logger.warning("%s: %d rows dropped while the queue was full", self.name, dropped)
            try:
                self._write(batch)
                written = True
            except Exception:
                written = False
                self._logger.exception("%s: a batch of %d rows not written", self.name, len(batch))
            with self._condition:
                self._handled += len(batch)
                if written:
                    self.written += len(batch)
                else:
                    self.failed += len(batch)
                self._condition.notify_all()
