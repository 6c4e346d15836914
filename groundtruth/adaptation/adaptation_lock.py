"""One adaptation at a time: `encoder_adapt_task` and `manage.py encoder_adapt` (a fit, a
staging, a switch) both hold this lock for all they do. Staged vectors are one row per chunk, so
two stagings overwrite each other's, and a switch deletes every staged vector when it is done:
two adaptations at once would re-embed what the other overwrote inside the switch's transaction
(every repository's index lock held, ingests waiting) and leave the index on whichever switched
last.

The lock is a key in the default cache (Redis: every process and host using it sees the key),
added only when it is absent, with an expiry: a process killed while it holds the lock frees it
after that time. Its value names the holder (host, pid, since when, a token:
agentplatform/plumbing/cache_locks.py), which `encoder_adapt --lock-status` prints and a refusal
states; `encoder_adapt --break-lock` clears it when that process is known to be dead, instead of
waiting hours for the expiry.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from django.conf import settings

from agentplatform.plumbing.cache_locks import cache_lock, cache_lock_break, cache_lock_holder
from agentplatform.plumbing.errors import Conflict

ENCODER_ADAPT_LOCK = "groundtruth:encoder-adapt"
# Longer than the training's own limit plus staging a large index (100,000 chunks: about 2 h on
# two busy cores); a process killed mid-way frees the lock after it.
ENCODER_ADAPT_LOCK_EXTRA_SECONDS = 6 * 3600


class AdaptationRunning(Conflict):
    """Another adaptation holds the lock; nothing was done."""

    code = "adaptation_running"


@contextlib.contextmanager
def encoder_adaptation_lock() -> Iterator[None]:
    """Holds the adaptation lock for the `with` block; raises AdaptationRunning at once (nothing
    waits, nothing is changed), naming the holder, when another adaptation holds it."""
    timeout = int(settings.ENCODER_ADAPTATION_TIMEOUT_SECONDS) + ENCODER_ADAPT_LOCK_EXTRA_SECONDS
    with cache_lock(ENCODER_ADAPT_LOCK, timeout=timeout) as taken:
        if not taken:
            # Read after the refusal: a holder that released it in between is not named.
            holder = cache_lock_holder(ENCODER_ADAPT_LOCK)
            raise AdaptationRunning(
                "Another adaptation of the encoder (a fit, a staging or a switch) is running"
                + (f", held by {holder}" if holder is not None else "")
                + "; nothing was changed."
            )
        yield


def encoder_adaptation_lock_holder() -> str | None:
    """Who holds the adaptation lock (host, pid, since when, token), or None when it is free."""
    return cache_lock_holder(ENCODER_ADAPT_LOCK)


def encoder_adaptation_lock_break() -> str | None:
    """Deletes the adaptation lock whoever holds it; returns whom it belonged to (None: it was
    free). Only for a holder whose process is known to be dead: a live one would run beside the
    next adaptation."""
    return cache_lock_break(ENCODER_ADAPT_LOCK)
