"""Per-class rate limits counted by django-ratelimit in Redis, with X-RateLimit headers on every
limited response.

Classes (DECISIONS.md): public, per client IP; authenticated, per key or wallet session;
trading, per key; and admin sign-in attempts, per client IP and per user name (an HTML 429 page
from agentplatform/admin_site.py).

django-ratelimit counts (`django_ratelimit.core.get_usage`, through the `counters` cache, which
is django-redis over the same Redis as every other web worker and server):
- the window: fixed and one period long, its end staggered per caller by a hash of the key
  (crc32 modulo the period) so that all clients do not reset in the same second;
- the count: `cache.add` starts the window's counter at 1, every later hit is an atomic INCR,
  so concurrent workers hand out each count once (the `counters` cache's client,
  agentplatform/plumbing/counters_client.py, runs that add and INCR as one Lua call); the counter's key
  is a SHA-256 of class, rate, caller and window (no address or user name is stored in Redis)
  and expires 5 s after its window;
- the usage it answers: count, limit and the seconds left, from which the headers come.

What stays here, and why:
- which class a request counts against and whose counter it is (the credential, else the client
  IP); the client IP by the trusted-proxy rule (django-ratelimit's own `ip` key reads one META
  entry, masks IPv6 to /64 and refuses an empty REMOTE_ADDR);
- failing open: django-ratelimit passes a Redis error on (it catches only what a missing key
  raises), so here any Redis error serves the request without limits and without the
  X-RateLimit headers (no count is known), logs a warning, and leaves Redis alone for
  REDIS_RETRY_INTERVAL_SECONDS (agentplatform/plumbing/redis_breaker.py), so that a Redis that hangs costs
  one socket timeout per worker, not one per request. RATELIMIT_FAIL_OPEN covers a count that
  cannot be read.
- the DRF mixin: the headers on every response (also 4xx), the 429 problem, and the checks of the
  credential and response caches, which read the cache generations
  (agentplatform/plumbing/cache_generations.py) in the Redis call that counts the request when it has a
  cached answer to check: one round trip per request. Without Redis nothing is served from
  those caches either. README.md says so.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django_ratelimit.core import get_usage
from django_redis.exceptions import ConnectionInterrupted
from redis.exceptions import RedisError
from rest_framework.exceptions import APIException
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from agentplatform.plumbing import cache_generations, response_cache
from agentplatform.plumbing.counters_client import CountersRedisClient
from agentplatform.plumbing.errors import ApplicationError, RateLimited
from agentplatform.plumbing.rates import rate_parse
from agentplatform.plumbing.redis_breaker import REDIS_RETRY_INTERVAL_SECONDS, redis_breaker

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
    proxies = int(settings.TRUSTED_PROXY_COUNT)
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


def count_request(*, rate_class: str, key: str, request: HttpRequest | None = None) -> RateLimitUsage | None:
    """Counts one request for `key` in its class; None when Redis is unavailable (fail open)."""
    return count_request_reading_generations(rate_class=rate_class, key=key, request=request, generations=False)[0]


def count_request_reading_generations(
    *, rate_class: str, key: str, request: HttpRequest | None = None, generations: bool
) -> tuple[RateLimitUsage | None, cache_generations.Generations | None]:
    """Counts one request for `key` in its class and, when `generations` is true, reads the cache
    generations in the same Redis call (agentplatform/plumbing/counters_client.py). (None, None) when
    Redis is unavailable (fail open: no limits, nothing served from the caches)."""
    location = str(settings.CACHES[settings.RATELIMIT_USE_CACHE].get("LOCATION", ""))
    if redis_breaker.is_open(location):
        return None, None
    counters = caches[settings.RATELIMIT_USE_CACHE]
    client = counters.client  # type: ignore[attr-defined]  # django-redis's
    generation_keys = [counters.make_key(name) for name in cache_generations.NAMES] if generations else []
    one_call = (
        client.counting_in_one_call(generation_keys)
        if isinstance(client, CountersRedisClient)
        else contextlib.nullcontext(None)
    )
    try:
        with one_call as counted:
            usage = get_usage(
                request,
                group=rate_class,
                key=lambda _group, _request: key,
                rate=parse_rate(_rate_for(rate_class)),
                increment=True,
            )
    except (RedisError, OSError, ConnectionInterrupted) as exc:
        redis_breaker.trip(location)
        cause = exc.__cause__ if isinstance(exc, ConnectionInterrupted) and exc.__cause__ else exc
        logger.warning(
            "Rate-limit counters unavailable (%s: %s); serving without limits for %.0f s",
            type(cause).__name__,
            cause,
            REDIS_RETRY_INTERVAL_SECONDS,
        )
        return None, None
    read: cache_generations.Generations | None = None
    if generations:
        if counted is not None and counted.generations is not None:
            read = cache_generations.Generations(*counted.generations)
        else:  # get_usage made no call to count in (RATELIMIT_ENABLE off): read them on their own
            read = cache_generations.generations_get()
    if usage is None:  # the count could not be read back (RATELIMIT_FAIL_OPEN)
        return None, read
    # `time_left` is the whole seconds of the window after the current one, read at the end of
    # get_usage: the window ends when the second `now + time_left` does.
    reset_epoch = int(time.time()) + usage["time_left"] + 1
    limit = usage["limit"]
    usage_found = RateLimitUsage(
        limit=limit,
        remaining=max(limit - usage["count"], 0),
        reset_epoch=reset_epoch,
        exceeded=usage["should_limit"],
    )
    return usage_found, read


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
    The user name is not kept in Redis: django-ratelimit names the counter by a SHA-256.
    """
    by_address = count_request(rate_class=ADMIN_LOGIN, key=f"ip:{client_ip(request)}", request=request)
    if by_address is not None and by_address.exceeded:
        return AdminLoginRefusal("address", _seconds_until(by_address.reset_epoch))
    user_name = request.POST.get("username", "").strip().casefold()
    if not user_name:
        return None
    by_user_name = count_request(rate_class=ADMIN_LOGIN, key=f"user:{user_name}", request=request)
    if by_user_name is not None and by_user_name.exceeded:
        return AdminLoginRefusal("user name", _seconds_until(by_user_name.reset_epoch))
    return None


