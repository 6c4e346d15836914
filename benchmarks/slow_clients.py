"""Slow clients against the web tier: do idle or trickling connections delay everyone else?

    .venv/bin/python benchmarks/slow_clients.py                          # about 2.5 minutes
    .venv/bin/python benchmarks/slow_clients.py --worker-class sync      # the web tier before issue 21

What it does, in one run:
1. Creates a database `bench_slow_<pid>` on the embedded PostgreSQL (var/pgdata) and migrates it;
   Redis is the one at REDIS_URL, with a key prefix of this run's own (deleted at the end).
2. Starts gunicorn with the web line of the Procfile on a free port, with the benchmark server's
   settings (rate limits raised so they do not throttle the run, still counted) and
   EMBEDDING_BACKEND=none (the measured request does not embed; the model would only slow the
   start). `--worker-class sync` (or `gthread`) runs gunicorn's own worker of that class instead
   of the configured one (GUNICORN_CMD_ARGS), the same way.
3. Four phases of `--phase-seconds` each (default 32: past gunicorn's 30 s worker timeout, so a
   worker stuck on the held connections is killed within its phase), each sending GET /api/agents
   back to back on a new connection each time (a timeout of 5 s counts as a failure):
   - baseline: nothing else connected;
   - idle: 64 connections open, nothing sent;
   - stalled header: 64 connections that sent `GET /api/agents HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n`
     and nothing more (no blank line);
   - byte a second: 64 connections that sent the same, then one more header byte every second.
   A held connection the server closes is opened again at once (and counted), so 64 are held
   throughout.
4. Prints, per phase: connections held, requests, failures, p50 and p99 in ms beside the
   baseline's, the p99 ratio to the baseline (target: at most 2) and the workers gunicorn killed
   (`WORKER TIMEOUT` in its log; target: none). A failed request counts in p50/p99 as the 5 s
   timeout, a lower bound of what it would have waited.
"""

from __future__ import annotations

import argparse
import os
import selectors
import shlex
import socket
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.api import (
    BASE_DIR,
    clear_redis_prefix,
    embedded_postgres_socket_dir,
    procfile_web_command,
    server_environment,
    stop,
    wait_until_serving,
)

DATABASE_NAME = f"bench_slow_{os.getpid()}"
HELD_CONNECTIONS = 64
REQUEST_TIMEOUT_SECONDS = 5.0
TARGET_P99_RATIO = 2.0
PATH = "/api/agents"
STALLED_HEADER = b"GET /api/agents HTTP/1.1\r\nHost: 127.0.0.1\r\n"
# One byte a second of a header field that never ends.
TRICKLED_FIELD = b"X-Slow: " + b"a" * 10_000


@dataclass
class Phase:
    name: str
    held: int
    reopened: int
    latencies_ms: list[float]
    failures: int
    worker_kills: int

    def percentile(self, fraction: float) -> float:
        """Of every request sent, a failed one counted as the timeout (a lower bound)."""
        ordered = sorted(self.latencies_ms + [REQUEST_TIMEOUT_SECONDS * 1000] * self.failures)
        if not ordered:
            return float("nan")
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


class HeldConnections:
    """`count` connections to the server kept open from a thread of their own; `kind` is "idle",
    "stalled" or "trickling". One the server closes is opened again (and counted)."""

    def __init__(self, port: int, kind: str, count: int) -> None:
        self.port, self.kind, self.count = port, kind, count
        self.sockets: list[socket.socket] = []
        self.sent: dict[socket.socket, int] = {}
        self.reopened = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._hold, daemon=True)

    def __enter__(self) -> HeldConnections:
        for _ in range(self.count):
            self.sockets.append(self._open())
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()
        for connection in self.sockets:
            connection.close()

    def _open(self) -> socket.socket:
        connection = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        if self.kind != "idle":
            connection.sendall(STALLED_HEADER)
        self.sent[connection] = 0
        return connection

    def _hold(self) -> None:
        while not self._stop.wait(1.0):
            for index, connection in enumerate(self.sockets):
                if self._closed_by_server(connection) or not self._trickle(connection):
                    connection.close()
                    self.sent.pop(connection, None)
                    self.sockets[index] = self._open()
                    self.reopened += 1

    def _trickle(self, connection: socket.socket) -> bool:
        if self.kind != "trickling":
            return True
        position = self.sent[connection]
        try:
            connection.sendall(TRICKLED_FIELD[position : position + 1])
        except OSError:
            return False
        self.sent[connection] = position + 1
        return True

    @staticmethod
    def _closed_by_server(connection: socket.socket) -> bool:
        with selectors.DefaultSelector() as selector:
            selector.register(connection, selectors.EVENT_READ)
            if not selector.select(timeout=0):
                return False
        try:
            connection.recv(65536)  # an end of file, or an error answer before the close
        except OSError:
            pass
        return True


