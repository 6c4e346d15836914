"""POST /ingest/repo and GET /ingest/runs/<id>: service-key scopes, validation, one active run
per repository, stale runs cleared when read."""

from __future__ import annotations

import shutil
from datetime import timedelta

import pytest
from django.utils import timezone

from agents.models import ApiKeyKind
from agents.services import api_key_create
from groundtruth.ingest.foreground import ingest_foreground
from groundtruth.ingest.runs import STALE_RUNNING_ERROR
from groundtruth.models import Chunk, IngestRun, IngestStatus, Registry, Repository
from groundtruth.tasks import ingest_repo
from tests.groundtruth.conftest import HANDBOOK_GLOBS, sources_yaml
from tests.groundtruth.factories import IngestRunFactory, RepositoryFactory, bearer, service_key
from tests.groundtruth.run_bodies import queued_run_body

pytestmark = pytest.mark.django_db


def test_post_without_credentials_is_401_and_queues_nothing(api_client, handbook_registered):
    response = api_client.post("/ingest/repo", {"repo": "acme/handbook"}, format="json")
    assert response.status_code == 401
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "not_authenticated"
    assert IngestRun.objects.count() == 0


def test_post_with_a_read_only_or_agent_key_is_403_and_queues_nothing(api_client, handbook_registered):
    from tests.agents.factories import AgentFactory

    agent_key = api_key_create(kind=ApiKeyKind.AGENT, name="agent", agent=AgentFactory())[1]
    for secret in (service_key("read"), agent_key):
        response = api_client.post("/ingest/repo", {"repo": "acme/handbook"}, format="json", **bearer(secret))
        assert response.status_code == 403
        assert response.json() == {
            "type": "urn:problem:forbidden",
            "title": "Forbidden",
            "status": 403,
            "detail": "A service key with scope 'ingest' is required.",
            "code": "forbidden",
        }
    assert IngestRun.objects.count() == 0


def test_post_queues_one_run_and_a_second_request_gets_the_same_run(
    api_client, handbook_registered, django_capture_on_commit_callbacks
):
    secret = service_key("ingest")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        first = api_client.post("/ingest/repo", {"repo": "acme/handbook"}, format="json", **bearer(secret))
    assert first.status_code == 202
    run = IngestRun.objects.get()
    body = first.json()
    assert body["run_ids"] == [run.pk]
    [item] = body["runs"]
    assert item == queued_run_body(run, trigger="api", created=True)
    assert item["repo"] == "acme/handbook"
    assert len(callbacks) == 2  # the run's task and the brand-asset sync, on commit

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        again = api_client.post("/ingest/repo", {"repo": "acme/handbook", "ref": "v2"}, format="json", **bearer(secret))
    assert again.status_code == 202
    assert again.json()["run_ids"] == [run.pk]
    assert again.json()["runs"][0]["created"] is False
    assert again.json()["runs"][0]["ref"] == "main"
    assert len(callbacks) == 0
    assert IngestRun.objects.count() == 1


def test_post_without_repo_queues_every_enabled_repository(api_client, registry_repo, handbook, tmp_path):
    registry_repo(
        sources_yaml(
            {"name": "acme/b", "url": str(handbook.path), **HANDBOOK_GLOBS},
            {"name": "acme/a", "url": str(handbook.path), **HANDBOOK_GLOBS},
            {"name": "acme/off", "url": str(handbook.path), "include": ["*.md"], "enabled": "false"},
        ),
        synced=True,
    )
    response = api_client.post("/ingest/repo", {}, format="json", **bearer(service_key("ingest")))
    assert response.status_code == 202
    assert [(run["repo"], run["ref"], run["created"]) for run in response.json()["runs"]] == [
        ("acme/a", "main", True),
        ("acme/b", "main", True),
    ]
    assert sorted(IngestRun.objects.values_list("repository__name", flat=True)) == ["acme/a", "acme/b"]


@pytest.mark.parametrize(
    ("payload", "field", "message"),
    [
        (
            {"repo": "no-slash"},
            "repo",
            "must be owner/name (letters, digits, '.', '_' or '-'; neither part '.' or '..')",
        ),
        ({"repo": "../.."}, "repo", "must be owner/name (letters, digits, '.', '_' or '-'; neither part '.' or '..')"),
        ({"repo": "acme/."}, "repo", "must be owner/name (letters, digits, '.', '_' or '-'; neither part '.' or '..')"),
        ({"repo": "acme/handbook", "ref": "--upload-pack=x"}, "ref", "must be a branch, tag or commit SHA"),
        ({"repo": 42}, "repo", "Not a valid string."),
        ({"repo": "a/" + "b" * 300}, "repo", "Ensure this field has no more than 200 characters."),
    ],
)
def test_post_with_invalid_fields_is_400_naming_the_field(api_client, handbook_registered, payload, field, message):
    response = api_client.post("/ingest/repo", payload, format="json", **bearer(service_key("ingest")))
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert [error["field"] for error in errors] == [field]
    assert errors[0]["message"].startswith(message)
    assert IngestRun.objects.count() == 0


