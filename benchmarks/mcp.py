"""What the MCP server adds to a search: MCP `search_docs` next to GET /search, p50 of each.

    .venv/bin/python benchmarks/mcp.py [--rounds 5] [--web-port 8270] [--mcp-port 8272]

In one run:
1. A database of its own (gt_bench_mcp, on the embedded PostgreSQL or the DATABASE_URL server);
   the documentation of benchmarks/corpus/ferrite committed to a git repository under
   var/bench/mcp and ingested with the configured embedding model (the local one by default).
2. The Procfile's `web:` line (gunicorn, one worker) and `mcp:` line (uvicorn), each loading the
   model at start-up, with rate limits that never throttle (still counted) and a Redis key prefix
   of the run's own.
3. Every question of benchmarks/questions.yml as GET /search?q=…&limit=10 and as one MCP
   `tools/call` of search_docs (query, limit 10) in one stateless request (as a 2025-11-25
   client of this stateless server sends it; a 2026-07-28 request is the same POST with its
   version in headers and `_meta`), the two alternating, each on a keep-alive connection of its
   own. The first round fills each process's query-embedding cache and is not counted; the
   answers of the MCP tool are checked equal to /search's.
4. MCP `tools/list` (the gate and the transport, no Django work) for the fixed cost of a request.

Printed: p50 and p95 of each, and the p50 of search_docs minus the p50 of /search (target: at most
5 ms more). One client, one request at a time: the figures are latency, not throughput; the
client, the servers, PostgreSQL and Redis share the machine's cores.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
import yaml

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

from benchmarks.api import clear_redis_prefix, port_in_use, stop  # noqa: E402
from benchmarks.benchmark_database import benchmark_database_use  # noqa: E402
from benchmarks.benchmark_git import git  # noqa: E402

DATABASE_NAME = "gt_bench_mcp"
KEY_PREFIX = f"bench-mcp-{os.getpid()}"
UNTHROTTLED_RATE = "1000000000/m"
REPOSITORY = "bench/ferrite"
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
CURRENT_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "benchmarks/mcp.py", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def procfile_command(name: str, values: dict[str, str]) -> list[str]:
    """The Procfile's `name:` line with its ${NAME:-default} references taken from `values`."""
    line = next(line for line in (BASE_DIR / "Procfile").read_text().splitlines() if line.startswith(f"{name}:"))
    expanded = re.sub(r"\$\{(\w+)(?::-([^}]*))?\}", lambda m: values.get(m[1]) or (m[2] or ""), line)
    return shlex.split(expanded.split(":", 1)[1])


