"""Writes of the ground-truth app: ingest runs (request, claim, fail, stale clearing) and the
beat schedule. The ingest itself is `groundtruth.ingest.pipeline.ingest_run_execute`.

Run life cycle: queued -> running -> succeeded | failed. A repository has at most one queued or
running run (partial unique constraint `one_active_ingest_run_per_repository`): a second request
gets the active run back instead of a new one. A worker takes a run with a conditional update
(`ingest_run_claim`), so a redelivered or duplicated task never runs it twice.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from agentplatform.errors import Conflict, NotFound, ServiceUnavailable
from groundtruth.ingest.git_access import GitNetworkError
from groundtruth.models import IngestRun, IngestStatus, IngestTrigger, Repository
from groundtruth.registry import RegistryInvalid, registry_load

logger = logging.getLogger(__name__)

ProgressCallback = Callable[[str, int, int], None]  # (phase, done, total)

ACTIVE_STATUSES = (IngestStatus.QUEUED, IngestStatus.RUNNING)
STALE_RUNNING_ERROR = (
    "The worker stopped sending heartbeats (it died or was killed); the run was abandoned and "
    "the previous index is still served."
)
STALE_QUEUED_ERROR = "No worker started this run in time; the previous index is still served."
INGEST_ALL_TASK_NAME = "groundtruth: re-ingest every enabled repository"
STALE_CLEAR_TASK_NAME = "groundtruth: clear stale ingest runs"


@dataclass(frozen=True)
class RunRequest:
    run: IngestRun
    created: bool


def ingest_run_request(*, repository: Repository, ref: str | None, trigger: str) -> RunRequest:
    """The active run of `repository`, or a new queued one at `ref` (default: the registry's).

    The caller enqueues `ingest_repo` for a created run (on commit).
    """
    ingest_runs_stale_clear()
    active = IngestRun.objects.filter(repository=repository, status__in=ACTIVE_STATUSES).first()
    if active is not None:
        return RunRequest(run=active, created=False)
    try:
        with transaction.atomic():
            run = IngestRun.objects.create(repository=repository, ref=ref or repository.ref, trigger=trigger)
    except IntegrityError:
        # Another request created one between our read and our insert.
        active = IngestRun.objects.filter(repository=repository, status__in=ACTIVE_STATUSES).first()
        if active is None:
            raise
        return RunRequest(run=active, created=False)
    return RunRequest(run=run, created=True)


def ingest_request(
    *, repository_name: str | None, ref: str | None, trigger: str, enqueue: bool = True
) -> list[RunRequest]:
    """Re-reads the registry, then requests a run of one repository (or of every enabled one)
    and enqueues the created runs once their transaction commits. Call it outside a transaction.

    Raises Conflict when the registry is invalid or the repository is disabled, NotFound when
    it is not listed, ServiceUnavailable when the registry repository cannot be reached.
    """
    try:
        registry_load()
    except RegistryInvalid as exc:
        raise Conflict(
            "The source registry is invalid; the last good registry and the indexed data stay served.",
            code="registry_invalid",
            errors=[{"field": settings.SOURCE_REGISTRY_PATH, "message": error} for error in exc.errors],
        ) from exc
    except GitNetworkError as exc:
        raise ServiceUnavailable(f"The registry repository cannot be reached: {exc}") from exc
    if repository_name:
        repository = Repository.objects.filter(name=repository_name).first()
        if repository is None:
            raise NotFound(f"Repository {repository_name!r} is not listed in the source registry.")
        if not repository.enabled:
            raise Conflict(f"Repository {repository_name!r} is disabled in the source registry.", code="disabled")
        repositories = [repository]
    else:
        repositories = list(Repository.objects.filter(enabled=True).order_by("name"))
    # The registry load above commits on its own (its error record must survive a refusal);
    # the runs and their enqueueing commit together.
    with transaction.atomic():
        requests = [ingest_run_request(repository=repository, ref=ref, trigger=trigger) for repository in repositories]
        _runs_enqueue(requests, enqueue=enqueue)
        if enqueue and any(request.created for request in requests):
            _brand_assets_sync_enqueue()
    return requests


def _brand_assets_sync_enqueue() -> None:
    """brand-assets.yml lives in the same registry repository: every ingest request re-syncs it
    (on the worker, so a slow brand repository never holds up the request)."""
    from brandassets.tasks import asset_registry_sync_task

    transaction.on_commit(lambda: asset_registry_sync_task.apply_async(queue=settings.CELERY_TASK_DEFAULT_QUEUE))


def _runs_enqueue(requests: list[RunRequest], *, enqueue: bool) -> None:
    from groundtruth.tasks import ingest_repo

    for request in requests:
        if request.created and enqueue:
            run = request.run
            transaction.on_commit(
                lambda run=run: ingest_repo.apply_async(
                    args=[run.repository_id, run.ref],
                    kwargs={"run_id": run.pk, "trigger": run.trigger},
                    queue=settings.CELERY_TASK_DEFAULT_QUEUE,
                )
            )


def ingest_run_claim(*, run_id: int, task_id: str = "", worker: str = "") -> IngestRun | None:
    """Moves a queued run to running for this worker; None when it is not queued any more.

    `worker` is the Celery node name: a worker that restarts under the same name finds the runs
    its previous life held (`ingest_runs_orphaned_requeue`)."""
    now = timezone.now()
    claimed = IngestRun.objects.filter(pk=run_id, status=IngestStatus.QUEUED).update(
        status=IngestStatus.RUNNING,
        started_at=now,
        heartbeat_at=now,
        finished_at=None,
        task_id=task_id[:64],
        worker=worker[:200],
        phase="starting",
        attempts=F("attempts") + 1,
    )
    if not claimed:
        return None
    return IngestRun.objects.select_related("repository").get(pk=run_id)


def ingest_run_requeue(*, run: IngestRun, error: str) -> bool:
    """Puts a running run back in the queue before a retry; False if it is no longer running."""
    return bool(
        IngestRun.objects.filter(pk=run.pk, status=IngestStatus.RUNNING).update(
            status=IngestStatus.QUEUED, phase="waiting to retry", error=error[:4000]
        )
    )


def ingest_run_fail(*, run: IngestRun, error: str) -> bool:
    """Marks an active run failed; False if it had already finished."""
    now = timezone.now()
    return bool(
        IngestRun.objects.filter(pk=run.pk, status__in=ACTIVE_STATUSES).update(
            status=IngestStatus.FAILED, error=error[:4000], finished_at=now, phase="failed"
        )
    )


ORPHANED_RUN_NOTE = "requeued: the worker holding this run was restarted"


def ingest_runs_orphaned_requeue(*, worker: str) -> list[IngestRun]:
    """Puts back in the queue the runs a worker named `worker` held when it died, and enqueues
    them. Called when a worker of that name starts: the one that held them cannot be alive (a
    Celery node name is unique while it runs), so their repositories need not wait
    INGEST_STALE_SECONDS for the heartbeat to go stale. The previous index is served throughout:
    a dead run never committed its swap."""
    if not worker:
        return []
    with transaction.atomic():
        orphans = list(
            IngestRun.objects.select_for_update().filter(status=IngestStatus.RUNNING, worker=worker).order_by("pk")
        )
        IngestRun.objects.filter(pk__in=[run.pk for run in orphans]).update(
            status=IngestStatus.QUEUED, phase="requeued", error=ORPHANED_RUN_NOTE, worker=""
        )
        _runs_enqueue([RunRequest(run=run, created=True) for run in orphans], enqueue=True)
    if orphans:
        logger.warning(
            "Worker %s restarted: requeued its interrupted ingest runs %s", worker, [run.pk for run in orphans]
        )
    return orphans


def ingest_runs_stale_clear() -> int:
    """Fails running runs whose heartbeat is older than INGEST_STALE_SECONDS and queued runs no
    worker took within INGEST_QUEUED_TIMEOUT_SECONDS. Returns how many were cleared.

    Cheap (two conditional updates); called before every new run request, when a run is read
    through the API, and every minute by beat.
    """
    now = timezone.now()
    stale_running = IngestRun.objects.filter(
        status=IngestStatus.RUNNING, heartbeat_at__lt=now - timedelta(seconds=settings.INGEST_STALE_SECONDS)
    ).update(status=IngestStatus.FAILED, error=STALE_RUNNING_ERROR, finished_at=now, phase="failed")
    stale_queued = IngestRun.objects.filter(
        status=IngestStatus.QUEUED,
        created_at__lt=now - timedelta(seconds=settings.INGEST_QUEUED_TIMEOUT_SECONDS),
    ).update(status=IngestStatus.FAILED, error=STALE_QUEUED_ERROR, finished_at=now, phase="failed")
    if stale_running or stale_queued:
        logger.warning("Cleared %s stale running and %s stale queued ingest runs", stale_running, stale_queued)
    return stale_running + stale_queued


def ingest_schedule_sync() -> None:
    """Creates or updates the beat PeriodicTasks from INGEST_SCHEDULE (startup step).

    Called after every `migrate` (post_migrate) and when beat starts (beat_init). The re-ingest
    task gets the crontab of INGEST_SCHEDULE; "off" disables it. An edit made in the admin wins:
    the task's description records the schedule this function last applied, and the crontab is
    only replaced while it still equals that value (so changing INGEST_SCHEDULE moves a schedule
    nobody edited, and never overwrites one a staff member changed). The stale-run sweep runs
    every minute.
    """
    from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

    configured = settings.INGEST_SCHEDULE
    marker = f"managed by INGEST_SCHEDULE; last applied: {configured}"
    task = PeriodicTask.objects.filter(name=INGEST_ALL_TASK_NAME).select_related("crontab").first()
    if configured != "off":
        minute, hour, day_of_month, month, day_of_week = configured.split()
        crontab, _ = CrontabSchedule.objects.get_or_create(
            minute=minute,
            hour=hour,
            day_of_month=day_of_month,
            month_of_year=month,
            day_of_week=day_of_week,
            timezone="UTC",
        )
    if task is None:
        if configured != "off":
            PeriodicTask.objects.create(
                name=INGEST_ALL_TASK_NAME,
                task="groundtruth.tasks.ingest_all",
                crontab=crontab,
                kwargs=json.dumps({"trigger": IngestTrigger.SCHEDULE}),
                description=marker,
            )
    else:
        last_applied = task.description.removeprefix("managed by INGEST_SCHEDULE; last applied: ")
        current = task.crontab and " ".join(
            [
                task.crontab.minute,
                task.crontab.hour,
                task.crontab.day_of_month,
                task.crontab.month_of_year,
                task.crontab.day_of_week,
            ]
        )
        untouched = task.description.startswith("managed by INGEST_SCHEDULE") and (
            current == last_applied or (last_applied == "off" and not task.enabled)
        )
        if untouched and last_applied != configured:
            if configured == "off":
                task.enabled = False
            else:
                task.crontab = crontab
                task.interval = None
                task.enabled = True
            task.description = marker
            task.save()
    interval, _ = IntervalSchedule.objects.get_or_create(every=60, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.get_or_create(
        name=STALE_CLEAR_TASK_NAME,
        defaults={"task": "groundtruth.tasks.ingest_runs_stale_clear_task", "interval": interval},
    )


def ingest_foreground(
    *,
    repository_name: str | None,
    ref: str | None,
    trigger: str = IngestTrigger.COMMAND,
    full: bool = False,
    progress_factory: Callable[[Repository], ProgressCallback | None] | None = None,
) -> list[IngestRun]:
    """Runs ingests in this process (the `ingest` command, tests): one repository or every
    enabled one, one after the other. A repository whose run is already active elsewhere is
    skipped (its active run is returned as is). Returns the runs, finished or failed.

    Raises what `ingest_request` raises (invalid registry, unknown or disabled repository).
    """
    from groundtruth.ingest.pipeline import ingest_run_execute

    runs: list[IngestRun] = []
    requests = ingest_request(repository_name=repository_name, ref=ref, trigger=trigger, enqueue=False)
    for request in requests:
        if not request.created:
            runs.append(request.run)
            continue
        run = ingest_run_claim(run_id=request.run.pk, task_id=f"{trigger}")
        if run is None:
            runs.append(IngestRun.objects.get(pk=request.run.pk))
            continue
        progress = progress_factory(run.repository) if progress_factory else None
        try:
            ingest_run_execute(run=run, progress=progress, full=full)
        except Exception as exc:
            ingest_run_fail(run=run, error=f"{type(exc).__name__}: {exc}")
        runs.append(IngestRun.objects.select_related("repository").get(pk=run.pk))
    return runs


def repository_reembed(
    *, repository: Repository, progress: Callable[[int, int], None] | None = None, batch_size: int = 512
) -> int:
    """Re-embeds every chunk of `repository` whose vectors are missing or were made by another
    model or dimension than the configured backend's; returns how many were embedded.

    One transaction per repository (the repository row is locked, so an ingest of it waits):
    readers keep the old vectors until it commits. Run `manage.py reembed` after changing
    EMBEDDING_BACKEND or EMBEDDING_MODEL; ingests refuse to mix models until it has run.
    """
    from groundtruth.embeddings import EmbeddingsDisabled, embedding_backend
    from groundtruth.ingest.index_text import heading_text, passage_text
    from groundtruth.models import Chunk

    backend = embedding_backend()
    if not backend.enabled:
        raise EmbeddingsDisabled("EMBEDDING_BACKEND=none: there is no model to re-embed with")
    model, dimension = backend.model_name, backend.dimension
    embedded = 0
    with transaction.atomic():
        Repository.objects.select_for_update().filter(pk=repository.pk).first()
        stale = (
            Chunk.objects.filter(repository=repository)
            .extra(
                where=[
                    "(embedding IS NULL OR embedding_model <> %s OR vector_dims(embedding) <> %s"
                    " OR (heading_embedding IS NULL AND jsonb_array_length(heading) > 0))"
                ],
                params=[model, dimension],
            )
            .order_by("id")
        )
        ids = list(stale.values_list("id", flat=True))
        for start in range(0, len(ids), batch_size):
            chunks = list(Chunk.objects.filter(id__in=ids[start : start + batch_size]).order_by("id"))
            texts: dict[str, str] = {}
            titles: set[str] = set()
            for chunk in chunks:
                heading = [str(part) for part in chunk.heading or []]
                texts.setdefault(
                    chunk.content_hash, passage_text(repository_name=repository.name, heading=heading, text=chunk.text)
                )
                if title := heading_text(heading):
                    titles.add(title)
            ordered_titles = sorted(titles)
            embedded_vectors = backend.embed([*texts.values(), *ordered_titles])
            vectors = dict(zip(texts, embedded_vectors[: len(texts)], strict=True))
            title_vectors = dict(zip(ordered_titles, embedded_vectors[len(texts) :], strict=True))
            for chunk in chunks:
                title = heading_text([str(part) for part in chunk.heading or []])
                chunk.embedding = vectors[chunk.content_hash]
                chunk.heading_embedding = title_vectors[title] if title else None
                chunk.embedding_model = model
            Chunk.objects.bulk_update(chunks, ["embedding", "heading_embedding", "embedding_model"], batch_size=500)
            embedded += len(chunks)
            if progress:
                progress(embedded, len(ids))
    return embedded
