"""Fault scenarios against a live instance: what clients see when input is hostile or a peer fails.

    .venv/bin/python benchmarks/faults.py            # about 3 minutes

Everything runs on resources of its own, so nothing shared is frozen or stopped: a temporary
VAR_DIR with its own embedded PostgreSQL (stopped in one scenario), its own `redis-server` on a
free port (frozen in one scenario), gunicorn with the Procfile's web line (2 workers) and a Celery
worker with the Procfile's worker line. The registry lists one generated repository of 150 pages
under the run's demo-sources directory.

Scenarios, each bounded in time, each printing requests sent, answered, the status mix and the
slowest answer:
1. hostile input: 1,000-level nested JSON to four endpoints, a request line over the server's
   limit, an oversized header, a control character in a header;
2. Redis frozen (SIGSTOP) for 12 s: /health polled by 4 clients, /api/agents and /api/chat;
   gunicorn must kill no worker;
3. PostgreSQL stopped: every API answers 503 problem+json; then started again: the first
   request of each endpoint after it is back answers 200;
3b. PostgreSQL frozen (every process SIGSTOPped) for 20 s: /api/agents, POST /api/chat and /search
   polled; each answer a 503 within the database deadlines (issue 21: about 6 s, where it was a
   worker killed at 30 s), no worker killed, 200s after SIGCONT;
4. Celery worker SIGKILLed mid-ingest, then started again: seconds from the worker being ready
   to the interrupted ingest running again, and the run's outcome.

Targets (issue 10): no 5xx other than a true 503; /health within 3 s with Redis frozen and no
worker killed; 503 problem+json everywhere with PostgreSQL stopped; the ingest running again
within 15 s of the worker being up.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.benchmark_git import git  # noqa: E402
from tests.processes import process_group_stop  # noqa: E402
from tests.redisserver import redis_server  # noqa: E402  (a Redis of our own on a free port)

PROBLEM = "application/problem+json"


@dataclass
class Tally:
    name: str
    sent: int = 0
    answered: int = 0
    statuses: Counter = field(default_factory=Counter)
    by_path: dict[str, Counter] = field(default_factory=dict)
    slowest: float = 0.0
    notes: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, started: float, status: int | str, path: str = "") -> None:
        elapsed = time.monotonic() - started
        with self.lock:
            self.sent += 1
            if isinstance(status, int):
                self.answered += 1
            self.statuses[status] += 1
            self.by_path.setdefault(path, Counter())[status] += 1
            self.slowest = max(self.slowest, elapsed)

    def print(self) -> None:
        mix = ", ".join(f"{status}: {count}" for status, count in sorted(self.statuses.items(), key=str))
        print(f"{self.name}: sent {self.sent}, answered {self.answered}, max latency {self.slowest:.2f} s; {mix}")
        for path, statuses in self.by_path.items():
            print(
                f"    {path or 'raw request'}: " + ", ".join(f"{status}: {count}" for status, count in statuses.items())
            )
        for note in self.notes:
            print(f"    {note}")

    @property
    def five_hundreds(self) -> int:
        return sum(count for status, count in self.statuses.items() if isinstance(status, int) and status >= 500)


def send(tally: Tally, client: httpx.Client, method: str, url: str, **kwargs) -> httpx.Response | None:
    started = time.monotonic()
    try:
        response = client.request(method, url, **kwargs)
    except httpx.HTTPError as exc:
        tally.record(started, type(exc).__name__, f"{method} {url}")
        return None
    tally.record(started, response.status_code, f"{method} {url}")
    return response


def raw(tally: Tally, port: int, payload: bytes) -> int | None:
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(payload)
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
    status = int(received.split(b" ", 2)[1]) if received else "no answer"
    tally.record(started, status)
    return status if isinstance(status, int) else None


def procfile_command(kind: str, env: dict[str, str]) -> list[str]:
    line = next(
        line.split(":", 1)[1].strip()
        for line in (ROOT / "Procfile").read_text().splitlines()
        if line.startswith(f"{kind}:")
    )
    return shlex.split(re.sub(r"\$\{(\w+)(?::-([^}]*))?\}", lambda m: env.get(str(m[1])) or (m[2] or ""), line))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def repository_create(path: Path, files: dict[str, str]) -> None:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "content")


@contextmanager
def process(command: list[str], env: dict[str, str], log_path: Path):
    with log_path.open("ab") as log:
        child = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        yield child
    finally:
        process_group_stop(child)


def wait_for(predicate: Callable[[], object], timeout: float, what: str) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise SystemExit(f"timed out waiting for {what}")


def django_shell(env: dict[str, str], code: str) -> str:
    """Runs `code` in a Django process of the run's configuration; returns the last line it printed."""
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return result.stdout.strip().splitlines()[-1]