def repositories_create(root: Path) -> Path:
    """The corpus as a git repository and a registry repository listing it; returns the registry."""
    shutil.rmtree(root, ignore_errors=True)
    docs, registry = root / "ferrite", root / "registry"
    shutil.copytree(BASE_DIR / "benchmarks" / "corpus" / "ferrite", docs)
    registry.mkdir(parents=True)
    (registry / "sources.yml").write_text(
        f"repos:\n  - name: {REPOSITORY}\n    url: {docs}\n    trust: canonical\n"
        '    include: ["**/*.md", "**/*.rst", "**/*.yml", "**/*.yaml", "**/*.toml", "**/*.json"]\n'
    )
    for directory in (docs, registry):
        git(directory, "init", "--quiet", "--initial-branch", "main")
        git(directory, "add", "--all")
        git(directory, "-c", "user.name=bench", "-c", "user.email=bench@example.com", "commit", "--quiet", "-m", "x")
    return registry


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def wait_until_answering(url: str, server: subprocess.Popen, log: Path, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"{url}: the server exited with {server.returncode}; see {log}")
        try:
            httpx.get(url, timeout=30)  # any answer: started (both load the model before listening)
            return
        except httpx.TransportError:
            time.sleep(0.3)
    raise SystemExit(f"{url}: no answer within {timeout:.0f} s; see {log}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="measured rounds over the questions (after one warm-up)")
    parser.add_argument("--web-port", type=int, default=8270)
    parser.add_argument("--mcp-port", type=int, default=8272)
    args = parser.parse_args()
    for port in (args.web_port, args.mcp_port):
        if port_in_use(port):
            raise SystemExit(f"port {port} is in use; pick others with --web-port / --mcp-port")

    work = Path(os.environ.get("VAR_DIR", BASE_DIR / "var")) / "bench" / "mcp"
    registry = repositories_create(work / "repos")
    settings_environment = {
        "SOURCE_REGISTRY_REPO": str(registry),
        "SOURCE_REGISTRY_REF": "main",
        "GIT_LOCAL_ROOTS": str(work / "repos"),
        "GIT_CACHE_DIR": str(work / "git-cache"),
        "CACHE_KEY_PREFIX": KEY_PREFIX,
        "RATE_LIMIT_PUBLIC": UNTHROTTLED_RATE,
        "RATE_LIMIT_AUTHENTICATED": UNTHROTTLED_RATE,
        "WEB_BASE_URL": f"http://127.0.0.1:{args.web_port}",
        "LLM_BASE_URL": "",
    }
    os.environ.update(settings_environment)
    database_url = benchmark_database_use(DATABASE_NAME)

    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request otherwise

    from agents.models import ApiKeyKind
    from agents.services import api_key_create
    from groundtruth.ingest.foreground import ingest_foreground

    started = time.perf_counter()
    [run] = ingest_foreground(repository_name=REPOSITORY, ref=None)
    if run.status != "succeeded":
        raise SystemExit(f"ingest failed: {run.error}")
    chunks = run.chunks_added + run.chunks_unchanged
    print(f"ingested {REPOSITORY}: {chunks} chunks ({time.perf_counter() - started:.0f} s)")
    _, secret = api_key_create(kind=ApiKeyKind.SERVICE, name="mcp benchmark", scopes=["read"])

    environment = {**os.environ, **settings_environment, "DATABASE_URL": database_url, "DEBUG": "false"}
    values = {
        "WEB_HOST": "127.0.0.1",
        "WEB_PORT": str(args.web_port),
        "WEB_WORKERS": "1",
        "MCP_PORT": str(args.mcp_port),
    }
    servers: list[subprocess.Popen] = []
    try:
        for name, url in (
            ("web", f"http://127.0.0.1:{args.web_port}/health"),
            ("mcp", f"http://127.0.0.1:{args.mcp_port}/"),
        ):
            log = work / f"{name}.log"
            with open(log, "wb") as output:
                server = subprocess.Popen(
                    procfile_command(name, values),
                    cwd=BASE_DIR,
                    env=environment,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            servers.append(server)
            wait_until_answering(url, server, log)
        measure(args, secret)
    finally:
        for server in servers:
            stop(server)
        clear_redis_prefix(environment, KEY_PREFIX)
    return 0


def measure(args: argparse.Namespace, secret: str) -> None:
    questions = yaml.safe_load((BASE_DIR / "benchmarks" / "questions.yml").read_text())
    queries = [item["question"] for item in (*questions["answerable"], *questions["unanswerable"])]
    authorization = {"Authorization": f"Bearer {secret}"}
    web = httpx.Client(base_url=f"http://127.0.0.1:{args.web_port}", headers=authorization, timeout=60)
    mcp = httpx.Client(
        base_url=f"http://127.0.0.1:{args.mcp_port}", headers={**authorization, **MCP_HEADERS}, timeout=60
    )
    timings: dict[str, list[float]] = {
        "GET /search": [],
        "MCP search_docs": [],
        "MCP search_docs'": [],
        "MCP tools/list": [],
        "MCP tools/list'": [],
    }
    mismatches = 0

    def search(query: str) -> dict:
        begun = time.perf_counter()
        response = web.get("/search", params={"q": query, "limit": 10})
        elapsed = time.perf_counter() - begun
        response.raise_for_status()
        timings["GET /search"].append(elapsed)
        return response.json()

    def mcp_request(label: str, number: int, method: str, params: dict, *, current: bool) -> dict:
        """One JSON-RPC request; `current`: as the 2026-07-28 protocol sends it (version, method and
        tool name in headers, client facts in `_meta`), else as a stateless 2025-11-25 request."""
        headers = {}
        if current:
            params = {**params, "_meta": CURRENT_META}
            headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
            if "name" in params:
                headers["Mcp-Name"] = params["name"]
        body = {"jsonrpc": "2.0", "id": number, "method": method, "params": params}
        begun = time.perf_counter()
        response = mcp.post("/mcp", json=body, headers=headers)
        elapsed = time.perf_counter() - begun
        answer = response.json()
        if "result" not in answer or answer["result"].get("isError"):
            raise SystemExit(f"{label} failed: {answer}")
        timings[label].append(elapsed)
        return answer["result"]

    def search_docs(number: int, query: str) -> dict:
        call = {"name": "search_docs", "arguments": {"query": query, "limit": 10}}
        legacy = mcp_request("MCP search_docs", number, "tools/call", call, current=False)["structuredContent"]
        current = mcp_request("MCP search_docs'", number, "tools/call", call, current=True)["structuredContent"]
        if current != legacy:
            raise SystemExit("search_docs answered a 2026-07-28 request differently")
        return legacy

    def tools_list(number: int) -> None:
        mcp_request("MCP tools/list", number, "tools/list", {}, current=False)
        mcp_request("MCP tools/list'", number, "tools/list", {}, current=True)

    number = 0
    for round_number in range(args.rounds + 1):
        for index, query in enumerate(queries):
            number += 1
            # Alternating which goes first, so that neither always follows the other's work.
            if (index + round_number) % 2:
                rest, tool = search(query), search_docs(number, query)
            else:
                tool, rest = search_docs(number, query), search(query)
            tools_list(number)
            mismatches += round_number == 1 and tool != rest
        if round_number == 0:  # warm-up: the embedding caches fill, connections open
            for values in timings.values():
                values.clear()
    web.close()
    mcp.close()

    print(f"\n{len(queries)} questions x {args.rounds} rounds, one request at a time; milliseconds")
    print("(' : the same request in the 2026-07-28 protocol; without: a stateless 2025-11-25 request)")
    print(f"{'':<20}{'p50':>8}{'p95':>8}{'mean':>8}")
    for label, values in timings.items():
        milliseconds = [value * 1000 for value in values]
        print(
            f"{label:<20}{percentile(milliseconds, 0.5):8.2f}{percentile(milliseconds, 0.95):8.2f}"
            f"{statistics.fmean(milliseconds):8.2f}"
        )
    print()
    for label in ("MCP search_docs", "MCP search_docs'"):
        overhead = (percentile(timings[label], 0.5) - percentile(timings["GET /search"], 0.5)) * 1000
        verdict = "within" if overhead <= 5 else "over"
        print(f"{label[4:]} p50 - /search p50: {overhead:+.2f} ms ({verdict} the 5 ms target)")
    print(f"search_docs answers equal to /search: {len(queries) - mismatches} of {len(queries)}")


if __name__ == "__main__":
    raise SystemExit(main())
