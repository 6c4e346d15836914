"""The ingest admin's pages, read-only: a repository's globs one per line and links to its runs and
chunks, no delete anywhere, readable run titles, durations and lists that fit."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse
from pytest_django.asserts import assertContains, assertNotContains

from agentplatform.plumbing.admin_display import duration_text, moment_text
from groundtruth.models import IngestRun, IngestStatus, Repository
from tests.adminpages import changelist_cells, changelist_headers
from tests.groundtruth.factories import IngestRunFactory, RepositoryFactory

pytestmark = pytest.mark.django_db

FINISHED = datetime(2026, 11, 20, 9, 30, 4, 500000, tzinfo=UTC)


@pytest.fixture
def handbook() -> Repository:
    return RepositoryFactory(
        name="demo/handbook",
        trust="canonical",
        owners=["docs-team", "platform-team"],
        include=["docs/**/*.md", "**/*.{yml,yaml}"],
        exclude=[],
        last_commit="4f1c2a9e8b7d6c5f4e3d2c1b0a9f8e7d6c5b4a39",
        last_ingested_at=FINISHED,
        file_count=1204,
        chunk_count=15230,
    )


@pytest.fixture
def succeeded(handbook) -> IngestRun:
    return IngestRunFactory(
        repository=handbook,
        commit=handbook.last_commit,
        files_added=2,
        files_removed=1,
        chunks_added=30,
        chunks_updated=4,
        files_skipped=[["docs/diagram.png", "not a text file"], ["docs/huge.md", "larger than 1 MB"]],
        timings={"fetch": 0.412, "select": 0.008, "chunk_embed_write": 2.731, "swap": 0.052, "total": 3.203},
        started_at=FINISHED - timedelta(seconds=3.4),
        finished_at=FINISHED,
    )


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.0004, "0 ms"), (0.412, "412 ms"), (3.4, "3.4 s"), (59.94, "59.9 s"), (75, "1 min 15 s"), (7440, "2 h 4 min")],
)
def test_durations_read_in_the_unit_that_fits(seconds, text):
    assert duration_text(seconds) == text


def test_moments_are_short_and_in_the_current_time_zone():
    assert (moment_text(FINISHED), moment_text(None)) == ("2026-11-20 09:30", "—")


def test_a_run_is_titled_by_its_repository_name(succeeded):
    assert str(succeeded) == f"demo/handbook run #{succeeded.pk} (succeeded)"


def test_repository_list_fits_with_links_to_its_chunks_and_runs(admin_client, handbook, succeeded):
    never_run = RepositoryFactory(name="demo/config", enabled=True)

    response = admin_client.get(reverse("admin:groundtruth_repository_changelist"))

    assert response.context["title"] == "Select repository to view"
    assert changelist_headers(response) == [
        "Name",
        "State",
        "Trust",
        "Ref",
        "Last commit",
        "Files",
        "Chunks",
        "Runs",
        "Last ingested (UTC)",
    ]
    assert changelist_cells(response) == [
        ["demo/config", "new", "reviewed", "main", "-", "0", "0", "none yet", "—"],
        [
            "demo/handbook",
            "ready",
            "canonical",
            "main",
            "4f1c2a9e8b7d",
            "1,204",
            "15,230",
            "all runs",
            "2026-11-20 09:30",
        ],
    ]
    chunks = reverse("admin:groundtruth_chunk_changelist")
    runs = reverse("admin:groundtruth_ingestrun_changelist")
    assertContains(response, f'<a href="{chunks}?repository__id__exact={handbook.pk}">15,230</a>', html=True)
    assertContains(response, f'<a href="{runs}?repository__id__exact={handbook.pk}">all runs</a>', html=True)
    assertContains(response, f'<a href="{chunks}?repository__id__exact={never_run.pk}">0</a>', html=True)


def test_repositories_cannot_be_deleted_or_edited_only_ingested(admin_client, handbook):
    changelist = admin_client.get(reverse("admin:groundtruth_repository_changelist"))
    delete_page = admin_client.get(reverse("admin:groundtruth_repository_delete", args=[handbook.pk]))
    bulk_delete = admin_client.post(
        reverse("admin:groundtruth_repository_changelist"),
        {"action": "delete_selected", "_selected_action": [handbook.pk], "post": "yes"},
    )
    edit = admin_client.post(reverse("admin:groundtruth_repository_change", args=[handbook.pk]), {"name": "x/y"})

    assert [value for value, _ in changelist.context["action_form"].fields["action"].choices] == ["", "ingest_now"]
    assert delete_page.status_code == 403
    assert bulk_delete.status_code == 302  # back to the list: no such action
    assert edit.status_code == 403
    assert list(Repository.objects.values_list("name", flat=True)) == ["demo/handbook"]


def test_repository_page_lists_owners_and_globs_one_per_line_and_links_runs_and_chunks(
    admin_client, handbook, succeeded
):
    response = admin_client.get(reverse("admin:groundtruth_repository_change", args=[handbook.pk]))

    assert response.status_code == 200
    assertContains(
        response,
        '<ul class="plain-list"><li><code>docs-team</code></li><li><code>platform-team</code></li></ul>',
        html=True,
    )
    assertContains(
        response,
        '<ul class="plain-list"><li><code>docs/**/*.md</code></li><li><code>**/*.{yml,yaml}</code></li></ul>',
        html=True,
    )
    assertNotContains(response, '["docs-team", "platform-team"]')
    runs = reverse("admin:groundtruth_ingestrun_changelist")
    assertContains(response, f'<a href="{runs}?repository__id__exact={handbook.pk}">all runs</a>', html=True)
    assertNotContains(response, 'class="deletelink"')
    assertNotContains(response, 'name="_save"')


def test_runs_of_a_repository_list_what_changed_and_how_long_it_took(admin_client, handbook, succeeded):
    failed = IngestRunFactory(
        repository=handbook,
        commit="",
        status=IngestStatus.FAILED,
        phase="fetch",
        trigger="beat",
        error="GitError: fetching https://git.example.com/demo/handbook.git failed: could not resolve host",
        started_at=FINISHED + timedelta(minutes=1),
        finished_at=FINISHED + timedelta(minutes=2, seconds=15),
    )
    IngestRunFactory(repository=RepositoryFactory(name="demo/other"))

    response = admin_client.get(
        reverse("admin:groundtruth_ingestrun_changelist"), {"repository__id__exact": handbook.pk}
    )

    created = moment_text(succeeded.created_at)
    assert changelist_headers(response) == [
        "ID",
        "Repository",
        "Status",
        "Trigger",
        "Commit",
        "Files",
        "Chunks",
        "Created (UTC)",
        "Took",
        "Error",
    ]
    assert changelist_cells(response) == [
        [
            str(failed.pk),
            "demo/handbook",
            "failed (fetch)",
            "beat",
            "-",
            "no change",
            "no change",
            created,
            "1 min 15 s",
            "GitError: fetching https://git.example.com/demo/handbook.gi…",
        ],
        [
            str(succeeded.pk),
            "demo/handbook",
            "succeeded",
            "api",
            "4f1c2a9e8b7d",
            "2 added, 1 removed",
            "30 added, 4 updated",
            created,
            "3.4 s",
            "-",
        ],
    ]
    assertContains(response, f'<span title="{failed.error}">', count=1)


def test_run_page_titles_the_run_and_shows_durations_skipped_files_and_its_chunks(admin_client, succeeded):
    response = admin_client.get(reverse("admin:groundtruth_ingestrun_change", args=[succeeded.pk]))

    assert response.context["subtitle"] == f"demo/handbook run #{succeeded.pk} (succeeded)"
    assertContains(
        response,
        "fetch <strong>412 ms</strong> · select <strong>8 ms</strong> · chunk, embed, write <strong>2.7 s</strong>"
        " · swap <strong>52 ms</strong> · total <strong>3.2 s</strong>",
        count=1,
    )
    assertContains(
        response,
        '<ul class="plain-list"><li><code>docs/diagram.png</code>: not a text file</li>'
        "<li><code>docs/huge.md</code>: larger than 1 MB</li></ul>",
        html=True,
    )
    chunks = reverse("admin:groundtruth_chunk_changelist")
    assertContains(
        response,
        f'<a href="{chunks}?repository__id__exact={succeeded.repository_id}">the chunks of demo/handbook</a>',
        html=True,
    )
    assertNotContains(response, '"chunk_embed_write"')  # no JSON dump
    assertNotContains(response, 'class="deletelink"')


def test_a_run_that_changed_nothing_says_so_beside_its_full_bar(admin_client, handbook):
    run = IngestRunFactory(repository=handbook, files_total=4, files_processed=0, files_unchanged=4)

    response = admin_client.get(reverse("admin:groundtruth_ingestrun_change", args=[run.pk]))

    assertContains(response, '<span id="ingest-files">no change: 4 files unchanged</span>', html=True)
    assertContains(response, '<progress id="ingest-bar" max="1" value="1"></progress>', html=True)
    assertNotContains(response, 'id="ingest-files-processed"')


def test_a_run_that_rechunked_files_counts_them_of_the_total(admin_client, handbook):
    run = IngestRunFactory(repository=handbook, files_total=4, files_processed=1, files_unchanged=3)

    response = admin_client.get(reverse("admin:groundtruth_ingestrun_change", args=[run.pk]))

    assertContains(
        response,
        '<span id="ingest-files">files <strong id="ingest-files-processed">1</strong>'
        ' of <strong id="ingest-files-total">4</strong></span>',
        html=True,
    )


def test_run_page_writes_moments_as_the_run_list_does(admin_client, succeeded):
    change_page = admin_client.get(reverse("admin:groundtruth_ingestrun_change", args=[succeeded.pk]))
    run_list = admin_client.get(reverse("admin:groundtruth_ingestrun_changelist"))

    assertContains(change_page, '<div class="readonly">2026-11-20 09:30</div>', html=True)  # finished at
    assertNotContains(change_page, "a.m.")
    assert changelist_cells(run_list)[0][7] == moment_text(succeeded.created_at)
    assert f'<div class="readonly">{moment_text(succeeded.created_at)}</div>' in change_page.content.decode()


def test_the_index_names_the_apps_in_words_and_offers_read_only_lists_as_view(admin_client):
    response = admin_client.get(reverse("admin:index"))

    apps = {app["app_label"]: app for app in response.context["app_list"]}
    assert {label: app["name"] for label, app in apps.items()} == {
        "agents": "Agents",
        "auth": "Authentication and Authorization",
        "brandassets": "Brand assets",
        "chat": "Chat",
        "coin": "Coin",
        "django_celery_beat": "Periodic Tasks",
        "groundtruth": "Ground truth",
    }
    repositories = next(model for model in apps["groundtruth"]["models"] if model["object_name"] == "Repository")
    assert repositories["view_only"] is True
    assertContains(
        response,
        f'<a href="{reverse("admin:groundtruth_repository_changelist")}" class="viewlink"'
        ' aria-describedby="groundtruth-repository">View</a>',
        html=True,
    )


def test_ingest_now_queues_from_the_synced_rows_without_reading_git(
    admin_client, handbook, settings, tmp_path, django_capture_on_commit_callbacks
):
    """A web host has no git access: the admin's action decides from the Repository rows."""
    settings.SOURCE_REGISTRY_REPO = str(tmp_path / "no-such-registry")
    settings.GIT_CACHE_DIR = tmp_path / "no-git-cache"
    disabled = RepositoryFactory(name="demo/off", enabled=False)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = admin_client.post(
            reverse("admin:groundtruth_repository_changelist"),
            {"action": "ingest_now", "_selected_action": [handbook.pk, disabled.pk]},
            follow=True,
        )

    run = IngestRun.objects.get()
    assert (run.repository, run.status, run.trigger, run.ref, run.follows_registry_ref) == (
        handbook,
        "queued",
        "admin",
        "main",
        True,
    )
    assert len(callbacks) == 2  # the run's task and the brand-asset sync
    run_url = reverse("admin:groundtruth_ingestrun_change", args=[run.pk])
    assert [str(message) for message in response.context["messages"]] == [
        f'demo/handbook: queued as <a href="{run_url}">run {run.pk}</a> (queued)',
        "demo/off: Repository 'demo/off' is disabled in the source registry.",
    ]
    assert not (tmp_path / "no-git-cache").exists()
