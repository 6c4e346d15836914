"""Stopping a child process started with start_new_session=True, with all of its children."""

from __future__ import annotations

import os
import signal
import subprocess


def process_group_stop(process: subprocess.Popen, *, grace_seconds: float = 20) -> None:
    """SIGTERM to the process group, SIGKILL if it has not exited within `grace_seconds`."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace_seconds)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
