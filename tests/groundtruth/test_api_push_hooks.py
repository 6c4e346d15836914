"""POST /hooks/git: push webhooks of GitHub, GitLab, Gitea and Forgejo, signed in the test as each
host signs them, against real git repositories and a real registry repository."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from urllib.parse import urlencode

import httpx
import pytest
from django.utils import timezone

from groundtruth.ingest.push import ABANDONED_CLAIM_SECONDS, DELIVERY_RETENTION
from groundtruth.ingest.push_events import repository_url_key
from groundtruth.models import IngestRun, IngestStatus, PushDelivery, Registry, Repository
from groundtruth.services import registry_load
from groundtruth.tasks import ingest_repo, registry_sync_task
from tests import celeryworker
from tests.conftest import closed_port
from tests.gitrepos import GitWorkTree
from tests.groundtruth.conftest import HANDBOOK_GLOBS, sources_yaml
from tests.groundtruth.run_bodies import queued_run_body
from tests.liveserver import gunicorn_server

pytestmark = pytest.mark.django_db

SECRET = "s3cret-for-push-hooks"
HOOK = "/hooks/git"

Headers = dict[str, str]


def _hex_hmac(secret: str, body: bytes) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def github(body: bytes, *, event: str = "push", delivery: str = "", secret: str = SECRET) -> Headers:
    return {
        "HTTP_X_GITHUB_EVENT": event,
        "HTTP_X_GITHUB_DELIVERY": delivery or str(uuid.uuid4()),
        "HTTP_X_HUB_SIGNATURE_256": "sha256=" + _hex_hmac(secret, body),
    }


def gitlab(body: bytes, *, event: str = "Push Hook", delivery: str = "", secret: str = SECRET) -> Headers:
    return {
        "HTTP_X_GITLAB_EVENT": event,
        "HTTP_X_GITLAB_EVENT_UUID": delivery or str(uuid.uuid4()),
        "HTTP_X_GITLAB_TOKEN": secret,
    }


def gitea(body: bytes, *, event: str = "push", delivery: str = "", secret: str = SECRET) -> Headers:
    # Gitea also sends GitHub's headers (with GitHub's own signature format): it is told apart first.
    signature = _hex_hmac(secret, body)
    delivery = delivery or str(uuid.uuid4())
    return {
        "HTTP_X_GITEA_EVENT": event,
        "HTTP_X_GITEA_DELIVERY": delivery,
        "HTTP_X_GITEA_SIGNATURE": signature,
        "HTTP_X_GITHUB_EVENT": event,
        "HTTP_X_GITHUB_DELIVERY": delivery,
        "HTTP_X_HUB_SIGNATURE_256": "sha256=" + signature,
    }


def forgejo(body: bytes, *, event: str = "push", delivery: str = "", secret: str = SECRET) -> Headers:
    signature = _hex_hmac(secret, body)
    delivery = delivery or str(uuid.uuid4())
    return {
        "HTTP_X_FORGEJO_EVENT": event,
        "HTTP_X_FORGEJO_DELIVERY": delivery,
        "HTTP_X_FORGEJO_SIGNATURE": signature,
        "HTTP_X_GITEA_EVENT": event,
        "HTTP_X_GITEA_DELIVERY": delivery,
        "HTTP_X_GITEA_SIGNATURE": signature,
    }


PROVIDERS: dict[str, Callable[..., Headers]] = {"github": github, "gitlab": gitlab, "gitea": gitea, "forgejo": forgejo}


def push_payload(provider: str, *, url: str, ref: str = "refs/heads/main", after: str = "f" * 40) -> dict:
    """The parts of each host's push payload the endpoint reads, as the host names them."""
    if provider == "gitlab":
        return {
            "object_kind": "push",
            "ref": ref,
            "before": "e" * 40,
            "after": after,
            "project": {"path_with_namespace": "acme/handbook", "git_http_url": url, "web_url": url},
            "repository": {"name": "handbook", "url": url, "git_http_url": url},
        }
    return {
        "ref": ref,
        "before": "e" * 40,
        "after": after,
        "deleted": after == "0" * 40,
        "repository": {"full_name": "acme/handbook", "clone_url": url, "html_url": url},
    }