def request_once(port: int) -> float | None:
    """Milliseconds for one GET on a new connection, or None when it failed or timed out."""
    started = time.perf_counter()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=REQUEST_TIMEOUT_SECONDS) as connection:
            connection.sendall(f"GET {PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
            received = b""
            while chunk := connection.recv(65536):
                received += chunk
    except OSError:
        return None
    if not received.startswith(b"HTTP/1.1 200"):
        return None
    return (time.perf_counter() - started) * 1000


def run_phase(name: str, port: int, seconds: float, log_path: Path, holding: str | None) -> Phase:
    kills_before = log_path.read_text(errors="replace").count("WORKER TIMEOUT")
    latencies: list[float] = []
    failures = 0
    held = HeldConnections(port, holding, HELD_CONNECTIONS) if holding else None
    if held is not None:
        held.__enter__()
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            latency = request_once(port)
            if latency is None:
                failures += 1
            else:
                latencies.append(latency)
    finally:
        if held is not None:
            held.__exit__()
    kills = log_path.read_text(errors="replace").count("WORKER TIMEOUT") - kills_before
    return Phase(
        name=name,
        held=held.count if held else 0,
        reopened=held.reopened if held else 0,
        latencies_ms=latencies,
        failures=failures,
        worker_kills=kills,
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--phase-seconds", type=float, default=32.0)
    parser.add_argument("--workers", type=int, default=int(os.environ.get("WEB_WORKERS", "4")))
    parser.add_argument(
        "--worker-class", default="", help="gunicorn's own `sync` or `gthread` instead of the configured worker"
    )
    args = parser.parse_args()
    args.port = free_port()

    import psycopg

    socket_dir = embedded_postgres_socket_dir()
    prefix = f"bench-slow-{os.getpid()}"
    env = {
        **server_environment(args, key_prefix=prefix),
        "DATABASE_URL": f"postgres://postgres@{quote(socket_dir, safe='')}/{DATABASE_NAME}",
        "EMBEDDING_BACKEND": "none",
    }
    if args.worker_class:
        # A config file's `threads` above 1 turns `sync` into gthread: the old web tier had 1.
        threads = "1" if args.worker_class == "sync" else "4"
        env["GUNICORN_CMD_ARGS"] = f"--worker-class {args.worker_class} --threads {threads}"
    log_path = BASE_DIR / "var" / f"bench-slow-{os.getpid()}.log"
    with psycopg.connect(host=socket_dir, user="postgres", dbname="postgres", autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{DATABASE_NAME}"')
    server: subprocess.Popen | None = None
    try:
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "--verbosity", "0"], cwd=BASE_DIR, env=env, check=True
        )
        command = procfile_web_command(env)
        print(f"server: {shlex.join(command)}  {env.get('GUNICORN_CMD_ARGS', '')}")
        with log_path.open("w") as log:
            server = subprocess.Popen(
                command, cwd=BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        wait_until_serving(f"http://127.0.0.1:{args.port}{PATH}", server)
        for _ in range(50):  # warm every worker's URL configuration and connections
            request_once(args.port)
        phases = [
            run_phase("baseline", args.port, args.phase_seconds, log_path, None),
            run_phase("idle", args.port, args.phase_seconds, log_path, "idle"),
            run_phase("stalled header", args.port, args.phase_seconds, log_path, "stalled"),
            run_phase("byte a second", args.port, args.phase_seconds, log_path, "trickling"),
        ]
    finally:
        if server is not None:
            stop(server)
        clear_redis_prefix(env, prefix)
        with psycopg.connect(host=socket_dir, user="postgres", dbname="postgres", autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{DATABASE_NAME}" WITH (FORCE)')

    baseline = phases[0]
    print(
        f"\nGET {PATH}, one request at a time on a new connection, {args.phase_seconds:.0f} s per phase, "
        f"gunicorn {args.workers} workers, worker class {args.worker_class or 'configured'}"
    )
    print(
        f"{'phase':<16}{'held':>6}{'reopened':>10}{'requests':>10}{'failed':>8}"
        f"{'p50 ms':>9}{'(base)':>9}{'p99 ms':>9}{'(base)':>9}{'p99 x':>8}{'kills':>7}"
    )
    worst = 0.0
    for phase in phases:
        ratio = phase.percentile(0.99) / baseline.percentile(0.99)
        if phase is not baseline:
            worst = max(worst, ratio)
        print(
            f"{phase.name:<16}{phase.held:>6}{phase.reopened:>10}{len(phase.latencies_ms) + phase.failures:>10}"
            f"{phase.failures:>8}{phase.percentile(0.5):>9.1f}{baseline.percentile(0.5):>9.1f}"
            f"{phase.percentile(0.99):>9.1f}{baseline.percentile(0.99):>9.1f}{ratio:>8.2f}{phase.worker_kills:>7}"
        )
    kills = sum(phase.worker_kills for phase in phases)
    spread = statistics.pstdev(baseline.latencies_ms) if len(baseline.latencies_ms) > 1 else 0.0
    print(
        f"baseline standard deviation {spread:.1f} ms; failed = no 200 within {REQUEST_TIMEOUT_SECONDS:.0f} s, "
        "counted in p50/p99 as that timeout"
    )
    met = worst <= TARGET_P99_RATIO and kills == 0
    print(f"target (p99 at most {TARGET_P99_RATIO:.0f}x the baseline, no worker killed): {'met' if met else 'NOT met'}")
    log_path.unlink(missing_ok=True)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
