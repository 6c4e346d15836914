"""What each kind of process waits on the database (agentplatform/plumbing/database_backend/): the web,
stream and MCP entry points and Celery's worker and beat each open connections with their own
limits, and a live but slow server cancels a statement itself, leaving the connection usable."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from django.db import OperationalError, connections

from agentplatform.plumbing.database_backend.deadlines import ProcessKind, process_kind, process_kind_set
from tests import celeryworker
from tests.liveserver import ROOT

# Prints what a connection of this process gets: the server's limits for the session, the
# client's deadline and the connect timeout.
REPORT = """
from django.db import connection
with connection.cursor() as cursor:
    cursor.execute(
        "SELECT current_setting('statement_timeout'), current_setting('idle_in_transaction_session_timeout')"
    )
    limits = cursor.fetchone()
print(*limits, connection.connection.deadline_seconds, connection.get_connection_params()["connect_timeout"])
"""
DJANGO_SETUP = "import django; django.setup()\n"
ENTRY_POINTS = {
    "web (gunicorn's agentplatform.wsgi)": "import agentplatform.wsgi\n",
    "stream (uvicorn's agentplatform.asgi)": "import agentplatform.asgi\n",
    "mcp (uvicorn's agentplatform.mcp_app)": "import agentplatform.mcp_app\n",
    "celery worker": DJANGO_SETUP + "from celery.signals import celeryd_init; celeryd_init.send(sender='test')\n",
    "celery beat": DJANGO_SETUP + "from celery.signals import beat_init; beat_init.send(sender='test')\n",
    "management command": DJANGO_SETUP,
}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("entry_point", "expected"),
    [
        ("web (gunicorn's agentplatform.wsgi)", "5s 1min 6.0 3"),
        ("stream (uvicorn's agentplatform.asgi)", "5s 1min 6.0 3"),
        ("mcp (uvicorn's agentplatform.mcp_app)", "5s 1min 6.0 3"),
        ("celery worker", "10min 0 601.0 3"),
        ("celery beat", "10min 0 601.0 3"),
        ("management command", "0 0 None 3"),
    ],
)
def test_each_process_connects_with_the_deadlines_of_its_kind(entry_point, expected):
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "agentplatform.settings",
        "DATABASE_URL": celeryworker.test_database_url(),
        "EMBEDDING_BACKEND": "none",
    }
    report = subprocess.run(
        [sys.executable, "-c", ENTRY_POINTS[entry_point] + REPORT],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert report.returncode == 0, report.stderr
    assert report.stdout.splitlines()[-1] == expected


@pytest.mark.django_db
def test_a_slow_statement_is_cancelled_by_the_server_and_the_connection_stays_usable(settings):
    settings.DATABASE_STATEMENT_TIMEOUT_SECONDS = 0.5
    kind = process_kind()
    process_kind_set(ProcessKind.SERVING)
    serving = connections.create_connection("default")  # a connection of its own, opened as SERVING
    try:
        with serving.cursor() as cursor:
            started = time.monotonic()
            with pytest.raises(OperationalError, match="canceling statement due to statement timeout"):
                cursor.execute("SELECT pg_sleep(5)")
            seconds = time.monotonic() - started
        with serving.cursor() as cursor:
            cursor.execute("SELECT 1")
            answer = cursor.fetchone()
        closed = serving.connection.closed
    finally:
        serving.close()
        process_kind_set(kind)

    assert seconds < 4  # the server's 0.5 s, not the 5 s sleep
    assert (answer, closed) == ((1,), False)  # the same connection, still open