def test_post_for_an_unlisted_repository_is_404_saying_when_the_registry_was_synced(api_client, handbook_registered):
    registry = Registry.objects.get()
    response = api_client.post("/ingest/repo", {"repo": "acme/unknown"}, format="json", **bearer(service_key("ingest")))
    assert response.status_code == 404
    assert response.json()["detail"] == (
        "Repository 'acme/unknown' is not listed in the source registry (last synced by a worker at "
        f"{registry.loaded_at.isoformat(timespec='seconds')} (commit {registry.commit[:12]}); the workers re-read "
        "sources.yml on a push to the registry repository and before every ingest)."
    )
    assert IngestRun.objects.count() == 0


def test_post_before_any_sync_is_404_saying_the_registry_is_not_synced_yet(api_client, registry_repo, handbook):
    registry_repo(sources_yaml({"name": "acme/handbook", "url": str(handbook.path), **HANDBOOK_GLOBS}))
    response = api_client.post(
        "/ingest/repo", {"repo": "acme/handbook"}, format="json", **bearer(service_key("ingest"))
    )
    assert response.status_code == 404
    assert response.json()["detail"] == (
        "Repository 'acme/handbook' is not listed in the source registry (not yet synced by a worker; the workers "
        "re-read sources.yml on a push to the registry repository and before every ingest)."
    )
    every = api_client.post("/ingest/repo", {}, format="json", **bearer(service_key("ingest")))
    assert (every.status_code, every.json()) == (202, {"run_ids": [], "runs": []})
    assert (IngestRun.objects.count(), Repository.objects.count(), Registry.objects.count()) == (0, 0, 0)


def test_post_reads_no_git_it_decides_from_the_registry_as_last_synced(
    api_client, handbook_registered, settings, tmp_path
):
    """A web host has no git access (docs/deployment.md): the request is accepted from the rows."""
    settings.SOURCE_REGISTRY_REPO = str(tmp_path / "no-such-registry")
    settings.GIT_CACHE_DIR = tmp_path / "no-git-cache"
    response = api_client.post(
        "/ingest/repo", {"repo": "acme/handbook"}, format="json", **bearer(service_key("ingest"))
    )
    assert response.status_code == 202
    run = IngestRun.objects.get()
    assert response.json() == {"run_ids": [run.pk], "runs": [queued_run_body(run, trigger="api", created=True)]}
    assert not (tmp_path / "no-git-cache").exists()


def _worker_runs(run: IngestRun) -> IngestRun:
    """What the worker does with the queued run (the task, in this process)."""
    ingest_repo.apply(args=[run.repository_id, run.ref], kwargs={"run_id": run.pk, "trigger": run.trigger})
    return IngestRun.objects.get(pk=run.pk)


def test_a_repository_removed_from_the_registry_since_the_sync_fails_its_run_on_the_worker(
    api_client, handbook_registered, registry_repo
):
    other = {"name": "acme/other", "url": str(handbook_registered.path), **HANDBOOK_GLOBS}
    registry_repo(sources_yaml(other), "acme/handbook removed")  # not yet synced
    response = api_client.post(
        "/ingest/repo", {"repo": "acme/handbook"}, format="json", **bearer(service_key("ingest"))
    )
    assert response.status_code == 202
    run = _worker_runs(IngestRun.objects.get())

    assert (run.status, run.phase, run.error) == (
        IngestStatus.FAILED,
        "failed",
        "IngestError: repository acme/handbook is disabled or no longer listed in the registry",
    )
    assert list(Repository.objects.order_by("name").values_list("name", "enabled")) == [
        ("acme/handbook", False),
        ("acme/other", True),
    ]
    assert Chunk.objects.count() == 0
    assert api_client.get(f"/ingest/runs/{run.pk}", **bearer(service_key("read"))).json()["error"] == run.error


