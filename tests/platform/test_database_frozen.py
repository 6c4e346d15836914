"""A database that stops answering (every PostgreSQL process SIGSTOPped: its kernel still accepts
connections and acknowledges packets, so only a client-side deadline ends a wait) costs a request
a few seconds and a 503 `database_unavailable`, never the worker: through gunicorn as the Procfile
runs it, the Procfile's stream and MCP processes, on a PostgreSQL of this module's own (never the shared one)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil
import pytest

from agentplatform.plumbing.embedded_postgres import embedded_server
from tests.liveserver import ROOT, gunicorn_server, procfile_server
from tests.streamserver import stream_server

pytestmark = pytest.mark.slow

PROBLEM = "application/problem+json"
DATABASE_UNAVAILABLE = {
    "type": "urn:problem:database_unavailable",
    "title": "Service Unavailable",
    "status": 503,
    "detail": "The database is unavailable; retry shortly.",
    "code": "database_unavailable",
}
# Today's deadlines answer in about 6 s (a statement on an open connection: 5 s and 1 s of grace)
# or 3 s (a new connection); without them a request waited until gunicorn killed its worker (30 s).
ANSWERED_WITHIN_SECONDS = 10

SETUP = """
from agents.models import Agent, AgentStatus, ApiKeyKind
from agents.services import api_key_create
agent = Agent.objects.create(instance_id="frost", name="Frost", status=AgentStatus.RUNNING)
print(api_key_create(kind=ApiKeyKind.AGENT, name="frost", agent=agent)[1])
print(api_key_create(kind=ApiKeyKind.SERVICE, name="reader", scopes=["read"])[1])
"""


@dataclass(frozen=True)
class OwnDatabase:
    environment: dict[str, str]
    data_dir: Path
    agent_key: str
    reader_key: str


@pytest.fixture(scope="module")
def own_database() -> Iterator[OwnDatabase]:
    """An embedded PostgreSQL (pgvector) under a VAR_DIR of this module's, migrated, with an agent,
    its key and a service key with scope `read`. The directory is not one of pytest's numbered
    ones: another pytest session on the machine may remove those while this module runs."""
    with tempfile.TemporaryDirectory(prefix="frozen-database-") as directory:
        yield from _own_database(Path(directory) / "var")


def _own_database(var_dir: Path) -> Iterator[OwnDatabase]:
    environment = {
        "VAR_DIR": str(var_dir),
        "DATABASE_URL": "",  # the embedded server under VAR_DIR
        "EMBEDDING_BACKEND": "none",
        "API_RESPONSE_CACHE_SECONDS": "0",  # every list read reaches the database
        "CREDENTIAL_CACHE_SECONDS": "0",  # every key is checked in the database
    }
    env = {**os.environ, **environment}
    try:
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=300)
        shell = [sys.executable, "manage.py", "shell", "-c", SETUP]
        created = subprocess.run(shell, cwd=ROOT, env=env, check=True, capture_output=True, text=True)
        agent_key, reader_key = created.stdout.split()[-2:]
        yield OwnDatabase(environment, var_dir / "pgdata", agent_key, reader_key)
    finally:
        if (var_dir / "pgdata" / "postmaster.pid").exists():
            embedded_server(var_dir / "pgdata").stop()


@contextmanager
def frozen(data_dir: Path) -> Iterator[None]:
    """Every process of the PostgreSQL in `data_dir` (postmaster and backends) stopped, then continued."""
    postmaster = psutil.Process(int((data_dir / "postmaster.pid").read_text().split()[0]))
    processes = [postmaster, *postmaster.children(recursive=True)]
    try:
        for process in processes:
            process.send_signal(signal.SIGSTOP)
        yield
    finally:
        for process in processes:
            process.send_signal(signal.SIGCONT)


def timed(request: httpx.Request, client: httpx.Client) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = client.send(request)
    return response, time.monotonic() - started


def test_with_the_database_frozen_requests_answer_503_in_seconds_and_the_worker_lives(own_database, tmp_path):
    log_path = tmp_path / "web.log"
    agent = {"Authorization": f"Bearer {own_database.agent_key}"}
    with (
        gunicorn_server(environment=own_database.environment, log_path=log_path) as base_url,
        httpx.Client(base_url=base_url, timeout=60) as client,
    ):
        agents = client.build_request("GET", "/api/agents")
        chat = client.build_request("POST", "/api/chat", json={"message": "still here?"}, headers=agent)
        assert client.send(agents).status_code == 200  # the worker holds an open connection
        with frozen(own_database.data_dir):
            # On the open connection (a statement), then on a new one (a connect).
            agents_frozen, agents_seconds = timed(agents, client)
            chat_frozen, chat_seconds = timed(chat, client)
        agents_back = client.send(agents)
        chat_back = client.send(chat)

    for response in (agents_frozen, chat_frozen):
        assert (response.status_code, response.headers["content-type"]) == (503, PROBLEM)
        assert response.headers["retry-after"] == "5"
        assert response.json() == DATABASE_UNAVAILABLE
    assert agents_seconds < ANSWERED_WITHIN_SECONDS
    assert chat_seconds < ANSWERED_WITHIN_SECONDS
    assert agents_back.status_code == 200
    assert [agent["instance_id"] for agent in agents_back.json()] == ["frost"]
    assert (chat_back.status_code, chat_back.json()["message"]) == (201, "still here?")
    log = log_path.read_text()
    assert log.count("Booting worker with pid") == 1  # the one worker served every request
    assert "WORKER TIMEOUT" not in log
    assert log.count("Database unavailable (OperationalError: ") == 1
    assert log.count("Database available again") == 1


def test_with_the_database_frozen_mcp_answers_503_in_seconds_and_then_lists_its_tools(own_database, tmp_path):
    headers = {
        "Authorization": f"Bearer {own_database.reader_key}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    tools_list = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    with (
        procfile_server(
            name="mcp", port_variable="MCP_PORT", environment=own_database.environment, log_path=tmp_path / "mcp.log"
        ) as base_url,
        httpx.Client(base_url=base_url, timeout=60) as client,
    ):
        request = client.build_request("POST", "/mcp", json=tools_list, headers=headers)
        assert client.send(request).status_code == 200
        with frozen(own_database.data_dir):
            refused, seconds = timed(request, client)
        listed = client.send(request)

    assert (refused.status_code, refused.headers["content-type"]) == (503, PROBLEM)
    assert refused.json() == DATABASE_UNAVAILABLE
    assert seconds < ANSWERED_WITHIN_SECONDS
    assert listed.status_code == 200
    assert len(listed.json()["result"]["tools"]) == 6


def test_with_the_database_frozen_the_stream_refuses_to_open_with_503_in_seconds_then_opens(own_database, tmp_path):
    def stream_open(client: httpx.Client) -> tuple[int, str, bytes | dict, float]:
        started = time.monotonic()
        with client.stream("GET", "/api/chat/stream", headers={"Accept": "text/event-stream"}) as response:
            seconds = time.monotonic() - started
            content_type = response.headers["content-type"]
            body = response.read() if response.status_code != 200 else b""
        return response.status_code, content_type, json.loads(body) if body else body, seconds

    with (
        stream_server(environment=own_database.environment, log_path=tmp_path / "stream.log") as base_url,
        httpx.Client(base_url=base_url, timeout=60) as client,
    ):
        opened_before = stream_open(client)
        with frozen(own_database.data_dir):
            refused = stream_open(client)
        opened_after = stream_open(client)

    assert opened_before[:3] == opened_after[:3] == (200, "text/event-stream", b"")
    assert refused[:3] == (503, PROBLEM, DATABASE_UNAVAILABLE)
    assert refused[3] < ANSWERED_WITHIN_SECONDS
