"""Celery tasks run in-process (retries, idempotence), the ingest command, the beat schedule
sync, the admin, and the demo sources."""

from __future__ import annotations

import importlib
import io
import json

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django_celery_beat.models import PeriodicTask

from agentplatform.demo.sources import demo_sources_create
from groundtruth.ingest.foreground import ingest_foreground
from groundtruth.ingest.runs import ingest_run_request
from groundtruth.models import Chunk, IngestRun, IngestStatus, Registry, Repository
from groundtruth.services import INGEST_ALL_TASK_NAME, STALE_CLEAR_TASK_NAME, ingest_schedule_sync
from groundtruth.tasks import ingest_repo
from tests.groundtruth.factories import IngestRunFactory

pytestmark = pytest.mark.django_db


def test_network_errors_are_retried_then_the_run_fails(handbook_registered, embedding_server, settings):
    settings.INGEST_RETRY_MAX = 2
    from groundtruth.services import registry_load

    registry_load()
    repository = Repository.objects.get()
    run = ingest_run_request(repository=repository, ref=None, trigger="task").run
    embedding_server.fail_with = 503

    ingest_repo.apply(args=[repository.pk, None], kwargs={"run_id": run.pk})

    run.refresh_from_db()
    assert run.status == IngestStatus.FAILED
    assert run.attempts == 3  # the first try and two retries
    assert run.error.startswith("EmbeddingUnavailable: embedding endpoint ")
    assert run.error.endswith("answered 503 (after 2 retries)")
    assert Chunk.objects.count() == 0


def test_tasks_are_idempotent(handbook_registered, embedding_server):
    from groundtruth.services import registry_load

    registry_load()
    repository = Repository.objects.get()
    run = ingest_run_request(repository=repository, ref=None, trigger="task").run

    assert ingest_repo.apply(args=[repository.pk, None], kwargs={"run_id": run.pk}).get() == run.pk
    requests = embedding_server.requests
    # Redelivered: the run is no longer queued, nothing happens.
    assert ingest_repo.apply(args=[repository.pk, None], kwargs={"run_id": run.pk}).get() is None
    # A vanished repository: the task returns quietly.
    assert ingest_repo.apply(args=[repository.pk + 999, None]).get() is None
    assert embedding_server.requests == requests
    assert IngestRun.objects.count() == 1
    # Without a run id, the task requests its own run.
    new_run_id = ingest_repo.apply(args=[repository.pk, None]).get()
    assert IngestRun.objects.get(pk=new_run_id).status == IngestStatus.SUCCEEDED


def test_ingest_command_reports_each_run_and_fails_on_errors(handbook_registered, embedding_server):
    out = io.StringIO()
    call_command("ingest", "acme/handbook", "--no-progress", stdout=out)
    run = IngestRun.objects.get()
    registry = settings.SOURCE_REGISTRY_REPO
    registry_commit = Registry.objects.get().commit
    assert out.getvalue() == (
        f"acme/handbook @ {run.commit[:12]}: run {run.pk} succeeded: files +4 ~0 -0 =0; chunks +7 ~0 -0 =0, "
        f"7 embedded in {run.timings['total']:.1f} s\n"
        # The brand-asset registry is synced by every ingest; this registry repo has none.
        f"Brand asset registry {registry}@main:brand-assets.yml could not be read; the last good registry stays "
        "in use.\n"
        f"  error: brand-assets.yml not found at {registry_commit[:12]} of {registry}\n"
    )
    assert run.trigger == "command"

    err = io.StringIO()
    call_command("ingest", stdout=io.StringIO(), stderr=err)  # every enabled repo, with a progress bar
    assert "acme/handbook" in err.getvalue() and "4/4" not in err.getvalue()  # nothing to re-chunk: 0/0

    with pytest.raises(
        CommandError, match=r"Repository 'acme/nope' is not listed in the source registry \(last synced by a worker at "
    ):
        call_command("ingest", "acme/nope", "--no-progress", stdout=io.StringIO())
    out = io.StringIO()
    with pytest.raises(CommandError, match=r"At least one ingest run failed\."):
        call_command("ingest", "acme/handbook", "--ref", "missing", "--no-progress", stdout=out)
    assert "failed: GitError: ref 'missing' not found" in out.getvalue()


def test_schedule_follows_the_environment_until_staff_edit_it(settings):
    settings.INGEST_SCHEDULE = "17 * * * *"
    ingest_schedule_sync()
    task = PeriodicTask.objects.get(name=INGEST_ALL_TASK_NAME)
    assert (task.task, json.loads(task.kwargs), task.enabled) == (
        "groundtruth.tasks.ingest_all",
        {"trigger": "beat"},
        True,
    )
    assert (task.crontab.minute, task.crontab.hour) == ("17", "*")
    assert PeriodicTask.objects.get(name=STALE_CLEAR_TASK_NAME).interval.every == 60

    settings.INGEST_SCHEDULE = "5 3 * * *"
    ingest_schedule_sync()
    task.refresh_from_db()
    assert (task.crontab.minute, task.crontab.hour) == ("5", "3")

    # A staff member edits it in the admin: the environment no longer moves it.
    from django_celery_beat.models import CrontabSchedule

    task.crontab = CrontabSchedule.objects.create(minute="0", hour="12", timezone="UTC")
    task.save()
    settings.INGEST_SCHEDULE = "9 9 * * *"
    ingest_schedule_sync()
    task.refresh_from_db()
    assert (task.crontab.minute, task.crontab.hour) == ("0", "12")
    assert PeriodicTask.objects.filter(name=INGEST_ALL_TASK_NAME).count() == 1


