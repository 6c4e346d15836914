"""A real Celery worker process for end-to-end tests, sharing the test database.

    with celery_worker(queue=f"test-{uuid4().hex}", environment={...}, log_path=tmp_path / "worker.log") as worker:
        ...                      # tasks sent to `queue` run in the worker
        worker_kill(worker)      # SIGKILL the whole worker (main process and pool children)

The worker reaches the pytest database through DATABASE_URL (the embedded server's socket
directory, URL-encoded, and the test database name), so the test must use `transactional_db`
for the worker to see its rows. A unique queue keeps it from taking other runs' tasks and other
workers from taking its tasks.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from django.db import connection

from tests.processes import process_group_stop

ROOT = Path(__file__).resolve().parent.parent


def test_database_url() -> str:
    settings = connection.settings_dict
    host = quote(str(settings["HOST"]), safe="") if str(settings["HOST"]).startswith("/") else settings["HOST"]
    port = f":{settings['PORT']}" if settings.get("PORT") else ""
    password = f":{quote(settings['PASSWORD'], safe='')}" if settings.get("PASSWORD") else ""
    return f"postgres://{settings['USER']}{password}@{host}{port}/{settings['NAME']}"


@contextmanager
def celery_worker(*, queue: str, environment: dict[str, str], log_path: Path) -> Iterator[subprocess.Popen]:
    # Adaptation off unless the test says otherwise: a fit queued after its ingests would wait on
    # a models queue no test worker serves.
    env = {
        **os.environ,
        "DATABASE_URL": test_database_url(),
        "CELERY_QUEUE": queue,
        "ENCODER_ADAPTATION_ENABLED": "false",
        **environment,
    }
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "agentplatform",
                "worker",
                "--loglevel",
                "INFO",
                "--concurrency",
                "1",
                "--hostname",
                f"{queue}@%h",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the pool children die with it
        )
    try:
        deadline = time.monotonic() + 90
        while b" ready." not in log_path.read_bytes():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Celery worker did not start:\n{log_path.read_text()}")
            time.sleep(0.2)
        yield process
    finally:
        process_group_stop(process)


def worker_kill(process: subprocess.Popen) -> None:
    """SIGKILL the worker's whole process group, as when its machine or container dies."""
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=10)
