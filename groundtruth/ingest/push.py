"""What a verified push (POST /hooks/git, groundtruth/ingest/push_events.py) does, and its deliveries.

- A push to the ref a registered repository follows (`refs/heads/<ref>`, or `refs/tags/<ref>`
  for a tag) queues that repository's ingest exactly as POST /ingest/repo does: decided from the
  registry as last synced into PostgreSQL (the worker re-reads sources.yml before it ingests),
  and a repository with a run queued or running gets that run back.
- A push to the registry repository's `SOURCE_REGISTRY_REF` queues a re-read of sources.yml on a
  worker (an invalid one is recorded and the last good one stays served, as for every re-read)
  and, through `registry_pushed`, of brand-assets.yml. Nothing here reads git: a web host needs
  no git token, egress or cache.
- Anything else is ignored, with the reason: another event (a ping), a deleted ref, another
  ref, a repository the registry does not list (or lists disabled).

Repositories are found by URL (`repository_url_key`: host and path), not by name: the names in
sources.yml are labels of our own, which need not be the host's `owner/name`.

A delivery id is handled once. The first delivery claims its id (a row with no outcome yet,
inserted under a unique constraint) and records its outcome when done; a later delivery with the
same id is answered from that outcome (the runs as they are now) and queues nothing. A first
delivery that fails (the database is down) gives its id back, so that the host's retry
is handled afresh; one whose process died is taken over once it is older than
`ABANDONED_CLAIM_SECONDS`. Rows older than `DELIVERY_RETENTION` are deleted as deliveries
arrive (hosts redeliver within days).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from agentplatform.plumbing.errors import Conflict
from groundtruth.ingest.push_events import PushHook, repository_url_key
from groundtruth.ingest.runs import RunRequest
from groundtruth.models import IngestRun, IngestTrigger, PushDelivery, Registry, Repository
from groundtruth.selectors import registry_current
from groundtruth.services import ingest_runs_request, registry_sync_enqueue
from groundtruth.signals import registry_pushed

logger = logging.getLogger(__name__)

DELIVERY_RETENTION = timedelta(days=30)
# Far longer than a first delivery takes (a few queries; it reads no git): an older claim without an
# outcome died with its process.
ABANDONED_CLAIM_SECONDS = 900


@dataclass
class PushOutcome:
    """`ignored`: why nothing was done; else the runs requested and the registry re-read, if the
    push was to the registry repository. `replayed`: answered from an earlier delivery."""

    ignored: str = ""
    runs: list[RunRequest] = field(default_factory=list)
    registry: Registry | None = None
    replayed: bool = False


def push_hook_handle(*, hook: PushHook) -> PushOutcome:
    """Does what the push asks (see the module's docstring), once per delivery id.

    Raises Conflict while the first delivery of this id is still being handled. Call it outside a
    transaction."""
    if hook.delivery_id:
        earlier = _delivery_claim(hook)
        if earlier is not None:
            return earlier
    try:
        outcome = _push_outcome(hook)
    except BaseException:
        if hook.delivery_id:
            PushDelivery.objects.filter(delivery_id=hook.delivery_id, outcome__isnull=True).delete()
        raise
    logger.info(
        "Push delivery %s (%s %s, %s): %s",
        hook.delivery_id or "without id",
        hook.provider,
        hook.event,
        hook.ref or "-",
        f"ignored: {outcome.ignored}" if outcome.ignored else f"runs {[item.run.pk for item in outcome.runs]}",
    )
    if hook.delivery_id:
        recorded: dict[str, Any] = (
            {"ignored": outcome.ignored}
            if outcome.ignored
            else {"run_ids": [item.run.pk for item in outcome.runs], "registry": outcome.registry is not None}
        )
        PushDelivery.objects.filter(delivery_id=hook.delivery_id).update(outcome=recorded)
    return outcome


def _delivery_claim(hook: PushHook) -> PushOutcome | None:
    """Claims the delivery id for this request (None), or the outcome of its earlier delivery."""
    now = timezone.now()
    PushDelivery.objects.filter(received_at__lt=now - DELIVERY_RETENTION).delete()
    try:
        with transaction.atomic():
            PushDelivery.objects.create(
                delivery_id=hook.delivery_id, provider=hook.provider, event=hook.event[:64], received_at=now
            )
        return None
    except IntegrityError:
        pass
    earlier = PushDelivery.objects.filter(delivery_id=hook.delivery_id).first()
    if earlier is None:  # handled and given back between our insert and this read: claim it again
        return _delivery_claim(hook)
    if earlier.outcome is None:
        abandoned = PushDelivery.objects.filter(
            pk=earlier.pk,
            outcome__isnull=True,
            received_at__lt=now - timedelta(seconds=ABANDONED_CLAIM_SECONDS),
        ).update(received_at=now)
        if abandoned:
            return None
        raise Conflict(
            f"Delivery {hook.delivery_id} is still being handled; send it again in a minute.",
            code="delivery_in_progress",
            headers={"Retry-After": "60"},
        )
    return _outcome_replayed(earlier.outcome)


def _outcome_replayed(recorded: dict[str, Any]) -> PushOutcome:
    if recorded.get("ignored"):
        return PushOutcome(ignored=str(recorded["ignored"]), replayed=True)
    run_ids = [run_id for run_id in recorded.get("run_ids") or [] if isinstance(run_id, int)]
    runs = IngestRun.objects.select_related("repository").in_bulk(run_ids)
    return PushOutcome(
        runs=[RunRequest(run=runs[run_id], created=False) for run_id in run_ids if run_id in runs],
        registry=registry_current() if recorded.get("registry") else None,
        replayed=True,
    )


def _push_outcome(hook: PushHook) -> PushOutcome:
    if not hook.is_push:
        return PushOutcome(ignored=f"{hook.event} event: only pushes are acted on")
    if hook.deleted:
        return PushOutcome(ignored=f"{hook.ref} was deleted")
    keys = {repository_url_key(url) for url in hook.repository_urls}
    to_registry = repository_url_key(settings.SOURCE_REGISTRY_REPO) in keys
    registry_pushed_to = to_registry and _ref_matches(hook.ref, settings.SOURCE_REGISTRY_REF)
    listed = _repositories_at(keys)
    followed = [repository for repository in listed if repository.enabled and _ref_matches(hook.ref, repository.ref)]
    if not followed and not registry_pushed_to:
        return PushOutcome(ignored=_ignored_reason(hook, listed, to_registry))

    # Decided from the registry as last synced into PostgreSQL: a web host reads no git. The
    # worker re-reads sources.yml before it ingests (a repository removed since fails its run with
    # the reason), and a push to the registry repository queues that re-read on a worker.
    runs = ingest_runs_request(repositories=followed, ref=None, trigger=IngestTrigger.PUSH) if followed else []
    if not registry_pushed_to:
        return PushOutcome(runs=runs)
    registry_sync_enqueue()
    if not any(item.created for item in runs):
        registry_pushed.send(sender=Registry)
    return PushOutcome(runs=runs, registry=registry_current())


def _repositories_at(keys: set[str]) -> list[Repository]:
    # The registry lists tens of repositories, not thousands: their URLs are compared here.
    return [
        repository for repository in Repository.objects.order_by("name") if repository_url_key(repository.url) in keys
    ]


def _ref_matches(pushed: str, configured: str) -> bool:
    return pushed in {configured, f"refs/heads/{configured}", f"refs/tags/{configured}"}


def _ignored_reason(hook: PushHook, listed: list[Repository], to_registry: bool) -> str:
    named = hook.repository_label or hook.repository_urls[0]
    if not listed and not to_registry:
        return f"{named} is not a repository of the source registry"
    if listed and not any(repository.enabled for repository in listed):
        return f"{', '.join(repository.name for repository in listed)}: disabled in the source registry"
    followed = [repository.ref for repository in listed if repository.enabled]
    if to_registry:
        followed.append(settings.SOURCE_REGISTRY_REF)
    refs = ", ".join(f"refs/heads/{ref}" for ref in sorted(set(followed)))
    return f"{hook.ref} is not a followed ref of {named} (followed: {refs})"