def deliver(api_client, body: bytes, headers: Headers, content_type: str = "application/json"):
    return api_client.generic("POST", HOOK, body, content_type=content_type, **headers)


def encoded(payload: dict) -> bytes:
    return json.dumps(payload).encode()


@pytest.fixture(autouse=True)
def _secret(settings) -> None:
    settings.INGEST_WEBHOOK_SECRET = SECRET


@pytest.fixture
def handbook_listed(handbook_registered: GitWorkTree) -> GitWorkTree:
    """acme/handbook in the registry, and its Repository row as the last registry load left it."""
    return handbook_registered


def run_body(run: IngestRun, *, created: bool) -> dict:
    return queued_run_body(run, trigger="push", created=created)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_push_to_the_followed_branch_queues_one_ingest_run_triggered_by_push(
    api_client, handbook_listed, provider, django_capture_on_commit_callbacks
):
    body = encoded(push_payload(provider, url=str(handbook_listed.path)))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = deliver(api_client, body, PROVIDERS[provider](body))

    assert response.status_code == 202, response.content
    run = IngestRun.objects.select_related("repository").get()
    assert response.json() == {"run_ids": [run.pk], "runs": [run_body(run, created=True)], "registry": None}
    assert (run.repository.name, run.trigger, run.ref, run.status) == ("acme/handbook", "push", "main", "queued")
    assert len(callbacks) == 2  # the run's task and the brand-asset sync, as POST /ingest/repo queues them
    delivery = PushDelivery.objects.get()
    assert (delivery.provider, delivery.outcome) == (
        "gitlab" if provider == "gitlab" else "github" if provider == "github" else "gitea",
        {"run_ids": [run.pk], "registry": False},
    )


def test_push_naming_the_repository_by_another_form_of_its_url_matches(api_client, handbook_listed):
    # The registry lists a path; the push names a file:// URL with a trailing .git-less slash.
    body = encoded(push_payload("github", url=handbook_listed.file_url + "/"))
    response = deliver(api_client, body, github(body))
    assert response.status_code == 202
    assert IngestRun.objects.get().trigger == "push"


def test_a_repository_with_a_run_active_gets_that_run_back(api_client, handbook_listed):
    first = encoded(push_payload("github", url=str(handbook_listed.path), after="1" * 40))
    second = encoded(push_payload("github", url=str(handbook_listed.path), after="2" * 40))
    run_id = deliver(api_client, first, github(first)).json()["run_ids"][0]
    response = deliver(api_client, second, github(second))
    assert response.status_code == 202
    assert (response.json()["run_ids"], response.json()["runs"][0]["created"]) == ([run_id], False)
    assert IngestRun.objects.count() == 1


def test_github_form_encoded_payload_is_read_like_json(api_client, handbook_listed):
    body = urlencode({"payload": json.dumps(push_payload("github", url=str(handbook_listed.path)))}).encode()
    response = deliver(api_client, body, github(body), content_type="application/x-www-form-urlencoded")
    assert response.status_code == 202
    assert IngestRun.objects.count() == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_wrong_secret_is_401_and_queues_nothing(api_client, handbook_listed, provider):
    body = encoded(push_payload(provider, url=str(handbook_listed.path)))
    response = deliver(api_client, body, PROVIDERS[provider](body, secret="not-the-secret"))
    assert response.status_code == 401
    assert response["Content-Type"] == "application/problem+json"
    assert response.json() == {
        "type": "urn:problem:invalid_signature",
        "title": "Authentication required",
        "status": 401,
        "detail": "The delivery is not signed with the configured secret: send X-Hub-Signature-256 (GitHub), "
        "X-Gitlab-Token (GitLab) or X-Gitea-Signature (Gitea, Forgejo).",
        "code": "invalid_signature",
    }
    assert (IngestRun.objects.count(), PushDelivery.objects.count()) == (0, 0)


def test_a_body_changed_after_signing_is_401(api_client, handbook_listed):
    signed = encoded(push_payload("github", url=str(handbook_listed.path)))
    tampered = encoded(push_payload("github", url=str(handbook_listed.path), after="9" * 40))
    for headers in (github(signed), gitea(signed), forgejo(signed)):
        assert deliver(api_client, tampered, headers).status_code == 401
    assert (IngestRun.objects.count(), PushDelivery.objects.count()) == (0, 0)


