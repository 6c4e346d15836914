"""GET /search: auth, input validation, result shape, repository filter."""

from __future__ import annotations

import pytest

from tests.groundtruth.factories import RepositoryFactory, bearer, service_key
from tests.groundtruth.search_fixtures import COMMIT, COMMUNITY, HANDBOOK, chunks_index

pytestmark = pytest.mark.django_db


@pytest.fixture
def indexed():
    handbook = RepositoryFactory(name="acme/handbook", url="https://github.com/acme/handbook.git", trust="canonical")
    community = RepositoryFactory(name="acme/community", url="/srv/git/community", trust="community")
    return {"handbook": chunks_index(handbook, HANDBOOK), "community": chunks_index(community, COMMUNITY)}


@pytest.fixture
def reader():
    return bearer(service_key("read"))


def test_search_without_credentials_is_401(api_client, indexed):
    response = api_client.get("/search", {"q": "broker"})

    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"


def test_search_with_an_ingest_only_key_is_403(api_client, indexed):
    response = api_client.get("/search", {"q": "broker"}, **bearer(service_key("ingest")))

    assert response.status_code == 403
    assert response.json()["detail"] == "A service key with scope 'read' is required."


def test_search_returns_cited_chunks_best_first(api_client, indexed, reader, settings):
    # The lexical leg alone, so that the score is one exact reciprocal rank (and no re-ranking).
    settings.SEARCH_DENSE_WEIGHT = 0.0
    settings.SEARCH_RERANK_DEPTH = 0
    broker = indexed["handbook"][0]

    response = api_client.get("/search", {"q": "CELERY_BROKER_URL", "repo": "acme/handbook", "limit": 1}, **reader)

    assert response.status_code == 200
    assert response.json() == {
        "query": "CELERY_BROKER_URL",
        "results": [
            {
                "chunk_id": broker.pk,
                "text": broker.text,
                "score": round(settings.SEARCH_LEXICAL_WEIGHT / (settings.SEARCH_RRF_K + 1), 6),
                "relevance": None,
                "heading": ["Background jobs", "Broker"],
                "trust": "canonical",
                "citation": {
                    "repo": "acme/handbook",
                    "path": "docs/celery.md",
                    "commit": COMMIT,
                    "line": 10,
                    "end_line": 13,
                    "url": f"https://github.com/acme/handbook/blob/{COMMIT}/docs/celery.md#L10-L13",
                    "source_url": (
                        f"http://testserver/sources/acme/handbook/docs/celery.md?commit={COMMIT}&start=10&end=13"
                    ),
                },
            }
        ],
    }


def test_search_of_a_local_repository_cites_without_url(api_client, indexed, reader):
    response = api_client.get("/search", {"q": "CELERY_BROKER_URL", "repo": "acme/community"}, **reader)

    assert [result["citation"] for result in response.json()["results"]] == [
        {
            "repo": "acme/community",
            "path": "faq/broker.md",
            "commit": COMMIT,
            "line": 1,
            "end_line": 4,
            "url": None,
            "source_url": f"http://testserver/sources/acme/community/faq/broker.md?commit={COMMIT}&start=1&end=4",
        }
    ]


def test_search_without_repo_covers_every_enabled_repository(api_client, indexed, reader):
    retired = RepositoryFactory(name="acme/retired", enabled=False)
    chunks_index(retired, COMMUNITY)

    response = api_client.get("/search", {"q": "CELERY_BROKER_URL", "limit": 3}, **reader)

    assert sorted(result["citation"]["repo"] for result in response.json()["results"][:2]) == [
        "acme/community",
        "acme/handbook",
    ]
    assert "acme/retired" not in {result["citation"]["repo"] for result in response.json()["results"]}


def test_search_limit_defaults_to_10_and_is_honoured(api_client, indexed, reader):
    default = api_client.get("/search", {"q": "redis workers connection certificate retries"}, **reader)
    three = api_client.get("/search", {"q": "redis workers connection certificate retries", "limit": 3}, **reader)

    assert len(default.json()["results"]) == 6  # every chunk, fewer than 10
    assert len(three.json()["results"]) == 3


@pytest.mark.parametrize(
    ("params", "field", "message"),
    [
        ({}, "q", "is required: the text to search for"),
        ({"q": "   "}, "q", "must not be empty"),
        ({"q": "x" * 501}, "q", "may be at most 500 characters"),
        ({"q": "broker", "limit": "0"}, "limit", "must be an integer from 1 to 50"),
        ({"q": "broker", "limit": "51"}, "limit", "must be an integer from 1 to 50"),
        ({"q": "broker", "limit": "ten"}, "limit", "must be an integer from 1 to 50"),
        ({"q": "broker", "repo": ""}, "repo", "must name a repository (owner/name) when given"),
    ],
)
def test_search_with_bad_input_is_400_naming_the_field(api_client, indexed, reader, params, field, message):
    response = api_client.get("/search", params, **reader)

    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["errors"] == [{"field": field, "message": message}]


def test_search_of_an_unknown_repository_is_400_naming_it(api_client, indexed, reader):
    response = api_client.get("/search", {"q": "broker", "repo": "acme/nope"}, **reader)

    assert response.status_code == 400
    assert response.json() == {
        "type": "urn:problem:unknown_repository",
        "title": "Invalid input",
        "status": 400,
        "detail": "Unknown repository acme/nope; indexed repositories: acme/community, acme/handbook.",
        "code": "unknown_repository",
        "errors": [{"field": "repo", "message": "unknown repository acme/nope"}],
    }
