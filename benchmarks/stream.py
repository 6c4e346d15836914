"""Delivery latency of GET /api/chat/stream (post -> event) and memory per open stream.

    .venv/bin/python benchmarks/stream.py [--port 8260] [--streams 100,1000] [--posts 30] [--interval 0.5]

What it does, in one run:
1. Creates a database of its own (`bench_stream_<pid>`) on the embedded PostgreSQL (or the
   DATABASE_URL server), migrates it and adds one running agent. Redis is the one at REDIS_URL,
   with a key prefix of this run's own (deleted at the end).
2. Starts the stream process with the Procfile's `stream:` line (uvicorn, one process), with the
   public rate limit and the per-IP cap raised (every stream comes from 127.0.0.1).
3. For each count of streams: opens that many streams (plain HTTP/1.1 on asyncio sockets, one
   connection each) and waits until all have their response headers; reads the stream
   process's RSS before and after (memory per open stream = the difference / the count); then
   posts `--posts` messages one after another (`--interval` apart) through the service behind
   POST /api/chat (chat_message_post: the INSERT, the commit, the Redis publish after it), and
   records when each stream receives each message's event. Latency = from just before the post
   to the event's arrival at a client; p50 and p99 over all (stream, message) pairs. Then closes
   the streams.

The clients, the poster, PostgreSQL, Redis and the stream process share the machine's cores; with
1,000 streams the client's own reading of 1,000 sockets is part of each figure. The stream
process is separate from gunicorn (the Procfile's `web:` line), so `benchmarks/api.py` measures
the API as before: open streams hold no gunicorn worker.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

from benchmarks.api import clear_redis_prefix, port_in_use, stop  # noqa: E402

DATABASE_NAME = f"bench_stream_{os.getpid()}"
KEY_PREFIX = f"bench-stream-{os.getpid()}"
UNTHROTTLED_RATE = "1000000000/m"
_EVENT_ID = re.compile(rb"(?:^|\n)id: (\d+)\n")


def procfile_stream_command(port: int) -> list[str]:
    """The Procfile's `stream:` line on 127.0.0.1:`port`."""
    line = next(line for line in (BASE_DIR / "Procfile").read_text().splitlines() if line.startswith("stream:"))
    values = {"WEB_HOST": "127.0.0.1", "STREAM_PORT": str(port)}
    expanded = re.sub(r"\$\{(\w+)(?::-([^}]*))?\}", lambda m: values.get(m[1], m[2] or ""), line)
    return shlex.split(expanded.split(":", 1)[1])


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads) so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_and_threads(pid: int) -> tuple[int, int]:
    """Resident memory (bytes) and thread count of a process, from /proc."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) * 1024, int(fields["Threads"])


class StreamClient:
    """One open stream: records when each event id arrives."""

    def __init__(self) -> None:
        self.arrivals: dict[int, float] = {}
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.task: asyncio.Task[None] | None = None

    async def open(self, port: int) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", port)
        self.writer.write(b"GET /api/chat/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n")
        head = await self.reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"stream refused: {head[:200]!r}")
        self.task = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        assert self.reader is not None
        buffer = b""
        while chunk := await self.reader.read(65536):
            now = time.monotonic()
            buffer += chunk
            # Events arrive whole (one chunk each); keep only the tail that may hold a partial one.
            for match in _EVENT_ID.finditer(buffer):
                self.arrivals.setdefault(int(match[1]), now)
            buffer = buffer[-256:]

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
        if self.writer is not None:
            self.writer.close()


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def measure(port: int, pid: int, streams: int, posts: int, interval: float, agent_id: int) -> dict[str, float]:
    from asgiref.sync import sync_to_async

    from chat.services import chat_message_post

    rss_before, threads_before = rss_and_threads(pid)
    clients = [StreamClient() for _ in range(streams)]
    for start in range(0, streams, 50):  # in batches, as a crowd reconnecting would not all at once
        await asyncio.gather(*(client.open(port) for client in clients[start : start + 50]))
    await asyncio.sleep(2)  # let the process settle (its thread pool, allocator) before reading its RSS
    rss_open, threads_open = rss_and_threads(pid)

    post = sync_to_async(chat_message_post, thread_sensitive=False)
    posted: dict[int, float] = {}
    cpu_before = cpu_seconds(pid)
    for n in range(posts):
        started = time.monotonic()
        result = await post(agent_id=agent_id, message=f"benchmark message {n}")
        posted[result.message.pk] = started
        await asyncio.sleep(interval)
    # Until every stream has every message (or 30 s): the last events may still be on their way.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not all(len(client.arrivals) >= len(posted) for client in clients):
        await asyncio.sleep(0.1)
    server_cpu = cpu_seconds(pid) - cpu_before

    latencies = []
    missing = 0
    for client in clients:
        for message_id, started in posted.items():
            arrived = client.arrivals.get(message_id)
            if arrived is None:
                missing += 1
            else:
                latencies.append((arrived - started) * 1000)
    await asyncio.gather(*(client.close() for client in clients))
    await asyncio.sleep(1)
    return {
        "streams": streams,
        "events": len(latencies),
        "missing": missing,
        "p50_ms": percentile(latencies, 0.5),
        "p99_ms": percentile(latencies, 0.99),
        "max_ms": max(latencies),
        "mean_ms": statistics.fmean(latencies),
        "rss_before_mb": rss_before / 2**20,
        "rss_open_mb": rss_open / 2**20,
        "kb_per_stream": (rss_open - rss_before) / streams / 1024,
        "cpu_us_per_event": server_cpu / max(len(latencies), 1) * 1e6,
        "threads_before": threads_before,
        "threads_open": threads_open,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=8260)
    parser.add_argument("--streams", default="100,1000", help="comma-separated counts of open streams")
    parser.add_argument("--posts", type=int, default=30, help="messages posted per count")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between posts")
    parser.add_argument("--keep-db", action="store_true", help="leave the run's database in place")
    args = parser.parse_args()
    counts = [int(count) for count in args.streams.split(",")]
    if port_in_use(args.port):
        print(f"port {args.port} is in use; pass another with --port", file=sys.stderr)
        return 2

    os.environ["CACHE_KEY_PREFIX"] = KEY_PREFIX
    from benchmarks.benchmark_database import benchmark_database_use

    database_url = benchmark_database_use(DATABASE_NAME)  # sets Django up in this process too
    from agents.models import Agent, AgentStatus
    from tests.agents.factories import AgentFactory

    agent: Agent = AgentFactory.create(instance_id="bench-poster", name="Bench Poster", status=AgentStatus.RUNNING)
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "CACHE_KEY_PREFIX": KEY_PREFIX,
        "RATE_LIMIT_PUBLIC": UNTHROTTLED_RATE,
        "CHAT_STREAM_MAX_PER_IP": str(max(counts) + 10),
        "DEBUG": "false",
    }
    command = procfile_stream_command(args.port)
    print(f"database: {DATABASE_NAME}; stream process: {shlex.join(command)}")
    log_path = BASE_DIR / "var" / f"bench-stream-{os.getpid()}.log"
    log_path.parent.mkdir(exist_ok=True)
    server: subprocess.Popen | None = None
    results = []
    try:
        with log_path.open("w") as log:
            server = subprocess.Popen(
                command, cwd=BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + 90
        while not port_in_use(args.port):
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the stream process did not start; see {log_path}")
            time.sleep(0.3)
        for count in counts:
            print(f"{count} streams ...", flush=True)
            results.append(asyncio.run(measure(args.port, server.pid, count, args.posts, args.interval, agent.pk)))
    finally:
        if server is not None:
            stop(server)
        clear_redis_prefix(env, KEY_PREFIX)
        if not args.keep_db:
            from django.db import connection

            connection.close()
            import psycopg

            from benchmarks.benchmark_database import _server_url

            _url, maintenance = _server_url(DATABASE_NAME)
            with psycopg.connect(**maintenance, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{DATABASE_NAME}" WITH (FORCE)')

    print()
    print(f"{args.posts} posts {args.interval} s apart per row; one uvicorn process; {os.cpu_count()} CPUs")
    header = (
        f"{'streams':>8} {'events':>8} {'missing':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}"
        f" {'RSS MB before/open':>19} {'KB/stream':>10} {'threads before/open':>20} {'server CPU us/event':>20}"
    )
    print(header)
    print("-" * len(header))
    for row in results:
        print(
            f"{row['streams']:>8} {row['events']:>8} {row['missing']:>8} {row['p50_ms']:>8.1f} {row['p99_ms']:>8.1f}"
            f" {row['max_ms']:>8.1f} {row['rss_before_mb']:>9.1f}/{row['rss_open_mb']:<9.1f}"
            f" {row['kb_per_stream']:>10.1f} {row['threads_before']:>9}/{row['threads_open']:<10}"
            f" {row['cpu_us_per_event']:>20.0f}"
        )
    return 1 if any(row["missing"] for row in results) else 0


if __name__ == "__main__":
    sys.exit(main())
