"""The real web server (gunicorn, as the Procfile runs it) in a subprocess, for tests of what only
a whole server shows: a database that is down, worker start-up, server-level limits.

    with gunicorn_server(environment={"DATABASE_URL": ...}, log_path=tmp_path / "web.log") as base_url:
        httpx.get(f"{base_url}/api/agents")

The server reads its configuration from the environment (the test's environment plus
`environment`), so it reaches the test database only through an explicit DATABASE_URL
(`tests.celeryworker.test_database_url()`, with `transactional_db`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.conftest import closed_port
from tests.processes import process_group_stop

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def gunicorn_server(*, environment: dict[str, str], log_path: Path, workers: int = 1) -> Iterator[str]:
    port = closed_port()
    env = {**os.environ, **environment}
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "agentplatform.wsgi:application",
                "--config",
                "python:agentplatform.gunicorn_config",
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                str(workers),
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                httpx.get(f"{base_url}/", timeout=5)  # any answer: the server is up
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"gunicorn did not start:\n{log_path.read_text()}") from None
                time.sleep(0.2)
        yield base_url
    finally:
        process_group_stop(process)