def test_beat_entries_written_with_the_old_trigger_name_are_renamed_and_edited_ones_kept(settings):
    settings.INGEST_SCHEDULE = "17 * * * *"
    ingest_schedule_sync()
    PeriodicTask.objects.filter(name=INGEST_ALL_TASK_NAME).update(kwargs=json.dumps({"trigger": "schedule"}))
    ingest_schedule_sync()
    assert json.loads(PeriodicTask.objects.get(name=INGEST_ALL_TASK_NAME).kwargs) == {"trigger": "beat"}

    PeriodicTask.objects.filter(name=INGEST_ALL_TASK_NAME).update(kwargs=json.dumps({"trigger": "admin"}))
    ingest_schedule_sync()
    assert json.loads(PeriodicTask.objects.get(name=INGEST_ALL_TASK_NAME).kwargs) == {"trigger": "admin"}


def test_the_migration_renames_schedule_runs_to_beat_and_back():
    from django.apps import apps

    migration = importlib.import_module("groundtruth.migrations.0006_push_deliveries_and_beat_trigger")
    old = IngestRunFactory(trigger="schedule")
    api = IngestRunFactory(trigger="api")
    migration.schedule_runs_to_beat(apps, None)
    assert list(IngestRun.objects.order_by("pk").values_list("pk", "trigger")) == [(old.pk, "beat"), (api.pk, "api")]
    migration.beat_runs_to_schedule(apps, None)
    assert IngestRun.objects.get(pk=old.pk).trigger == "schedule"


def test_schedule_off_disables_the_task(settings):
    settings.INGEST_SCHEDULE = "17 * * * *"
    ingest_schedule_sync()
    settings.INGEST_SCHEDULE = "off"
    ingest_schedule_sync()
    assert PeriodicTask.objects.get(name=INGEST_ALL_TASK_NAME).enabled is False


def test_admin_lists_repositories_runs_chunks_and_ingests_now(
    client, django_user_model, handbook_registered, embedding_server, django_capture_on_commit_callbacks
):
    staff = django_user_model.objects.create_superuser("admin", "admin@example.invalid", "pw-123456789")
    client.force_login(staff)
    ingest_foreground(repository_name="acme/handbook", ref=None)
    repository = Repository.objects.get()
    for url in (
        "/admin/groundtruth/repository/",
        f"/admin/groundtruth/repository/{repository.pk}/change/",
        "/admin/groundtruth/ingestrun/",
        "/admin/groundtruth/chunk/?q=ACME_TOKEN",
        "/admin/groundtruth/registry/",
        f"/admin/groundtruth/registry/{repository.registry_id}/change/",
    ):
        response = client.get(url)
        assert response.status_code == 200, url
    chunks_page = client.get("/admin/groundtruth/chunk/?q=ACME_TOKEN").content.decode()
    assert "docs/index.md" in chunks_page and "README.md" not in chunks_page
    assert repository.last_commit[:12] in client.get("/admin/groundtruth/repository/").content.decode()

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post(
            "/admin/groundtruth/repository/",
            {"action": "ingest_now", "_selected_action": [repository.pk]},
            follow=True,
        )
    assert response.status_code == 200
    run = IngestRun.objects.filter(trigger="admin").get()
    assert run.status == IngestStatus.QUEUED
    assert [str(m) for m in response.context["messages"]] == [
        f'acme/handbook: queued as <a href="/admin/groundtruth/ingestrun/{run.pk}/change/">run {run.pk}</a> (queued)'
    ]
    assert len(callbacks) == 2  # the run's task and the brand-asset sync


def test_demo_sources_build_a_registry_of_local_repositories_that_ingests(tmp_path, settings, embedding_server):
    registry = demo_sources_create(root=tmp_path / "demo")
    assert registry == (tmp_path / "demo" / "registry").resolve()
    assert demo_sources_create(root=tmp_path / "demo") == registry  # a second call keeps it
    settings.SOURCE_REGISTRY_REPO = str(registry)

    runs = ingest_foreground(repository_name=None, ref=None)

    assert [(run.repository.name, run.status) for run in runs] == [
        ("acme/community-notes", "succeeded"),
        ("acme/handbook", "succeeded"),
        ("acme/platform-docs", "succeeded"),
    ]
    assert list(Repository.objects.values_list("name", "enabled", "trust")) == [
        ("acme/community-notes", True, "community"),
        ("acme/handbook", True, "canonical"),
        ("acme/platform-docs", True, "reviewed"),
        ("acme/transcripts", False, "transcript"),
    ]
    paths = set(Chunk.objects.values_list("repository__name", "path"))
    assert ("acme/handbook", "docs/operations/deploy.md") in paths
    assert ("acme/handbook", "pyproject.toml") in paths
    assert ("acme/platform-docs", "config/limits.json") in paths
    assert ("acme/platform-docs", "docs/errors.rst") in paths
    rollbacks = Chunk.objects.get(path="docs/operations/deploy.md", heading=["Deployment", "Rollbacks"])
    assert rollbacks.text.startswith("## Rollbacks\n\nRoll back by redeploying the previous release tag.")
