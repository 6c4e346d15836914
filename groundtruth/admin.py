"""Admin of the ground-truth ingest: the registry and its repositories, ingest runs, chunks.

Rows come from the registry and the ingest, so they are read-only here (no add, edit or delete):
sources.yml is the place to change a repository. Staff can start an ingest ("Ingest now") and
edit the beat schedule under Periodic tasks (django-celery-beat). A repository links to its runs
and its chunks (the change lists filtered to it); a run to its repository and its chunks.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import flatten_fieldsets
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from agentplatform.plumbing.admin_display import duration_text, moment_text
from agentplatform.plumbing.errors import ApplicationError
from groundtruth import (
    admin_questions,  # noqa: F401  (the audit of questions, registered on import)
    selectors,
    services,
)
from groundtruth.models import (
    AdaptedEncoder,
    Chunk,
    IngestRun,
    IngestStatus,
    IngestTrigger,
    Registry,
    RelevanceJudge,
    Repository,
)


class _ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


# The phases of groundtruth/ingest/pipeline.py in the order it runs them (the keys of a run's timings).
INGEST_PHASES = ("registry", "fetch", "select", "store", "chunk_embed_write", "swap")


def _changes_text(*, added: int, updated: int, removed: int) -> str:
    """What a run changed, zeros left out: `12 added, 1 updated`, or `no change`."""
    counts = [(added, "added"), (updated, "updated"), (removed, "removed")]
    return ", ".join(f"{count:,} {what}" for count, what in counts if count) or "no change"


def _changelist_link(model: str, repository: Repository, text: str) -> SafeString:
    """A link to the change list of `model` (`ingestrun`, `chunk`) filtered to the repository."""
    url = reverse(f"admin:groundtruth_{model}_changelist") + f"?repository__id__exact={repository.pk}"
    return format_html('<a href="{}">{}</a>', url, text)


def _lines(items: Iterable[str]) -> SafeString | str:
    """A list as one item per line (globs and owners are read better so than as JSON)."""
    html = format_html_join("", "<li><code>{}</code></li>", ((item,) for item in items))
    return format_html('<ul class="plain-list">{}</ul>', html) if html else "—"


class RepositoryInline(admin.TabularInline):
    model = Repository
    readonly_fields = ("name", "enabled", "trust", "ref", "last_commit", "chunk_count")
    fields = readonly_fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Registry)
class RegistryAdmin(_ReadOnlyAdmin):
    list_display = ["location", "short_commit", "loaded_at", "has_error", "last_error_at"]
    readonly_fields = ["location", "commit", "loaded_at", "last_error", "last_error_at", "content"]
    inlines = [RepositoryInline]

    @admin.display(description="commit")
    def short_commit(self, registry: Registry) -> str:
        return registry.commit[:12]

    @admin.display(boolean=True, description="last load failed")
    def has_error(self, registry: Registry) -> bool:
        return bool(registry.last_error)


@admin.action(description="Ingest now")
def ingest_now(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Repository]) -> None:
    for repository in queryset.order_by("name"):
        try:
            [item] = services.ingest_request(repository_name=repository.name, ref=None, trigger=IngestTrigger.ADMIN)
        except ApplicationError as exc:
            details = "; ".join(error["message"] for error in exc.errors or [])
            modeladmin.message_user(request, f"{repository.name}: {exc.detail} {details}".strip(), messages.ERROR)
            continue
        verb = "queued as" if item.created else "already has"
        run_url = reverse("admin:groundtruth_ingestrun_change", args=[item.run.pk])
        modeladmin.message_user(
            request,
            format_html(
                '{}: {} <a href="{}">run {}</a> ({})', repository.name, verb, run_url, item.run.pk, item.run.status
            ),
        )


@admin.register(Repository)
class RepositoryAdmin(_ReadOnlyAdmin):
    list_display = [
        "name",
        "state",
        "trust",
        "ref",
        "short_commit",
        "files",
        "chunks_link",
        "runs_link",
        "last_ingested",
    ]
    list_filter = ["enabled", "trust", "is_transcript"]
    search_fields = ["name", "url"]
    actions = [ingest_now]
    fieldsets = [
        (None, {"fields": ["name", "registry", "url", "ref", "trust", "enabled", "is_transcript"]}),
        (
            "Files indexed",
            {
                "fields": ["owners_list", "include_list", "exclude_list"],
                "description": "As sources.yml lists them: the registry repository is the place to change them.",
            },
        ),
        (
            "Index",
            {
                "fields": [
                    "state",
                    "last_commit",
                    "last_ingested_at",
                    "index_version",
                    "file_count",
                    "chunks_link",
                    "runs_link",
                    "created_at",
                    "updated_at",
                ]
            },
        ),
    ]
    readonly_fields = flatten_fieldsets(fieldsets)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Repository]:
        return selectors.repository_list()

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        # The changelist needs "change" for actions to show; the form stays read-only.
        return bool(request.user and request.user.is_staff) if obj is None else False

    def get_model_perms(self, request: HttpRequest) -> dict[str, bool]:
        # The index links the list as "View", not "Change": the "change" above only enables the action.
        return {**super().get_model_perms(request), "change": False}

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        # "to change", Django's word when actions are allowed, promises an edit the pages do not offer.
        return super().changelist_view(request, {"title": "Select repository to view", **(extra_context or {})})

    @admin.display(description="state")
    def state(self, repository: Repository) -> str:
        return selectors.repository_state(repository)

    @admin.display(description="last commit")
    def short_commit(self, repository: Repository) -> str:
        return repository.last_commit[:12]

    @admin.display(description="files", ordering="file_count")
    def files(self, repository: Repository) -> str:
        return f"{repository.file_count:,}"

    @admin.display(description="last ingested (UTC)", ordering="last_ingested_at")
    def last_ingested(self, repository: Repository) -> str:
        return moment_text(repository.last_ingested_at)

    @admin.display(description="chunks", ordering="chunk_count")
    def chunks_link(self, repository: Repository) -> SafeString:
        return _changelist_link("chunk", repository, f"{repository.chunk_count:,}")

    @admin.display(description="runs")
    def runs_link(self, repository: Repository) -> SafeString | str:
        if getattr(repository, "latest_run_id", None) is None:
            return "none yet"
        return _changelist_link("ingestrun", repository, "all runs")

    @admin.display(description="owners")
    def owners_list(self, repository: Repository) -> SafeString | str:
        return _lines(repository.owners)

    @admin.display(description="include")
    def include_list(self, repository: Repository) -> SafeString | str:
        return _lines(repository.include)

    @admin.display(description="exclude")
    def exclude_list(self, repository: Repository) -> SafeString | str:
        return _lines(repository.exclude)


@admin.register(IngestRun)
class IngestRunAdmin(_ReadOnlyAdmin):
    list_display = [
        "id",
        "repository",
        "status_and_phase",
        "trigger",
        "short_commit",
        "files_changed",
        "chunks_changed",
        "created",
        "took",
        "short_error",
    ]
    list_filter = ["status", "trigger", "repository"]
    search_fields = ["repository__name", "commit", "error"]
    list_select_related = ["repository"]
    fieldsets = [
        (None, {"fields": ["repository", "chunks_link", "ref", "commit", "status", "trigger", "phase", "error"]}),
        (
            "Files and chunks",
            {
                "fields": [
                    "files_total",
                    "files_processed",
                    "files_changed",
                    "files_unchanged",
                    "files_skipped_list",
                    "chunks_changed",
                    "chunks_unchanged",
                    "chunks_embedded",
                ]
            },
        ),
        (
            "Timing",
            {"fields": ["created_at", "started_at", "heartbeat_at", "finished_at", "took", "phase_timings"]},
        ),
        ("Worker", {"fields": ["attempts", "task_id", "worker"]}),
    ]
    readonly_fields = flatten_fieldsets(fieldsets)

    @admin.display(description="commit")
    def short_commit(self, run: IngestRun) -> str:
        return run.commit[:12]

    @admin.display(description="status", ordering="status")
    def status_and_phase(self, run: IngestRun) -> str:
        """The phase says what a running run does and where a failed one stopped."""
        if run.status in (IngestStatus.RUNNING, IngestStatus.FAILED) and run.phase:
            return f"{run.status} ({run.phase.replace('_', ', ')})"
        return run.status

    @admin.display(description="created (UTC)", ordering="created_at")
    def created(self, run: IngestRun) -> str:
        return moment_text(run.created_at)

    @admin.display(description="error")
    def short_error(self, run: IngestRun) -> SafeString | str:
        if len(run.error) <= 60:
            return run.error
        return format_html('<span title="{}">{}…</span>', run.error, run.error[:59])

    @admin.display(description="files")
    def files_changed(self, run: IngestRun) -> str:
        return _changes_text(added=run.files_added, updated=run.files_updated, removed=run.files_removed)

    @admin.display(description="chunks")
    def chunks_changed(self, run: IngestRun) -> str:
        return _changes_text(added=run.chunks_added, updated=run.chunks_updated, removed=run.chunks_removed)

    @admin.display(description="took")
    def took(self, run: IngestRun) -> str:
        if run.started_at is None or run.finished_at is None:
            return "—"
        return duration_text((run.finished_at - run.started_at) / timedelta(seconds=1))

    @admin.display(description="time per phase")
    def phase_timings(self, run: IngestRun) -> SafeString | str:
        # JSONB keeps no key order: the phases in the order the pipeline runs them, the total last.
        order = {phase: position for position, phase in enumerate(INGEST_PHASES)}
        names = sorted(run.timings, key=lambda phase: (phase == "total", order.get(phase, len(order)), phase))
        phases = [(name.replace("_", ", "), duration_text(run.timings[name])) for name in names]
        if not phases:
            return "—"
        return format_html_join(" · ", "{} <strong>{}</strong>", phases)

    @admin.display(description="files skipped")
    def files_skipped_list(self, run: IngestRun) -> SafeString | str:
        if not run.files_skipped:
            return "none"
        rows = ((path, reason) for path, reason in run.files_skipped)
        return format_html('<ul class="plain-list">{}</ul>', format_html_join("", "<li><code>{}</code>: {}</li>", rows))

    @admin.display(description="indexed chunks")
    def chunks_link(self, run: IngestRun) -> SafeString:
        return _changelist_link("chunk", run.repository, f"the chunks of {run.repository.name}")


@admin.register(Chunk)
class ChunkAdmin(_ReadOnlyAdmin):
    list_display = ["id", "repository", "path", "lines", "heading_trail", "trust", "embedding_model"]
    list_filter = ["repository", "trust"]
    search_fields = ["path", "text", "repository__name"]
    list_select_related = ["repository"]
    show_full_result_count = False
    fields = [
        "repository",
        "source_file",
        "path",
        "commit",
        "start_line",
        "end_line",
        "heading",
        "trust",
        "ordinal",
        "content_hash",
        "embedding_model",
        "lexeme_count",
        "text",
    ]
    readonly_fields = tuple(fields)  # type: ignore[arg-type]  # the same names, all read-only

    @admin.display(description="lines", ordering="start_line")
    def lines(self, chunk: Chunk) -> str:
        return f"{chunk.start_line}-{chunk.end_line}"

    @admin.display(description="heading")
    def heading_trail(self, chunk: Chunk) -> str:
        return " > ".join(chunk.heading or [])


@admin.register(RelevanceJudge)
class RelevanceJudgeAdmin(_ReadOnlyAdmin):
    """Each fitted relevance judge: when, on how many mined pairs, and how it scored on the mined
    queries held out from its own training (the newest one that loads is in use)."""

    list_display = [
        "id",
        "fitted_at",
        "pair_count",
        "query_count",
        "held_out_accuracy",
        "held_out_pairwise_accuracy",
        "index_version",
        "chunk_count",
        "fit_seconds",
        "peak_rss_mb",
    ]
    fields = [
        "fitted_at",
        "index_version",
        "chunk_count",
        "repositories",
        "pair_count",
        "query_count",
        "held_out_query_count",
        "held_out_accuracy",
        "held_out_pairwise_accuracy",
        "thresholds",
        "default_threshold",
        "seed",
        "fit_seconds",
        "peak_rss_mb",
        "artifact",
    ]
    readonly_fields = tuple(fields)  # type: ignore[arg-type]  # the same names, all read-only


@admin.register(AdaptedEncoder)
class AdaptedEncoderAdmin(_ReadOnlyAdmin):
    """Each adapted encoder: when fitted, on how many mined queries, how the base model and it
    scored on the mined queries held out from its training, what the fit cost, and where the
    switch of the index to it stands (at most one is active)."""

    list_display = ["id", "fitted_at", "status", "model_name", "query_count", "accuracy", "fit", "staged_count"]
    list_filter = ["status"]
    fields = [
        "fitted_at",
        "status",
        "status_changed_at",
        "error",
        "model_name",
        "base_model",
        "directory",
        "index_version",
        "repositories",
        "chunk_count",
        "mined_query_count",
        "query_count",
        "held_out_query_count",
        "held_out_accuracy_before",
        "held_out_accuracy",
        "seed",
        "fit_seconds",
        "peak_rss_mb",
        "staged_count",
    ]
    readonly_fields = tuple(fields)  # type: ignore[arg-type]  # the same names, all read-only

    @admin.display(description="held-out accuracy")
    def accuracy(self, encoder: AdaptedEncoder) -> str:
        """The base model's, then this one's, on the same held-out mined queries."""
        return f"{encoder.held_out_accuracy_before:.3f} → {encoder.held_out_accuracy:.3f}"

    @admin.display(description="fit")
    def fit(self, encoder: AdaptedEncoder) -> str:
        return f"{duration_text(encoder.fit_seconds)}, {encoder.peak_rss_mb:,.0f} MB"
