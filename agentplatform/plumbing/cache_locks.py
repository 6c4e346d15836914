"""A lock held in the default cache (Redis: every process and host using it sees the key), for
work of which one runs at a time across the deployment (a model fit, an adaptation).

The key is added only when it is absent, with an expiry, so a holder killed mid-way frees it
after that time. Its value names the holder (`LockHolder`: host, process id, when it was taken,
and a random token of its own), so an operator can see who holds it (`cache_lock_holder`) and,
once that process is known to be dead, clear it (`cache_lock_break`) rather than wait for the
expiry.

The holder deletes the key only while it still holds its own value; the comparison and the
delete are one Lua script, so one step on the Redis server: a holder that outlived its expiry
(the lock then taken by another) leaves the other's lock alone, however close together the two
are. The script compares bytes, so it is given the value as Django's RedisCache stored it (its
serializer's pickle) under the full key (prefix and version: `make_and_validate_key`).

Only Django's RedisCache is supported (settings/cache.py): a lock in a per-process cache would
let every process hold it at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache
from django.core.exceptions import ImproperlyConfigured

# KEYS[1]: the lock's full key; ARGV[1]: the holder's stored value. Deletes the key only while it
# holds that value; returns 1 when it deleted it.
_RELEASE_LUA = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"
# KEYS[1]: the lock's full key. Deletes it whoever holds it and returns what it held (nil: it was
# free), in one step, so the holder reported is the one deleted. (GETDEL does the same from Redis
# 6.2 on; a script runs on any Redis the rest of the service runs on.)
_BREAK_LUA = "local value = redis.call('get', KEYS[1]) redis.call('del', KEYS[1]) return value"


@dataclass(frozen=True)
class LockHolder:
    """Who holds a cache lock, written as the lock's value (JSON text) when it is taken."""

    host: str
    pid: int
    taken_at: datetime  # UTC, to the second
    token: str  # random: two holders on one host and pid (a restarted container) still differ

    @classmethod
    def of_this_process(cls) -> LockHolder:
        return cls(
            host=socket.gethostname(),
            pid=os.getpid(),
            taken_at=datetime.now(UTC).replace(microsecond=0),
            token=uuid.uuid4().hex,
        )

    def value(self) -> str:
        return json.dumps(
            {"host": self.host, "pid": self.pid, "taken_at": self.taken_at.isoformat(), "token": self.token}
        )

    @classmethod
    def parse(cls, value: Any) -> LockHolder | None:
        """The holder a lock's value names, or None when the value is not one."""
        try:
            fields = json.loads(value)
            return cls(
                host=str(fields["host"]),
                pid=int(fields["pid"]),
                taken_at=datetime.fromisoformat(fields["taken_at"]),
                token=str(fields["token"]),
            )
        except (TypeError, ValueError, KeyError):
            return None

    def __str__(self) -> str:
        return f"{self.host} pid {self.pid} since {self.taken_at:%Y-%m-%d %H:%M:%S} UTC, token {self.token}"


def _redis_cache() -> RedisCache:
    default = caches["default"]
    if not isinstance(default, RedisCache):
        raise ImproperlyConfigured(
            "CACHES['default'] must be django.core.cache.backends.redis.RedisCache: cache locks are keys that "
            "every process and host sees."
        )
    return default


def _run_script(cache: RedisCache, lua: str, key: str, *args: bytes) -> Any:
    full_key = cache.make_and_validate_key(key)
    # Django's RedisCache makes a redis-py client per call from its pool; neither it nor its
    # serializer is public API (django-stubs leaves them out), and a script needs the client.
    client = cache._cache.get_client(full_key, write=True)  # type: ignore[attr-defined]
    # register_script only hashes the text: EVALSHA, loading the script once when Redis lacks it.
    return client.register_script(lua)(keys=[full_key], args=list(args), client=client)


def _holder_described(value: Any) -> str:
    holder = LockHolder.parse(value)
    # A value this module did not write as a holder: a process from before holders were named
    # wrote a bare token (a deploy while it runs).
    return str(holder) if holder is not None else f"an unnamed holder ({value!r})"


@contextlib.contextmanager
def cache_lock(key: str, *, timeout: float) -> Iterator[bool]:
    """Takes the lock for the `with` block if it is free; yields whether it was taken (nothing
    waits). Releases it at the end only if this holder still holds it."""
    cache = _redis_cache()
    value = LockHolder.of_this_process().value()
    taken = bool(cache.add(key, value, timeout=timeout))
    try:
        yield taken
    finally:
        if taken:
            stored = cache._cache._serializer.dumps(value)  # type: ignore[attr-defined]  # as `add` stored it
            _run_script(cache, _RELEASE_LUA, key, stored)


def cache_lock_holder(key: str) -> str | None:
    """Who holds the lock (host, pid, since when, token), or None when it is free."""
    value = _redis_cache().get(key)
    return None if value is None else _holder_described(value)


def cache_lock_break(key: str) -> str | None:
    """Deletes the lock whoever holds it; returns whom it belonged to, or None when it was free.
    For an operator, once the holder's process is known to be dead: a live holder would go on
    beside the next one, and its own release would then leave the next one's lock alone."""
    cache = _redis_cache()
    stored = _run_script(cache, _BREAK_LUA, key)
    if stored is None:
        return None
    return _holder_described(cache._cache._serializer.loads(stored))  # type: ignore[attr-defined]
