"""The life of an ingest run, in one place: every write to an IngestRun row is made here.

    requested -> queued -> running -> succeeded | failed
                   ^          |
                   +----------+  requeued: a transient error before a retry, or the worker
                                 holding it restarted
    queued or running -> failed when stale (no heartbeat in time, or no worker started it)

A repository has at most one queued or running run (partial unique constraint
`one_active_ingest_run_per_repository`): a second request gets the active run back instead of a
new one. A worker takes a run with a conditional update (`ingest_run_claim`), so a redelivered or
duplicated task never runs it twice; every later transition is conditional on the state it
leaves, so a run failed by stale detection cannot be made to succeed by the worker that lost it.

Runs are queued for the worker by the task's registered name (`INGEST_REPO_TASK`, the task
`groundtruth.tasks.ingest_repo`), so this module needs nothing from the tasks that call it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Sum
from django.utils import timezone

from agentplatform.plumbing.server_paths import server_paths_hidden
from groundtruth.models import IngestRun, IngestStatus, Repository

logger = logging.getLogger(__name__)

INGEST_REPO_TASK = "groundtruth.tasks.ingest_repo"
ACTIVE_STATUSES = (IngestStatus.QUEUED, IngestStatus.RUNNING)
STALE_RUNNING_ERROR = (
    "The worker stopped sending heartbeats (it died or was killed); the run was abandoned and "
    "the previous index is still served."
)
STALE_QUEUED_ERROR = "No worker started this run in time; the previous index is still served."
ORPHANED_RUN_NOTE = "requeued: the worker holding this run was restarted"


@dataclass(frozen=True)
class RunRequest:
    run: IngestRun
    created: bool


def ingest_run_request(*, repository: Repository, ref: str | None, trigger: str) -> RunRequest:
    """The active run of `repository`, or a new queued one at `ref` (default: the registry's as
    last synced, which the worker replaces by what sources.yml names when it re-reads it).

    The caller queues a created run for the worker (`ingest_runs_enqueue`).
    """
    ingest_runs_stale_clear()
    active = IngestRun.objects.filter(repository=repository, status__in=ACTIVE_STATUSES).first()
    if active is not None:
        return RunRequest(run=active, created=False)
    try:
        with transaction.atomic():
            run = IngestRun.objects.create(
                repository=repository, ref=ref or repository.ref, follows_registry_ref=not ref, trigger=trigger
            )
    except IntegrityError:
        # Another request created one between our read and our insert.
        active = IngestRun.objects.filter(repository=repository, status__in=ACTIVE_STATUSES).first()
        if active is None:
            raise
        return RunRequest(run=active, created=False)
    return RunRequest(run=run, created=True)


def ingest_runs_enqueue(*, runs: Iterable[IngestRun]) -> None:
    """Sends each queued run to the worker once the current transaction commits."""
    for run in runs:
        _send_after_commit(run)


def _send_after_commit(run: IngestRun) -> None:
    transaction.on_commit(lambda: _ingest_repo_send(run))


def _ingest_repo_send(run: IngestRun) -> None:
    # current_app: the project's Celery app (agentplatform/celery.py makes it current), without an
    # app importing the wiring. By name: where the task is registered (the web and worker
    # processes) this is the task's own apply_async, so CELERY_TASK_ALWAYS_EAGER still applies;
    # elsewhere it is sent by name.
    current_app.signature(
        INGEST_REPO_TASK,
        args=[run.repository_id, run.ref],
        kwargs={"run_id": run.pk, "trigger": run.trigger},
        queue=settings.CELERY_TASK_DEFAULT_QUEUE,
    ).apply_async()


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


def ingest_run_commit_record(*, run: IngestRun, commit: str) -> None:
    """Records the commit a running run resolved its ref to."""
    IngestRun.objects.filter(pk=run.pk).update(commit=commit)
    run.commit = commit


def ingest_run_ref_follow(*, run: IngestRun, ref: str) -> None:
    """Moves a running run that asked for no ref to the ref sources.yml names now (the worker's
    re-read changed it since the run was accepted)."""
    IngestRun.objects.filter(pk=run.pk).update(ref=ref)
    run.ref = ref


def ingest_run_heartbeat(*, run_id: int, progress: Mapping[str, Any]) -> bool:
    """Stamps a running run's heartbeat and progress (phase and counts); False when the run was
    finished elsewhere meanwhile (stale detection failed it), so its worker must stop.

    Called from the heartbeat's own connection: a run this connection cannot see yet (created in
    a transaction not committed) is not finished."""
    updated = IngestRun.objects.filter(pk=run_id, status=IngestStatus.RUNNING).update(
        heartbeat_at=timezone.now(), **progress
    )
    if updated:
        return True
    return not IngestRun.objects.filter(pk=run_id).exclude(status=IngestStatus.RUNNING).exists()


def ingest_run_succeed(
    *,
    run: IngestRun,
    finished_at: datetime,
    files_total: int,
    files_processed: int,
    files_skipped: list[list[str]],
    timings: dict[str, float],
    counts: Mapping[str, int],
) -> bool:
    """Marks a running run succeeded with its counts and timings; False if it is no longer
    running (failed by stale detection meanwhile): the caller must then roll its work back."""
    return bool(
        IngestRun.objects.filter(pk=run.pk, status=IngestStatus.RUNNING).update(
            status=IngestStatus.SUCCEEDED,
            phase="done",
            finished_at=finished_at,
            heartbeat_at=finished_at,
            files_total=files_total,
            files_processed=files_processed,
            files_skipped=files_skipped,
            timings=timings,
            error="",
            **counts,
        )
    )


def ingest_run_requeue(*, run: IngestRun, error: str) -> bool:
    """Puts a running run back in the queue before a retry; False if it is no longer running."""
    return bool(
        IngestRun.objects.filter(pk=run.pk, status=IngestStatus.RUNNING).update(
            status=IngestStatus.QUEUED, phase="waiting to retry", error=server_paths_hidden(error)[:4000]
        )
    )


def ingest_run_fail(*, run: IngestRun, error: str) -> bool:
    """Marks an active run failed; False if it had already finished."""
    now = timezone.now()
    return bool(
        IngestRun.objects.filter(pk=run.pk, status__in=ACTIVE_STATUSES).update(
            status=IngestStatus.FAILED, error=server_paths_hidden(error)[:4000], finished_at=now, phase="failed"
        )
    )


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
        ingest_runs_enqueue(runs=orphans)
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


def ingest_chunks_changed_since(*, moment: datetime) -> int:
    """The chunks added, updated and removed by the runs that succeeded after `moment` (what a
    fitted model has not seen: the judge's and the adapted encoder's refits are due on it)."""
    changed = IngestRun.objects.filter(status=IngestStatus.SUCCEEDED, finished_at__gt=moment).aggregate(
        total=Sum(F("chunks_added") + F("chunks_updated") + F("chunks_removed"))
    )["total"]
    return int(changed or 0)
