"""The busiest reads' queries as server-side prepared statements.

Django's psycopg cursors bind parameters on the client and send every query as text, so
PostgreSQL parses, analyzes and plans it again on each request. The agent list, the chat feed
and the price history (their SQL is long: it writes the JSON, agentplatform/plumbing/sql_json.py) are one
query each, whose text never changes: that repeated work was 0.1-0.2 ms of the database's CPU
per request, a fifth of the query's cost. `prepared_cursor` gives Django's cursor wrapper (its
error translation, execute wrappers and query logging, so tests still count the query) around a
psycopg cursor with server-side binding that prepares each query on its first use on a
connection and then only binds and executes it by name. Its placeholders are PostgreSQL's own
(`%s` and `%(name)s` become `$1`...), its parameters typed by psycopg.

It needs the connection's `prepare_threshold` set (settings: DATABASES OPTIONS); Django's own
client-binding cursors never prepare, whatever the threshold, so no other query is prepared. A
pooler in transaction mode that does not track prepared statements (PgBouncer before 1.21, or
without max_prepared_statements) would break these queries.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from django.db import connection
from django.db.backends.utils import CursorWrapper


class _PreparingCursor(psycopg.Cursor[Any]):
    """psycopg's server-binding cursor, each query prepared from its first execution."""

    def execute(
        self, query: Any, params: Any = None, *, prepare: bool | None = None, binary: bool | None = None
    ) -> Any:
        return super().execute(query, params, prepare=True, binary=binary)


@contextmanager
def prepared_cursor() -> Iterator[CursorWrapper]:
    """Django's cursor whose queries run as prepared statements (see the module docstring)."""
    with connection.cursor() as cursor:
        cursor.cursor.close()
        cursor.cursor = _PreparingCursor(connection.connection)
        yield cursor
