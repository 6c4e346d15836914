"""The stream process (the Procfile's `stream` line: uvicorn serving agentplatform.asgi) in a
subprocess, and a reader of Server-Sent Events for tests that open streams with httpx.

    with stream_server(environment={"DATABASE_URL": test_database_url()}, log_path=...) as base_url:
        with httpx.Client(base_url=base_url, timeout=10) as client, client.stream("GET", STREAM) as response:
            events = SSEReader(response)
            events.next_event()   # {"id": "12", "data": "{...}"}; a comment line is {"comment": "ping"}
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


def procfile_stream_command(port: int) -> list[str]:
    """The Procfile's `stream:` line on `port`, its uvicorn run by this interpreter, no access log."""
    line = next(line for line in (ROOT / "Procfile").read_text().splitlines() if line.startswith("stream:"))
    expanded = re.sub(r"\$\{(\w+)(?::-([^}]*))?\}", lambda m: {"STREAM_PORT": str(port)}.get(m[1], m[2] or ""), line)
    program, *arguments = shlex.split(expanded.split(":", 1)[1])
    assert program.endswith("/uvicorn"), program
    return [sys.executable, "-m", "uvicorn", *arguments, "--no-access-log"]


@contextmanager
def stream_server(*, environment: dict[str, str], log_path: Path) -> Iterator[str]:
    port = closed_port()
    env = {**os.environ, **environment}
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            procfile_stream_command(port),
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
                    raise RuntimeError(f"uvicorn did not start:\n{log_path.read_text()}") from None
                time.sleep(0.2)
        yield base_url
    finally:
        process_group_stop(process)


class SSEReader:
    """The frames of an open `text/event-stream` response, one at a time (blocking up to the
    client's read timeout)."""

    def __init__(self, response: httpx.Response) -> None:
        self._lines = response.iter_lines()

    def next_frame(self) -> dict[str, str]:
        frame: dict[str, str] = {}
        for line in self._lines:
            if line == "":
                if frame:
                    return frame
                continue
            name, _, value = line.partition(":")
            if name == "":
                frame["comment"] = value.strip()
            else:
                frame[name] = value.removeprefix(" ")
        raise EOFError("the stream ended")

    def next_event(self) -> dict[str, str]:
        """The next event, past any comment (heartbeat)."""
        while "comment" in (frame := self.next_frame()):
            pass
        return frame
