"""Service keys limited to repositories: by name or by the registry's `owners`. A repository
outside a key's scope answers exactly as one that does not exist, on every endpoint."""

from __future__ import annotations

import pytest

from agentplatform.plumbing.authentication import RepositoryScope, hash_token, verified_credentials
from agentplatform.plumbing.errors import InvalidInput
from agents.models import ApiKey, ApiKeyKind
from agents.services import api_key_create
from groundtruth.models import IngestRun, Registry, Repository
from groundtruth.registry_files import registry_location
from tests.groundtruth.factories import IngestRunFactory, RepositoryFactory, bearer, service_key
from tests.groundtruth.search_fixtures import COMMUNITY, HANDBOOK, chunks_index

pytestmark = pytest.mark.django_db


@pytest.fixture
def indexed() -> dict[str, Repository]:
    """acme/handbook (owners docs-team), acme/community (owners community-team, the same GitHub
    owner's other repository) and platform/runbooks (owners platform), the first two indexed."""
    handbook = RepositoryFactory(name="acme/handbook", trust="canonical", owners=["docs-team"])
    community = RepositoryFactory(name="acme/community", trust="community", owners=["community-team"])
    runbooks = RepositoryFactory(name="platform/runbooks", owners=["platform"])
    chunks_index(handbook, HANDBOOK)
    chunks_index(community, COMMUNITY)
    return {"handbook": handbook, "community": community, "runbooks": runbooks}


def scoped_key(
    *, repositories: tuple[str, ...] = (), owners: tuple[str, ...] = (), scopes: tuple[str, ...] = ("read",)
) -> dict[str, str]:
    _, secret = api_key_create(
        kind=ApiKeyKind.SERVICE,
        name="scoped",
        scopes=list(scopes),
        scope_repositories=list(repositories),
        scope_owners=list(owners),
    )
    return bearer(secret)


@pytest.fixture
def keys(indexed) -> dict[str, dict[str, str]]:
    return {
        # The docs team's key: every repository whose registry owners list docs-team.
        "owner": scoped_key(owners=("docs-team",), scopes=("read", "ingest")),
        # A teammate's key: the same GitHub owner (acme), another repository.
        "teammate": scoped_key(repositories=("acme/community",), scopes=("read", "ingest")),
        # An outsider's key: another team's repositories only.
        "outsider": scoped_key(owners=("platform",), scopes=("read", "ingest")),
        "unscoped": bearer(service_key("read", "ingest")),
    }


def repo_names(api_client, key) -> list[str]:
    response = api_client.get("/repos", **key)
    assert response.status_code == 200
    return [repository["name"] for repository in response.json()["repositories"]]


def test_repos_lists_only_the_repositories_of_the_keys_scope(api_client, keys):
    assert repo_names(api_client, keys["owner"]) == ["acme/handbook"]
    assert repo_names(api_client, keys["teammate"]) == ["acme/community"]
    assert repo_names(api_client, keys["outsider"]) == ["platform/runbooks"]
    assert repo_names(api_client, keys["unscoped"]) == ["acme/community", "acme/handbook", "platform/runbooks"]


def test_a_key_limited_to_a_repository_and_an_owner_sees_both(api_client, indexed):
    key = scoped_key(repositories=("acme/community",), owners=("platform",))

    assert repo_names(api_client, key) == ["acme/community", "platform/runbooks"]


def test_search_without_repo_searches_only_the_keys_repositories(api_client, keys, settings):
    settings.SEARCH_RERANK_DEPTH = 0

    def cited(key) -> list[str]:
        response = api_client.get("/search", {"q": "broker", "limit": 20}, **key)
        assert response.status_code == 200
        return sorted({hit["citation"]["repo"] for hit in response.json()["results"]})

    assert cited(keys["owner"]) == ["acme/handbook"]
    assert cited(keys["teammate"]) == ["acme/community"]
    assert cited(keys["outsider"]) == []
    assert cited(keys["unscoped"]) == ["acme/community", "acme/handbook"]


def test_search_of_an_out_of_scope_repository_is_byte_for_byte_the_unknown_repository_400(api_client, keys, indexed):
    out_of_scope = api_client.get("/search", {"q": "broker", "repo": "acme/handbook"}, **keys["teammate"])
    Repository.objects.filter(pk=indexed["handbook"].pk).delete()
    unknown = api_client.get("/search", {"q": "broker", "repo": "acme/handbook"}, **keys["teammate"])

    assert out_of_scope.status_code == unknown.status_code == 400
    assert out_of_scope.content == unknown.content
    assert out_of_scope.json() == {
        "type": "urn:problem:unknown_repository",
        "title": "Invalid input",
        "status": 400,
        "detail": "Unknown repository acme/handbook; indexed repositories: acme/community.",
        "code": "unknown_repository",
        "errors": [{"field": "repo", "message": "unknown repository acme/handbook"}],
    }


def test_ask_searches_only_the_keys_repositories_and_names_only_them(api_client, keys, indexed):
    question = {"question": "How do I rotate the Kubernetes ingress certificates?"}

    response = api_client.post("/ask", question, format="json", **keys["outsider"])

    assert response.status_code == 200
    body = response.json()
    assert (body["sources_missing"], body["citations"]) == (True, [])
    assert "acme/" not in response.content.decode()


def test_ask_scoped_to_an_out_of_scope_repository_is_byte_for_byte_the_unknown_repository_400(
    api_client, keys, indexed
):
    body = {"question": "Where is the broker configured?", "scope": {"repos": ["acme/handbook"]}}
    out_of_scope = api_client.post("/ask", body, format="json", **keys["outsider"])
    Repository.objects.filter(pk=indexed["handbook"].pk).delete()
    unknown = api_client.post("/ask", body, format="json", **keys["outsider"])

    assert out_of_scope.status_code == 400
    assert out_of_scope.content == unknown.content
    assert out_of_scope.json()["detail"] == "Unknown repository acme/handbook; indexed repositories: platform/runbooks."


