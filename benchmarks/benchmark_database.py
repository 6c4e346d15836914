"""A database of its own for a benchmark, on the embedded PostgreSQL (or the DATABASE_URL server).

Benchmarks never touch the development or test databases: each one names a database (created
and migrated on first use) and points DATABASE_URL at it before Django starts. With DATABASE_URL
unset, the embedded server under var/pgdata is started if needed and reached over its Unix
socket; with DATABASE_URL set, the benchmark database is created on that same server.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent


def _server_url(database: str) -> tuple[str, dict[str, Any]]:
    """(DATABASE_URL for `database`, psycopg connect kwargs for the maintenance database)."""
    configured = os.environ.get("DATABASE_URL", "")
    if configured:
        parts = urlsplit(configured)
        url = urlunsplit(parts._replace(path=f"/{database}"))
        return url, {"conninfo": urlunsplit(parts._replace(path="/postgres"))}
    sys.path.insert(0, str(ROOT))
    from agentplatform.plumbing.embedded_postgres import embedded_server

    data_dir = Path(os.environ.get("VAR_DIR", ROOT / "var")) / "pgdata"
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    server = embedded_server(data_dir)
    socket_dir = str(data_dir)
    # django-environ does not decode a %2F-encoded socket directory in the host part; it passes
    # a `host` query parameter through to libpq, which accepts a directory.
    url = f"postgresql://postgres@/{database}?host={quote(socket_dir, safe='/')}"
    del server
    return url, {"host": socket_dir, "user": "postgres", "dbname": "postgres"}


def benchmark_database_use(database: str) -> str:
    """Creates `database` if missing, points DATABASE_URL at it, sets Django up and migrates."""
    import psycopg

    url, maintenance = _server_url(database)
    with psycopg.connect(**maintenance, autocommit=True) as connection:
        exists = connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database]).fetchone()
        if not exists:
            connection.execute(f'CREATE DATABASE "{database}"')
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentplatform.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return url