def run_state(env: dict[str, str], run_id: int) -> dict:
    code = (
        "import json; from groundtruth.models import IngestRun; "
        f"r = IngestRun.objects.get(pk={run_id}); "
        "print(json.dumps({'status': r.status, 'attempts': r.attempts, 'files_processed': r.files_processed, "
        "'phase': r.phase}))"
    )
    return json.loads(django_shell(env, code))


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="faults-"))
    var_dir = work / "var"
    sources = var_dir / "demo-sources"
    pages = {
        f"docs/page{n:03d}.md": f"# Page {n}\n\n" + f"Paragraph {n} about fault tolerance. " * 40 for n in range(150)
    }
    repository_create(sources / "acme-faults", {"README.md": "# Faults\n", **pages})
    repository_create(
        sources / "registry",
        {
            "sources.yml": (
                f'repos:\n  - name: acme/faults\n    url: {sources / "acme-faults"}\n    include: ["docs/**/*.md"]\n'
            )
        },
    )
    port = free_port()
    print(f"work directory: {work}")
    tallies: list[Tally] = []
    with redis_server() as redis:
        env = {
            **os.environ,
            "VAR_DIR": str(var_dir),
            "REDIS_URL": redis.url,
            "CELERY_BROKER_URL": redis.url,
            "DEBUG": "false",
            "WEB_HOST": "127.0.0.1",
            "WEB_PORT": str(port),
            "WEB_WORKERS": "2",
            "WORKER_CONCURRENCY": "1",
            "LOG_LEVEL": "INFO",
            "INGEST_HEARTBEAT_SECONDS": "1",
            "INGEST_FILE_BATCH_SIZE": "20",  # progress visible early, so the kill lands mid-ingest
        }
        env.pop("DATABASE_URL", None)
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
        key = django_shell(
            env,
            "from agents.services import api_key_create; from agents.models import ApiKeyKind; "
            "print(api_key_create(kind=ApiKeyKind.SERVICE, name='faults', scopes=['read', 'ingest'])[1])",
        )
        bearer = {"Authorization": f"Bearer {key}"}
        base = f"http://127.0.0.1:{port}"
        with (
            process(procfile_command("web", env), env, work / "web.log") as web,
            process(procfile_command("worker", env), env, work / "worker.log") as worker,
        ):
            wait_for(lambda: b"embedding backend ready" in (work / "web.log").read_bytes(), 120, "gunicorn")
            wait_for(lambda: b" ready." in (work / "worker.log").read_bytes(), 120, "the Celery worker")
            with httpx.Client(base_url=base, timeout=30) as client:
                # A first ingest, so that the index exists before anything is broken.
                response = client.post("/ingest/repo", json={"repo": "acme/faults"}, headers=bearer)
                first_run = response.json()["run_ids"][0]
                wait_for(lambda: run_state(env, first_run)["status"] == "succeeded", 300, "the first ingest")

                tallies.append(hostile_input(client, port, bearer))
                tallies.append(redis_frozen(client, redis, work / "web.log"))
                tallies.append(postgres_stopped(client, env, var_dir, bearer))
                tallies.append(postgres_frozen(client, var_dir, bearer, work / "web.log"))
                tallies.append(worker_killed(client, env, worker, work, bearer))
            web.poll()
    print()
    for tally in tallies:
        tally.print()
    unexpected = sum(tally.five_hundreds - tally.statuses.get(503, 0) for tally in tallies)
    print(f"5xx other than 503: {unexpected}")
    return 0