@pytest.mark.parametrize(
    "headers",
    [
        {"HTTP_X_GITHUB_EVENT": "push"},  # no signature
        {"HTTP_X_GITLAB_EVENT": "Push Hook"},  # no token
        {"HTTP_X_GITEA_EVENT": "push", "HTTP_X_HUB_SIGNATURE_256": "ignored for Gitea"},
        {"HTTP_X_HUB_SIGNATURE_256": "sha256=00"},  # no event header: no host we know
        {"HTTP_X_GITHUB_EVENT": "push", "HTTP_X_HUB_SIGNATURE_256": "sha256=ü"},  # not ASCII
        {},
    ],
)
def test_a_missing_signature_is_401_and_queues_nothing(api_client, handbook_listed, headers):
    body = encoded(push_payload("github", url=str(handbook_listed.path)))
    response = deliver(api_client, body, headers)
    assert (response.status_code, response.json()["code"]) == (401, "invalid_signature")
    assert (IngestRun.objects.count(), PushDelivery.objects.count()) == (0, 0)


def test_without_a_secret_configured_the_endpoint_is_404_and_queues_nothing(api_client, handbook_listed, settings):
    settings.INGEST_WEBHOOK_SECRET = ""
    body = encoded(push_payload("github", url=str(handbook_listed.path)))
    response = deliver(api_client, body, github(body, secret=""))
    assert response.status_code == 404
    assert response.json() == {
        "type": "urn:problem:webhooks_off",
        "title": "Not Found",
        "status": 404,
        "detail": "Push webhooks are off: INGEST_WEBHOOK_SECRET is not set.",
        "code": "webhooks_off",
    }
    assert (IngestRun.objects.count(), PushDelivery.objects.count()) == (0, 0)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_repeated_delivery_id_gets_the_same_run_and_queues_no_second_one(
    api_client, handbook_listed, provider, django_capture_on_commit_callbacks
):
    body = encoded(push_payload(provider, url=str(handbook_listed.path)))
    headers = PROVIDERS[provider](body)
    first = deliver(api_client, body, headers)
    run = IngestRun.objects.get()
    # The run finishes; a redelivery would otherwise find no active run and queue a new one.
    IngestRun.objects.filter(pk=run.pk).update(status=IngestStatus.SUCCEEDED, phase="done")

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        again = deliver(api_client, body, headers)

    assert (first.status_code, again.status_code) == (202, 202)
    assert again["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first
    assert again.json()["run_ids"] == [run.pk]
    assert (again.json()["runs"][0]["status"], again.json()["runs"][0]["created"]) == ("succeeded", False)
    assert (IngestRun.objects.count(), len(callbacks), PushDelivery.objects.count()) == (1, 0, 1)

    # Another delivery of a later push does queue a new run.
    later = encoded(push_payload(provider, url=str(handbook_listed.path), after="3" * 40))
    response = deliver(api_client, later, PROVIDERS[provider](later))
    assert response.status_code == 202
    assert response.json()["run_ids"] != [run.pk]
    assert IngestRun.objects.count() == 2


def test_a_repeated_ignored_delivery_gets_the_same_answer(api_client, handbook_listed):
    body = encoded(push_payload("github", url=str(handbook_listed.path), ref="refs/heads/dev"))
    headers = github(body)
    first = deliver(api_client, body, headers)
    again = deliver(api_client, body, headers)
    assert (first.status_code, again.status_code) == (200, 200)
    assert first.json() == again.json()
    assert again["Idempotent-Replayed"] == "true"


def test_a_delivery_still_being_handled_is_409_and_an_abandoned_one_is_taken_over(api_client, handbook_listed):
    body = encoded(push_payload("github", url=str(handbook_listed.path)))
    headers = github(body, delivery="in-flight-1")
    PushDelivery.objects.create(delivery_id="in-flight-1", provider="github", event="push", received_at=timezone.now())

    response = deliver(api_client, body, headers)
    assert response.status_code == 409
    assert response["Retry-After"] == "60"
    assert response.json()["code"] == "delivery_in_progress"
    assert IngestRun.objects.count() == 0

    PushDelivery.objects.update(received_at=timezone.now() - timedelta(seconds=ABANDONED_CLAIM_SECONDS + 1))
    response = deliver(api_client, body, headers)
    assert response.status_code == 202
    run = IngestRun.objects.get()
    assert PushDelivery.objects.get().outcome == {"run_ids": [run.pk], "registry": False}


def test_deliveries_older_than_the_retention_are_deleted_as_new_ones_arrive(api_client, handbook_listed):
    old = PushDelivery.objects.create(
        delivery_id="old", provider="github", event="push", received_at=timezone.now() - DELIVERY_RETENTION
    )
    body = encoded(push_payload("github", url=str(handbook_listed.path), ref="refs/heads/dev"))
    deliver(api_client, body, github(body, delivery="new"))
    assert list(PushDelivery.objects.values_list("delivery_id", flat=True)) == ["new"]
    assert not PushDelivery.objects.filter(pk=old.pk).exists()


@pytest.mark.parametrize(
    ("ref", "reason"),
    [
        ("refs/heads/dev", "refs/heads/dev is not a followed ref of acme/handbook (followed: refs/heads/main)"),
        ("refs/tags/v1", "refs/tags/v1 is not a followed ref of acme/handbook (followed: refs/heads/main)"),
    ],
)
def test_a_push_to_another_ref_is_ignored(api_client, handbook_listed, ref, reason):
    body = encoded(push_payload("github", url=str(handbook_listed.path), ref=ref))
    response = deliver(api_client, body, github(body))
    assert (response.status_code, response.json()) == (200, {"ignored": reason})
    assert IngestRun.objects.count() == 0


def test_a_push_to_an_unknown_repository_is_ignored(api_client, handbook_listed):
    body = encoded(push_payload("gitlab", url="https://gitlab.example.com/acme/other.git"))
    response = deliver(api_client, body, gitlab(body))
    assert (response.status_code, response.json()) == (
        200,
        {"ignored": "acme/handbook is not a repository of the source registry"},
    )
    assert IngestRun.objects.count() == 0


def test_a_deleted_branch_and_a_disabled_repository_are_ignored(api_client, handbook_listed):
    for provider in ("github", "gitlab"):
        body = encoded(push_payload(provider, url=str(handbook_listed.path), after="0" * 40))
        response = deliver(api_client, body, PROVIDERS[provider](body))
        assert (response.status_code, response.json()) == (200, {"ignored": "refs/heads/main was deleted"})

    Repository.objects.update(enabled=False)
    body = encoded(push_payload("github", url=str(handbook_listed.path)))
    response = deliver(api_client, body, github(body))
    assert (response.status_code, response.json()) == (
        200,
        {"ignored": "acme/handbook: disabled in the source registry"},
    )
    assert IngestRun.objects.count() == 0


@pytest.mark.parametrize(
    ("provider", "event", "reason"),
    [
        ("github", "ping", "ping event: only pushes are acted on"),
        ("github", "pull_request", "pull_request event: only pushes are acted on"),
        ("gitlab", "Merge Request Hook", "Merge Request Hook event: only pushes are acted on"),
        ("gitea", "issues", "issues event: only pushes are acted on"),
    ],
)
def test_other_events_are_ignored(api_client, handbook_listed, provider, event, reason):
    body = encoded({"zen": "Keep it logically awesome.", "hook_id": 1})
    response = deliver(api_client, body, PROVIDERS[provider](body, event=event))
    assert (response.status_code, response.json()) == (200, {"ignored": reason})
    assert IngestRun.objects.count() == 0


def test_a_gitlab_tag_push_to_a_followed_tag_queues_a_run(api_client, handbook, registry_repo):
    handbook.tag("v1")
    registry_repo(sources_yaml({"name": "acme/handbook", "url": str(handbook.path), "ref": "v1", **HANDBOOK_GLOBS}))
    registry_load()
    body = encoded(push_payload("gitlab", url=str(handbook.path), ref="refs/tags/v1"))
    response = deliver(api_client, body, gitlab(body, event="Tag Push Hook"))
    assert response.status_code == 202
    assert IngestRun.objects.get().ref == "v1"


@pytest.mark.parametrize(
    ("body", "field", "code"),
    [
        (b"{not json", "", "invalid_json"),
        (b"[1, 2]", "", "invalid_json"),
        (json.dumps({"repository": {"clone_url": "x"}}).encode(), "ref", "invalid"),
        (json.dumps({"ref": "refs/heads/main", "repository": {"full_name": "a/b"}}).encode(), "repository", "invalid"),
    ],
)
def test_a_signed_payload_that_is_not_a_push_is_400(api_client, handbook_listed, body, field, code):
    response = deliver(api_client, body, github(body))
    assert response.status_code == 400
    assert response.json()["code"] == code
    assert [error["field"] for error in response.json().get("errors", [])] == ([field] if field else [])
    assert (IngestRun.objects.count(), PushDelivery.objects.count()) == (0, 0)


def test_a_payload_over_the_limit_is_413_and_one_over_the_api_body_limit_is_read(api_client, handbook_listed, settings):
    payload = push_payload("github", url=str(handbook_listed.path))
    # Pushes are larger than the API's other bodies (MAX_REQUEST_BODY_BYTES, 64 KiB here).
    payload["commits"] = [{"id": f"{n:040d}", "message": "x" * 500} for n in range(200)]
    body = encoded(payload)
    assert settings.DATA_UPLOAD_MAX_MEMORY_SIZE < len(body) < settings.INGEST_WEBHOOK_MAX_BYTES
    assert deliver(api_client, body, github(body)).status_code == 202

    settings.INGEST_WEBHOOK_MAX_BYTES = 4096
    response = deliver(api_client, body, github(body, delivery="too-large"))
    assert response.status_code == 413
    assert response.json() == {
        "type": "urn:problem:body_too_large",
        "title": "Request Entity Too Large",
        "status": 413,
        "detail": "The request body is larger than the limit of 4096 bytes.",
        "code": "body_too_large",
    }
    assert (IngestRun.objects.count(), PushDelivery.objects.count()) == (1, 1)

    # Other endpoints keep the general limit.
    response = api_client.generic("POST", "/ingest/repo", body, content_type="application/json")
    assert (response.status_code, response.json()["detail"]) == (
        413,
        f"The request body is larger than the limit of {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes.",
    )


def _registry_body(registry: Registry) -> dict:
    return {
        "location": registry.location,
        "commit": registry.commit,
        "loaded_at": registry.loaded_at.isoformat().replace("+00:00", "Z"),
        "last_error": registry.last_error,
        "last_error_at": registry.last_error_at and registry.last_error_at.isoformat().replace("+00:00", "Z"),
    }


def test_a_push_to_the_registry_repository_queues_its_reread_on_a_worker(
    api_client, handbook_listed, registry_repo, handbook, django_capture_on_commit_callbacks
):
    synced = Registry.objects.get()
    tree = registry_repo(
        sources_yaml(
            {"name": "acme/handbook", "url": str(handbook.path), **HANDBOOK_GLOBS},
            {"name": "acme/second", "url": str(handbook.path), "include": ["README.md"]},
        ),
        "add a second repository",
    )
    body = encoded(push_payload("gitea", url=str(tree.path)))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = deliver(api_client, body, gitea(body))

    # The web request reads no git: it answers the registry as last synced, and a worker re-reads it.
    assert response.status_code == 202
    assert response.json() == {"run_ids": [], "runs": [], "registry": _registry_body(synced)}
    assert list(Repository.objects.values_list("name", flat=True)) == ["acme/handbook"]
    assert IngestRun.objects.count() == 0
    assert len(callbacks) == 2  # sources.yml and brand-assets.yml, re-read on the worker

    assert registry_sync_task.apply().get() == tree.head()
    assert Registry.objects.get().commit == tree.head()
    assert sorted(Repository.objects.values_list("name", flat=True)) == ["acme/handbook", "acme/second"]


def test_an_invalid_registry_pushed_is_recorded_by_the_worker_and_the_last_good_one_stays(
    api_client, handbook_listed, registry_repo
):
    good = Registry.objects.get()
    tree = registry_repo("repos:\n  - name: no-slash\n", "broken")
    body = encoded(push_payload("github", url=str(tree.path)))
    response = deliver(api_client, body, github(body))
    assert (response.status_code, response.json()["registry"]) == (202, _registry_body(good))

    assert registry_sync_task.apply().get() == ""
    registry = Registry.objects.get()
    assert registry.commit == good.commit
    assert registry.last_error.startswith("sources.yml:2: repos[0].name: 'no-slash' is not of the form owner/name")
    assert list(Repository.objects.values_list("name", "enabled")) == [("acme/handbook", True)]
    body = encoded(push_payload("github", url=str(tree.path)))
    assert deliver(api_client, body, github(body)).json()["registry"] == _registry_body(registry)

    # A push to a registered repository while the registry is invalid is accepted from the last good
    # sync; the worker's re-read fails the run with the registry's errors.
    body = encoded(push_payload("github", url=str(handbook_listed.path)))
    response = deliver(api_client, body, github(body, delivery="push-while-invalid"))
    assert response.status_code == 202
    [run] = IngestRun.objects.all()
    ingest_repo.apply(args=[run.repository_id, run.ref], kwargs={"run_id": run.pk, "trigger": run.trigger})
    run.refresh_from_db()
    assert (run.status, run.error) == (
        IngestStatus.FAILED,
        "IngestError: the source registry is invalid, so this run did not start (the last good registry and the "
        f"index stay served): {registry.last_error.replace(chr(10), '; ')}",
    )


def test_a_push_accepted_before_the_registry_changed_its_ref_is_ingested_at_the_new_ref(
    api_client, handbook_listed, registry_repo, no_embeddings
):
    handbook_listed.branch("release")
    handbook_listed.write("docs/release.md", "# Release\n\nThe release notes.\n")
    handbook_listed.commit("release notes")
    release = handbook_listed.head()
    registry_repo(
        sources_yaml({"name": "acme/handbook", "url": str(handbook_listed.path), "ref": "release", **HANDBOOK_GLOBS}),
        "follow the release branch",
    )
    body = encoded(push_payload("github", url=str(handbook_listed.path)))
    response = deliver(api_client, body, github(body))
    assert response.status_code == 202  # the registry as last synced follows main
    [run] = IngestRun.objects.all()
    assert (run.ref, run.follows_registry_ref) == ("main", True)

    ingest_repo.apply(args=[run.repository_id, run.ref], kwargs={"run_id": run.pk, "trigger": run.trigger})

    run.refresh_from_db()
    assert (run.status, run.ref, run.commit, run.error) == (IngestStatus.SUCCEEDED, "release", release, "")
    assert Repository.objects.get().ref == "release"
    # Synced now: the next push to main is ignored on the web host.
    body = encoded(push_payload("github", url=str(handbook_listed.path)))
    assert deliver(api_client, body, github(body)).json() == {
        "ignored": "refs/heads/main is not a followed ref of acme/handbook (followed: refs/heads/release)"
    }


def test_a_push_to_another_branch_of_the_registry_repository_is_ignored(api_client, handbook_listed, settings):
    body = encoded(push_payload("github", url=settings.SOURCE_REGISTRY_REPO, ref="refs/heads/draft"))
    response = deliver(api_client, body, github(body))
    assert (response.status_code, response.json()) == (
        200,
        {"ignored": "refs/heads/draft is not a followed ref of acme/handbook (followed: refs/heads/main)"},
    )


def test_a_push_is_accepted_without_reading_the_registry_repository(api_client, handbook_listed, settings, tmp_path):
    """A web host holds no git access: an unreachable registry repository changes nothing here."""
    settings.SOURCE_REGISTRY_REPO = f"http://127.0.0.1:{closed_port()}/registry.git"
    settings.GIT_CACHE_DIR = tmp_path / "no-git-cache"
    body = encoded(push_payload("github", url=str(handbook_listed.path)))
    response = deliver(api_client, body, github(body, delivery="registry-down"))
    run = IngestRun.objects.get()
    assert (response.status_code, response.json()) == (
        202,
        {"run_ids": [run.pk], "runs": [run_body(run, created=True)], "registry": None},
    )
    assert PushDelivery.objects.get().outcome == {"run_ids": [run.pk], "registry": False}
    assert not (tmp_path / "no-git-cache").exists()


def test_webhooks_are_rate_limited_per_client_ip_as_public_requests(api_client, handbook_listed, settings):
    settings.RATE_LIMIT_PUBLIC = "2/m"
    body = encoded(push_payload("github", url=str(handbook_listed.path), ref="refs/heads/dev"))
    statuses = [deliver(api_client, body, github(body)).status_code for _ in range(3)]
    assert statuses == [200, 200, 429]


@pytest.mark.parametrize(
    ("url", "key"),
    [
        ("https://GitHub.com/Acme/Docs.git", "github.com/acme/docs"),
        ("https://github.com/acme/docs/", "github.com/acme/docs"),
        ("http://github.com:8080/acme/docs", "github.com/acme/docs"),
        ("git@github.com:acme/docs.git", "github.com/acme/docs"),
        ("ssh://git@github.com:22/acme/docs.git", "github.com/acme/docs"),
        ("git://github.com/acme/docs.git", "github.com/acme/docs"),
        ("https://gitlab.example.com/group/sub/docs.git", "gitlab.example.com/group/sub/docs"),
        ("file:///srv/git/docs.git", "file:/srv/git/docs"),
        ("/srv/git/docs/", "file:/srv/git/docs"),
        ("/srv/git/../git/docs", "file:/srv/git/docs"),
    ],
)
def test_repository_urls_compare_by_host_and_path(url, key):
    assert repository_url_key(url) == key


def test_the_secret_never_appears_in_a_response_or_a_log_line(api_client, handbook_listed, caplog):
    caplog.set_level("DEBUG")
    body = encoded(push_payload("gitlab", url=str(handbook_listed.path)))
    responses = [
        deliver(api_client, body, gitlab(body, secret="wrong")),
        deliver(api_client, body, gitlab(body)),
        deliver(api_client, b"{", gitlab(b"{")),
    ]
    assert [response.status_code for response in responses] == [401, 202, 400]
    assert all(SECRET not in response.content.decode() for response in responses)
    assert "Push delivery" in caplog.text and SECRET not in caplog.text


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_through_gunicorn_a_push_over_the_api_body_limit_is_read_whole_chunked_or_not(tmp_path):
    environment = {
        "DATABASE_URL": celeryworker.test_database_url(),
        "EMBEDDING_BACKEND": "none",
        "MAX_REQUEST_BODY_BYTES": "4096",
        "INGEST_WEBHOOK_SECRET": SECRET,
        "INGEST_WEBHOOK_MAX_BYTES": "16384",
    }
    ping = encoded({"zen": "x" * 10_000, "hook_id": 1})
    too_large = encoded({"zen": "x" * 20_000, "hook_id": 1})

    def pieces(body: bytes) -> Iterator[bytes]:  # httpx sends a generator's pieces as chunks
        for start in range(0, len(body), 1000):
            yield body[start : start + 1000]

    def headers(body: bytes) -> dict[str, str]:
        return {
            "Content-Type": "application/json",
            "X-GitHub-Event": "ping",
            "X-GitHub-Delivery": str(uuid.uuid4()),
            "X-Hub-Signature-256": "sha256=" + _hex_hmac(SECRET, body),
        }

    with gunicorn_server(environment=environment, log_path=tmp_path / "web.log") as base_url:
        with httpx.Client(base_url=base_url, timeout=20) as client:
            plain = client.post(HOOK, content=ping, headers=headers(ping))
            in_chunks = client.post(HOOK, content=pieces(ping), headers=headers(ping))
            over = client.post(HOOK, content=pieces(too_large), headers=headers(too_large))
            elsewhere = client.post("/ingest/repo", content=ping, headers={"Content-Type": "application/json"})

    assert in_chunks.request.headers["transfer-encoding"] == "chunked"
    for response in (plain, in_chunks):
        assert (response.status_code, response.json()) == (200, {"ignored": "ping event: only pushes are acted on"})
    assert (over.status_code, over.json()["detail"]) == (
        413,
        "The request body is larger than the limit of 16384 bytes.",
    )
    assert (elsewhere.status_code, elsewhere.json()["detail"]) == (
        413,
        "The request body is larger than the limit of 4096 bytes.",
    )
