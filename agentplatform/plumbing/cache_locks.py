"""A lock held in the default cache (Redis: every process and host using it sees the key), for
work of which one runs at a time across the deployment (a model fit, an adaptation).

The key is added only when it is absent, with an expiry, so a holder killed mid-way frees it
after that time. The holder writes a token of its own and deletes the key only while it still
holds that token; the comparison and the delete are one Lua script, so one step on the Redis
server: a holder that outlived its expiry (the lock then taken by another) leaves the other's
lock alone, however close together the two are. The script compares bytes, so it is given the
token as Django's RedisCache stored it (its serializer's pickle) under the full key (prefix and
version: `make_and_validate_key`).

Only Django's RedisCache is supported (settings/cache.py): a lock in a per-process cache would
let every process hold it at once.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache
from django.core.exceptions import ImproperlyConfigured

# KEYS[1]: the lock's full key; ARGV[1]: the holder's stored value. Deletes the key only while it
# holds that value; returns 1 when it deleted it.
_RELEASE_LUA = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"


def _redis_cache() -> RedisCache:
    default = caches["default"]
    if not isinstance(default, RedisCache):
        raise ImproperlyConfigured(
            "CACHES['default'] must be django.core.cache.backends.redis.RedisCache: cache locks are keys that "
            "every process and host sees."
        )
    return default


@contextlib.contextmanager
def cache_lock(key: str, *, timeout: float) -> Iterator[bool]:
    """Takes the lock for the `with` block if it is free; yields whether it was taken (nothing
    waits). Releases it at the end only if this holder still holds it."""
    cache = _redis_cache()
    token = uuid.uuid4().hex
    taken = bool(cache.add(key, token, timeout=timeout))
    try:
        yield taken
    finally:
        if taken:
            full_key = cache.make_and_validate_key(key)
            # Django's RedisCache makes a redis-py client per call from its pool; neither it nor
            # its serializer is public API (django-stubs leaves them out), and a script needs both.
            client = cache._cache.get_client(full_key, write=True)  # type: ignore[attr-defined]
            stored = cache._cache._serializer.dumps(token)  # type: ignore[attr-defined]  # as `add` stored it
            # register_script only hashes the text: EVALSHA, loading the script once when Redis lacks it.
            client.register_script(_RELEASE_LUA)(keys=[full_key], args=[stored], client=client)
