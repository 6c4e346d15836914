"""The stream process (the Procfile's `stream` line: uvicorn serving agentplatform.asgi) in a
subprocess, and a reader of Server-Sent Events for tests that open streams with httpx.

    with stream_server(environment={"DATABASE_URL": test_database_url()}, log_path=...) as base_url:
        with httpx.Client(base_url=base_url, timeout=10) as client, client.stream("GET", STREAM) as response:
            events = SSEReader(response)
            events.next_event()   # {"id": "12", "data": "{...}"}; a comment line is {"comment": "ping"}
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.liveserver import procfile_server


@contextmanager
def stream_server(*, environment: dict[str, str], log_path: Path) -> Iterator[str]:
    """The Procfile's `stream:` line on a free port; yields its base URL."""
    with procfile_server(name="stream", port_variable="STREAM_PORT", environment=environment, log_path=log_path) as url:
        yield url


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
