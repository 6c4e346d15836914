"""Reads of the ground-truth ingest: repositories with their state, the registry, runs."""

from __future__ import annotations

from django.conf import settings
from django.db.models import OuterRef, Q, QuerySet, Subquery

from agentplatform.plumbing.errors import InvalidInput, NotFound
from groundtruth.models import IngestRun, IngestStatus, Registry, Repository
from groundtruth.registry_files import registry_location


class RepositoryState:
    """What /repos and the admin show as a repository's state."""

    DISABLED = "disabled"  # not (or no longer) enabled in the registry
    QUEUED = "queued"
    RUNNING = "running"
    FAILED = "failed"  # the last run failed; the previous index (if any) is still served
    READY = "ready"  # indexed, last run succeeded
    NEW = "new"  # listed, never indexed


def repository_state(repository: Repository) -> str:
    """Needs the annotations of `repository_list()` (latest_run_status)."""
    if not repository.enabled:
        return RepositoryState.DISABLED
    latest = getattr(repository, "latest_run_status", None)
    if latest in (IngestStatus.QUEUED, IngestStatus.RUNNING, IngestStatus.FAILED):
        return str(latest)
    return RepositoryState.READY if repository.last_commit else RepositoryState.NEW


def repository_visible_queryset(*, viewer: object) -> QuerySet[Repository]:
    """The repositories `viewer` (request.user: a bearer Principal or a staff user) may see: all
    of them, or, for a key limited to some (Principal.repository_scope), those it names and those
    whose registry `owners` list one of its owners. Every read a key makes starts here; a
    repository outside it answers as one that does not exist."""
    scope = getattr(viewer, "repository_scope", None)
    if scope is None:
        return Repository.objects.all()
    visible = Q(name__in=sorted(scope.repositories))
    for owner in sorted(scope.owners):
        visible |= Q(owners__contains=[owner])
    return Repository.objects.filter(visible)


def repository_scope_unknown_names(*, repositories: list[str], owners: list[str]) -> tuple[list[str], list[str]]:
    """Of the repository names and registry owners given, those no listed repository has."""
    known = set(Repository.objects.filter(name__in=repositories).values_list("name", flat=True))
    unknown_owners = [owner for owner in owners if not Repository.objects.filter(owners__contains=[owner]).exists()]
    return [name for name in repositories if name not in known], unknown_owners


def repository_list(*, visible: QuerySet[Repository] | None = None) -> QuerySet[Repository]:
    """Every repository the registry listed (of `visible`, when given), ordered by name, with its
    latest run annotated (one query whatever the number of repositories)."""
    latest = IngestRun.objects.filter(repository=OuterRef("pk")).order_by("-created_at", "-id")
    return (
        (visible if visible is not None else Repository.objects.all())
        .annotate(
            latest_run_id=Subquery(latest.values("id")[:1]),
            latest_run_status=Subquery(latest.values("status")[:1]),
            latest_run_finished_at=Subquery(latest.values("finished_at")[:1]),
            latest_run_error=Subquery(latest.values("error")[:1]),
            latest_run_trigger=Subquery(latest.values("trigger")[:1]),
        )
        .order_by("name")
    )


# What a key limited to some repositories reads instead of the registry's last load error, which
# may name any repository of sources.yml (and so ones outside the key's scope).
REGISTRY_ERROR_WITHHELD = (
    "The last load of the source registry failed; its errors are shown to unscoped keys and staff only."
)


def registry_current(*, viewer: object = None) -> Registry | None:
    """The registry row; for a `viewer` limited to some repositories (repository_visible_queryset),
    with its last load error withheld (never saved)."""
    registry = Registry.objects.filter(location=registry_location(settings.SOURCE_REGISTRY_PATH)).first()
    if registry is not None and registry.last_error and getattr(viewer, "repository_scope", None) is not None:
        registry.last_error = REGISTRY_ERROR_WITHHELD
    return registry


def ingest_run_get(*, run_id: int, visible: QuerySet[Repository] | None = None) -> IngestRun:
    """The run `run_id` (of a repository of `visible`, when given; another is a 404 like a run
    that does not exist)."""
    runs = IngestRun.objects.select_related("repository")
    if visible is not None:
        runs = runs.filter(repository__in=visible)
    run = runs.filter(pk=run_id).first()
    if run is None:
        raise NotFound(f"No ingest run with id {run_id}.")
    return run


def ingest_run_list(
    *,
    repository_name: str | None,
    status: str | None,
    limit: int,
    before: int | None,
    visible: QuerySet[Repository] | None = None,
) -> list[IngestRun]:
    """The newest `limit` runs (by id, newest first) of the repositories of `visible` (all when
    None), of one repository and in one status when given, older than run `before` when given. A
    repository the registry never listed (or not visible) is a 400 (as /search's `repo`): an empty
    page would hide a misspelt name."""
    repositories = visible if visible is not None else Repository.objects.all()
    runs = IngestRun.objects.select_related("repository").order_by("-id")
    if visible is not None:
        runs = runs.filter(repository__in=visible)
    if repository_name is not None:
        if not repositories.filter(name=repository_name).exists():
            raise InvalidInput(
                f"Unknown repository {repository_name}: no repository of that name was ever listed in the registry.",
                code="unknown_repository",
                errors=[{"field": "repo", "message": f"unknown repository {repository_name}"}],
            )
        runs = runs.filter(repository__name=repository_name)
    if status is not None:
        runs = runs.filter(status=status)
    if before is not None:
        runs = runs.filter(pk__lt=before)
    return list(runs[:limit])
