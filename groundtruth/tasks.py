"""Celery tasks of the ground-truth ingest. Each takes ids and plain JSON values.

- `ingest_repo(repo_id, ref=None, run_id=None, trigger="task")`: runs one repository's ingest.
  Idempotent: without run_id it requests a run (getting the active one if there is one, in which
  case it returns at once); with run_id it claims that run and does nothing if another worker
  has it or it has finished. Network errors (git fetch, embedding endpoint) are retried up to
  INGEST_RETRY_MAX times with exponential backoff and jitter; the run goes back to `queued`
  in between. Any other error fails the run at once.
- `ingest_all(trigger="beat")`: re-reads the registry and requests a run of every enabled
  repository (the beat schedule calls it).
- `registry_sync_task()`: re-reads sources.yml into the Registry and Repository rows; queued by
  a push to the registry repository (web hosts read no git, so they ask a worker).
- `ingest_runs_stale_clear_task()`: fails runs whose worker died (beat, every minute).
- `judge_fit_task()`: fits a new relevance judge (`groundtruth/judge/fitting.py`), queued by
  `ingest_repo` after an ingest that changed the index enough (`judge_refit_due`); one fit at a
  time (a cache lock), and none when a fit that ran meanwhile made it no longer due.
- `encoder_adapt_task()`: with ENCODER_ADAPTATION_ENABLED, fits an adapted encoder
  (`groundtruth/adaptation/`) and, when it beats the serving model on its held-out mined queries
  by ENCODER_ADAPTATION_MIN_GAIN, stages every chunk's vectors in its space and switches the index
  to it; queued like the judge's fit after an ingest that changed the index enough
  (`encoder_adaptation_due`). One at a time; a failure leaves the active encoder and the index.
- Both fits run on the models queue (CELERY_MODELS_QUEUE, the Procfile's `models` worker), so
  that ingests never wait behind them.

A worker that starts requeues the runs its previous life (same node name) held when it was
killed (`worker_ready` below), so a restarted worker resumes them at once.
"""

from __future__ import annotations

import logging
import random

from celery import shared_task
from celery.signals import worker_ready
from django.conf import settings
from django.db import transaction

from agentplatform.plumbing.cache_locks import cache_lock
from agentplatform.plumbing.errors import ApplicationError
from groundtruth.adaptation.adaptation_lock import AdaptationRunning, encoder_adaptation_lock
from groundtruth.adaptation.backoff import adaptation_failure_forget, adaptation_failure_record
from groundtruth.adaptation.fitting import adaptation_gain_shortfall, encoder_adapt, encoder_adaptation_due
from groundtruth.adaptation.switching import SwitchFailed, encoder_activate
from groundtruth.embeddings import EmbeddingError, EmbeddingUnavailable
from groundtruth.ingest.git_access import GitNetworkError
from groundtruth.ingest.pipeline import ingest_run_execute
from groundtruth.ingest.runs import (
    INGEST_REPO_TASK,
    ingest_run_claim,
    ingest_run_fail,
    ingest_run_request,
    ingest_run_requeue,
    ingest_runs_orphaned_requeue,
    ingest_runs_stale_clear,
)
from groundtruth.judge.fitting import judge_fit, judge_refit_due
from groundtruth.models import AdaptationStatus, AdaptedEncoder, IngestTrigger, Repository
from groundtruth.question_audit import asked_questions_purge
from groundtruth.services import REGISTRY_SYNC_TASK, ingest_request, registry_reload

logger = logging.getLogger(__name__)

TRANSIENT_ERRORS = (GitNetworkError, EmbeddingUnavailable)


@shared_task(bind=True, name=INGEST_REPO_TASK, acks_late=True)
def ingest_repo(
    self, repo_id: int, ref: str | None = None, run_id: int | None = None, trigger: str = IngestTrigger.TASK
) -> int | None:
    """Ingests one repository; returns the id of the run it carried out, or None."""
    repository = Repository.objects.filter(pk=repo_id).first()
    if repository is None:
        return None
    if run_id is None:
        request = ingest_run_request(repository=repository, ref=ref, trigger=trigger)
        if not request.created:
            logger.info("Repository %s already has run %s active", repository.name, request.run.pk)
            return None
        run_id = request.run.pk
    run = ingest_run_claim(run_id=run_id, task_id=self.request.id or "", worker=self.request.hostname or "")
    if run is None:
        return None
    try:
        ingest_run_execute(run=run)
    except TRANSIENT_ERRORS as exc:
        retries = self.request.retries
        if retries >= settings.INGEST_RETRY_MAX or not ingest_run_requeue(run=run, error=f"retrying: {exc}"):
            ingest_run_fail(run=run, error=f"{type(exc).__name__}: {exc} (after {retries} retries)")
            return run_id
        countdown = settings.INGEST_RETRY_BACKOFF_SECONDS * 2**retries
        countdown += random.uniform(0, countdown / 2)  # jitter spreads retries of many repos
        raise self.retry(
            args=[repo_id, ref],
            kwargs={"run_id": run_id, "trigger": trigger},
            countdown=countdown,
            max_retries=settings.INGEST_RETRY_MAX,
        ) from exc
    except Exception:
        # The run is already marked failed with its error; the task itself ends quietly
        # (retrying a terminal error cannot help).
        logger.exception("Ingest run %s of %s failed", run_id, repository.name)
        return run_id
    if judge_refit_due():
        # The ingest has committed; on_commit runs this at once outside a transaction, and after
        # the commit inside one (a test's, a caller's).
        transaction.on_commit(judge_fit_task.delay)
    if encoder_adaptation_due():
        transaction.on_commit(encoder_adapt_task.delay)
    return run_id


