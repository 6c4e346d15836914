"""Ground-truth rows for endpoint tests that do not need a real ingest."""

from __future__ import annotations

from datetime import UTC, datetime

import factory

from agents.models import ApiKeyKind
from agents.services import api_key_create
from groundtruth.models import IngestRun, IngestStatus, Repository

COMMIT = "a" * 40


class RepositoryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Repository

    name = factory.Sequence(lambda n: f"acme/repo-{n:03d}")
    url = factory.Sequence(lambda n: f"https://git.example.com/acme/repo-{n:03d}.git")
    ref = "main"
    trust = "reviewed"
    owners = factory.LazyFunction(lambda: ["docs-team"])
    include = factory.LazyFunction(lambda: ["docs/**/*.md"])
    exclude = factory.LazyFunction(list)


class IngestRunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = IngestRun

    repository = factory.SubFactory(RepositoryFactory)
    ref = "main"
    commit = COMMIT
    status = IngestStatus.SUCCEEDED
    trigger = "api"
    phase = "done"
    started_at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    heartbeat_at = datetime(2026, 1, 2, 3, 4, 9, tzinfo=UTC)
    finished_at = datetime(2026, 1, 2, 3, 4, 10, tzinfo=UTC)


def service_key(*scopes: str) -> str:
    return api_key_create(kind=ApiKeyKind.SERVICE, name=f"service {'+'.join(scopes)}", scopes=list(scopes))[1]


def bearer(secret: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {secret}"}
