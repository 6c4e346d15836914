"""Admin of the ground-truth ingest: the registry and its repositories, ingest runs, chunks.

Rows come from the registry and the ingest, so they are read-only here: sources.yml is the
place to change a repository. Staff can start an ingest ("Ingest now") and edit the beat
schedule under Periodic tasks (django-celery-beat).
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from agentplatform.errors import ApplicationError
from groundtruth import selectors, services
from groundtruth.models import Chunk, IngestRun, IngestTrigger, Registry, Repository


class _ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


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
        modeladmin.message_user(request, f"{repository.name}: {verb} run {item.run.pk} ({item.run.status})")


@admin.register(Repository)
class RepositoryAdmin(_ReadOnlyAdmin):
    list_display = [
        "name",
        "state",
        "enabled",
        "trust",
        "ref",
        "short_commit",
        "chunk_count",
        "file_count",
        "last_ingested_at",
    ]
    list_filter = ["enabled", "trust", "is_transcript"]
    search_fields = ["name", "url"]
    actions = [ingest_now]
    readonly_fields = [
        "name",
        "registry",
        "url",
        "ref",
        "trust",
        "owners",
        "include",
        "exclude",
        "enabled",
        "is_transcript",
        "last_commit",
        "last_ingested_at",
        "index_version",
        "file_count",
        "chunk_count",
        "created_at",
        "updated_at",
    ]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Repository]:
        return selectors.repository_list()

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        # The changelist needs "change" for actions to show; the form stays read-only.
        return bool(request.user and request.user.is_staff) if obj is None else False

    @admin.display(description="state")
    def state(self, repository: Repository) -> str:
        return selectors.repository_state(repository)

    @admin.display(description="last commit")
    def short_commit(self, repository: Repository) -> str:
        return repository.last_commit[:12]


@admin.register(IngestRun)
class IngestRunAdmin(_ReadOnlyAdmin):
    list_display = [
        "id",
        "repository",
        "status",
        "trigger",
        "phase",
        "short_commit",
        "files_added",
        "files_updated",
        "files_removed",
        "files_unchanged",
        "chunks_added",
        "chunks_removed",
        "chunks_embedded",
        "created_at",
        "finished_at",
        "short_error",
    ]
    list_filter = ["status", "trigger", "repository"]
    search_fields = ["repository__name", "commit", "error"]
    list_select_related = ["repository"]
    readonly_fields = [field.name for field in IngestRun._meta.fields]

    @admin.display(description="commit")
    def short_commit(self, run: IngestRun) -> str:
        return run.commit[:12]

    @admin.display(description="error")
    def short_error(self, run: IngestRun) -> str:
        return run.error[:120]


@admin.register(Chunk)
class ChunkAdmin(_ReadOnlyAdmin):
    list_display = ["id", "repository", "path", "start_line", "end_line", "heading_trail", "trust", "embedding_model"]
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

    @admin.display(description="heading")
    def heading_trail(self, chunk: Chunk) -> str:
        return " > ".join(chunk.heading or [])
