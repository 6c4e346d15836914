"""Generation counters in Redis: how every web worker learns that a cached answer is stale.

A cached entry remembers the generation it was built under, and is used only while that is
still the current generation. Writers bump the generation; they never have to find the entries.
Two generations exist:

- CREDENTIALS: API keys and wallet sessions (created, edited, revoked, deleted). Guards each
  worker's in-process cache of verified bearer tokens (agentplatform/plumbing/authentication.py).
- RESPONSES: everything the cached public reads show (agents, chat messages, price points).
  Guards the shared cache of rendered responses (agentplatform/plumbing/response_cache.py).

A request that has a cached answer to check reads both in the Redis call that counts it against
its rate limit (agentplatform/plumbing/rate_counters.py, from agentplatform/plumbing/ratelimits.py). They live in
the `counters` cache (RATELIMIT_USE_CACHE, beside the rate-limit counters): django-redis, whose
client each process keeps.

A generation that is missing (a new or flushed Redis) starts from the Redis server's clock in
microseconds rather than from 0, so values never repeat across a Redis restart and an entry from
before it cannot match by chance.

A writer bumps twice: at once, and again after its transaction commits. The first bump stops
entries being served while the write is in flight; the second makes sure that nothing cached in
between, from the rows as they were before the commit, is used after it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.db import transaction
from django.db.models import Model
from django.db.models.signals import post_delete, post_save
from django_redis.exceptions import ConnectionInterrupted
from redis.exceptions import RedisError

from agentplatform.plumbing.redis_breaker import redis_breaker

logger = logging.getLogger(__name__)

CREDENTIALS = "gen:credentials"
RESPONSES = "gen:responses"
# Both, in the order of Generations' fields (read together beside a rate-limit count).
NAMES = (CREDENTIALS, RESPONSES)
# What a Redis call can raise: redis-py's errors, socket errors, and django-redis's wrapper of both.
_REDIS_ERRORS = (RedisError, OSError, ConnectionInterrupted)

# Lua: the value of a generation key, first set from the server clock when missing.
GENERATION_LUA = """
local function generation(key)
  local value = redis.call('GET', key)
  if not value then
    local now = redis.call('TIME')
    value = now[1] .. string.format('%06d', now[2])
    redis.call('SET', key, value)
  end
  return value
end
"""
_BUMP_LUA = GENERATION_LUA + "generation(KEYS[1]) return redis.call('INCR', KEYS[1])"
_READ_LUA = GENERATION_LUA + "return generation(KEYS[1])"
_READ_BOTH_LUA = GENERATION_LUA + "return {generation(KEYS[1]), generation(KEYS[2])}"
_scripts: dict[tuple[str, str], Any] = {}


def generation_key(name: str) -> str:
    return caches[settings.RATELIMIT_USE_CACHE].make_key(name)


def _location() -> str:
    alias = settings.RATELIMIT_USE_CACHE
    return str(settings.CACHES[alias].get("LOCATION", alias))


def _run(lua: str, *names: str) -> Any:
    """Runs `lua` on the generation keys `names`, the script registered once per process and Redis."""
    location = _location()
    # django-redis's client (not in the stubs): this thread's, as Django's caches are per thread.
    client = caches[settings.RATELIMIT_USE_CACHE].client.get_client(write=True)  # type: ignore[attr-defined]
    script = _scripts.get((lua, location))
    if script is None:
        script = _scripts[(lua, location)] = client.register_script(lua)
    # Run on this thread's connection, not on the one of the thread that registered the script
    # (web workers are threaded: that connection would be shared, its calls taking turns).
    return script(keys=[generation_key(name) for name in names], client=client)


def _increment(name: str) -> None:
    location = _location()
    if redis_breaker.is_open(location):
        logger.warning("Cache generation %s not bumped: Redis is down", name)
        return
    try:
        _run(_BUMP_LUA, name)
    except _REDIS_ERRORS as exc:
        redis_breaker.trip(location)
        # The entries then live out their own expiry (docs/rate-limits-and-caching.md).
        logger.warning("Could not bump cache generation %s (%s: %s)", name, type(exc).__name__, exc)


def generation_bump(name: str) -> None:
    """Makes every entry cached under generation `name` stale, now and once the transaction commits."""
    _increment(name)
    transaction.on_commit(lambda: _increment(name))


def generation_get(name: str) -> str | None:
    """The current generation, or None when Redis cannot be reached (then nothing may be cached)."""
    location = _location()
    if redis_breaker.is_open(location):
        return None
    try:
        value = _run(_READ_LUA, name)
    except _REDIS_ERRORS:
        redis_breaker.trip(location)
        return None
    return value.decode()


@dataclass(frozen=True)
class Generations:
    credentials: str
    responses: str


def generations_get() -> Generations | None:
    """Both generations in one round trip, or None when Redis cannot be reached."""
    location = _location()
    if redis_breaker.is_open(location):
        return None
    try:
        credentials, responses = _run(_READ_BOTH_LUA, CREDENTIALS, RESPONSES)
    except _REDIS_ERRORS:
        redis_breaker.trip(location)
        return None
    return Generations(credentials=credentials.decode(), responses=responses.decode())


def bump_on_change(name: str, *models: type[Model], on_create: bool = True) -> None:
    """Bumps `name` whenever one of `models` is saved or deleted through the ORM (admin edits,
    cascades, and creates unless `on_create` is False: a new credential is in no cache yet).
    Writes through `QuerySet.update()` or `bulk_create()` send no signal; the services that use
    them call generation_bump() themselves."""

    def receiver(sender: type, created: bool = False, **kwargs: Any) -> None:
        if on_create or not created:
            generation_bump(name)

    for model in models:
        post_save.connect(receiver, sender=model, weak=False, dispatch_uid=f"{name}:{model._meta.label}:save")
        post_delete.connect(receiver, sender=model, weak=False, dispatch_uid=f"{name}:{model._meta.label}:delete")
