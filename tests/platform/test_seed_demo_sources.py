"""seed_demo's ground-truth part: demo git repositories, a registry with sources.yml and
brand-assets.yml, and the first ingest queued for the worker."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from brandassets.models import BrandAsset
from brandassets.tasks import asset_registry_sync_task
from groundtruth.models import IngestRun, IngestStatus, Repository

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo_settings(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    settings.SOURCE_REGISTRY_REPO = str(tmp_path / "demo-sources" / "registry")
    settings.GIT_CACHE_DIR = tmp_path / "git-cache"
    # What GIT_LOCAL_ROOTS defaults to for this VAR_DIR: the demo works with the defaults.
    settings.GIT_LOCAL_ROOTS = [(tmp_path / "demo-sources").resolve()]
    settings.GIT_ALLOW_PRIVATE_HOSTS = []
    return tmp_path


def test_seed_demo_builds_demo_sources_and_queues_their_first_ingest(demo_settings, django_capture_on_commit_callbacks):
    out = StringIO()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        call_command("seed_demo", "--once", stdout=out)

    registry = demo_settings / "demo-sources" / "registry"
    assert sorted(path.name for path in registry.iterdir() if path.name != ".git") == [
        "brand-assets.yml",
        "sources.yml",
    ]
    runs = list(IngestRun.objects.order_by("repository__name").values_list("repository__name", "status", "trigger"))
    assert runs == [
        ("acme/community-notes", IngestStatus.QUEUED, "command"),
        ("acme/handbook", IngestStatus.QUEUED, "command"),
        ("acme/platform-docs", IngestStatus.QUEUED, "command"),
    ]
    assert list(Repository.objects.filter(enabled=False).values_list("name", flat=True)) == ["acme/transcripts"]
    # Three ingest tasks and the brand-asset sync, sent once the runs commit (the rest are the
    # response and credential cache generation bumps of the rows seeded).
    tasks = [callback for callback in callbacks if "generation_bump" not in callback.__qualname__]
    assert len(tasks) == 4
    run_ids = ", ".join(str(pk) for pk in IngestRun.objects.order_by("repository__name").values_list("pk", flat=True))
    assert f"Demo sources: registry at {registry.resolve()}; queued ingest runs {run_ids} for the worker." in (
        out.getvalue()
    )

    # What the worker does with the sync task: the demo brand assets are served.
    result = asset_registry_sync_task()
    assert result == {"status": "synced", "listed": 10, "served": 10, "missing": 0}
    assert BrandAsset.objects.count() == 10


def test_seed_demo_leaves_an_explicit_registry_alone(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    settings.SOURCE_REGISTRY_REPO = str(tmp_path / "elsewhere" / "registry")

    call_command("seed_demo", "--once", stdout=StringIO())

    assert not (tmp_path / "demo-sources").exists()
    assert IngestRun.objects.count() == 0
