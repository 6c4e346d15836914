"""Throughput and latency of the agent platform API, served the way `make run` serves it.

    .venv/bin/python benchmarks/api.py [--port 8250] [--duration 10] [--connections 16]

What it does, in one run:
1. Starts (or reuses) the embedded PostgreSQL under var/pgdata, creates a separate database
   `bench_api_<pid>` on it, migrates it and seeds 100 agents, a chat
   backlog and 45 days of 5-minute price points, then analyzes it (statistics, as in service).
   Redis is the one at REDIS_URL, with a key prefix of this run's own (deleted at the end).
2. Starts gunicorn with the web line of the Procfile (its options: workers, access log), on
   127.0.0.1:<port>, against that database. The rate limits are raised through the environment
   (RATE_LIMIT_*) so they do not throttle the load; they are still counted in Redis on every
   request, so their cost is in the figures.
3. Measures with wrk (`apt-get install -y wrk`), `--connections` concurrent connections for
   `--duration` seconds after a short warm-up each: GET /api/agents, GET /api/chat?limit=50,
   GET /api/<COIN_SEGMENT>/history?period=30d and the bare ceiling view GET /bench/ceiling
   (measured before the first endpoint and after each one; an endpoint's reference is the mean
   of the ceiling runs just before and after it, since the load of a shared machine drifts
   during a run; the route exists only in the benchmark server's settings,
   benchmarks/server_settings.py). Prints requests/s, p50 and p99 and each endpoint's share of
   the ceiling (target: at least 60%), and its CPU per request against the ceiling's.
4. Then the same three endpoints with `Cache-Control: no-cache`, which makes each request build
   its answer from the database instead of taking this worker's cached rendering
   (agentplatform/plumbing/response_cache.py): what a request costs right after a write, as every read
   in a busy chat does (target: at least 35% of the ceiling; skip with --skip-uncached).

The load generator shares the machine's cores with the server, as any local run does.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

BASE_DIR = Path(__file__).resolve().parent.parent
# Per run, so that two runs at once (on different ports) never share a database or a log.
DATABASE_NAME = f"bench_api_{os.getpid()}"
# High enough never to throttle a run, low enough to stay a valid rate.
UNTHROTTLED_RATE = "1000000000/m"
# Each endpoint's share of the ceiling's requests/s: as clients use it, and right after a write.
TARGET_SHARE = 0.60
TARGET_SHARE_UNCACHED = 0.35
UNCACHED = "(no-cache)"


@dataclass
class Measurement:
    name: str
    path: str
    requests_per_second: float
    p50_ms: float
    p99_ms: float
    requests: int
    errors: int
    cpu_ms_per_request: float = 0.0
    database_cpu_ms_per_request: float = 0.0  # the part of it in PostgreSQL's backends


def load_argument_parser(*, description: str | None, default_port: int) -> argparse.ArgumentParser:
    """The options every load benchmark here takes (port, duration, warm-up, wrk load, workers)."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=default_port)
    parser.add_argument("--duration", type=int, default=10, help="seconds of measurement per endpoint")
    parser.add_argument("--warmup", type=int, default=3, help="seconds of warm-up per endpoint")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2, help="wrk threads")
    parser.add_argument("--workers", type=int, default=int(os.environ.get("WEB_WORKERS", "4")))
    return parser


