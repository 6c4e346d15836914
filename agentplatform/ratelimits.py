"""Per-class rate limits counted in Redis, with X-RateLimit headers on every limited response.

Classes (DECISIONS.md): public, per client IP; authenticated, per key or wallet session;
trading, per key. Windows are fixed and one period long. Each counter's window start is
offset by a hash of its key (as django-ratelimit does) so that all clients do not reset in the
same second; `X-RateLimit-Reset` gives the epoch second at which the caller's own window ends.

One request costs one Redis round trip: a small Lua script that INCRs the counter and sets
its expiry on the first hit. The counters live in Redis, so every web worker and every web server
sharing that Redis sees the same counts.

When Redis cannot be reached the limits fail open: the request is served without the
X-RateLimit headers (no count is known) and a warning is logged. After a failure Redis is not
tried again for REDIS_RETRY_INTERVAL_SECONDS, so that a Redis that hangs (each attempt waits for
the socket timeout) does not add that wait to every request. README.md says so.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import threading
import time
import zlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest
from redis.exceptions import RedisError
from rest_framework.exceptions import APIException
from rest_framework.request import Request
from rest_framework.response import Response

from agentplatform.errors import ApplicationError, RateLimited

logger = logging.getLogger(__name__)

PUBLIC = "public"
AUTHENTICATED = "authenticated"
TRADING = "trading"

REDIS_RETRY_INTERVAL_SECONDS = 5.0

_RATE_PATTERN = re.compile(r"(?P<count>[1-9]\d*)/(?P<multiplier>[1-9]\d*)?(?P<unit>[smhd])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True)
class RateLimitUsage:
    limit: int
    remaining: int
    reset_epoch: int
    exceeded: bool

    def headers(self) -> dict[str, str]:
        return {
            "X-RateLimit-Limit": str(self.limit),
            "X-RateLimit-Remaining": str(self.remaining),
            "X-RateLimit-Reset": str(self.reset_epoch),
        }


@lru_cache(maxsize=64)
def parse_rate(rate: str) -> tuple[int, int]:
    """`"100/m"` -> (100, 60); `"5/10s"` -> (5, 10). Raises ImproperlyConfigured on anything else."""
    match = _RATE_PATTERN.fullmatch(rate.strip())
    if match is None:
        raise ImproperlyConfigured(
            f"Rate {rate!r} must be <count>/<unit> or <count>/<n><unit> with unit s, m, h or d (e.g. 100/m)"
        )
    multiplier = int(match["multiplier"] or 1)
    return int(match["count"]), multiplier * _UNIT_SECONDS[match["unit"]]


def client_ip(request: HttpRequest) -> str:
    """REMOTE_ADDR, or the address TRUSTED_PROXY_COUNT hops from the right of X-Forwarded-For.

    Each trusted proxy appends the address it received the request from, so the client is the
    entry that many places from the right; anything further left was written by the client and
    is ignored. A value that is not an IP address falls back to REMOTE_ADDR.
    """
    remote = request.META.get("REMOTE_ADDR", "") or "unknown"
    proxies = settings.TRUSTED_PROXY_COUNT
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if proxies > 0 and forwarded:
        hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
        if len(hops) >= proxies:
            candidate = hops[-proxies]
            try:
                return str(ipaddress.ip_address(candidate))
            except ValueError:
                return remote
    return remote


def credential_id(request: Request) -> str | None:
    """A stable id for the credential that authenticated the request, if any."""
    principal = getattr(request, "user", None)
    if principal is None or not getattr(principal, "is_authenticated", False):
        return None
    if hasattr(principal, "credential_id"):
        return principal.credential_id
    return f"user:{principal.pk}"


def _rate_for(rate_class: str) -> str:
    return {
        PUBLIC: settings.RATE_LIMIT_PUBLIC,
        AUTHENTICATED: settings.RATE_LIMIT_AUTHENTICATED,
        TRADING: settings.RATE_LIMIT_TRADING,
    }[rate_class]


class _RedisBreaker:
    """Remembers, per cache location, until when Redis is considered down."""

    def __init__(self) -> None:
        self._down_until: dict[str, float] = {}
        self._lock = threading.Lock()

    def is_open(self, location: str, now: float) -> bool:
        return self._down_until.get(location, 0.0) > now

    def trip(self, location: str, now: float) -> None:
        with self._lock:
            self._down_until[location] = now + REDIS_RETRY_INTERVAL_SECONDS


redis_breaker = _RedisBreaker()


# INCR, and start the window's clock on the first hit: atomic, and one round trip (a pipeline
# would cost a MULTI/EXEC pair of replies and a client-side object per request).
_COUNT_SCRIPT = """
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return count
"""
_counters: dict[tuple[str, str], Any] = {}


def _counter_script(alias: str, location: str) -> Any:
    """The registered counting script, bound to a redis-py client kept per cache and process.

    Django's RedisCache builds a new client object on every call (cheap for one cache call, a
    measurable share of a 1 ms request); its connection pool is what we want to share.
    """
    script = _counters.get((alias, location))
    if script is None:
        cache = caches[alias]
        try:
            client = cache._cache.get_client(write=True)  # the client over the cache's own pool
        except AttributeError as exc:
            raise ImproperlyConfigured(f"Rate limits need Django's RedisCache for cache {alias!r}") from exc
        script = _counters[(alias, location)] = client.register_script(_COUNT_SCRIPT)
    return script


def count_request(*, rate_class: str, key: str, now: float | None = None) -> RateLimitUsage | None:
    """Counts one request for `key` in its class; None when Redis is unavailable (fail open)."""
    limit, period = parse_rate(_rate_for(rate_class))
    alias = settings.RATELIMIT_USE_CACHE
    location = str(settings.CACHES[alias].get("LOCATION", alias))
    now = time.time() if now is None else now
    if redis_breaker.is_open(location, now):
        return None
    offset = zlib.crc32(key.encode()) % period
    window = (int(now) - offset) // period
    reset_epoch = (window + 1) * period + offset
    redis_key = caches[alias].make_key(f"rl:{rate_class}:{window}:{key}")
    try:
        # Kept one second past the window so a late INCR never lands on an expired key.
        count = int(_counter_script(alias, location)(keys=[redis_key], args=[reset_epoch - int(now) + 1]))
    except (RedisError, OSError) as exc:
        redis_breaker.trip(location, now)
        logger.warning(
            "Rate-limit counters unavailable (%s: %s); serving without limits for %.0f s",
            type(exc).__name__,
            exc,
            REDIS_RETRY_INTERVAL_SECONDS,
        )
        return None
    return RateLimitUsage(limit=limit, remaining=max(limit - count, 0), reset_epoch=reset_epoch, exceeded=count > limit)


def rate_limit_hit(request: Request, *, trading: bool = False) -> RateLimitUsage | None:
    """Counts this request against its class and returns the usage, or None if Redis is down."""
    credential = credential_id(request)
    if trading:
        rate_class, key = TRADING, credential or f"ip:{client_ip(request)}"
    elif credential:
        rate_class, key = AUTHENTICATED, credential
    else:
        rate_class, key = PUBLIC, f"ip:{client_ip(request)}"
    return count_request(rate_class=rate_class, key=key)


class RateLimitedViewMixin:
    """For DRF views: counts every request (also those refused by auth) and adds the headers.

    Put it first in the bases. Set `trading_actions` to the names of viewset actions that move
    tokens: those count against the trading class instead.
    """

    trading_actions: frozenset[str] = frozenset()

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        request._rate_limit_usage = None  # type: ignore[attr-defined]
        auth_error: Exception | None = None
        try:
            self.perform_authentication(request)  # type: ignore[attr-defined]
        except (APIException, ApplicationError) as exc:
            # Still counted (per IP, as the credentials were refused): a key guesser is limited,
            # and past the limit gets 429 rather than another answer about the key.
            auth_error = exc
        trading = getattr(self, "action", None) in self.trading_actions
        usage = rate_limit_hit(request, trading=trading)
        request._rate_limit_usage = usage  # type: ignore[attr-defined]
        if usage is not None and usage.exceeded:
            retry_after = max(usage.reset_epoch - int(time.time()), 1)
            raise RateLimited(
                f"Rate limit of {usage.limit} requests per window exceeded; retry in {retry_after} s.",
                headers={"Retry-After": str(retry_after)},
            )
        if auth_error is not None:
            raise auth_error
        super().initial(request, *args, **kwargs)  # type: ignore[misc]

    def finalize_response(self, request: Request, response: Response, *args: Any, **kwargs: Any) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc]
        usage: RateLimitUsage | None = getattr(request, "_rate_limit_usage", None)
        if usage is not None:
            for name, value in usage.headers().items():
                response[name] = value
        return response
