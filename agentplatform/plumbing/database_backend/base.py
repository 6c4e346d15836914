"""The backend's DatabaseWrapper (Django loads `<ENGINE>.base`): connects DeadlineConnections
with the deadlines of this process's kind (agentplatform/plumbing/database_backend/deadlines.py)."""

from __future__ import annotations

from typing import Any

import psycopg
from django.db.backends.postgresql import base as postgresql

from agentplatform.plumbing.database_backend.deadlines import DeadlineConnection, database_deadlines, process_kind


class _PsycopgWithDeadlineConnections:
    """What Django's backend calls `Database`: psycopg (its errors, for Django's error wrapping),
    except that `connect` makes a DeadlineConnection."""

    connect = DeadlineConnection.connect

    def __getattr__(self, name: str) -> Any:
        return getattr(psycopg, name)


class DatabaseWrapper(postgresql.DatabaseWrapper):
    Database = _PsycopgWithDeadlineConnections()

    def get_connection_params(self) -> dict[str, Any]:
        params = super().get_connection_params()
        deadlines = database_deadlines(process_kind())
        params.setdefault("connect_timeout", deadlines.connect_seconds)
        params["options"] = " ".join([params.get("options", ""), *deadlines.server_options()]).strip()
        return params

    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        connection = super().get_new_connection(conn_params)
        connection.deadline_seconds = database_deadlines(process_kind()).client_seconds
        return connection