def test_with_an_invalid_registry_the_post_is_accepted_and_the_worker_fails_the_run_with_its_errors(
    api_client, handbook_registered, registry_repo
):
    before = list(Repository.objects.values_list("name", "url", "include", "enabled"))
    registry_repo("repos:\n  - name: acme/handbook\n    url: ./x\n    includes: ['*.md']\n", "typo")

    response = api_client.post(
        "/ingest/repo", {"repo": "acme/handbook"}, format="json", **bearer(service_key("ingest"))
    )
    assert response.status_code == 202
    run = _worker_runs(IngestRun.objects.get())

    errors = [
        "sources.yml:4: repos[0].includes: unknown key; allowed keys: enabled, exclude, include, name, owners, ref, "
        "trust, url",
        "sources.yml:2: repos[0].include: no include globs (set them here or in defaults)",
    ]
    assert (run.status, run.error) == (
        IngestStatus.FAILED,
        "IngestError: the source registry is invalid, so this run did not start (the last good registry and the "
        f"index stay served): {'; '.join(errors)}",
    )
    assert list(Repository.objects.values_list("name", "url", "include", "enabled")) == before
    registry = Registry.objects.get()
    assert registry.last_error == "\n".join(errors)
    assert "includes:" not in registry.content  # the last good registry is kept


def test_post_for_a_disabled_repository_is_409(api_client, registry_repo, handbook):
    off = {"name": "acme/off", "url": str(handbook.path), "include": ["*.md"], "enabled": "false"}
    registry_repo(sources_yaml(off), synced=True)
    response = api_client.post("/ingest/repo", {"repo": "acme/off"}, format="json", **bearer(service_key("ingest")))
    assert response.status_code == 409
    assert response.json()["detail"] == "Repository 'acme/off' is disabled in the source registry."
    assert IngestRun.objects.count() == 0


def test_get_run_shows_status_counts_and_timings(api_client):
    run = IngestRunFactory(
        repository=RepositoryFactory(name="acme/docs"),
        files_total=3,
        files_processed=2,
        files_added=1,
        files_updated=1,
        files_unchanged=1,
        files_skipped=[["docs/logo.md", "binary"]],
        chunks_added=4,
        chunks_updated=2,
        chunks_unchanged=3,
        chunks_embedded=5,
        timings={"fetch": 0.5, "total": 1.5},
        attempts=1,
    )
    for secret in (service_key("read"), service_key("ingest")):
        response = api_client.get(f"/ingest/runs/{run.pk}", **bearer(secret))
        assert response.status_code == 200
        assert response.json() == {
            "id": run.pk,
            "repo": "acme/docs",
            "ref": "main",
            "commit": "a" * 40,
            "status": "succeeded",
            "trigger": "api",
            "phase": "done",
            "files": {
                "total": 3,
                "processed": 2,
                "added": 1,
                "updated": 1,
                "removed": 0,
                "unchanged": 1,
                "skipped": [{"path": "docs/logo.md", "reason": "binary"}],
            },
            "chunks": {"added": 4, "updated": 2, "removed": 0, "unchanged": 3, "embedded": 5},
            "timings": {"fetch": 0.5, "total": 1.5},
            "error": "",
            "attempts": 1,
            "created_at": run.created_at.isoformat().replace("+00:00", "Z"),
            "started_at": "2026-01-02T03:04:05Z",
            "heartbeat_at": "2026-01-02T03:04:09Z",
            "finished_at": "2026-01-02T03:04:10Z",
        }


def test_get_run_is_401_without_key_and_404_for_unknown_ids(api_client):
    run = IngestRunFactory()
    assert api_client.get(f"/ingest/runs/{run.pk}").status_code == 401
    response = api_client.get(f"/ingest/runs/{run.pk + 1000}", **bearer(service_key("read")))
    assert response.status_code == 404
    assert response.json()["detail"] == f"No ingest run with id {run.pk + 1000}."


def test_reading_a_run_whose_worker_died_marks_it_failed(api_client, settings):
    settings.INGEST_STALE_SECONDS = 60
    silent = IngestRunFactory(
        status=IngestStatus.RUNNING, heartbeat_at=timezone.now() - timedelta(seconds=61), finished_at=None
    )
    alive = IngestRunFactory(
        status=IngestStatus.RUNNING, heartbeat_at=timezone.now() - timedelta(seconds=5), finished_at=None
    )
    response = api_client.get(f"/ingest/runs/{silent.pk}", **bearer(service_key("read")))
    assert (response.json()["status"], response.json()["error"]) == ("failed", STALE_RUNNING_ERROR)
    alive.refresh_from_db()
    assert alive.status == IngestStatus.RUNNING