JUDGE_FIT_LOCK = "groundtruth:judge-fit"
# Longer than a fit of the development set's 6,000 chunks takes on two busy cores; a worker
# killed mid-fit frees the lock after it.
JUDGE_FIT_LOCK_SECONDS = 3600


@shared_task(name="groundtruth.tasks.judge_fit_task")
def judge_fit_task() -> int | None:
    """Fits and stores a new relevance judge; returns its id, or None (another fit runs, none
    is due any more, or the corpus is too small: the previous judge stays, logged)."""
    with cache_lock(JUDGE_FIT_LOCK, timeout=JUDGE_FIT_LOCK_SECONDS) as taken:
        if not taken:
            logger.info("A relevance judge is being fitted already")
            return None
        try:
            if not judge_refit_due():
                return None
            return judge_fit().pk
        except ApplicationError as exc:
            logger.warning("Relevance judge not refitted: %s", exc.detail)
            return None


@shared_task(name="groundtruth.tasks.encoder_adapt_task")
def encoder_adapt_task() -> int | None:
    """Fits an adapted encoder and switches the index to it; returns its id, or None (another
    adaptation runs, none is due any more, or it failed: logged, the active encoder stays)."""
    try:
        with encoder_adaptation_lock():
            if not encoder_adaptation_due():
                return None
            # A staging cut short (its worker died) is resumed rather than fitted again: its fit
            # passed the check below when its staging began.
            encoder = AdaptedEncoder.objects.filter(status=AdaptationStatus.STAGING).first()
            if encoder is None:
                encoder = encoder_adapt()
                shortfall = adaptation_gain_shortfall(encoder)
                if shortfall is not None:
                    # Not a failure: the row stays `fitted` on this index version, so no fit is
                    # due again until the corpus changes (encoder_adaptation_due).
                    logger.warning(
                        "Adapted encoder #%d fitted but not switched to: %s; `manage.py encoder_adapt --activate %d` "
                        "switches to it anyway",
                        encoder.pk,
                        shortfall,
                        encoder.pk,
                    )
                    return None
            encoder_activate(encoder=encoder)
            adaptation_failure_forget()
            return encoder.pk
    except AdaptationRunning as exc:  # before ApplicationError: not a failure, the other one goes on
        logger.info("Encoder not adapted: %s", exc.detail)
        return None
    except ApplicationError as exc:
        # A corpus too small to adapt to (a demo, a first repository) is the service working as
        # it should, on by default: said, not warned of. A training that failed is a fault.
        level = logging.INFO if exc.code == "adaptation_corpus_too_small" else logging.WARNING
        logger.log(level, "Encoder not adapted: %s", exc.detail)
        adaptation_failure_record(reason=exc.code)
        return None
    except (SwitchFailed, EmbeddingError) as exc:
        logger.warning("Adapted encoder not switched to: %s", exc)
        adaptation_failure_record(reason=type(exc).__name__)
        return None


@shared_task(name="groundtruth.tasks.ingest_all")
def ingest_all(trigger: str = IngestTrigger.BEAT) -> list[int]:
    """Requests a run of every enabled repository; returns the ids of the runs it created."""
    try:
        registry_reload()
        requests = ingest_request(repository_name=None, ref=None, trigger=trigger)
    except ApplicationError as exc:
        # An invalid registry (Conflict) or an unreachable one (ServiceUnavailable): the last
        # good registry and index stay served; the error is on the Registry row for the admin.
        logger.error("Re-ingest of every repository not started: %s %s", exc.detail, exc.errors or "")
        return []
    return [request.run.pk for request in requests if request.created]


@shared_task(name=REGISTRY_SYNC_TASK)
def registry_sync_task() -> str:
    """Re-reads sources.yml; returns the commit now served. An invalid or missing file is recorded
    on the Registry row (the admin and GET /repos show it) and the last good one stays; an
    unreachable registry repository is logged, and the next push, ingest or beat re-reads it."""
    try:
        registry = registry_reload()
    except ApplicationError as exc:
        logger.error("The source registry was not re-read: %s %s", exc.detail, exc.errors or "")
        return ""
    return registry.commit


@shared_task(name="groundtruth.tasks.ingest_runs_stale_clear_task")
def ingest_runs_stale_clear_task() -> int:
    return ingest_runs_stale_clear()


@shared_task(name="groundtruth.tasks.asked_questions_purge_task")
def asked_questions_purge_task() -> int:
    """Daily (beat): the audit of questions older than QUESTION_AUDIT_RETENTION_DAYS goes."""
    return asked_questions_purge()


@worker_ready.connect
def _requeue_runs_of_my_previous_life(sender, **kwargs) -> None:
    try:
        ingest_runs_orphaned_requeue(worker=sender.hostname)
    except Exception:  # the worker must start even when the database is down; stale clearing remains
        logger.exception("Could not requeue the ingest runs of worker %s", sender.hostname)
