"""/search under 16 concurrent clients: a baseline commit against this build, alternating, in one run.

    nice -n 5 .venv/bin/python benchmarks/search_throughput.py --baseline-ref 469c281 \\
        [--rounds 3] [--seconds 20] [--workers 4] [--chunks 3000] [--embedded 300]

The baseline is checked out (`git worktree add --detach`) into a temporary directory that shares
this checkout's virtualenv and VAR_DIR (so the same embedded PostgreSQL serves both), with
EMBEDDING_RUNTIME=torch (what a commit before the ONNX work ran; an older commit ignores the
variable). Each side sets up a database of its own with its own code (its migrations, its
`benchmarks/search.py` generator: --chunks chunks, --embedded embedded by the model) and a service
key, then starts gunicorn with its own Procfile web line. Both servers are warmed (a discarded
load of 5 s each), then loaded in turn for --seconds per round, baseline first, for --rounds
rounds: each round's and the pooled requests/s, p50 and p99 are printed side by side with the
ratio, and the 1-minute load average before and after each load (the machine is shared).
Every query is distinct (no embedding-cache hits).

Beside them, the CPU time each request cost the server, from /proc: the gunicorn master and its
workers, and the PostgreSQL backends connected to the side's database. On a machine shared with
other work requests/s measure the share of the cores each side got as much as its code; CPU
milliseconds per request measure the code alone.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.inference import CONCURRENT_CLIENTS, free_port, percentile  # noqa: E402

# Run in the side's checkout with its own code: database, chunks, service key.
_SETUP_PROGRAM = """
import json, sys
sys.path.insert(0, ".")
from benchmarks.benchmark_database import benchmark_database_use
url = benchmark_database_use(sys.argv[1])
from agents.models import ApiKeyKind
from agents.services import api_key_create
from benchmarks.search import chunks_generate
chunks_generate(int(sys.argv[2]), embedded=int(sys.argv[3]))
_, secret = api_key_create(kind=ApiKeyKind.SERVICE, name="search throughput", scopes=["read"])
print(json.dumps({"url": url, "secret": secret}))
"""


@dataclass
class Side:
    label: str
    checkout: Path
    env: dict[str, str]
    secret: str = ""
    port: int = 0
    server: subprocess.Popen | None = None
    latencies: list[float] = field(default_factory=list)
    seconds: float = 0.0
    errors: int = 0
    database: str = ""
    web_cpu: float = 0.0  # seconds, over the measured loads
    database_cpu: float = 0.0


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS  # utime + stime


def server_cpu(side: Side) -> tuple[float, dict[int, float]]:
    """CPU seconds used so far by the side's gunicorn (master and workers), and by each PostgreSQL
    backend connected to its database (by pid: Django closes a connection after CONN_MAX_AGE and
    opens another, so a load's share is the growth of the backends alive at its end)."""
    listing = subprocess.run(["ps", "-eo", "pid=,ppid=,args="], capture_output=True, text=True, check=True).stdout
    web = 0.0
    backends: dict[int, float] = {}
    assert side.server is not None
    for line in listing.splitlines():
        pid, ppid, args = line.split(None, 2)
        if int(pid) == side.server.pid or int(ppid) == side.server.pid:
            web += _cpu_seconds(int(pid))
        elif args.startswith("postgres: ") and f" {side.database} " in args:
            backends[int(pid)] = _cpu_seconds(int(pid))
    return web, backends


def backends_growth(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds the backends alive at the end used since `before` (a backend that ended in
    between is left out: the figure errs low)."""
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


def procfile_web(checkout: Path, env: dict[str, str]) -> list[str]:
    import re
    import shlex

    line = next(line for line in (checkout / "Procfile").read_text().splitlines() if line.startswith("web:"))
    expanded = re.sub(r"\$\{(\w+)(?::-([^}]*))?\}", lambda m: env.get(m[1]) or (m[2] or ""), line[4:].strip())
    return shlex.split(expanded)


def side_prepare(side: Side, *, database: str, chunks: int, embedded: int) -> None:
    started = time.monotonic()
    finished = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "python"), "-c", _SETUP_PROGRAM, database, str(chunks), str(embedded)],
        cwd=side.checkout,
        env=side.env,
        capture_output=True,
        text=True,
    )
    if finished.returncode != 0:
        raise SystemExit(f"{side.label}: setup failed:\n{finished.stderr[-3000:]}")
    found = json.loads(finished.stdout.strip().splitlines()[-1])
    side.env["DATABASE_URL"] = found["url"]
    side.secret = found["secret"]
    print(f"{side.label}: database {database} ready in {time.monotonic() - started:.0f} s", flush=True)


def side_start(side: Side, *, workers: int, log_dir: Path) -> None:
    import httpx

    side.port = free_port()
    env = {
        **side.env,
        "WEB_PORT": str(side.port),
        "WEB_HOST": "127.0.0.1",
        "WEB_WORKERS": str(workers),
        "DEBUG": "false",
        "RATE_LIMIT_AUTHENTICATED": "100000000/m",
    }
    with (log_dir / f"web-{side.label}.log").open("ab") as log:
        side.server = subprocess.Popen(
            procfile_web(side.checkout, env),
            cwd=side.checkout,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    started = time.monotonic()
    while time.monotonic() - started < 300:
        try:
            response = httpx.get(
                f"http://127.0.0.1:{side.port}/search",
                params={"q": "configure the server"},
                headers={"Authorization": f"Bearer {side.secret}"},
                timeout=60,
            )
            if response.status_code == 200:
                print(f"{side.label}: first /search answer {time.monotonic() - started:.1f} s after start", flush=True)
                return
            raise SystemExit(f"{side.label}: /search answered {response.status_code}: {response.text[:300]}")
        except httpx.HTTPError:
            time.sleep(0.3)
    raise SystemExit(f"{side.label}: no /search answer; see {log_dir}")


def load(side: Side, *, seconds: float, tag: str) -> tuple[list[float], float, int]:
    """16 clients for `seconds`: (latencies, elapsed seconds, errors)."""
    import httpx

    latencies: list[float] = []
    errors = [0]
    stop_at = time.monotonic() + seconds

    def client(number: int) -> None:
        with httpx.Client(headers={"Authorization": f"Bearer {side.secret}"}, timeout=60) as session:
            index = 0
            while time.monotonic() < stop_at:
                index += 1
                began = time.perf_counter()
                response = session.get(
                    f"http://127.0.0.1:{side.port}/search",
                    params={"q": f"how does client {number} configure worker {index} {tag}"},
                )
                latencies.append(time.perf_counter() - began)
                if response.status_code != 200:
                    errors[0] += 1

    started = time.monotonic()
    threads = [threading.Thread(target=client, args=(number,)) for number in range(CONCURRENT_CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies, time.monotonic() - started, errors[0]


def figures(latencies: list[float], seconds: float) -> tuple[float, float, float]:
    return len(latencies) / seconds, percentile(latencies, 0.5) * 1000, percentile(latencies, 0.99) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline-ref", required=True, help="the commit to compare with (e.g. 469c281)")
    parser.add_argument("--baseline-runtime", default="torch", help="EMBEDDING_RUNTIME of the baseline")
    parser.add_argument(
        "--baseline-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an extra variable of the baseline's environment (e.g. OMP_NUM_THREADS=1); repeatable",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--chunks", type=int, default=3000)
    parser.add_argument("--embedded", type=int, default=300)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-search-throughput-"))
    baseline_dir = work / "baseline"
    subprocess.run(
        ["git", "worktree", "add", "--detach", str(baseline_dir), args.baseline_ref],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    (baseline_dir / ".venv").symlink_to(ROOT / ".venv")
    shared = {**os.environ, "VAR_DIR": str(ROOT / "var"), "DJANGO_SETTINGS_MODULE": "agentplatform.settings"}
    shared.pop("DATABASE_URL", None)
    ref = subprocess.run(
        ["git", "rev-parse", "--short", args.baseline_ref], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()
    current = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()
    sides = [
        Side(
            label=f"baseline {ref}",
            checkout=baseline_dir,
            env={
                **shared,
                "EMBEDDING_RUNTIME": args.baseline_runtime,
                "CACHE_KEY_PREFIX": "bench-throughput-base",
                **dict(item.split("=", 1) for item in args.baseline_env),
            },
        ),
        Side(
            label=f"current {current}",
            checkout=ROOT,
            env={**shared, "CACHE_KEY_PREFIX": "bench-throughput-current"},
        ),
    ]
    try:
        for side, database in zip(sides, ("gt_bench_throughput_baseline", "gt_bench_throughput_current"), strict=True):
            side.database = database
            side_prepare(side, database=database, chunks=args.chunks, embedded=args.embedded)
        for side in sides:
            side_start(side, workers=args.workers, log_dir=work)
        for side in sides:
            load(side, seconds=5, tag="warm-up")
        print(
            f"\n/search, gunicorn ({args.workers} workers) as each checkout's Procfile starts it, "
            f"{CONCURRENT_CLIENTS} clients for {args.seconds:g} s per side and round, distinct queries, "
            f"{args.chunks} chunks:"
        )
        header = (
            f"{'round':<7}{'side':<20}{'req/s':>8}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}"
            f"{'CPU ms/req web+db':>19}{'load avg':>14}"
        )
        print(header)
        for round_number in range(1, args.rounds + 1):
            for side in sides:
                before = os.getloadavg()[0]
                web_before, database_before = server_cpu(side)
                latencies, seconds, errors = load(side, seconds=args.seconds, tag=f"r{round_number}")
                web_after, database_after = server_cpu(side)
                after = os.getloadavg()[0]
                side.latencies += latencies
                side.seconds += seconds
                side.errors += errors
                database_seconds = backends_growth(database_before, database_after)
                side.web_cpu += web_after - web_before
                side.database_cpu += database_seconds
                rate, p50, p99 = figures(latencies, seconds)
                count = max(len(latencies), 1)
                web_ms = (web_after - web_before) * 1000 / count
                database_ms = database_seconds * 1000 / count
                print(
                    f"{round_number:<7}{side.label:<20}{rate:>8.1f}{p50:>9.0f}{p99:>9.0f}{errors:>8}"
                    f"{web_ms:>11.1f}+{database_ms:<7.1f}{before:>7.1f}->{after:<5.1f}",
                    flush=True,
                )
        print("\npooled over the rounds:")
        print(
            f"{'side':<20}{'req/s':>8}{'x base':>8}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}{'requests':>10}"
            f"{'CPU ms/req':>12}{'base/this':>10}"
        )
        base_rate = figures(sides[0].latencies, sides[0].seconds)[0]
        base_cpu = (sides[0].web_cpu + sides[0].database_cpu) * 1000 / max(len(sides[0].latencies), 1)
        for side in sides:
            rate, p50, p99 = figures(side.latencies, side.seconds)
            cpu = (side.web_cpu + side.database_cpu) * 1000 / max(len(side.latencies), 1)
            print(
                f"{side.label:<20}{rate:>8.1f}{rate / base_rate:>8.2f}{p50:>9.0f}{p99:>9.0f}{side.errors:>8}"
                f"{len(side.latencies):>10}{cpu:>12.1f}{base_cpu / cpu:>10.2f}"
            )
    finally:
        for side in sides:
            if side.server is not None:
                os.killpg(side.server.pid, signal.SIGTERM)
                try:
                    side.server.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(side.server.pid, signal.SIGKILL)
        subprocess.run(["git", "worktree", "remove", "--force", str(baseline_dir)], cwd=ROOT, capture_output=True)
        print(f"(server logs in {work})")


if __name__ == "__main__":
    main()
