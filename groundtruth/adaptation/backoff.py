"""An automatic adaptation that failed is not tried again on every ingest.

A refused fit (a corpus too small, a training that failed or ran out of time) leaves no
AdaptedEncoder row, and a failed switch leaves a FAILED one, which `encoder_adaptation_due`
does not count: without this, every later ingest (Celery beat re-ingests every repository) would
queue the same fit again, and a training that times out would burn both cores for
ENCODER_ADAPTATION_TIMEOUT_SECONDS each time. So the task records the failure in the cache
(shared by every host), and the next adaptation is due only once the corpus has changed by
ENCODER_ADAPTATION_REFIT_CHANGED_SHARE since then, or after ENCODER_ADAPTATION_RETRY_SECONDS
(the record expires), or on another index version. `manage.py encoder_adapt` is not held back:
an operator who asks for a fit gets one.
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from groundtruth.ingest.index_text import INDEX_VERSION
from groundtruth.ingest.runs import ingest_chunks_changed_since
from groundtruth.models import Repository

ADAPTATION_FAILED_KEY = "groundtruth:encoder-adapt-failed"


def adaptation_failure_record(*, reason: str) -> None:
    """Holds automatic adaptations back until the corpus changes enough (or the record expires)."""
    chunks = sum(Repository.objects.filter(enabled=True).values_list("chunk_count", flat=True))
    cache.set(
        ADAPTATION_FAILED_KEY,
        {"at": timezone.now().isoformat(), "index_version": INDEX_VERSION, "chunks": chunks, "reason": reason},
        timeout=settings.ENCODER_ADAPTATION_RETRY_SECONDS,
    )


def adaptation_held_back() -> bool:
    """Whether a recorded failure still holds automatic adaptations back."""
    failure = cache.get(ADAPTATION_FAILED_KEY)
    if not isinstance(failure, dict) or failure.get("index_version") != INDEX_VERSION:
        return False
    changed = ingest_chunks_changed_since(moment=datetime.fromisoformat(failure["at"]))
    return changed < settings.ENCODER_ADAPTATION_REFIT_CHANGED_SHARE * max(1, int(failure["chunks"]))


def adaptation_failure_forget() -> None:
    """After a successful switch: nothing holds the next adaptation back."""
    cache.delete(ADAPTATION_FAILED_KEY)
