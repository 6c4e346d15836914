"""The served OpenAPI schema against the running server, by schemathesis: every operation, with
a service key, an agent key and no key, through gunicorn as the Procfile runs it. Any 5xx, any
response the schema does not describe (status, content type, headers, body), any valid request
refused or invalid one accepted, and any error that is not RFC 9457 problem details fails.

Generation is deterministic (a fixed seed, derandomized Hypothesis, no example database) and
bounded (SCHEMATHESIS_MAX_EXAMPLES per operation in the fuzzing phase, plus the examples and
coverage phases), so a run checks the same cases every time.

The schema is the one GET /api/schema/ serves, generated in this process when the module is
collected, and `schema.parametrize()` makes one test per operation and credential; the server
address is given per call. (schemathesis's fixture-loaded schema, `schemathesis.pytest.from_fixture`,
does not run under pytest 9.2: it sets `Function._nodeid`, which pytest no longer has.)
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import hypothesis
import pytest
import redis
import schemathesis
from django.conf import settings
from django.core.management import call_command

from agents.models import AgentStatus
from brandassets.models import BrandAsset
from groundtruth.models import IngestStatus
from tests import celeryworker
from tests.agents.factories import AgentFactory, agent_key_for
from tests.chat.factories import ChatMessageFactory
from tests.coin.factories import PricePointFactory, WalletFactory
from tests.gitrepos import GitWorkTree
from tests.groundtruth.factories import IngestRunFactory, RepositoryFactory, service_key
from tests.liveserver import gunicorn_server

# `django_db` only so that pytest-django creates the test database; the rows are seeded and
# committed once per module (`seeded`), and the tests only send HTTP.
pytestmark = [pytest.mark.slow, pytest.mark.django_db]

SCHEMATHESIS_MAX_EXAMPLES = 15
SEED = 20261122
PROBLEM_KEYS = {"type", "title", "status", "detail", "code"}
LOGO = '<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"/>\n'


@pytest.fixture(scope="module")
def var_dir(tmp_path_factory) -> Path:
    """The server's VAR_DIR: a registry and the repositories it names under demo-sources/, where
    local repositories are allowed."""
    var = tmp_path_factory.mktemp("schemathesis-var")
    sources = var / "demo-sources"
    docs = GitWorkTree.create(sources / "docs")
    docs.write("docs/index.md", "# Docs\n\nThe broker URL is set in CELERY_BROKER_URL.\n")
    docs.commit("docs")
    brand = GitWorkTree.create(sources / "brand")
    brand.write("logos/logo.svg", LOGO)
    brand.commit("logo")
    registry = GitWorkTree.create(sources / "registry")
    registry.write(
        "sources.yml",
        f"repos:\n  - name: acme/docs\n    url: {docs.path}\n    include: ['docs/**/*.md']\n",
    )
    registry.write(
        "brand-assets.yml",
        f"repos:\n  acme/brand:\n    url: {brand.path}\n"
        "products:\n  acme-app:\n    logo:\n      - {repo: acme/brand, path: logos/logo.svg, format: svg}\n",
    )
    registry.commit("registry")
    return var


@pytest.fixture(scope="module")
def celery_queue() -> Iterator[str]:
    """Ingest requests queue tasks here; no worker takes them, and the queue is removed afterwards."""
    queue = f"test-schemathesis-{uuid.uuid4().hex[:12]}"
    yield queue
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    client.delete(queue, f"_kombu.binding.{queue}")


@pytest.fixture(scope="module")
def base_url(django_db_setup, var_dir: Path, celery_queue: str, tmp_path_factory) -> Iterator[str]:
    environment = {
        "DATABASE_URL": celeryworker.test_database_url(),
        "VAR_DIR": str(var_dir),
        "SOURCE_REGISTRY_REPO": str(var_dir / "demo-sources" / "registry"),
        "CELERY_QUEUE": celery_queue,
        "EMBEDDING_BACKEND": "none",
        # Thousands of requests from one address in a few minutes: the limits are tested elsewhere.
        "RATE_LIMIT_PUBLIC": "100000/m",
        "RATE_LIMIT_AUTHENTICATED": "100000/m",
        "RATE_LIMIT_TRADING": "100000/m",
    }
    log_path = tmp_path_factory.mktemp("schemathesis-log") / "web.log"
    with gunicorn_server(environment=environment, log_path=log_path, workers=2) as url:
        yield url


@pytest.fixture(scope="module")
def seeded(django_db_setup, django_db_blocker, var_dir: Path) -> Iterator[dict[str, str]]:
    """A little of everything the API reads, committed once for the module so that the server sees
    it (the tests themselves only send HTTP), and flushed afterwards."""
    with django_db_blocker.unblock():
        keys = seed(var_dir)
    yield keys
    with django_db_blocker.unblock():
        call_command("flush", interactive=False, verbosity=0)


def seed(var_dir: Path) -> dict[str, str]:
    running = AgentFactory(instance_id="atlas", name="Atlas", status=AgentStatus.RUNNING)
    AgentFactory(instance_id="idle", name="Idle", status=AgentStatus.PAUSED)
    ChatMessageFactory.create_batch(3, agent=running)
    WalletFactory(address="0x" + "ab" * 20)
    now = datetime.now(UTC)
    for hours in (48, 24, 1):
        PricePointFactory(timestamp=now - timedelta(hours=hours))
    repository = RepositoryFactory(name="acme/docs", url=str(var_dir / "demo-sources" / "docs"))
    IngestRunFactory(repository=repository, status=IngestStatus.SUCCEEDED)
    brand = GitWorkTree(var_dir / "demo-sources" / "brand")
    BrandAsset.objects.create(
        product="acme-app",
        kind="logo",
        asset_index=0,
        position=0,
        repo="acme/brand",
        repo_url=str(brand.path),  # local: no web address, so blobUrl is null
        path="logos/logo.svg",
        ref="main",
        format="svg",
        commit=brand.git("rev-parse", "HEAD").strip(),
        blob_sha=brand.git("rev-parse", "HEAD:logos/logo.svg").strip(),
        size=len(LOGO),
        synced_at=now,
    )
    return {"agent": agent_key_for(running), "service": service_key("read", "ingest")}


@schemathesis.check
def problem_details_for_errors(ctx, response, case) -> None:
    """Every 4xx/5xx is application/problem+json with the RFC 9457 members (GET /health's 503 is
    its own report, as documented)."""
    if response.status_code < 400 or (case.path == "/health" and response.status_code == 503):
        return None
    content_type = response.headers.get("content-type", [""])[0]
    assert content_type == "application/problem+json", f"error {response.status_code} as {content_type!r}"
    body = json.loads(response.content)
    assert PROBLEM_KEYS <= set(body), f"problem body without {sorted(PROBLEM_KEYS - set(body))}"
    assert body["status"] == response.status_code
    assert body["type"] == f"urn:problem:{body['code']}"
    return None


# Refusals of schema-valid requests that JSON Schema cannot express, by problem code: they depend
# on the server's data (a repository that is not indexed, a commit prefix two seen commits share), on
# two parameters together (a line range's end before its start) or on a grammar or checksum (EIP-4361
# messages, EIP-55 mixed-case addresses). Each is documented on its operation.
REFUSALS_BEYOND_THE_SCHEMA = {"unknown_repository", "siwe_malformed", "invalid_range", "ambiguous_commit"}
CHECKSUM_REFUSAL = "the mixed-case address does not match its EIP-55 checksum"
ACCEPTED_REFUSALS = {401, 403, 404, 409, 429}  # credentials, a missing resource, state, rate limit


@schemathesis.check
def valid_requests_are_accepted(ctx, response, case) -> None:
    """schemathesis's positive_data_acceptance, except REFUSALS_BEYOND_THE_SCHEMA."""
    if case.meta is None or not case.meta.generation.mode.is_positive:
        return None
    if response.status_code < 400 or response.status_code in ACCEPTED_REFUSALS or response.status_code >= 500:
        return None  # 5xx fail in not_a_server_error
    body = json.loads(response.content) if response.content else {}
    if response.status_code == 400 and (
        body.get("code") in REFUSALS_BEYOND_THE_SCHEMA
        or {error["message"] for error in body.get("errors", [])} == {CHECKSUM_REFUSAL}
    ):
        return None
    raise AssertionError(f"a schema-valid request was refused with {response.status_code}: {body}")