def server_environment(args: argparse.Namespace, *, key_prefix: str) -> dict[str, str]:
    """The environment of a benchmark's gunicorn: this shell's, with the benchmark server's
    settings (the reference routes under /bench/), the run's Redis key prefix, rate limits that
    never throttle (still counted) and the Procfile's web options."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "benchmarks.server_settings",
        "CACHE_KEY_PREFIX": key_prefix,
        "RATE_LIMIT_PUBLIC": UNTHROTTLED_RATE,
        "RATE_LIMIT_AUTHENTICATED": UNTHROTTLED_RATE,
        "RATE_LIMIT_TRADING": UNTHROTTLED_RATE,
        "DEBUG": "false",
        "WEB_HOST": "127.0.0.1",
        "WEB_PORT": str(args.port),
        "WEB_WORKERS": str(args.workers),
    }


def main() -> int:
    parser = load_argument_parser(description=__doc__, default_port=8250)
    parser.add_argument("--keep-db", action="store_true", help="leave the run's database in place")
    parser.add_argument(
        "--skip-uncached", action="store_true", help="do not measure the endpoints with Cache-Control: no-cache"
    )
    parser.add_argument(
        "--profile", action="store_true", help="then profile each endpoint in-process (where the time goes)"
    )
    args = parser.parse_args()

    wrk = shutil.which("wrk")
    if wrk is None:
        print("wrk is not installed: apt-get install -y wrk (Debian/Ubuntu) or brew install wrk", file=sys.stderr)
        return 2
    python = sys.executable
    socket_dir = embedded_postgres_socket_dir()
    prefix = f"bench-{os.getpid()}"
    segment = os.environ.get("COIN_SEGMENT", "wisent")
    env = {
        **server_environment(args, key_prefix=prefix),
        "DATABASE_URL": f"postgres://postgres@{quote(socket_dir, safe='')}/{DATABASE_NAME}",
        "COIN_SEGMENT": segment,
    }
    endpoints = [
        ("agents", "/api/agents"),
        ("chat", "/api/chat?limit=50"),
        ("history", f"/api/{segment}/history?period=30d"),
    ]

    print(f"database: {DATABASE_NAME} on the embedded PostgreSQL ({socket_dir})")
    recreate_database(socket_dir, drop_only=False)
    server: subprocess.Popen | None = None
    log_path = BASE_DIR / "var" / f"bench-api-{os.getpid()}.log"
    if port_in_use(args.port):
        print(f"port {args.port} is in use; pass another with --port", file=sys.stderr)
        return 2
    try:
        run([python, "manage.py", "migrate", "--noinput", "--verbosity", "0"], env)
        run([python, str(Path(__file__).resolve()), "seed"], env)
        command = procfile_web_command(env)
        print(f"server: {shlex.join(command)}")
        print(f"rate limits raised for the run: RATE_LIMIT_PUBLIC/AUTHENTICATED/TRADING={UNTHROTTLED_RATE}")
        with log_path.open("w") as log:
            server = subprocess.Popen(
                command, cwd=BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        base = f"http://127.0.0.1:{args.port}"
        wait_until_serving(base + "/bench/ceiling", server)
        for _, path in endpoints:
            check_endpoint(base + path)

        def measure(name: str, path: str, headers: dict[str, str] | None = None) -> Measurement:
            assert server is not None
            wrk_run(wrk, base + path, args.warmup, args.connections, args.threads, headers)
            cpu_before = server_cpu_seconds(server.pid)
            result = wrk_run(wrk, base + path, args.duration, args.connections, args.threads, headers)
            cpu_after = server_cpu_seconds(server.pid)
            spent = {key: seconds - cpu_before.get(key, 0.0) for key, seconds in cpu_after.items()}
            return Measurement(
                name=name,
                path=path,
                **result,
                cpu_ms_per_request=sum(spent.values()) / result["requests"] * 1000,
                database_cpu_ms_per_request=sum(v for (kind, _), v in spent.items() if kind == "postgres")
                / result["requests"]
                * 1000,
            )

        # The ceiling is measured before the first endpoint and after each one, and every endpoint
        # is compared with the two ceiling runs on either side of it: on a shared machine the load
        # drifts during a run (the ceiling's own CPU per request moved by half within one run).
        plan: list[tuple[str, str, dict[str, str] | None]] = [(name, path, None) for name, path in endpoints]
        if not args.skip_uncached:
            plan += [(f"{name} {UNCACHED}", path, {"Cache-Control": "no-cache"}) for name, path in endpoints]
        ceilings = [measure("ceiling", "/bench/ceiling")]
        results = []
        for name, path, headers in plan:
            results.append(measure(name, path, headers))
            ceilings.append(measure("ceiling", "/bench/ceiling"))
        if args.profile:
            stop(server)
            server = None
            run([python, str(Path(__file__).resolve()), "profile", "/bench/ceiling", *(p for _, p in endpoints)], env)
    finally:
        if server is not None:
            stop(server)
        clear_redis_prefix(env, prefix)
        if not args.keep_db:
            recreate_database(socket_dir, drop_only=True)

    print()
    print(
        f"{args.connections} concurrent connections, {args.duration} s each, gunicorn {args.workers} workers, "
        f"wrk {args.threads} threads, {os.cpu_count()} CPUs"
    )
    header = (
        f"{'endpoint':<51} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7} {'of ceiling':>11}"
        f" {'CPU ms/req':>11} {'of it SQL':>10} {'CPU-bound share':>16}"
    )
    print(header)
    print("-" * len(header))
    below = []
    for before, row, after in zip(ceilings, results, ceilings[1:], strict=False):
        ceiling_rps = (before.requests_per_second + after.requests_per_second) / 2
        ceiling_cpu = (before.cpu_ms_per_request + after.cpu_ms_per_request) / 2
        share = row.requests_per_second / ceiling_rps
        uncached = row.name.endswith(UNCACHED)
        target = TARGET_SHARE_UNCACHED if uncached else TARGET_SHARE
        verdict = "ok" if share >= target else "BELOW"
        label = f"{row.path} {UNCACHED}" if uncached else row.path
        if share < target:
            below.append(label)
        print(
            f"GET {label:<47} {row.requests_per_second:>9.0f} {row.p50_ms:>8.2f} {row.p99_ms:>8.2f} "
            f"{row.errors:>7} {share:>10.0%} {row.cpu_ms_per_request:>11.2f} {row.database_cpu_ms_per_request:>10.2f} "
            f"{ceiling_cpu / row.cpu_ms_per_request:>16.0%} {verdict}"
        )
    print(
        f"ceiling (GET /bench/ceiling), {len(ceilings)} runs: {min(c.requests_per_second for c in ceilings):.0f}-"
        f"{max(c.requests_per_second for c in ceilings):.0f} req/s, p50 {min(c.p50_ms for c in ceilings):.2f}-"
        f"{max(c.p50_ms for c in ceilings):.2f} ms, CPU {min(c.cpu_ms_per_request for c in ceilings):.2f}-"
        f"{max(c.cpu_ms_per_request for c in ceilings):.2f} ms/req; each endpoint's reference is the mean of the "
        f"runs just before and after it; targets >= {TARGET_SHARE:.0%}, {TARGET_SHARE_UNCACHED:.0%} with no-cache"
    )
    print(
        "CPU ms/req: CPU time of the gunicorn workers and of this run's PostgreSQL backends per request "
        "(not Redis, which other clients share); of it SQL: the PostgreSQL backends' part; CPU-bound share = "
        "the ceiling's CPU per request / the endpoint's, the share of the ceiling to expect where CPU, not "
        "waiting, is the limit."
    )
    load = os.getloadavg()
    print(f"load average during the run: {load[0]:.1f} (1 min), {load[1]:.1f} (5 min) on {os.cpu_count()} CPUs")
    errors = sum(row.errors for row in [*ceilings, *results])
    if errors:
        print(f"{errors} responses were not 2xx; see {log_path}")
    else:
        log_path.unlink(missing_ok=True)
    return 1 if below or errors else 0


# --- the database ---------------------------------------------------------------------------------


def embedded_postgres_socket_dir() -> str:
    """Starts (or finds) the embedded server exactly as the settings do; returns its socket dir."""
    sys.path.insert(0, str(BASE_DIR))
    from agentplatform.plumbing.embedded_postgres import embedded_database_settings

    return str(embedded_database_settings(BASE_DIR / "var" / "pgdata")["HOST"])


def recreate_database(socket_dir: str, *, drop_only: bool) -> None:
    import psycopg

    with psycopg.connect(host=socket_dir, user="postgres", dbname="postgres", autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{DATABASE_NAME}" WITH (FORCE)')
        if not drop_only:
            connection.execute(f'CREATE DATABASE "{DATABASE_NAME}"')


def seed() -> None:
    """Runs inside a child process with the benchmark's DATABASE_URL: 100 agents, a chat backlog
    of 2,000 messages and 45 days of price points every 5 minutes, then ANALYZE."""
    import random
    from datetime import timedelta
    from decimal import Decimal

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentplatform.settings")
    sys.path.insert(0, str(BASE_DIR))
    django.setup()
    from django.db import connection
    from django.utils import timezone

    from agents.models import Agent, AgentStatus
    from chat.models import ChatMessage, MessageType
    from coin.models import PricePoint

    rng = random.Random(42)
    statuses = list(AgentStatus.values)
    agents = Agent.objects.bulk_create(
        Agent(
            instance_id=f"bench-agent-{n:03d}",
            name=f"Bench agent {n:03d}",
            status=statuses[n % len(statuses)],
            balance=Decimal(rng.randint(0, 10_000_000)) / 100,
            total_revenue=Decimal(rng.randint(0, 10_000_000)) / 100,
            total_costs=Decimal(rng.randint(0, 10_000_000)) / 100,
            burn_rate_hourly=Decimal(rng.randint(0, 10_000)) / 100,
            description=f"Benchmark agent number {n}.",
            model="bench-model",
            tags=["bench", f"group-{n % 7}"],
        )
        for n in range(100)
    )
    now = timezone.now()
    types = [MessageType.CHAT, MessageType.CHAT, MessageType.STATUS, MessageType.TRADE]
    ChatMessage.objects.bulk_create(
        ChatMessage(
            agent=agents[n % len(agents)],
            message=f"Message {n}: " + "lorem ipsum dolor sit amet " * rng.randint(1, 8),
            message_type=types[n % len(types)],
            created_at=now - timedelta(minutes=2000 - n),
        )
        for n in range(2000)
    )
    step = timedelta(minutes=5)
    count = int(timedelta(days=45) / step)
    price = 1.0
    points = []
    for n in range(count):
        price = max(0.01, price * (1 + rng.uniform(-0.004, 0.004)))
        points.append(
            PricePoint(
                timestamp=now - step * (count - n),
                price=Decimal(f"{price:.8f}"),
                supply=Decimal(1_000_000 + n),
            )
        )
    PricePoint.objects.bulk_create(points, batch_size=2000)
    # Statistics, as a database in service has them (autovacuum analyzes after bulk writes): without
    # them the plans measured depended on whether autovacuum had got to the new tables yet (the chat
    # feed's query took 1.7 ms before it had, 0.3 ms after).
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    print(f"seeded {len(agents)} agents, 2000 chat messages, {count} price points")


def profile(paths: list[str]) -> None:
    """Runs inside a child process: each path through Django's test client, timed, then profiled,
    printing where the time goes (our code, SQL waits, Redis, DRF serializers)."""
    import cProfile
    import pstats

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentplatform.settings")
    sys.path.insert(0, str(BASE_DIR))
    django.setup()
    from django.test import Client

    client = Client()
    requests = 200
    for path in paths:
        for _ in range(20):
            client.get(path)
        started = time.perf_counter()
        for _ in range(requests):
            client.get(path)
        per_request = (time.perf_counter() - started) / requests * 1000
        print(f"\n=== GET {path}: {per_request:.2f} ms per request in-process (no profiler)")
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(requests):
            client.get(path)
        profiler.disable()
        stats = pstats.Stats(profiler)
        stats.sort_stats("cumulative").print_stats(
            r"(?:/(?:agents|coin|chat|agentplatform)/(?!migrations)\w+\.py)|psycopg/cursor.py.*\(execute\)"
            r"|redis/client.py.*\(execute_command\)|rest_framework/serializers.py.*\(data\)",
            14,
        )


def clear_redis_prefix(env: dict[str, str], prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(env.get("REDIS_URL", "redis://127.0.0.1:6379/0"), socket_timeout=2)
    try:
        keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
        if keys:
            client.delete(*keys)
    except redis.RedisError as exc:
        print(f"could not clear the run's Redis keys ({exc})", file=sys.stderr)


# --- the server -----------------------------------------------------------------------------------


def procfile_web_command(env: dict[str, str]) -> list[str]:
    """The Procfile's `web:` line with its ${NAME:-default} references expanded from `env`."""
    line = next(
        line.split(":", 1)[1].strip()
        for line in (BASE_DIR / "Procfile").read_text().splitlines()
        if line.startswith("web:")
    )
    expanded = re.sub(r"\$\{(\w+)(?::-([^}]*))?\}", lambda m: env.get(m[1]) or (m[2] or ""), line)
    return shlex.split(expanded)