def test_sources_of_an_out_of_scope_repository_is_byte_for_byte_the_unknown_repository_404(api_client, keys, indexed):
    url = "/sources/acme/handbook/docs/celery.md"
    query = {"commit": "c0ffee0"}
    in_scope = api_client.get(url, {"commit": "c0ffee0"}, **keys["owner"])
    out_of_scope = api_client.get(url, query, **keys["teammate"])
    Repository.objects.filter(pk=indexed["handbook"].pk).delete()
    unknown = api_client.get(url, query, **keys["teammate"])

    # The owner's key gets past the repository to the file: it sees the repository.
    assert in_scope.json()["detail"] != out_of_scope.json()["detail"]
    assert out_of_scope.status_code == 404
    assert out_of_scope.content == unknown.content
    assert out_of_scope.json()["detail"] == "No repository named 'acme/handbook' is in the registry."


def test_ingest_runs_list_only_the_keys_repositories(api_client, keys, indexed):
    handbook_run = IngestRunFactory(repository=indexed["handbook"])
    community_run = IngestRunFactory(repository=indexed["community"])

    def run_ids(key, **query) -> list[int]:
        response = api_client.get("/ingest/runs", query, **key)
        assert response.status_code == 200
        return [run["id"] for run in response.json()]

    assert run_ids(keys["owner"]) == [handbook_run.pk]
    assert run_ids(keys["teammate"]) == [community_run.pk]
    assert run_ids(keys["outsider"]) == []
    assert run_ids(keys["unscoped"]) == [community_run.pk, handbook_run.pk]


def test_ingest_runs_of_an_out_of_scope_repository_is_byte_for_byte_the_unknown_repository_400(
    api_client, keys, indexed
):
    IngestRunFactory(repository=indexed["handbook"])
    out_of_scope = api_client.get("/ingest/runs", {"repo": "acme/handbook"}, **keys["outsider"])
    Repository.objects.filter(pk=indexed["handbook"].pk).delete()
    unknown = api_client.get("/ingest/runs", {"repo": "acme/handbook"}, **keys["outsider"])

    assert out_of_scope.status_code == 400
    assert out_of_scope.content == unknown.content


def test_an_ingest_run_of_an_out_of_scope_repository_is_byte_for_byte_a_missing_run_404(api_client, keys, indexed):
    run = IngestRunFactory(repository=indexed["handbook"])
    seen = api_client.get(f"/ingest/runs/{run.pk}", **keys["owner"])
    out_of_scope = api_client.get(f"/ingest/runs/{run.pk}", **keys["teammate"])
    IngestRun.objects.filter(pk=run.pk).delete()
    missing = api_client.get(f"/ingest/runs/{run.pk}", **keys["teammate"])

    assert (seen.status_code, seen.json()["id"]) == (200, run.pk)
    assert out_of_scope.status_code == 404
    assert out_of_scope.content == missing.content
    assert out_of_scope.json()["detail"] == f"No ingest run with id {run.pk}."


def test_a_scope_naming_an_unknown_repository_or_owner_is_refused_and_creates_nothing(indexed):
    with pytest.raises(InvalidInput) as unknown_repository:
        api_key_create(kind="service", name="x", scopes=["read"], scope_repositories=["acme/nope"])
    with pytest.raises(InvalidInput) as unknown_owner:
        api_key_create(kind="service", name="x", scopes=["read"], scope_owners=["nobody"])
    with pytest.raises(InvalidInput) as not_a_service_key:
        api_key_create(kind="user", name="x", wallet_address="0x" + "a" * 40, scope_owners=["platform"])

    assert unknown_repository.value.errors == [
        {
            "field": "scope_repositories",
            "message": "unknown repositories ['acme/nope']: not listed in the source registry",
        }
    ]
    assert unknown_owner.value.errors == [
        {
            "field": "scope_owners",
            "message": "unknown owners ['nobody']: no repository of the source registry lists them",
        }
    ]
    assert not_a_service_key.value.errors == [
        {"field": "scope_repositories", "message": "only service keys are limited to repositories"}
    ]
    assert ApiKey.objects.count() == 0


def test_the_scope_travels_with_the_remembered_credential(api_client, indexed, settings):
    settings.CREDENTIAL_CACHE_SECONDS = 60
    verified_credentials.clear()
    key = scoped_key(owners=("platform",))

    first = repo_names(api_client, key)
    second = repo_names(api_client, key)

    assert first == second == ["platform/runbooks"]
    remembered = verified_credentials.get(hash_token(key["HTTP_AUTHORIZATION"].split()[1]))
    assert remembered is not None
    assert remembered.repository_scope == RepositoryScope(repositories=frozenset(), owners=frozenset({"platform"}))


def test_the_registry_error_which_may_name_any_repository_is_withheld_from_scoped_keys(api_client, keys, settings):
    Registry.objects.create(
        location=registry_location(settings.SOURCE_REGISTRY_PATH),
        commit="b" * 40,
        last_error="repos[2].include (platform/runbooks): must be a list",
    )

    scoped = api_client.get("/repos", **keys["owner"]).json()["registry"]
    unscoped = api_client.get("/repos", **keys["unscoped"]).json()["registry"]

    assert scoped["last_error"] == (
        "The last load of the source registry failed; its errors are shown to unscoped keys and staff only."
    )
    assert unscoped["last_error"] == "repos[2].include (platform/runbooks): must be a list"
    assert Registry.objects.get().last_error == "repos[2].include (platform/runbooks): must be a list"
