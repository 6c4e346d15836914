"""How long a process waits on the database, by what the process does.

- `SERVING`, the web (agentplatform/wsgi.py), the chat stream (agentplatform/asgi.py) and MCP
  (agentplatform/mcp_app.py): a client waits on every query. The server cancels a statement after
  DATABASE_STATEMENT_TIMEOUT_SECONDS (`statement_timeout`, which also bounds lock waits); the
  client stops waiting one second later if the server did not even answer that (frozen), and
  closes the connection. A session idle inside a transaction for
  DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS is ended by the server, releasing its locks.
- `WORKER`, Celery's worker and beat (agentplatform/celery.py): the ingest runs long statements
  (HNSW index builds, bulk inserts of embedded chunks), so DATABASE_WORKER_STATEMENT_TIMEOUT_SECONDS;
  no idle-in-transaction limit (the ingest embeds inside its transaction).
- `COMMAND`, everything else (management commands such as `migrate` and `reembed`, whose index
  builds run as long as the corpus needs; shells; tests): no statement deadline.

Every kind connects within DATABASE_CONNECT_TIMEOUT_SECONDS (libpq's `connect_timeout`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

import psycopg
from django.conf import settings
from psycopg import pq
from psycopg.abc import PQGen

# Past the server's statement_timeout, how much longer the client waits for the server's own
# cancellation (which leaves the connection usable) before it gives up on a server that does not answer.
CLIENT_GRACE_SECONDS = 1.0


class ProcessKind(enum.StrEnum):
    SERVING = "serving"
    WORKER = "worker"
    COMMAND = "command"


_process_kind = ProcessKind.COMMAND


def process_kind_set(kind: ProcessKind) -> None:
    """Called once by a process's entry point, before its first connection."""
    global _process_kind
    _process_kind = kind


def process_kind() -> ProcessKind:
    return _process_kind


@dataclass(frozen=True)
class DatabaseDeadlines:
    connect_seconds: int
    statement_seconds: float  # 0: none
    idle_in_transaction_seconds: float  # 0: none

    @property
    def client_seconds(self) -> float | None:
        """How long the client waits for any one exchange with the server; None: unbounded."""
        return self.statement_seconds + CLIENT_GRACE_SECONDS if self.statement_seconds else None

    def server_options(self) -> list[str]:
        """libpq `options` setting the server's own limits for the session (milliseconds)."""
        limits = {
            "statement_timeout": self.statement_seconds,
            "idle_in_transaction_session_timeout": self.idle_in_transaction_seconds,
        }
        return [f"-c {name}={round(seconds * 1000)}" for name, seconds in limits.items() if seconds]


def database_deadlines(kind: ProcessKind) -> DatabaseDeadlines:
    statement_seconds = {
        ProcessKind.SERVING: settings.DATABASE_STATEMENT_TIMEOUT_SECONDS,
        ProcessKind.WORKER: settings.DATABASE_WORKER_STATEMENT_TIMEOUT_SECONDS,
        ProcessKind.COMMAND: 0,
    }[kind]
    idle_seconds = settings.DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS if kind == ProcessKind.SERVING else 0
    return DatabaseDeadlines(
        connect_seconds=settings.DATABASE_CONNECT_TIMEOUT_SECONDS,
        statement_seconds=statement_seconds,
        idle_in_transaction_seconds=idle_seconds,
    )


class DeadlineConnection(psycopg.Connection[Any]):
    """A psycopg connection whose every exchange with the server ends within `deadline_seconds`.

    An exchange cut short leaves the protocol mid-way (the connection still `ACTIVE`): nothing
    more can be sent on it, so it is closed, and the caller gets an OperationalError (Django's
    error handling answers 503 `database_unavailable`; the next use opens a new connection)."""

    deadline_seconds: float | None = None

    def wait(self, gen: PQGen[Any], interval: float = 0.1, timeout: float | None = None) -> Any:
        deadline = self.deadline_seconds if timeout is None else timeout
        try:
            return super().wait(gen, interval, deadline)
        except psycopg.OperationalError as exc:
            if self.closed or self.pgconn.transaction_status != pq.TransactionStatus.ACTIVE:
                raise  # answered (a cancelled statement, a lost connection): psycopg's own error
            self.close()
            raise psycopg.OperationalError(
                f"the database did not answer within {deadline:g} s; the connection was closed"
            ) from exc