def wait_until_serving(url: str, server: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the server exited with {server.returncode}; see its log under var/")
        try:
            # The first request of a worker loads the URL configuration (and what it imports).
            with urllib.request.urlopen(url, timeout=30) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.3)
    raise SystemExit(f"the server did not answer {url} within {timeout:.0f} s")


def server_cpu_seconds(master_pid: int) -> dict[tuple[str, int], float]:
    """CPU seconds (user + system) so far of each gunicorn worker and each PostgreSQL backend
    serving this run's database, by ("gunicorn" or "postgres", pid)."""
    import psutil

    processes = [("gunicorn", process) for process in psutil.Process(master_pid).children()]
    for process in psutil.process_iter(["cmdline"]):
        command = " ".join(process.info["cmdline"] or ())
        if command.startswith("postgres: ") and f" {DATABASE_NAME} " in command:
            processes.append(("postgres", process))
    seconds = {}
    for kind, process in processes:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        seconds[(kind, process.pid)] = times.user + times.system
    return seconds


def port_in_use(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def check_endpoint(url: str) -> None:
    """One request before the load: it must be a 200 JSON answer carrying the (raised) limit headers."""
    try:
        response = urllib.request.urlopen(url, timeout=10)
    except urllib.error.HTTPError as exc:
        raise SystemExit(f"{url}: {exc.code} {exc.read()[:300]!r}") from exc
    with response:
        body = response.read()
        limit = response.headers.get("X-RateLimit-Limit")
        if response.status != 200 or not body or limit != UNTHROTTLED_RATE.split("/")[0]:
            raise SystemExit(f"{url}: status {response.status}, X-RateLimit-Limit {limit!r}")
    print(f"checked {url}: 200, {len(body)} bytes, X-RateLimit-Limit {limit}")


def stop(server: subprocess.Popen) -> None:
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)  # gunicorn's master and its workers, started by us
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


