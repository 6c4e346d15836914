"""The `counters` cache's django-redis client: a request's rate-limit count and the cache
generations it needs in one Redis round trip.

django-ratelimit counts a request with two cache calls (`django_ratelimit.core.get_usage` with
`increment=True`): `add(key, 1, timeout)`, which starts the window's counter, and, when the
counter was already there (every request of a window but its first), `incr(key)`. Each is a
round trip, and a request with a cached answer to check then reads the cache generations in a
third (agentplatform/plumbing/cache_generations.py). On a cached read those round trips were most of the
request's work besides gunicorn's and Django's own.

`counting_in_one_call` arms this client for one get_usage call: its `add` then runs one Lua
script that sets the counter with its expiry if it is absent, else increments it, and reads the
generation keys asked for; the `incr` of the same key that follows is answered from that result.
django-ratelimit still decides the window, the counter's key, the limit and the answer; the
counting stays one atomic step in Redis (the script), so concurrent workers still hand out each
count once. Outside that context, and for any call that is not exactly that pair (another value,
another key, no expiry), this is django-redis's DefaultClient unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django_redis.client import DefaultClient
from django_redis.exceptions import ConnectionInterrupted
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from agentplatform.plumbing.cache_generations import GENERATION_LUA

# KEYS[1]: the counter; KEYS[2..]: generation keys. ARGV: the counter's first value, its expiry in ms.
# Returns {1 if the counter was created, the count, the generations...}.
_COUNT_LUA = (
    GENERATION_LUA
    + """
local added = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
local count = tonumber(ARGV[1])
if not added then
  count = redis.call('INCR', KEYS[1])
end
local result = {added and 1 or 0, count}
for i = 2, #KEYS do
  result[i + 1] = generation(KEYS[i])
end
return result
"""
)
# What django-redis itself turns into ConnectionInterrupted.
_REDIS_CALL_ERRORS = (RedisConnectionError, RedisTimeoutError, ResponseError, OSError)


@dataclass
class OneCallCount:
    """What the armed `add` found: the counter's key and count, and the generations asked for."""

    generation_keys: list[str]
    counter_key: str | None = None
    count: int | None = None
    generations: list[str] | None = None
    incr_answered: bool = field(default=False)


class CountersRedisClient(DefaultClient):
    _armed: OneCallCount | None = None
    _script: Any = None

    @contextmanager
    def counting_in_one_call(self, generation_keys: list[str]) -> Iterator[OneCallCount]:
        """Within the block, the next `add(key, 1, timeout)` counts (add or increment) and reads
        `generation_keys` in one call, and `incr(key)` returns that count. Each Django cache
        object (one per thread) has its own client, so no other thread shares the arming."""
        armed = OneCallCount(generation_keys=generation_keys)
        self._armed = armed
        try:
            yield armed
        finally:
            self._armed = None

    def add(
        self,
        key: Any,
        value: Any,
        timeout: Any = DEFAULT_TIMEOUT,
        version: int | None = None,
        client: Any = None,
    ) -> bool:
        armed = self._armed
        if (
            armed is None
            or armed.count is not None
            or client is not None
            or type(value) is not int
            or not isinstance(timeout, int | float)
            or timeout <= 0
        ):
            return super().add(key, value, timeout, version=version, client=client)
        counter_key = self.make_key(key, version=version)
        redis = self.get_client(write=True)
        try:
            if self._script is None:
                self._script = redis.register_script(_COUNT_LUA)
            added, count, *generations = self._script(
                keys=[counter_key, *armed.generation_keys], args=[value, int(timeout * 1000)], client=redis
            )
        except _REDIS_CALL_ERRORS as exc:
            raise ConnectionInterrupted(connection=redis) from exc
        armed.counter_key = str(counter_key)
        armed.count = int(count)
        armed.generations = [generation.decode() for generation in generations]
        return bool(added)

    def incr(
        self,
        key: Any,
        delta: int = 1,
        version: int | None = None,
        client: Any = None,
        ignore_key_check: bool = False,
    ) -> int:
        armed = self._armed
        if (
            armed is not None
            and armed.count is not None
            and not armed.incr_answered
            and delta == 1
            and client is None
            and str(self.make_key(key, version=version)) == armed.counter_key
        ):
            armed.incr_answered = True
            return armed.count
        return super().incr(key, delta=delta, version=version, client=client, ignore_key_check=ignore_key_check)