def hostile_input(client: httpx.Client, port: int, bearer: dict[str, str]) -> Tally:
    tally = Tally("1. hostile input")
    nested = '{"message":' + "[" * 1000 + "]" * 1000 + "}"
    for path in ("/api/auth/wallet", "/api/chat", "/ask", "/ingest/repo"):
        for _ in range(5):
            send(tally, client, "POST", path, content=nested, headers={**bearer, "Content-Type": "application/json"})
    raw(tally, port, b"GET /search?q=" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    raw(tally, port, b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 9000 + b"\r\n\r\n")
    raw(tally, port, b"GET /health HTTP/1.1\r\nHost: x\r\nX-Bad: a\x01b\r\n\r\n")
    return tally


def redis_frozen(client: httpx.Client, redis, web_log: Path) -> Tally:
    tally = Tally("2. Redis frozen 12 s")
    stop = time.monotonic() + 12

    def poll(path: str) -> None:
        with httpx.Client(base_url=str(client.base_url), timeout=30) as own:
            while time.monotonic() < stop:
                send(tally, own, "GET", path)
                time.sleep(0.2)

    with redis.frozen():
        pollers = [threading.Thread(target=poll, args=("/health",)) for _ in range(4)]
        pollers += [threading.Thread(target=poll, args=(path,)) for path in ("/api/agents", "/api/chat")]
        for poller in pollers:
            poller.start()
        for poller in pollers:
            poller.join()
    killed = web_log.read_text().count("WORKER TIMEOUT")
    tally.notes.append(f"gunicorn workers killed (WORKER TIMEOUT): {killed}")
    return tally


def postgres_stopped(client: httpx.Client, env: dict[str, str], var_dir: Path, bearer: dict[str, str]) -> Tally:
    from agentplatform.plumbing.embedded_postgres import embedded_server

    tally = Tally("3. PostgreSQL stopped")
    calls = [
        ("GET", "/api/agents", {}),
        ("GET", "/api/chat", {}),
        ("POST", "/api/chat", {"json": {"message": "hi"}, "headers": bearer}),
        ("GET", "/api/auth/nonce", {}),
        ("GET", "/search?q=fault", {"headers": bearer}),
        ("POST", "/ask", {"json": {"question": "What is page 7 about?"}, "headers": bearer}),
        ("GET", "/repos", {"headers": bearer}),
        ("GET", "/health", {}),
    ]
    server = embedded_server(var_dir / "pgdata")
    server.stop()
    not_problem = 0
    for _ in range(3):
        for method, path, kwargs in calls:
            response = send(tally, client, method, path, **kwargs)
            if response is not None and path != "/health" and response.headers.get("content-type") != PROBLEM:
                not_problem += 1
    server.ensure_postgres_running()  # started again
    after = Tally("   after the restart")
    for method, path, kwargs in calls:
        if method == "GET":
            send(after, client, method, path, **kwargs)
    tally.notes.append(f"answers that were not problem+json: {not_problem}")
    tally.notes.append(
        "first GET of each endpoint after the restart: " + ", ".join(f"{s}: {c}" for s, c in after.statuses.items())
    )
    return tally


def postgres_frozen(client: httpx.Client, var_dir: Path, bearer: dict[str, str], web_log: Path) -> Tally:
    """Every PostgreSQL process SIGSTOPped for 20 s (its kernel still accepts connections and
    acknowledges packets): requests must answer 503 within the database deadlines, no worker killed."""
    import psutil

    tally = Tally("3b. PostgreSQL frozen 20 s")
    killed_before = web_log.read_text().count("WORKER TIMEOUT")
    stop = time.monotonic() + 20
    calls = [
        ("GET", "/api/agents", {}),
        ("POST", "/api/chat", {"json": {"message": "frozen?"}, "headers": bearer}),
        ("GET", "/search?q=fault", {"headers": bearer}),
    ]

    def poll(method: str, path: str, kwargs: dict) -> None:
        with httpx.Client(base_url=str(client.base_url), timeout=60) as own:
            while time.monotonic() < stop:
                send(tally, own, method, path, **kwargs)

    postmaster = psutil.Process(int((var_dir / "pgdata" / "postmaster.pid").read_text().split()[0]))
    processes = [postmaster, *postmaster.children(recursive=True)]
    pollers = [threading.Thread(target=poll, args=call) for call in calls]
    try:
        for frozen_process in processes:
            frozen_process.send_signal(signal.SIGSTOP)
        for poller in pollers:
            poller.start()
        for poller in pollers:
            poller.join()
    finally:
        for frozen_process in processes:
            frozen_process.send_signal(signal.SIGCONT)
    after = Tally("   after SIGCONT")
    for method, path, kwargs in calls:
        send(after, client, method, path, **kwargs)
    killed = web_log.read_text().count("WORKER TIMEOUT") - killed_before
    tally.notes.append(f"gunicorn workers killed (WORKER TIMEOUT): {killed}")
    statuses = ", ".join(f"{status}: {count}" for status, count in after.statuses.items())
    tally.notes.append(f"first request of each after SIGCONT: {statuses}")
    return tally


def worker_killed(
    client: httpx.Client, env: dict[str, str], worker: subprocess.Popen, work: Path, bearer: dict[str, str]
) -> Tally:
    tally = Tally("4. Celery worker SIGKILLed mid-ingest")
    # A change to every page, so the ingest has 150 files to chunk and embed.
    repo = Path(env["VAR_DIR"]) / "demo-sources" / "acme-faults"
    for path in repo.glob("docs/*.md"):
        path.write_text(path.read_text() + "\nA second version.\n")
    git(repo, "commit", "-qam", "v2")
    response = send(tally, client, "POST", "/ingest/repo", json={"repo": "acme/faults"}, headers=bearer)
    assert response is not None, "the ingest could not be queued"
    run_id = response.json()["run_ids"][0]
    wait_for(lambda: run_state(env, run_id)["files_processed"] >= 20, 120, "the ingest to be under way")
    os.killpg(worker.pid, signal.SIGKILL)
    worker.wait(timeout=10)
    killed_state = run_state(env, run_id)
    log = work / "worker-2.log"
    with process(procfile_command("worker", env), env, log):
        wait_for(lambda: b" ready." in log.read_bytes(), 120, "the restarted worker")
        ready = time.monotonic()
        wait_for(lambda: run_state(env, run_id)["attempts"] == 2, 60, "the run to be resumed")
        resumed_after = time.monotonic() - ready
        final = wait_for(
            lambda: (s := run_state(env, run_id))["status"] in ("succeeded", "failed") and s, 300, "the run"
        )
    tally.notes.append(f"killed at: {killed_state}")
    tally.notes.append(f"running again {resumed_after:.1f} s after the restarted worker was ready (target 15 s)")
    tally.notes.append(f"outcome: {final}")
    return tally


if __name__ == "__main__":
    sys.exit(main())