# --- the load -------------------------------------------------------------------------------------

_UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}


def wrk_run(
    wrk: str, url: str, duration: int, connections: int, threads: int, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    """One wrk run; 2xx and 3xx answers count as successes, anything else as errors."""
    header_args = [arg for name, value in (headers or {}).items() for arg in ("-H", f"{name}: {value}")]
    command = [wrk, f"-t{threads}", f"-c{connections}", f"-d{duration}s", "--latency", "--timeout", "10s"]
    output = subprocess.run([*command, *header_args, url], capture_output=True, text=True, check=True).stdout

    def latency(percentile: str) -> float:
        match = re.search(rf"^\s*{percentile}%\s+([\d.]+)(us|ms|s|m)\s*$", output, re.MULTILINE)
        if match is None:
            raise SystemExit(f"unexpected wrk output:\n{output}")
        return float(match[1]) * _UNITS_MS[match[2]]

    def number(pattern: str) -> str:
        match = re.search(pattern, output)
        if match is None:
            raise SystemExit(f"unexpected wrk output:\n{output}")
        return match[1]

    requests = int(number(r"(\d+) requests in"))
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    socket_errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", output)
    errors = (int(non_2xx[1]) if non_2xx else 0) + (sum(map(int, socket_errors.groups())) if socket_errors else 0)
    return {
        "requests_per_second": float(number(r"Requests/sec:\s+([\d.]+)")),
        "p50_ms": latency("50"),
        "p99_ms": latency("99"),
        "requests": requests,
        "errors": errors,
    }


def run(command: list[str], env: dict[str, str]) -> None:
    subprocess.run(command, cwd=BASE_DIR, env=env, check=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["seed"]:
        seed()
        sys.exit(0)
    if sys.argv[1:2] == ["profile"]:
        profile(sys.argv[2:])
        sys.exit(0)
    sys.exit(main())
