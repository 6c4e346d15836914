"""The rate-limit counter: one Redis call counts a request in its window and, when asked, reads the
cache generations (agentplatform/plumbing/cache_generations.py) beside the count.

Why a counter of our own rather than django-ratelimit's `get_usage`: that counts through Django's
cache API in two calls (`add`, then `incr` on every request of a window but its first), and a
request with a cached answer to check then needs a third for the generations; merging them meant
intercepting its cache calls, which an upgrade of either library could change silently. Here it
is one Lua script, so:
- one round trip per request, counted and generations read together;
- the count is atomic (SET NX with its expiry, else INCR, inside the script): concurrent workers
  and processes hand out each count once, and the headers give the exact count;
- Redis errors are raised as redis-py raises them (within the `counters` cache's socket
  timeouts), for the caller to fail open (agentplatform/plumbing/ratelimits.py).

Admin sign-in attempts need none of this (a plain Django view, no cached answer to check), so
they count with django-ratelimit's `get_usage` itself (ratelimits.admin_login_attempt_count).

The window and the counter's name follow django-ratelimit's scheme: a fixed window one period
long whose end is staggered per caller by crc32(caller) modulo the period (so that all callers do
not reset in the same second); the key is `rl:` and a SHA-256 of class, rate, caller and window
(no address or user name is stored in Redis), under the `counters` cache's key prefix; it expires
5 s after a period.

The connection is the `counters` cache's (django-redis, `get_redis_connection`): one per process
and thread, with that cache's location, prefix and socket timeouts.
"""

from __future__ import annotations

import hashlib
import time
import zlib
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django_redis import get_redis_connection

from agentplatform.plumbing.cache_generations import GENERATION_LUA, NAMES, Generations

# Seconds a counter outlives a period, so that it never expires inside its own window.
EXPIRY_SLACK_SECONDS = 5

# KEYS[1]: the counter; KEYS[2..]: generation keys. ARGV[1]: the counter's expiry in ms.
# Returns {the count, the generations...}.
_COUNT_LUA = (
    GENERATION_LUA
    + """
local count = 1
if not redis.call('SET', KEYS[1], 1, 'NX', 'PX', ARGV[1]) then
  count = redis.call('INCR', KEYS[1])
end
local result = {count}
for i = 2, #KEYS do
  result[i] = generation(KEYS[i])
end
return result
"""
)
# The registered script (its SHA-1) per Redis location; it runs on each caller's own connection.
_scripts: dict[str, Any] = {}


@dataclass(frozen=True)
class RateLimitUsage:
    """A caller's count in its current window, as the X-RateLimit headers state it."""

    limit: int
    remaining: int
    reset_epoch: int  # the first second of the next window
    exceeded: bool

    def headers(self) -> dict[str, str]:
        return {
            "X-RateLimit-Limit": str(self.limit),
            "X-RateLimit-Remaining": str(self.remaining),
            "X-RateLimit-Reset": str(self.reset_epoch),
        }


@dataclass(frozen=True)
class Counted:
    """What one counting call found: the usage and, when asked for, the generations."""

    usage: RateLimitUsage
    generations: Generations | None


def window_end(caller: str, period: int, now: int) -> int:
    """The last second of the caller's current window (django-ratelimit's staggered windows)."""
    if period == 1:
        return now
    end = now - now % period + zlib.crc32(caller.encode()) % period
    return end + period if end < now else end


def counter_increment(*, group: str, caller: str, limit: int, period: int, read_generations: bool) -> Counted:
    """Counts one request of `caller` against `limit` per `period` seconds in `group` and, when
    `read_generations`, reads the cache generations in the same Redis call. Raises redis-py's
    errors (RedisError, OSError) when Redis cannot be reached."""
    now = int(time.time())
    end = window_end(caller, period, now)
    counters = caches[settings.RATELIMIT_USE_CACHE]
    digest = hashlib.sha256(f"{group}{limit}/{period}s{caller}{end}".encode()).hexdigest()
    keys = [counters.make_key(f"rl:{digest}")]
    if read_generations:
        keys.extend(counters.make_key(name) for name in NAMES)
    redis = get_redis_connection(settings.RATELIMIT_USE_CACHE, write=True)
    location = str(settings.CACHES[settings.RATELIMIT_USE_CACHE].get("LOCATION", ""))
    script = _scripts.get(location)
    if script is None:
        script = _scripts[location] = redis.register_script(_COUNT_LUA)
    count, *generations = script(keys=keys, args=[(period + EXPIRY_SLACK_SECONDS) * 1000], client=redis)
    usage = RateLimitUsage(limit=limit, remaining=max(limit - count, 0), reset_epoch=end + 1, exceeded=count > limit)
    if not read_generations:
        return Counted(usage=usage, generations=None)
    credentials, responses = (generation.decode() for generation in generations)
    return Counted(usage=usage, generations=Generations(credentials=credentials, responses=responses))
