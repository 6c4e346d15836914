"""GET /ingest/runs: runs newest first, filtered by repository and status, paged by `before`."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from agents.models import ApiKeyKind
from agents.services import api_key_create
from groundtruth.ingest.runs import STALE_RUNNING_ERROR
from groundtruth.models import IngestStatus
from tests.groundtruth.factories import IngestRunFactory, RepositoryFactory, bearer, service_key

pytestmark = pytest.mark.django_db


@pytest.fixture
def runs() -> dict[str, list]:
    """Five runs of acme/docs and two of acme/api, created alternately, oldest first."""
    docs, api = RepositoryFactory(name="acme/docs"), RepositoryFactory(name="acme/api")
    made: dict[str, list] = {"acme/docs": [], "acme/api": []}
    for index in range(7):
        repository = api if index in (1, 4) else docs
        status = IngestStatus.FAILED if index in (2, 4) else IngestStatus.SUCCEEDED
        made[repository.name].append(
            IngestRunFactory(repository=repository, status=status, trigger="push" if index % 2 else "beat")
        )
    return made


def ids(response) -> list[int]:
    return [run["id"] for run in response.json()]


def test_runs_are_listed_newest_first_each_as_the_run_endpoint_shows_it(api_client, runs):
    secret = service_key("read")
    response = api_client.get("/ingest/runs", **bearer(secret))
    assert response.status_code == 200
    every = sorted((run.pk for made in runs.values() for run in made), reverse=True)
    assert ids(response) == every
    assert "Link" not in response  # fewer than the default limit of 20
    for listed in response.json():
        assert listed == api_client.get(f"/ingest/runs/{listed['id']}", **bearer(secret)).json()
    assert [run["trigger"] for run in response.json()] == ["beat", "push", "beat", "push", "beat", "push", "beat"]


def test_runs_are_filtered_by_repository_and_status(api_client, runs):
    secret = service_key("ingest")
    response = api_client.get("/ingest/runs?repo=acme/api", **bearer(secret))
    assert ids(response) == [run.pk for run in reversed(runs["acme/api"])]
    response = api_client.get("/ingest/runs?repo=acme/docs&status=failed", **bearer(secret))
    assert ids(response) == [runs["acme/docs"][1].pk]
    assert [run["status"] for run in response.json()] == ["failed"]
    response = api_client.get("/ingest/runs?status=running", **bearer(secret))
    assert response.json() == []


def test_a_full_page_links_to_the_next_one_with_the_same_filters(api_client, runs):
    secret = service_key("read")
    succeeded = [run.pk for run in reversed(runs["acme/docs"]) if run.status == IngestStatus.SUCCEEDED]
    assert len(succeeded) == 4
    first = api_client.get("/ingest/runs?repo=acme/docs&status=succeeded&limit=3", **bearer(secret))
    assert ids(first) == succeeded[:3]
    assert first["Link"] == (
        f'<http://testserver/ingest/runs?repo=acme%2Fdocs&status=succeeded&limit=3&before={succeeded[2]}>; rel="next"'
    )
    second = api_client.get(first["Link"][1 : first["Link"].index(">")], **bearer(secret))
    assert ids(second) == succeeded[3:]
    assert "Link" not in second  # fewer than `limit`: the last page


def test_paging_by_before_walks_every_run_once(api_client, runs):
    secret = service_key("read")
    seen: list[int] = []
    url = "/ingest/runs?limit=3"
    while url:
        response = api_client.get(url, **bearer(secret))
        seen += ids(response)
        link = response.get("Link")
        url = link[1 : link.index(">")] if link else ""
    assert seen == sorted((run.pk for made in runs.values() for run in made), reverse=True)


def test_listing_runs_runs_a_constant_number_of_queries(api_client, runs, django_assert_num_queries):
    secret = service_key("read")
    api_client.get("/ingest/runs", **bearer(secret))  # the worker now remembers the key
    with django_assert_num_queries(3):  # two stale-run sweeps, the runs with their repositories
        assert len(api_client.get("/ingest/runs?limit=100", **bearer(secret)).json()) == 7
    with django_assert_num_queries(4):  # and whether the repository exists
        assert len(api_client.get("/ingest/runs?repo=acme/docs", **bearer(secret)).json()) == 5


@pytest.mark.parametrize(
    ("query", "field", "message"),
    [
        ("limit=0", "limit", "must be an integer from 1 to 100"),
        ("limit=101", "limit", "must be an integer from 1 to 100"),
        ("limit=abc", "limit", "must be an integer from 1 to 100"),
        ("limit=", "limit", "must be an integer from 1 to 100"),
        ("before=0", "before", "must be an ingest run id (a positive integer)"),
        ("before=-1", "before", "must be an ingest run id (a positive integer)"),
        ("before=99999999999999999999", "before", "must be an ingest run id (a positive integer)"),
        ("status=done", "status", "must be one of queued, running, succeeded, failed"),
        ("repo=no-slash", "repo", "must be owner/name (letters, digits, '.', '_' or '-'; neither part '.' or '..')"),
        ("repo=../..", "repo", "must be owner/name (letters, digits, '.', '_' or '-'; neither part '.' or '..')"),
        ("repo=acme/nope", "repo", "unknown repository acme/nope"),
    ],
)
def test_malformed_queries_are_400_naming_the_parameter(api_client, runs, query, field, message):
    response = api_client.get(f"/ingest/runs?{query}", **bearer(service_key("read")))
    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["errors"] == [{"field": field, "message": message}]


def test_listing_runs_needs_a_read_or_ingest_service_key(api_client, runs):
    from tests.agents.factories import AgentFactory

    assert api_client.get("/ingest/runs").status_code == 401
    agent_key = api_key_create(kind=ApiKeyKind.AGENT, name="agent", agent=AgentFactory())[1]
    assert api_client.get("/ingest/runs", **bearer(agent_key)).status_code == 403


def test_listing_runs_marks_runs_whose_worker_died_failed(api_client, settings):
    settings.INGEST_STALE_SECONDS = 60
    silent = IngestRunFactory(
        status=IngestStatus.RUNNING, heartbeat_at=timezone.now() - timedelta(seconds=61), finished_at=None
    )
    response = api_client.get("/ingest/runs", **bearer(service_key("read")))
    assert [(run["id"], run["status"], run["error"]) for run in response.json()] == [
        (silent.pk, "failed", STALE_RUNNING_ERROR)
    ]
