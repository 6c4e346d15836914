"""What only the whole web server shows, through gunicorn as the Procfile runs it: every API
answering 503 while the database is down, the server's own limits and refusals as problem
details, and the embedding model loaded once, before the workers fork."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import time
from pathlib import Path

import httpx
import pytest
from django.core.management import call_command

from agentplatform.plumbing.authentication import new_token
from tests import celeryworker
from tests.chat.factories import ChatMessageFactory
from tests.conftest import closed_port
from tests.groundtruth.factories import service_key
from tests.liveserver import gunicorn_server

pytestmark = pytest.mark.slow

PROBLEM = "application/problem+json"


def raw_request(base_url: str, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Sends `request` as it is (what httpx would refuse to send) and reads the whole answer."""
    host, port = base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        connection.sendall(request)
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in header_lines)}
    return int(status_line.split()[1]), headers, body


def test_with_the_database_down_every_api_answers_503_problem_with_retry_after_and_logs_one_line(tmp_path: Path):
    environment = {
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:{closed_port()}/nowhere",
        "EMBEDDING_BACKEND": "none",
    }
    bearer = {"Authorization": f"Bearer {new_token('sk')[0]}"}  # well-formed: only the database can refuse it
    with gunicorn_server(environment=environment, log_path=tmp_path / "web.log") as base_url:
        with httpx.Client(base_url=base_url, timeout=20) as client:
            responses = {
                "GET /api/agents": client.get("/api/agents"),
                "GET /api/chat": client.get("/api/chat"),
                "POST /api/chat": client.post("/api/chat", json={"message": "hello"}, headers=bearer),
                "GET /api/auth/nonce": client.get("/api/auth/nonce"),
                "GET /search": client.get("/search", params={"q": "agents"}, headers=bearer),
                "POST /ask": client.post("/ask", json={"question": "Why is my agent paused?"}, headers=bearer),
                "GET /repos": client.get("/repos", headers=bearer),
            }
    expected_body = {
        "type": "urn:problem:database_unavailable",
        "title": "Service Unavailable",
        "status": 503,
        "detail": "The database is unavailable; retry shortly.",
        "code": "database_unavailable",
    }
    answers = {
        name: (response.status_code, response.headers["content-type"], response.headers.get("retry-after"))
        for name, response in responses.items()
    }
    assert answers == {name: (503, PROBLEM, "5") for name in responses}
    assert all(response.json() == expected_body for response in responses.values())
    log = (tmp_path / "web.log").read_text()
    assert log.count("Database unavailable") == 1  # one line for the outage, not one per request
    assert "Traceback" not in log