def served_schema() -> dict:
    """The schema GET /api/schema/ serves, made in this process at collection time (the server
    that the cases are sent to starts later, in a fixture)."""
    from drf_spectacular.generators import SchemaGenerator

    return json.loads(json.dumps(SchemaGenerator().get_schema(request=None, public=True), default=str))


CONFIG = schemathesis.Config.from_dict(
    {
        "seed": SEED,
        "generation": {"max-examples": SCHEMATHESIS_MAX_EXAMPLES, "deterministic": True, "database": "none"},
        # Replaced by `valid_requests_are_accepted`, which knows the refusals a schema cannot express.
        "checks": {"positive_data_acceptance": {"enabled": False}},
    }
)
schema = schemathesis.openapi.from_dict(served_schema(), config=CONFIG)


@pytest.mark.parametrize("who", ["service key", "agent key", "no key"])
@schema.parametrize()
@hypothesis.settings(deadline=None, suppress_health_check=list(hypothesis.HealthCheck))
def test_every_operation_conforms_to_the_schema(case, who, seeded, base_url):
    secret = {"service key": seeded["service"], "agent key": seeded["agent"], "no key": None}[who]
    case.call_and_validate(
        base_url=base_url,
        headers={"Authorization": f"Bearer {secret}"} if secret else {},
        additional_checks=[problem_details_for_errors, valid_requests_are_accepted],
        timeout=30,
    )