def _seconds_until(epoch: int) -> int:
    return max(epoch - int(time.time()), 1)


class RateLimitedViewMixin:
    """For DRF views: counts every request (also those refused by auth) and adds the headers.

    Put it first in the bases. Set `trading_actions` to the names of viewset actions that move
    tokens: those count against the trading class instead.

    It also checks the caches against the generations in Redis: a bearer token the authenticator
    answered from its in-process cache is verified again against the database when the
    credentials generation has moved (or Redis is down), and an action wrapped in
    `cached_response` gets its cached answer if that was built under the current responses
    generation. The generations are read (in the call that counts the request) only when there
    is such an answer to check.

    A repeated read of a cached action by a request without credentials is answered in
    `dispatch`, before DRF wraps the request: counted, checked and given the same headers, but
    without authentication (there is nothing to authenticate), permission checks (only an
    action every caller may read is answered there) and content negotiation (an entry is kept
    per Accept header, stored by a request that negotiated it): a fifth less CPU for such a read.
    """

    trading_actions: frozenset[str] = frozenset()

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        answer = self._cached_answer(request)
        if answer is not None:
            return answer
        return super().dispatch(request, *args, **kwargs)  # type: ignore[misc]

    def _cached_answer(self, request: HttpRequest) -> HttpResponseBase | None:
        """The cached answer to an anonymous read, or None: then DRF handles the request, with what
        was counted and read here kept on it (`initial` does not count it again)."""
        if request.META.get("HTTP_AUTHORIZATION") or request.META.get("HTTP_COOKIE"):
            return None
        action_map: dict[str, str] = getattr(self, "action_map", {})  # a viewset's
        action = action_map.get((request.method or "").lower())
        if action is None:
            return None
        self.action = action  # as DRF's initialize_request sets it, which has not run yet
        lookup = response_cache.lookup_for(self, request)
        if lookup is None or self.action in self.trading_actions:
            return None
        request.response_cache_lookup = lookup  # type: ignore[attr-defined]  # for `initial`, if DRF takes over
        if not lookup.use_entry:
            return None
        if not all(isinstance(permission, AllowAny) for permission in self.get_permissions()):  # type: ignore[attr-defined]
            return None
        usage, generations = count_request_reading_generations(
            rate_class=PUBLIC, key=f"ip:{client_ip(request)}", request=request, generations=True
        )
        request.rate_limit_counted = (usage, generations)  # type: ignore[attr-defined]
        if generations is None or (usage is not None and usage.exceeded):
            return None
        lookup.found(generation=generations.responses)
        if lookup.cached is None:
            return None
        request._rate_limit_usage = usage  # type: ignore[attr-defined]
        self.headers = self.default_response_headers  # type: ignore[attr-defined]
        return self.finalize_response(request, lookup.cached)  # type: ignore[arg-type]

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        request._rate_limit_usage = None  # type: ignore[attr-defined]
        # Lets the bearer authenticator answer from its cache: this method checks what it gave.
        request.credential_cache_allowed = True  # type: ignore[attr-defined]
        auth_error = self._authenticate(request)
        counted = getattr(request, "rate_limit_counted", None)  # by _cached_answer: anonymous, public
        cached_generation = getattr(request.user, "verified_generation", None) if auth_error is None else None
        lookup = getattr(request, "response_cache_lookup", None) or response_cache.lookup_for(self, request)
        if counted is not None:
            usage, generations = counted
        else:
            trading = getattr(self, "action", None) in self.trading_actions
            rate_class, key = rate_class_and_key(request, trading=trading)
            wanted = cached_generation is not None or lookup is not None
            usage, generations = count_request_reading_generations(
                rate_class=rate_class, key=key, request=request, generations=wanted
            )
        request._rate_limit_usage = usage  # type: ignore[attr-defined]
        if cached_generation is not None and (generations is None or generations.credentials != cached_generation):
            # Keys or sessions changed since the cached answer (or that cannot be known): ask the
            # database again. The request stays counted against the credential it named.
            request.credential_cache_allowed = generations is not None  # type: ignore[attr-defined]
            request.credentials_generation = generations.credentials if generations else None  # type: ignore[attr-defined]
            auth_error = self._authenticate(request)
        if lookup is not None and generations is not None and lookup.generation is None:
            lookup.found(generation=generations.responses)
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
            request._authenticate()  # type: ignore[attr-defined]  # DRF's own step behind request.user, re-runnable
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
