"""GET /repos (service key, no secrets, constant queries) and GET /health (public, 200/503)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from django.db import connection

from agentplatform.health import health_probe
from agents.models import ApiKey
from agents.services import api_key_revoke
from groundtruth.ingest.index_text import INDEX_VERSION
from groundtruth.models import IngestStatus, Registry
from tests.conftest import redis_cache_at
from tests.embeddingserver import EmbeddingServer
from tests.groundtruth.factories import IngestRunFactory, RepositoryFactory, bearer, service_key
from tests.redisserver import redis_server


@pytest.mark.django_db
def test_repos_lists_every_repository_with_state_and_latest_run(api_client, django_assert_num_queries, settings):
    settings.SOURCE_REGISTRY_REPO, settings.SOURCE_REGISTRY_REF = "/srv/registry", "main"
    registry = Registry.objects.create(
        location="/srv/registry@main:sources.yml",
        commit="b" * 40,
        content="repos: []\n",
        loaded_at=datetime(2026, 1, 1, tzinfo=UTC),
    )
    ready = RepositoryFactory(
        name="acme/ready",
        registry=registry,
        last_commit="c" * 40,
        file_count=3,
        chunk_count=9,
        trust="canonical",
        index_version=INDEX_VERSION,
    )
    ready.last_ingested_at = datetime(2026, 1, 2, tzinfo=UTC)
    ready.save()
    IngestRunFactory(repository=ready, status=IngestStatus.FAILED, error="GitError: boom")
    latest = IngestRunFactory(repository=ready, status=IngestStatus.SUCCEEDED, trigger="push")
    RepositoryFactory(name="acme/new", registry=registry)
    RepositoryFactory(name="acme/off", registry=registry, enabled=False, is_transcript=True, trust="transcript")
    running = RepositoryFactory(name="acme/busy", registry=registry)
    IngestRunFactory(repository=running, status=IngestStatus.RUNNING, finished_at=None)
    secret = service_key("read")
    api_client.get("/repos", **bearer(secret))  # verifies the key, which the worker then remembers

    with django_assert_num_queries(2):  # registry, repositories with latest runs
        response = api_client.get("/repos", **bearer(secret))

    assert response.status_code == 200
    body = response.json()
    assert body["registry"] == {
        "location": "/srv/registry@main:sources.yml",
        "commit": "b" * 40,
        "loaded_at": "2026-01-01T00:00:00Z",
        "last_error": "",
        "last_error_at": None,
    }
    assert [(repo["name"], repo["state"], repo["enabled"], repo["transcript"]) for repo in body["repositories"]] == [
        ("acme/busy", "running", True, False),
        ("acme/new", "new", True, False),
        ("acme/off", "disabled", False, True),
        ("acme/ready", "ready", True, False),
    ]
    assert body["repositories"][3] == {
        "name": "acme/ready",
        "url": ready.url,
        "ref": "main",
        "owners": ["docs-team"],
        "trust": "canonical",
        "include": ["docs/**/*.md"],
        "exclude": [],
        "enabled": True,
        "transcript": False,
        "state": "ready",
        "last_commit": "c" * 40,
        "last_ingested_at": "2026-01-02T00:00:00Z",
        "file_count": 3,
        "chunk_count": 9,
        "index_version": INDEX_VERSION,
        "index_current": True,
        "latest_run": {
            "id": latest.pk,
            "status": "succeeded",
            "finished_at": "2026-01-02T03:04:10Z",
            "error": "",
            "trigger": "push",
        },
    }
    assert body["repositories"][1]["latest_run"] is None
    assert (body["repositories"][1]["index_version"], body["repositories"][1]["index_current"]) == (0, False)


@pytest.mark.django_db
def test_repos_needs_a_read_key(api_client):
    RepositoryFactory()
    assert api_client.get("/repos").status_code == 401
    response = api_client.get("/repos", **bearer(service_key("ingest")))
    assert response.status_code == 403
    assert response.json()["detail"] == "A service key with scope 'read' is required."


@pytest.mark.django_db
def test_repos_is_readable_by_a_staff_session(client, django_user_model):
    staff = django_user_model.objects.create_user("staff", password="pw-123456789", is_staff=True)
    client.force_login(staff)
    response = client.get("/repos")
    assert response.status_code == 200
    assert response.json() == {"registry": None, "repositories": []}


@pytest.mark.django_db
def test_health_is_public_and_reports_every_dependency(api_client, settings):
    settings.EMBEDDING_BACKEND = "none"
    settings.LLM_BASE_URL = ""
    response = api_client.get("/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert {name: check["status"] for name, check in body["checks"].items()} == {
        "database": "ok",
        "pgvector": "ok",
        "redis": "ok",
        "broker": "ok",
        "embeddings": "disabled",
        "llm": "disabled",
        "judge": "disabled",
    }
    assert body["checks"]["pgvector"]["detail"].startswith("pgvector 0.")
    assert body["checks"]["llm"]["detail"] == "no LLM_BASE_URL: /ask answers extractively"


@pytest.mark.django_db
def test_health_is_degraded_but_200_when_the_embedding_endpoint_is_down(api_client, settings):
    settings.HEALTH_CACHE_SECONDS = 0  # two reports in a row, each of the settings of its moment
    with EmbeddingServer() as server:
        settings.EMBEDDING_BACKEND = "openai"
        settings.EMBEDDING_URL = server.base_url
        settings.EMBEDDING_MODEL = server.model
        assert api_client.get("/health").json()["checks"]["embeddings"]["status"] == "ok"
    settings.LLM_BASE_URL = f"https://user:hunter2@127.0.0.1:{server.port}/v1"
    response = api_client.get("/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "degraded"
    assert body["checks"]["embeddings"] == {
        "status": "error",
        "detail": f"embedding endpoint http://127.0.0.1:{server.port}/v1 unreachable",
        "ms": body["checks"]["embeddings"]["ms"],
    }
    assert body["checks"]["llm"]["detail"] == f"language-model endpoint https://127.0.0.1:{server.port}/v1 unreachable"
    assert "hunter2" not in response.content.decode()


@pytest.mark.django_db(transaction=True)
def test_health_is_503_when_the_database_is_unreachable(api_client):
    original = connection.settings_dict["HOST"]
    connection.close()
    connection.settings_dict["HOST"] = "/nonexistent-socket-dir"
    try:
        response = api_client.get("/health")
    finally:
        connection.close()
        connection.settings_dict["HOST"] = original
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert (body["checks"]["database"]["status"], body["checks"]["pgvector"]["status"]) == ("error", "error")
    assert body["checks"]["redis"]["status"] == "ok"


@pytest.mark.django_db
def test_health_with_redis_frozen_answers_in_time_with_redis_and_broker_in_error(api_client, settings):
    settings.EMBEDDING_BACKEND = "none"
    settings.LLM_BASE_URL = ""
    settings.HEALTH_TIMEOUT_SECONDS = 1.0
    with redis_server() as redis:
        settings.CACHES = redis_cache_at(redis.url)
        settings.CELERY_BROKER_URL = redis.url
        assert api_client.get("/health").json()["status"] == "ok"
        health_probe.clear()
        with redis.frozen():
            response = api_client.get("/health")
            again = api_client.get("/health")  # within HEALTH_CACHE_SECONDS: the same report
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "degraded"
    assert {name: check["status"] for name, check in body["checks"].items()} == {
        "database": "ok",
        "pgvector": "ok",
        "redis": "error",
        "broker": "error",
        "embeddings": "disabled",
        "llm": "disabled",
        "judge": "disabled",
    }
    assert body["checks"]["redis"]["detail"] == "TimeoutError: Timeout reading from socket"
    assert body["checks"]["broker"]["detail"] == "no answer within 1 s"
    assert again.json() == body


@pytest.mark.django_db
def test_a_check_still_waiting_on_a_frozen_redis_is_not_started_again(api_client, settings):
    settings.EMBEDDING_BACKEND = "none"
    settings.LLM_BASE_URL = ""
    settings.HEALTH_TIMEOUT_SECONDS = 0.5
    settings.HEALTH_CACHE_SECONDS = 0
    with redis_server() as redis:
        settings.CACHES = redis_cache_at(redis.url)
        settings.CACHES["default"]["OPTIONS"]["socket_timeout"] = 3  # longer than the health deadline
        settings.CELERY_BROKER_URL = redis.url
        with redis.frozen():
            first = api_client.get("/health").json()["checks"]["redis"]
            second = api_client.get("/health").json()["checks"]["redis"]
    assert (first["status"], first["detail"]) == ("error", "no answer within 0.5 s")
    assert (second["status"], second["detail"]) == ("error", "no answer: the previous check of it has not finished")


@pytest.mark.django_db
def test_health_reads_no_credentials_so_a_bad_bearer_token_gets_the_same_report(api_client, settings):
    """docs/authentication.md ("Who may call what") and the schema: /health is the one API endpoint that reads no
    credentials, so a probe configured with a stale key still sees the health."""
    settings.EMBEDDING_BACKEND = "none"
    settings.LLM_BASE_URL = ""
    revoked = service_key("read")
    api_key_revoke(key=ApiKey.objects.get(name="service read"))
    tokens = ["not a token", "sk_000000000000_not-a-key-of-ours", revoked]

    answers = [api_client.get("/health", **bearer(token)) for token in tokens]

    assert [answer.status_code for answer in answers] == [200, 200, 200]
    assert {answer.json()["status"] for answer in answers} == {"ok"}
    assert api_client.get("/repos", **bearer(revoked)).status_code == 401
    health = json.loads(api_client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").content)[
        "paths"
    ]["/health"]["get"]
    assert health["security"] == []
    assert health["description"].endswith(
        "Public; reads no credentials: an `Authorization` header, even a malformed, unknown or revoked one, is ignored."
    )
