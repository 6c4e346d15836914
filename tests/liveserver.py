"""The real servers (gunicorn, and uvicorn for an ASGI process, as the Procfile runs them) in a
subprocess, for tests of what only a whole server shows: a database that is down, worker
start-up, server-level limits, a protocol spoken by a real client.

    with gunicorn_server(environment={"DATABASE_URL": ...}, log_path=tmp_path / "web.log") as base_url:
        httpx.get(f"{base_url}/api/agents")

The server reads its configuration from the environment (the test's environment plus
`environment`), so it reaches the test database only through an explicit DATABASE_URL
(`tests.celeryworker.test_database_url()`, with `transactional_db`).
"""

from __future__ import annotations

import os
import re
import shlex
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
    yield from _serving(process, port=port, log_path=log_path, what="gunicorn")


@contextmanager
def procfile_server(*, name: str, port_variable: str, environment: dict[str, str], log_path: Path) -> Iterator[str]:
    """The Procfile's `name:` line (a uvicorn process) on a free port given as `port_variable`, run
    by this interpreter; ready once the application's lifespan start-up ran (uvicorn listens then)."""
    port = closed_port()
    env = {**os.environ, **environment}
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            procfile_command(name, {port_variable: str(port)}),
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    yield from _serving(process, port=port, log_path=log_path, what=f"the Procfile's {name}")


def procfile_command(name: str, variables: dict[str, str]) -> list[str]:
    """The Procfile's `name:` line with `variables` (else each `${NAME:-default}`'s default), its
    program run as a module of this interpreter."""
    line = next(line for line in (ROOT / "Procfile").read_text().splitlines() if line.startswith(f"{name}:"))
    expanded = re.sub(r"\$\{(\w+)(?::-([^}]*))?\}", lambda match: variables.get(match[1], match[2] or ""), line)
    program, *arguments = shlex.split(expanded.split(":", 1)[1])
    return [sys.executable, "-m", Path(program).name, *arguments]


def _serving(process: subprocess.Popen, *, port: int, log_path: Path, what: str) -> Iterator[str]:
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                httpx.get(f"{base_url}/", timeout=5)  # any answer: the server is up
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{what} did not start:\n{log_path.read_text()}") from None
                time.sleep(0.2)
        yield base_url
    finally:
        process_group_stop(process)
