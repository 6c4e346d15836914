"""End to end through a real Celery worker process: an ingest requested over the API, the
registry re-read by the worker, `ingest_all`, and a worker killed mid-ingest."""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import time
import uuid
from pathlib import Path

import pytest

from groundtruth.ingest.foreground import ingest_foreground
from groundtruth.ingest.runs import STALE_RUNNING_ERROR, ingest_runs_stale_clear
from groundtruth.models import Chunk, IngestRun, IngestStatus, Repository
from groundtruth.services import registry_load
from groundtruth.tasks import ingest_all
from tests.celeryworker import celery_worker, worker_kill
from tests.gitrepos import GitWorkTree
from tests.groundtruth.conftest import HANDBOOK_GLOBS, sources_yaml
from tests.groundtruth.factories import bearer, service_key

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def wait_for(predicate, timeout: float = 90.0, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("condition not reached in time")


def finished_run(run_id: int) -> IngestRun | None:
    run = IngestRun.objects.get(pk=run_id)
    return run if run.status in (IngestStatus.SUCCEEDED, IngestStatus.FAILED) else None


@pytest.fixture
def worker_environment(settings, embedding_server, tmp_path: Path) -> dict[str, str]:
    queue = f"test-h3-{uuid.uuid4().hex[:12]}"
    settings.CELERY_TASK_DEFAULT_QUEUE = queue
    return {
        "CELERY_QUEUE": queue,
        "EMBEDDING_BACKEND": "openai",
        "EMBEDDING_URL": embedding_server.base_url,
        "EMBEDDING_MODEL": embedding_server.model,
        "GIT_CACHE_DIR": str(tmp_path / "worker-git-cache"),
        "INGEST_HEARTBEAT_SECONDS": "1",
        "LOG_LEVEL": "INFO",
    }


def registry_environment(settings) -> dict[str, str]:
    return {
        "SOURCE_REGISTRY_REPO": settings.SOURCE_REGISTRY_REPO,
        "SOURCE_REGISTRY_REF": settings.SOURCE_REGISTRY_REF,
        "SOURCE_REGISTRY_PATH": settings.SOURCE_REGISTRY_PATH,
        # Where the test's repositories may be (tests/conftest.py), for the worker's own settings.
        "GIT_LOCAL_ROOTS": ",".join(str(root) for root in settings.GIT_LOCAL_ROOTS),
        "GIT_ALLOW_PRIVATE_HOSTS": ",".join(settings.GIT_ALLOW_PRIVATE_HOSTS),
    }


def test_ingest_requested_over_the_api_runs_in_a_real_worker(
    api_client, handbook_registered, registry_repo, worker_environment, settings, tmp_path
):
    environment = {**worker_environment, **registry_environment(settings)}
    secret = service_key("ingest")
    with celery_worker(queue=environment["CELERY_QUEUE"], environment=environment, log_path=tmp_path / "w.log"):
        response = api_client.post("/ingest/repo", {"repo": "acme/handbook"}, format="json", **bearer(secret))
        assert response.status_code == 202
        [run_id] = response.json()["run_ids"]
        run = wait_for(lambda: finished_run(run_id))
        assert (run.status, run.error, run.trigger, run.attempts) == (IngestStatus.SUCCEEDED, "", "api", 1)
        assert (run.commit, run.files_added, run.chunks_added) == (handbook_registered.head(), 4, 7)
        assert Chunk.objects.filter(repository__name="acme/handbook").count() == 7

        # The worker re-reads the registry: a narrower glob applies to the next run.
        registry_repo(
            sources_yaml({"name": "acme/handbook", "url": str(handbook_registered.path), "include": ["docs/*.md"]}),
            "only top-level docs",
        )
        response = api_client.post("/ingest/repo", {"repo": "acme/handbook"}, format="json", **bearer(secret))
        run = wait_for(lambda: finished_run(response.json()["run_ids"][0]))
        assert (run.status, run.files_removed, run.files_unchanged) == (IngestStatus.SUCCEEDED, 3, 1)
        assert sorted(set(Chunk.objects.values_list("path", flat=True))) == ["docs/index.md"]

        # The beat task: every enabled repository, nothing changed, nothing embedded.
        ingest_all.apply_async(kwargs={"trigger": "beat"}, queue=environment["CELERY_QUEUE"])
        run = wait_for(
            lambda: IngestRun.objects.filter(trigger="beat", status=IngestStatus.SUCCEEDED).first(), timeout=60
        )
        assert (run.chunks_embedded, run.files_unchanged) == (0, 1)


def test_worker_killed_mid_ingest_leaves_the_previous_index_served_and_the_run_failed_once_stale(
    api_client, registry_repo, worker_environment, embedding_server, settings, tmp_path
):
    tree = GitWorkTree.create(tmp_path / "big")
    for number in range(12):
        tree.write(f"docs/page{number:02d}.md", f"# Page {number}\n\nFirst version of page {number}.\n")
    first = tree.commit("v1")
    registry_repo(sources_yaml({"name": "acme/big", "url": str(tree.path), **HANDBOOK_GLOBS}))
    [run] = ingest_foreground(repository_name="acme/big", ref=None)
    assert run.status == IngestStatus.SUCCEEDED
    before = sorted(Chunk.objects.values_list("path", "text", "commit"))
    assert len(before) == 12 and {commit for *_, commit in before} == {first}

    for number in range(12):
        tree.write(f"docs/page{number:02d}.md", f"# Page {number}\n\nSecond version of page {number}.\n")
    tree.commit("v2")
    embedding_server.delay_seconds = 0.7  # one text per request: about 8 s for the 12 pages
    environment = {
        **worker_environment,
        **registry_environment(settings),
        "EMBEDDING_BATCH_SIZE": "1",
        "INGEST_FILE_BATCH_SIZE": "2",
    }
    with celery_worker(queue=environment["CELERY_QUEUE"], environment=environment, log_path=tmp_path / "w.log") as w:
        response = api_client.post("/ingest/repo", {"repo": "acme/big"}, format="json", **bearer(service_key("ingest")))
        [run_id] = response.json()["run_ids"]
        # Progress is visible through the heartbeat while the swap transaction is still open.
        wait_for(lambda: IngestRun.objects.filter(pk=run_id, status="running", files_processed__gte=2).exists())
        worker_kill(w)

    run = IngestRun.objects.get(pk=run_id)
    assert (run.status, run.phase) == (IngestStatus.RUNNING, "chunk_embed_write")
    assert sorted(Chunk.objects.values_list("path", "text", "commit")) == before
    assert Repository.objects.get(name="acme/big").last_commit == first

    settings.INGEST_STALE_SECONDS = 2
    time.sleep(3)
    assert ingest_runs_stale_clear() == 1
    run.refresh_from_db()
    assert (run.status, run.error, run.phase) == (IngestStatus.FAILED, STALE_RUNNING_ERROR, "failed")
    assert run.finished_at is not None
    assert sorted(Chunk.objects.values_list("path", "text", "commit")) == before

    # The repository is free again: a new request creates a new run.
    response = api_client.post("/ingest/repo", {"repo": "acme/big"}, format="json", **bearer(service_key("ingest")))
    assert response.json()["runs"][0]["created"] is True


def test_worker_restarted_after_a_kill_resumes_the_run_it_held_without_waiting_for_staleness(
    api_client, registry_repo, worker_environment, embedding_server, settings, tmp_path
):
    tree = GitWorkTree.create(tmp_path / "big")
    for number in range(8):
        tree.write(f"docs/page{number:02d}.md", f"# Page {number}\n\nFirst version of page {number}.\n")
    tree.commit("v1")
    registry_repo(sources_yaml({"name": "acme/big", "url": str(tree.path), **HANDBOOK_GLOBS}))
    [run] = ingest_foreground(repository_name="acme/big", ref=None)
    for number in range(8):
        tree.write(f"docs/page{number:02d}.md", f"# Page {number}\n\nSecond version of page {number}.\n")
    second = tree.commit("v2")
    embedding_server.delay_seconds = 0.7
    environment = {
        **worker_environment,
        **registry_environment(settings),
        "EMBEDDING_BATCH_SIZE": "1",
        "INGEST_FILE_BATCH_SIZE": "2",
        "INGEST_STALE_SECONDS": "3600",  # staleness must play no part in the recovery
    }
    queue = environment["CELERY_QUEUE"]
    with celery_worker(queue=queue, environment=environment, log_path=tmp_path / "w1.log") as first_life:
        response = api_client.post("/ingest/repo", {"repo": "acme/big"}, format="json", **bearer(service_key("ingest")))
        [run_id] = response.json()["run_ids"]
        wait_for(lambda: IngestRun.objects.filter(pk=run_id, status="running", files_processed__gte=2).exists())
        worker_kill(first_life)
    held = IngestRun.objects.get(pk=run_id)
    assert (held.status, held.attempts, held.worker) == (IngestStatus.RUNNING, 1, f"{queue}@{socket.gethostname()}")

    embedding_server.delay_seconds = 0
    with celery_worker(queue=queue, environment=environment, log_path=tmp_path / "w2.log"):
        run = wait_for(lambda: finished_run(run_id), timeout=60)

    assert (run.status, run.attempts, run.commit, run.error) == (IngestStatus.SUCCEEDED, 2, second, "")
    assert IngestRun.objects.filter(repository__name="acme/big").count() == 2  # the foreground one and this one
    assert set(Chunk.objects.values_list("commit", flat=True)) == {second}
    assert f"requeued its interrupted ingest runs [{run_id}]" in (tmp_path / "w2.log").read_text()


def test_a_signed_github_push_ingests_in_a_real_worker_and_repos_shows_how(
    api_client, handbook_registered, worker_environment, settings, tmp_path
):
    settings.INGEST_WEBHOOK_SECRET = "end-to-end-push-secret"
    registry_load()  # the repository's row, as an earlier ingest or registry push left it
    handbook_registered.write("docs/pushed.md", "# Pushed\n\nA page that arrived by push.\n")
    pushed = handbook_registered.commit("a pushed commit")
    body = json.dumps(
        {
            "ref": "refs/heads/main",
            "after": pushed,
            "repository": {"full_name": "acme/handbook", "clone_url": handbook_registered.file_url},
        }
    ).encode()
    headers = {
        "HTTP_X_GITHUB_EVENT": "push",
        "HTTP_X_GITHUB_DELIVERY": str(uuid.uuid4()),
        "HTTP_X_HUB_SIGNATURE_256": "sha256=" + hmac.new(b"end-to-end-push-secret", body, hashlib.sha256).hexdigest(),
    }
    environment = {**worker_environment, **registry_environment(settings)}
    with celery_worker(queue=environment["CELERY_QUEUE"], environment=environment, log_path=tmp_path / "w.log"):
        response = api_client.generic("POST", "/hooks/git", body, content_type="application/json", **headers)
        assert response.status_code == 202
        [run_id] = response.json()["run_ids"]
        run = wait_for(lambda: finished_run(run_id))

    assert (run.status, run.error, run.trigger, run.commit, run.files_added) == (
        IngestStatus.SUCCEEDED,
        "",
        "push",
        pushed,
        5,
    )
    [listed] = api_client.get("/repos", **bearer(service_key("read"))).json()["repositories"]
    assert (listed["last_commit"], listed["state"]) == (pushed, "ready")
    assert listed["last_ingested_at"] is not None
    assert (listed["latest_run"]["id"], listed["latest_run"]["trigger"]) == (run_id, "push")
    assert Chunk.objects.filter(repository__name="acme/handbook", path="docs/pushed.md").count() == 1


def test_ingest_requests_and_pushes_answer_at_once_while_an_ingest_is_embedding(
    api_client, registry_repo, worker_environment, embedding_server, settings, tmp_path
):
    # A registry re-read (a worker's, before each ingest or on a push to the registry repository)
    # must not wait on the repository row of an ingest that is in its chunk-and-embed transaction,
    # nor must POST /ingest/repo and pushes (they read the synced rows).
    settings.INGEST_WEBHOOK_SECRET = "busy-push-secret"
    big = GitWorkTree.create(tmp_path / "big")
    for number in range(24):
        big.write(f"docs/page{number:02d}.md", f"# Page {number}\n\nText of page {number}.\n")
    big.commit("v1")
    small = GitWorkTree.create(tmp_path / "small")
    small.write("docs/index.md", "# Small\n\nOne page.\n")
    small.commit("v1")
    registry_repo(
        sources_yaml(
            {"name": "acme/big", "url": str(big.path), **HANDBOOK_GLOBS},
            {"name": "acme/small", "url": str(small.path), **HANDBOOK_GLOBS},
        ),
        synced=True,
    )
    embedding_server.delay_seconds = 0.3  # one text per request: about 15 s for 24 pages and titles
    environment = {
        **worker_environment,
        **registry_environment(settings),
        "EMBEDDING_BATCH_SIZE": "1",
        "INGEST_FILE_BATCH_SIZE": "2",
    }
    key = bearer(service_key("ingest"))
    push_body = json.dumps(
        {
            "ref": "refs/heads/main",
            "after": big.head(),
            "repository": {"full_name": "acme/big", "clone_url": big.file_url},
        }
    ).encode()
    push_headers = {
        "HTTP_X_GITHUB_EVENT": "push",
        "HTTP_X_GITHUB_DELIVERY": str(uuid.uuid4()),
        "HTTP_X_HUB_SIGNATURE_256": "sha256=" + hmac.new(b"busy-push-secret", push_body, hashlib.sha256).hexdigest(),
    }
    with celery_worker(queue=environment["CELERY_QUEUE"], environment=environment, log_path=tmp_path / "w.log"):
        [run_id] = api_client.post("/ingest/repo", {"repo": "acme/big"}, format="json", **key).json()["run_ids"]
        wait_for(lambda: IngestRun.objects.filter(pk=run_id, status="running", files_processed__gte=2).exists())
        # A registry change to write to the row of the repository being embedded, synced as a
        # worker's registry_sync_task does.
        answered = []
        started = time.monotonic()
        registry_repo(
            sources_yaml(
                {"name": "acme/big", "url": str(big.path), "trust": "canonical", **HANDBOOK_GLOBS},
                {"name": "acme/small", "url": str(small.path), **HANDBOOK_GLOBS},
            ),
            "acme/big is canonical",
            synced=True,
        )
        answered.append(time.monotonic() - started)
        started = time.monotonic()
        same = api_client.post("/ingest/repo", {"repo": "acme/big"}, format="json", **key)
        answered.append(time.monotonic() - started)
        started = time.monotonic()
        other = api_client.post("/ingest/repo", {"repo": "acme/small"}, format="json", **key)
        answered.append(time.monotonic() - started)
        started = time.monotonic()
        pushed = api_client.generic("POST", "/hooks/git", push_body, content_type="application/json", **push_headers)
        answered.append(time.monotonic() - started)
        still_running = IngestRun.objects.get(pk=run_id).status

        assert max(answered) < 5, answered  # before: the first waited for the whole ingest (15 s)
        assert still_running == IngestStatus.RUNNING
        assert Repository.objects.get(name="acme/big").trust == "canonical"
        small_run = IngestRun.objects.get(repository__name="acme/small")
        assert (same.status_code, same.json()["run_ids"]) == (202, [run_id])
        assert [(run["id"], run["status"], run["created"]) for run in same.json()["runs"]] == [
            (run_id, "running", False)
        ]
        assert (other.status_code, other.json()["run_ids"]) == (202, [small_run.pk])
        assert [(run["id"], run["status"], run["created"]) for run in other.json()["runs"]] == [
            (small_run.pk, "queued", True)
        ]
        assert (pushed.status_code, pushed.json()["run_ids"], pushed.json()["registry"]) == (202, [run_id], None)
        assert [(run["id"], run["status"], run["created"]) for run in pushed.json()["runs"]] == [
            (run_id, "running", False)
        ]

        run = wait_for(lambda: finished_run(run_id), timeout=120)
    assert (run.status, run.error, run.files_added, run.chunks_added) == (IngestStatus.SUCCEEDED, "", 24, 24)
    assert Repository.objects.get(name="acme/big").last_commit == big.head()
