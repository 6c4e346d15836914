"""Reads of the ground-truth ingest: repositories with their state, the registry, runs."""

from __future__ import annotations

from django.conf import settings
from django.db.models import OuterRef, QuerySet, Subquery

from agentplatform.errors import InvalidInput, NotFound
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


def repository_list() -> QuerySet[Repository]:
    """Every repository the registry listed, ordered by name, with its latest run annotated
    (one query whatever the number of repositories)."""
    latest = IngestRun.objects.filter(repository=OuterRef("pk")).order_by("-created_at", "-id")
    return Repository.objects.annotate(
        latest_run_id=Subquery(latest.values("id")[:1]),
        latest_run_status=Subquery(latest.values("status")[:1]),
        latest_run_finished_at=Subquery(latest.values("finished_at")[:1]),
        latest_run_error=Subquery(latest.values("error")[:1]),
        latest_run_trigger=Subquery(latest.values("trigger")[:1]),
    ).order_by("name")


def registry_current() -> Registry | None:
    return Registry.objects.filter(location=registry_location(settings.SOURCE_REGISTRY_PATH)).first()


def ingest_run_get(*, run_id: int) -> IngestRun:
    run = IngestRun.objects.select_related("repository").filter(pk=run_id).first()
    if run is None:
        raise NotFound(f"No ingest run with id {run_id}.")
    return run


def ingest_run_list(
    *, repository_name: str | None, status: str | None, limit: int, before: int | None
) -> list[IngestRun]:
    """The newest `limit` runs (by id, newest first), of one repository and in one status when
    given, older than run `before` when given. A repository the registry never listed is a 400
    (as /search's `repo`): an empty page would hide a misspelt name."""
    runs = IngestRun.objects.select_related("repository").order_by("-id")
    if repository_name is not None:
        if not Repository.objects.filter(name=repository_name).exists():
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
