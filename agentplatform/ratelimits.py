"""Per-class rate limits counted in Redis, with X-RateLimit headers on every limited response.

Classes (DECISIONS.md): public, per client IP; authenticated, per key or wallet session;
trading, per key; and admin sign-in attempts, per client IP and per user name (an HTML 429 page
from agentplatform/admin_site.py). Windows are fixed and one period long. Each counter's window
start is offset by a hash of its key (as django-ratelimit does) so that all clients do not reset
in the same second; `X-RateLimit-Reset` gives the epoch second at which the caller's own window
ends.

One request costs one Redis round trip: a small Lua script that INCRs the counter, sets its
expiry on the first hit and reads the cache generations (agentplatform/cache_generations.py) that
tell this worker whether its remembered credentials and rendered responses are still current.
The counters live in Redis, so every web worker and every web server sharing that Redis sees the
same counts.

When Redis cannot be reached the limits fail open: the request is served without the
X-RateLimit headers (no count is known) and a warning is logged. After a failure Redis is not
tried again for REDIS_RETRY_INTERVAL_SECONDS, so that a Redis that hangs (each attempt waits for
the socket timeout) does not add that wait to every request (agentplatform/redis_breaker.py).
Without Redis nothing is served from those caches either. README.md says so.
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
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

from agentplatform import cache_generations, response_cache
from agentplatform.errors import ApplicationError, RateLimited
from agentplatform.rates import rate_parse
from agentplatform.redis_breaker import REDIS_RETRY_INTERVAL_SECONDS, redis_breaker

logger = logging.getLogger(__name__)

PUBLIC = "public"
AUTHENTICATED = "authenticated"
TRADING = "trading"
# Admin sign-in attempts: per client IP and per user name tried (admin_login_attempt_count).
ADMIN_LOGIN = "admin_login"


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
    try:
        return rate_parse(rate)
    except ValueError as exc:
        raise ImproperlyConfigured(str(exc)) from exc


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
        ADMIN_LOGIN: settings.RATE_LIMIT_ADMIN_LOGIN,
    }[rate_class]


# INCR, and start the window's clock on the first hit: atomic, and one round trip (a pipeline
# would cost a MULTI/EXEC pair of replies and a client-side object per request). The same trip
# reads the cache generations (agentplatform/cache_generations.py).
_COUNT_SCRIPT = (
    cache_generations.GENERATION_LUA
    + """
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return {count, generation(KEYS[2]), generation(KEYS[3])}
"""
)
_counters: dict[tuple[str, str], Any] = {}


@dataclass(frozen=True)
class RequestCount:
    """What one round trip to Redis tells a request: its rate-limit usage and the current cache
    generations."""

    usage: RateLimitUsage
    credentials_generation: str
    responses_generation: str


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


def count_request_and_read(*, rate_class: str, key: str, now: float | None = None) -> RequestCount | None:
    """Counts one request for `key` in its class and reads the cache generations; None when Redis
    is unavailable (fail open)."""
    limit, period = parse_rate(_rate_for(rate_class))
    alias = settings.RATELIMIT_USE_CACHE
    location = str(settings.CACHES[alias].get("LOCATION", alias))
    now = time.time() if now is None else now
    if redis_breaker.is_open(location, now):
        return None
    offset = zlib.crc32(key.encode()) % period
    window = (int(now) - offset) // period
    reset_epoch = (window + 1) * period + offset
    cache = caches[alias]
    keys = [
        cache.make_key(f"rl:{rate_class}:{window}:{key}"),
        cache.make_key(cache_generations.CREDENTIALS),
        cache.make_key(cache_generations.RESPONSES),
    ]
    try:
        # Kept one second past the window so a late INCR never lands on an expired key.
        count, credentials, responses = _counter_script(alias, location)(keys=keys, args=[reset_epoch - int(now) + 1])
    except (RedisError, OSError) as exc:
        redis_breaker.trip(location, now)
        logger.warning(
            "Rate-limit counters unavailable (%s: %s); serving without limits for %.0f s",
            type(exc).__name__,
            exc,
            REDIS_RETRY_INTERVAL_SECONDS,
        )
        return None
    count = int(count)
    usage = RateLimitUsage(
        limit=limit, remaining=max(limit - count, 0), reset_epoch=reset_epoch, exceeded=count > limit
    )
    return RequestCount(
        usage=usage,
        credentials_generation=credentials.decode(),
        responses_generation=responses.decode(),
    )


def count_request(*, rate_class: str, key: str, now: float | None = None) -> RateLimitUsage | None:
    """Counts one request for `key` in its class; None when Redis is unavailable (fail open)."""
    counted = count_request_and_read(rate_class=rate_class, key=key, now=now)
    return counted.usage if counted is not None else None


def rate_class_and_key(request: Request, *, trading: bool = False) -> tuple[str, str]:
    """The class a request counts against and whose counter: its credential's, else its IP's."""
    credential = credential_id(request)
    if trading:
        return TRADING, credential or f"ip:{client_ip(request)}"
    if credential:
        return AUTHENTICATED, credential
    return PUBLIC, f"ip:{client_ip(request)}"


@dataclass(frozen=True)
class AdminLoginRefusal:
    """Why an admin sign-in attempt is refused: too many from the `address`, or for the `user name`."""

    counted_by: str
    retry_after_seconds: int


def admin_login_attempt_count(request: HttpRequest) -> AdminLoginRefusal | None:
    """Counts one admin sign-in attempt against the client IP and, while that is within its limit,
    against the user name tried (RATE_LIMIT_ADMIN_LOGIN each); the refusal when one is past it.

    Every attempt counts, not only failed ones: the count and the check are then one atomic
    INCR, so concurrent guesses cannot slip past the limit between a check and a count. An
    address already refused does not count against the user name, so that it cannot lock the
    account's owner out for longer. Without Redis the attempt is allowed (fail open, logged).
    """
    by_address = count_request(rate_class=ADMIN_LOGIN, key=f"ip:{client_ip(request)}")
    if by_address is not None and by_address.exceeded:
        return AdminLoginRefusal("address", _seconds_until(by_address.reset_epoch))
    user_name = request.POST.get("username", "").strip().casefold()
    if not user_name:
        return None
    # A digest: user names are not kept in Redis, and any length makes a key of one size.
    digest = hashlib.sha256(user_name.encode()).hexdigest()[:32]
    by_user_name = count_request(rate_class=ADMIN_LOGIN, key=f"user:{digest}")
    if by_user_name is not None and by_user_name.exceeded:
        return AdminLoginRefusal("user name", _seconds_until(by_user_name.reset_epoch))
    return None


def _seconds_until(epoch: int) -> int:
    return max(epoch - int(time.time()), 1)


class RateLimitedViewMixin:
    """For DRF views: counts every request (also those refused by auth) and adds the headers.

    Put it first in the bases. Set `trading_actions` to the names of viewset actions that move
    tokens: those count against the trading class instead.

    The same Redis round trip checks the caches: a bearer token the authenticator answered from
    its in-process cache is verified again against the database when the credentials generation
    has moved (or Redis is down), and an action wrapped in `cached_response` gets its cached
    answer if that was built under the current responses generation.
    """

    trading_actions: frozenset[str] = frozenset()

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        request._rate_limit_usage = None  # type: ignore[attr-defined]
        # Lets the bearer authenticator answer from its cache: this method checks what it gave.
        request.credential_cache_allowed = True  # type: ignore[attr-defined]
        auth_error = self._authenticate(request)
        trading = getattr(self, "action", None) in self.trading_actions
        rate_class, key = rate_class_and_key(request, trading=trading)
        counted = count_request_and_read(rate_class=rate_class, key=key)
        cached_generation = getattr(request.user, "verified_generation", None) if auth_error is None else None
        if cached_generation is not None and (counted is None or counted.credentials_generation != cached_generation):
            # Keys or sessions changed since the cached answer (or that cannot be known): ask the
            # database again. The request stays counted against the credential it named.
            request.credential_cache_allowed = counted is not None  # type: ignore[attr-defined]
            request.credentials_generation = counted.credentials_generation if counted else None  # type: ignore[attr-defined]
            auth_error = self._authenticate(request)
        usage = counted.usage if counted is not None else None
        request._rate_limit_usage = usage  # type: ignore[attr-defined]
        lookup = response_cache.lookup_for(self, request) if counted is not None else None
        if lookup is not None:
            lookup.found(generation=counted.responses_generation)
            request.response_cache_lookup = lookup  # type: ignore[attr-defined]
        if usage is not None and usage.exceeded:
            retry_after = _seconds_until(usage.reset_epoch)
            raise RateLimited(
                f"Rate limit of {usage.limit} requests per window exceeded; retry in {retry_after} s.",
                headers={"Retry-After": str(retry_after)},
            )
        if auth_error is not None:
            raise auth_error
        super().initial(request, *args, **kwargs)  # type: ignore[misc]

    def _authenticate(self, request: Request) -> Exception | None:
        """Runs the authenticators (again, if they ran before); returns the refusal, if any."""
        try:
            request._authenticate()  # DRF's own step behind request.user, re-runnable
        except (APIException, ApplicationError) as exc:
            # Still counted (per IP, as the credentials were refused): a key guesser is limited,
            # and past the limit gets 429 rather than another answer about the key.
            return exc
        return None

    def finalize_response(self, request: Request, response: Response, *args: Any, **kwargs: Any) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc]
        usage: RateLimitUsage | None = getattr(request, "_rate_limit_usage", None)
        if usage is not None:
            for name, value in usage.headers().items():
                response[name] = value
        return response