@pytest.mark.django_db(transaction=True)
def test_server_limits_and_refusals_are_problem_details_and_the_longest_accepted_q_arrives(tmp_path: Path):
    key = service_key("read")
    environment = {"DATABASE_URL": celeryworker.test_database_url(), "EMBEDDING_BACKEND": "none"}
    with gunicorn_server(environment=environment, log_path=tmp_path / "web.log") as base_url:
        with httpx.Client(base_url=base_url, timeout=20, headers={"Authorization": f"Bearer {key}"}) as client:
            longest = client.get("/search", params={"q": "🦀" * 500, "repo": "o" * 99 + "/" + "n" * 100})
            too_long = client.get("/search", params={"q": "🦀" * 501})
        line_over_limit = raw_request(base_url, b"GET /search?q=" + b"a" * 8200 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        header_over_limit = raw_request(
            base_url, b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 9000 + b"\r\n\r\n"
        )
        control_character = raw_request(base_url, b"GET /health HTTP/1.1\r\nHost: x\r\nX-Bad: a\x01b\r\n\r\n")
        # Refused at once, not waited on for the blank line that would end the header.
        bare_line_feed = raw_request(base_url, b"GET /health HTTP/1.1\nHost: x\n")

    # 500 four-byte characters percent-encode to 6,000 bytes: the request reaches the application.
    assert len(str(longest.request.url).encode()) > 6000
    # Answered by the application (which knows no such repository), not refused by the server.
    assert (longest.status_code, longest.json()["code"]) == (400, "unknown_repository")
    assert (too_long.status_code, too_long.json()["errors"]) == (
        400,
        [{"field": "q", "message": "may be at most 500 characters"}],
    )
    for status, headers, body, code in (
        (*line_over_limit, "uri_too_long"),
        (*header_over_limit, "header_fields_too_large"),
        (*control_character, "bad_request"),
        (*bare_line_feed, "bad_request"),
    ):
        problem = httpx.Response(status, headers=headers, content=body).json()
        assert (headers["content-type"], problem["status"], problem["code"]) == (PROBLEM, status, code)
    assert [line_over_limit[0], header_over_limit[0], control_character[0], bare_line_feed[0]] == [414, 431, 400, 400]


def local_model_environment() -> dict[str, str]:
    """The server's environment for the test database and the packaged model on ONNX Runtime. The
    export is made once per host before the workers start (as `make run` does); a fresh
    checkout's first export takes longer than a worker waits before serving lexically."""
    call_command("prepare_models", stdout=io.StringIO())
    return {"DATABASE_URL": celeryworker.test_database_url(), "EMBEDDING_BACKEND": "local", "EMBEDDING_MODEL": ""}


@pytest.mark.django_db(transaction=True)
def test_the_arbiter_loads_the_embedding_model_once_and_every_worker_a_replaced_one_too_starts_with_it(
    tmp_path: Path,
):
    environment = local_model_environment()
    log_path = tmp_path / "web.log"
    ready = "embedding backend ready: local model all-MiniLM-L6-v2 on ONNX Runtime (loaded)"
    with gunicorn_server(environment=environment, log_path=log_path, workers=2) as base_url:
        health = httpx.get(f"{base_url}/health", timeout=20).json()
        # The first worker up answers; on a loaded machine the second may not have booted yet.
        deadline = time.monotonic() + 30
        while log_path.read_text().count("Booting worker") < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        booted = [int(line.rsplit(" ", 1)[1]) for line in log_path.read_text().splitlines() if "Booting worker" in line]
        os.kill(booted[0], signal.SIGKILL)  # the arbiter forks a replacement, model loaded
        deadline = time.monotonic() + 30
        while log_path.read_text().count(ready) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        replaced_health = httpx.get(f"{base_url}/health", timeout=20).json()
    assert health["checks"]["embeddings"]["status"] == replaced_health["checks"]["embeddings"]["status"] == "ok"
    assert health["checks"]["embeddings"]["detail"] == "local model all-MiniLM-L6-v2 on ONNX Runtime (loaded)"
    log = log_path.read_text()
    assert log.count("Embedding model loaded for the workers in") == 1
    assert (len(booted), log.count("Booting worker"), log.count(ready)) == (2, 3, 3)


@pytest.mark.django_db(transaction=True)
def test_workers_that_inherited_the_embedding_model_stop_cleanly(tmp_path: Path):
    # Each worker embeds a query with the model the arbiter loaded before forking, then the server
    # stops (a deploy, `make run`'s Ctrl-C). ONNX Runtime's thread pool belongs to the arbiter:
    # tearing it down in a forked worker aborted the worker (`std::system_error`), a core dump for
    # every graceful stop, HUP and max_requests restart.
    key = service_key("read")
    environment = local_model_environment()
    log_path = tmp_path / "web.log"
    with gunicorn_server(environment=environment, log_path=log_path, workers=2) as base_url:
        deadline = time.monotonic() + 30
        while log_path.read_text().count("embedding backend ready") < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        with httpx.Client(base_url=base_url, timeout=20, headers={"Authorization": f"Bearer {key}"}) as client:
            statuses = {
                client.get("/search", params={"q": f"how do I page the on-call engineer {n}"}).status_code
                for n in range(8)
            }
    log = log_path.read_text()
    assert statuses == {200}
    assert log.count("Worker exiting") == 2
    assert "terminate called" not in log and "SIGABRT" not in log and "Traceback" not in log
    assert "Shutting down: Master" in log


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("trusted_proxy_count", "scheme"), [("0", "http"), ("1", "https")])
def test_x_forwarded_proto_from_127_0_0_1_makes_links_https_only_behind_a_trusted_proxy(
    tmp_path: Path, trusted_proxy_count: str, scheme: str
):
    message = ChatMessageFactory()
    environment = {
        "DATABASE_URL": celeryworker.test_database_url(),
        "EMBEDDING_BACKEND": "none",
        "TRUSTED_PROXY_COUNT": trusted_proxy_count,
    }
    with gunicorn_server(environment=environment, log_path=tmp_path / "web.log") as base_url:
        response = httpx.get(f"{base_url}/api/chat?limit=1", headers={"X-Forwarded-Proto": "https"}, timeout=20)
    host = base_url.removeprefix("http://")
    assert response.status_code == 200
    assert response.headers["link"] == f'<{scheme}://{host}/api/chat?limit=1&before={message.pk}>; rel="next"'


@pytest.mark.django_db(transaction=True)
def test_idle_and_trickling_connections_neither_delay_other_requests_nor_get_a_worker_killed(tmp_path: Path):
    environment = {
        "DATABASE_URL": celeryworker.test_database_url(),
        "EMBEDDING_BACKEND": "none",
        # A worker stuck on the held connections would be killed within the test.
        "GUNICORN_CMD_ARGS": "--timeout 5",
    }
    with gunicorn_server(environment=environment, log_path=tmp_path / "web.log") as base_url:
        host, port = base_url.removeprefix("http://").split(":")
        idle = [socket.create_connection((host, int(port)), timeout=10) for _ in range(8)]
        trickling = [socket.create_connection((host, int(port)), timeout=10) for _ in range(8)]
        for connection in trickling:
            connection.sendall(b"GET /api/agents HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        answers = []
        with httpx.Client(base_url=base_url, timeout=3) as client:  # a stall is a ReadTimeout
            for _second in range(8):  # past gunicorn's worker timeout
                for connection in trickling:
                    connection.sendall(b"a")  # one byte a second, never the blank line
                answers.append((client.get("/health").status_code, client.get("/api/agents").json()))
                time.sleep(1)
        # 10 s after they opened, the server closes them: a trickled header with a 408 problem.
        trickled_answer = b""
        while chunk := trickling[0].recv(65536):
            trickled_answer += chunk
        idle_answer = idle[0].recv(65536)
        for connection in idle + trickling:
            connection.close()
    assert answers == [(200, [])] * 8
    head, _, body = trickled_answer.partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0] == b"HTTP/1.1 408 Request Timeout"
    assert json.loads(body)["code"] == "request_timeout"
    assert idle_answer == b""
    assert "WORKER TIMEOUT" not in (tmp_path / "web.log").read_text()