@pytest.mark.django_db(transaction=True)
def test_a_failed_runs_error_names_server_directories_by_their_setting_not_their_path(
    api_client, handbook_registered, settings, no_embeddings
):
    """The rule of README "Who may call what": a key with `read` or `ingest` reads runs; their
    errors quote no path under the server's directories, as stored and as served (the repository's
    URL, a local path here, is quoted as the registry has it)."""
    [first] = ingest_foreground(repository_name="acme/handbook", ref=None)
    assert first.status == IngestStatus.SUCCEEDED
    [cached] = (path for path in settings.GIT_CACHE_DIR.iterdir() if path.name.startswith("handbook-"))
    shutil.rmtree(cached / "objects")
    (cached / "objects").write_text("not a directory: git fails on this clone")

    [failed] = ingest_foreground(repository_name="acme/handbook", ref=None)

    error = (
        f"GitError: git fetch failed for {handbook_registered.path}: "
        f"fatal: not a git repository: 'GIT_CACHE_DIR/{cached.name}'"
    )
    assert (failed.status, IngestRun.objects.get(pk=failed.pk).error) == (IngestStatus.FAILED, error)
    for secret in (service_key("ingest"), service_key("read")):
        assert api_client.get(f"/ingest/runs/{failed.pk}", **bearer(secret)).json()["error"] == error
        assert api_client.get("/ingest/runs", **bearer(secret)).json()[0]["error"] == error


def test_errors_stored_before_the_rule_are_served_without_server_paths(api_client, settings, tmp_path):
    settings.VAR_DIR = tmp_path / "var"
    settings.GIT_CACHE_DIR = tmp_path / "var" / "git-cache"
    run = IngestRunFactory(
        status=IngestStatus.FAILED,
        error=(
            f"GitError: git fetch failed for {tmp_path}/repos/acme: fatal: not a git repository: "
            f"'{tmp_path}/var/git-cache/acme-0123.git' (see {tmp_path}/var/log, not {tmp_path}/various)"
        ),
    )
    settings.SOURCE_REGISTRY_REPO, settings.SOURCE_REGISTRY_REF = "/srv/registry", "main"
    Registry.objects.create(
        location="/srv/registry@main:sources.yml", last_error=f"cannot read {tmp_path}/var/demo-sources/registry"
    )
    served = (
        f"GitError: git fetch failed for {tmp_path}/repos/acme: fatal: not a git repository: "
        f"'GIT_CACHE_DIR/acme-0123.git' (see VAR_DIR/log, not {tmp_path}/various)"
    )
    secret = service_key("read")

    assert api_client.get(f"/ingest/runs/{run.pk}", **bearer(secret)).json()["error"] == served
    assert api_client.get("/ingest/runs", **bearer(secret)).json()[0]["error"] == served
    repos = api_client.get("/repos", **bearer(secret)).json()
    assert repos["repositories"][0]["latest_run"]["error"] == served
    assert repos["registry"]["last_error"] == "cannot read VAR_DIR/demo-sources/registry"


def test_post_from_a_key_limited_to_other_repositories_is_the_unlisted_404_and_queues_nothing(
    api_client, registry_repo, handbook
):
    registry_repo(
        sources_yaml(
            {"name": "acme/a", "url": str(handbook.path), "owners": ["docs-team"], **HANDBOOK_GLOBS},
            {"name": "acme/b", "url": str(handbook.path), "owners": ["platform"], **HANDBOOK_GLOBS},
        ),
        synced=True,  # the key's names are checked against the synced registry
    )
    _, secret = api_key_create(kind=ApiKeyKind.SERVICE, name="docs", scopes=["ingest"], scope_owners=["docs-team"])

    out_of_scope = api_client.post("/ingest/repo", {"repo": "acme/b"}, format="json", **bearer(secret))
    unlisted = api_client.post("/ingest/repo", {"repo": "acme/c"}, format="json", **bearer(secret))
    assert IngestRun.objects.count() == 0
    every = api_client.post("/ingest/repo", {}, format="json", **bearer(secret))

    assert (out_of_scope.status_code, unlisted.status_code) == (404, 404)
    assert out_of_scope.json() == {
        **unlisted.json(),
        "detail": unlisted.json()["detail"].replace("'acme/c'", "'acme/b'"),
    }
    assert [(run["repo"], run["created"]) for run in every.json()["runs"]] == [("acme/a", True)]
    assert list(IngestRun.objects.values_list("repository__name", flat=True)) == ["acme/a"]
