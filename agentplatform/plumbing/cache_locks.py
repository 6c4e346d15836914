"""A lock held in the default cache (Redis: every process and host using it sees the key), for
work of which one runs at a time across the deployment (a model fit, an adaptation).

The key is added only when it is absent, with an expiry, so a holder killed mid-way frees it
after that time. The holder writes a token of its own and deletes the key only while it still
holds that token: a holder that outlived its expiry (the lock then taken by another) leaves the
other's lock alone. The check and the delete are two cache calls, so a lock that expires and is
taken again between them is still deleted; the expiries are hours, the gap is one round trip.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

from django.core.cache import cache


@contextlib.contextmanager
def cache_lock(key: str, *, timeout: float) -> Iterator[bool]:
    """Takes the lock for the `with` block if it is free; yields whether it was taken (nothing
    waits). Releases it at the end only if this holder still holds it."""
    token = uuid.uuid4().hex
    taken = bool(cache.add(key, token, timeout=timeout))
    try:
        yield taken
    finally:
        if taken and cache.get(key) == token:
            cache.delete(key)
