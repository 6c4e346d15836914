"""A Redis of the test's own on a free port, for tests that freeze or stop it (never the shared one).

with redis_server() as redis:
    redis.url                  # redis://127.0.0.1:<port>/0
    with redis.frozen():       # SIGSTOP: connections accepted by the kernel, never answered
        ...

SilentRedis(): a listener that accepts connections and never answers, counting them (`accepted`),
for tests that pin how often a hung Redis is tried.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class RedisServer:
    process: subprocess.Popen
    port: int

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @contextmanager
    def frozen(self) -> Iterator[None]:
        os.kill(self.process.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(self.process.pid, signal.SIGCONT)


@contextmanager
def redis_server() -> Iterator[RedisServer]:
    executable = shutil.which("redis-server")
    if executable is None:
        raise RuntimeError("redis-server is not installed")
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="test-redis-") as directory:
        process = subprocess.Popen(
            [
                executable,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                directory,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    if process.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError("redis-server did not start") from None
                    time.sleep(0.05)
            yield RedisServer(process=process, port=port)
        finally:
            os.kill(process.pid, signal.SIGCONT)
            process.terminate()
            process.wait(timeout=10)


class SilentRedis:
    """A TCP server that accepts connections and never answers: a hung Redis."""

    def __init__(self) -> None:
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(16)
        self.port = self.server.getsockname()[1]
        self.accepted: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            self.accepted.append(connection)

    def close(self) -> None:
        self.server.close()
        for connection in self.accepted:
            connection.close()
