"""Per-class rate limits, counted in Redis, with X-RateLimit headers on every limited response.

Classes (DECISIONS.md): public, per client IP; authenticated, per key or wallet session;
trading, per key; and admin sign-in attempts, per client IP and per user name (an HTML 429 page
from agentplatform/admin_site.py).

Two counters, one per kind of caller:
- the API classes count with agentplatform/plumbing/rate_counters.py, our own Lua script: one
  Redis call per request, atomic, which also reads the cache generations when the request has a
  cached answer to check (django-ratelimit's `get_usage` counts in two cache calls, `add` then
  `incr`, and could not read the generations in the same call without intercepting its cache);
- admin sign-in attempts count with django-ratelimit's public `get_usage`
  (`admin_login_attempt_count`): a plain Django view with nothing cached to check, so the
  library's counter fits as it is. Both name counters the same way (`rl:` and a SHA-256 of class,
  rate, caller and window, under the `counters` cache's prefix) and stagger windows alike.

The parts, one job each:
- `rate_class_and_key` and `client_ip` say which class a request counts against and whose
  counter it is (the credential, else the client IP by the trusted-proxy rule);
- `count_request` and `admin_login_attempt_count` fail open (`_counted_or_none`): on any Redis
  error the request is served without limits and without the X-RateLimit headers (no count is
  known), a warning is logged, and Redis is left alone for REDIS_RETRY_INTERVAL_SECONDS
  (agentplatform/plumbing/redis_breaker.py), so that a Redis that hangs costs one socket timeout
  per worker, not one per request;
- `RateLimitThrottle` is DRF's throttle hook: it allows the request or not from its count;
- `RateLimitedViewMixin` wires them into a DRF view (see its docstring): the count right after
  authentication, the check of a remembered credential against the generation read with it, the
  429 problem, the headers on every response, and the anonymous cached read answered before DRF.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any, NoReturn, TypeVar

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django_ratelimit.core import get_usage
from redis.exceptions import RedisError
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import APIException
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView

from agentplatform.plumbing import response_cache
from agentplatform.plumbing.cache_generations import Generations
from agentplatform.plumbing.errors import ApplicationError, RateLimited
from agentplatform.plumbing.rate_counters import RateLimitUsage, counter_increment
from agentplatform.plumbing.rates import rate_parse
from agentplatform.plumbing.redis_breaker import REDIS_RETRY_INTERVAL_SECONDS, redis_breaker

logger = logging.getLogger(__name__)

PUBLIC = "public"
AUTHENTICATED = "authenticated"
TRADING = "trading"
# Admin sign-in attempts: per client IP and per user name tried (admin_login_attempt_count, counted
# by django-ratelimit, whose group this is).
ADMIN_LOGIN = "admin_login"


@lru_cache(maxsize=64)
def parse_rate(rate: str) -> tuple[int, int]:
    """`"100/m"` -> (100, 60); `"5/10s"` -> (5, 10). Raises ImproperlyConfigured on anything else."""
    try:
        return rate_parse(rate)
    except ValueError as exc:
        raise ImproperlyConfigured(str(exc)) from exc


def client_ip(request: HttpRequest | Request) -> str:
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
    principal = request.user  # None where UNAUTHENTICATED_USER is None (settings.REST_FRAMEWORK)
    if principal is None or not principal.is_authenticated:
        return None
    if hasattr(principal, "credential_id"):
        return str(principal.credential_id)
    return f"user:{principal.pk}"


def rate_class_and_key(request: Request, *, trading: bool = False) -> tuple[str, str]:
    """The class a request counts against and whose counter: its credential's, else its IP's."""
    credential = credential_id(request)
    if trading:
        return TRADING, credential or f"ip:{client_ip(request)}"
    if credential:
        return AUTHENTICATED, credential
    return PUBLIC, f"ip:{client_ip(request)}"


def _rate_for(rate_class: str) -> str:
    return {
        PUBLIC: settings.RATE_LIMIT_PUBLIC,
        AUTHENTICATED: settings.RATE_LIMIT_AUTHENTICATED,
        TRADING: settings.RATE_LIMIT_TRADING,
    }[rate_class]


@dataclass(frozen=True)
class RequestCount:
    """One request's count and the generations read with it; both None when Redis could not be
    reached: then no limit applies, and nothing is served from the caches the generations guard."""

    usage: RateLimitUsage | None
    generations: Generations | None


UNCOUNTED = RequestCount(usage=None, generations=None)


def count_request_reading_generations(*, rate_class: str, key: str, generations: bool) -> RequestCount:
    """Counts one request for `key` in its class and, when `generations` is true, reads the cache
    generations in the same Redis call; UNCOUNTED when Redis is unavailable (fail open)."""
    limit, period = parse_rate(_rate_for(rate_class))
    count = partial(
        counter_increment, group=rate_class, caller=key, limit=limit, period=period, read_generations=generations
    )
    counted = _counted_or_none(count)
    if counted is None:
        return UNCOUNTED
    return RequestCount(usage=counted.usage, generations=counted.generations)


Count = TypeVar("Count")


def _counted_or_none(count: Callable[[], Count]) -> Count | None:
    """`count()`, or None when the counters' Redis fails or failed within the retry interval: then
    the request is not limited (fail open), a warning says so once per interval, and a Redis that
    hangs is not waited for again (each wait is the `counters` cache's socket timeout)."""
    location = str(settings.CACHES[settings.RATELIMIT_USE_CACHE].get("LOCATION", ""))
    if redis_breaker.is_open(location):
        return None
    try:
        return count()
    except (RedisError, OSError) as exc:  # django-redis re-raises redis-py's own errors
        redis_breaker.trip(location)
        logger.warning(
            "Rate-limit counters unavailable (%s: %s); serving without limits for %.0f s",
            type(exc).__name__,
            exc,
            REDIS_RETRY_INTERVAL_SECONDS,
        )
        return None


def count_request(*, rate_class: str, key: str) -> RateLimitUsage | None:
    """Counts one request for `key` in its class; None when Redis is unavailable (fail open)."""
    return count_request_reading_generations(rate_class=rate_class, key=key, generations=False).usage


def seconds_until(epoch: int) -> int:
    """Whole seconds until `epoch`, at least 1 (what Retry-After says)."""
    return max(epoch - int(time.time()), 1)


@dataclass(frozen=True)
class AdminLoginRefusal:
    """Why an admin sign-in attempt is refused: too many from the `address`, or for the `user name`."""

    counted_by: str
    retry_after_seconds: int


def _admin_login_address(group: str, request: HttpRequest) -> str:
    """django-ratelimit key: the client IP, by the same trusted-proxy rule as the API."""
    return f"ip:{client_ip(request)}"


def _admin_login_user_name(group: str, request: HttpRequest) -> str:
    """django-ratelimit key: the user name tried, casefolded, so that `Operator ` is `operator`."""
    return f"user:{request.POST.get('username', '').strip().casefold()}"


def _admin_login_refusal(request: HttpRequest, *, key: Callable[[str, HttpRequest], str]) -> int | None:
    """Counts the attempt against `key`'s counter; the Retry-After seconds when past the limit.

    django-ratelimit's `get_usage` counts it in the `counters` cache (RATELIMIT_USE_CACHE): `add`
    of the window's counter with its expiry, else an atomic `incr`. It names the counter by a
    SHA-256 of group, rate, key and window, so the user name is not stored in Redis. It lets a
    cache error through (caught by `_counted_or_none`, fail open), and answers None, not limited,
    where the cache gave no count (RATELIMIT_FAIL_OPEN, settings/rate_limits.py).
    """
    rate = parse_rate(settings.RATE_LIMIT_ADMIN_LOGIN)  # our syntax, checked at start-up: (count, seconds)
    usage = _counted_or_none(partial(get_usage, request, group=ADMIN_LOGIN, key=key, rate=rate, increment=True))
    if usage is None or not usage["should_limit"]:
        return None
    # `time_left` is to the window's last second; the next window starts one second later.
    return max(int(usage["time_left"]) + 1, 1)


def admin_login_attempt_count(request: HttpRequest) -> AdminLoginRefusal | None:
    """Counts one admin sign-in attempt against the client IP and, while that is within its limit,
    against the user name tried (RATE_LIMIT_ADMIN_LOGIN each); the refusal when one is past it.

    Every attempt counts, not only failed ones: the count and the check are then one atomic
    increment, so concurrent guesses cannot slip past the limit between a check and a count. An
    address already refused does not count against the user name, so that it cannot lock the
    account's owner out for longer. Without Redis the attempt is allowed (fail open, logged).
    """
    retry_after = _admin_login_refusal(request, key=_admin_login_address)
    if retry_after is not None:
        return AdminLoginRefusal("address", retry_after)
    if not request.POST.get("username", "").strip():
        return None
    retry_after = _admin_login_refusal(request, key=_admin_login_user_name)
    if retry_after is not None:
        return AdminLoginRefusal("user name", retry_after)
    return None


class RateLimitThrottle(BaseThrottle):
    """DRF's throttle over the request's count, which RateLimitedViewMixin takes once per request
    (so that DRF asking again counts nothing more)."""

    usage: RateLimitUsage | None = None

    def allow_request(self, request: Request, view: APIView) -> bool:
        if not isinstance(view, RateLimitedViewMixin):
            raise ImproperlyConfigured(f"{type(self).__name__} counts for views with RateLimitedViewMixin only")
        self.usage = view.request_count(request).usage
        return self.usage is None or not self.usage.exceeded

    def wait(self) -> float | None:
        return None if self.usage is None else seconds_until(self.usage.reset_epoch)


class RateLimitedViewMixin(APIView):
    """For DRF views: counts every request (also those refused by authentication, permissions or
    the limit itself) and puts the X-RateLimit headers on every response.

    Put it first in the bases. Set `trading_actions` to the names of viewset actions that move
    tokens: those count against the trading class instead.

    The request is authenticated and counted in `initial`, before DRF's own steps (DRF would
    throttle after the permission check): a refused credential counts against the IP, a key
    guesser is limited, and past the limit the answer is 429 rather than another answer about
    the key. `RateLimitThrottle` decides from that count (DRF's own throttle step finds it
    taken).

    The count also reads the cache generations when there is a cached answer to check: a bearer
    token the authenticator answered from its in-process memory (agentplatform/plumbing/authentication.py)
    is verified again, through the same authenticator, when the credentials generation has moved
    (or Redis is down); an action wrapped in `cached_response` gets its cached answer if that was
    built under the current responses generation.

    A repeated read of a cached action by a request without credentials is answered in
    `dispatch`, before DRF wraps the request: counted, checked and given the same headers, but
    without authentication (there is nothing to authenticate), permission checks (only an
    action every caller may read is answered there) and content negotiation (an entry is kept
    per Accept header, stored by a request that negotiated it): a fifth less CPU for such a read.
    """

    throttle_classes = [RateLimitThrottle]
    trading_actions: frozenset[str] = frozenset()
    # A viewset's (DRF sets it in initialize_request); the anonymous cached read sets it earlier.
    action: str
    # This request's count and cache lookup: a view instance serves one request.
    counted: RequestCount | None = None
    response_lookup: response_cache.ResponseLookup | None = None

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        answer = self._cached_anonymous_answer(request)
        if answer is not None:
            return answer
        return super().dispatch(request, *args, **kwargs)

    def _cached_anonymous_answer(self, request: HttpRequest) -> HttpResponseBase | None:
        """The cached answer to a read without credentials, or None: then DRF handles the request,
        with what was counted and found here kept on the view (it is not counted again)."""
        if request.META.get("HTTP_AUTHORIZATION") or request.META.get("HTTP_COOKIE"):
            return None
        action_map: dict[str, str] = getattr(self, "action_map", {})  # a viewset's
        action = action_map.get((request.method or "").lower())
        if action is None or action in self.trading_actions:
            return None
        self.action = action  # as DRF's initialize_request sets it, which has not run yet
        lookup = response_cache.lookup_for(self, request)
        if lookup is None or not lookup.use_entry:
            return None
        if not all(isinstance(permission, AllowAny) for permission in self.get_permissions()):
            return None
        self.counted = count_request_reading_generations(
            rate_class=PUBLIC, key=f"ip:{client_ip(request)}", generations=True
        )
        usage, generations = self.counted.usage, self.counted.generations
        if generations is None or (usage is not None and usage.exceeded):
            return None
        lookup.found(generation=generations.responses)
        self.response_lookup = lookup
        if lookup.cached is None:
            return None
        self.headers = self.default_response_headers
        # DRF's finalize_response reads the request only to negotiate for a DRF Response; a
        # cached answer is a plain HttpResponse, so the Django request does.
        return self.finalize_response(request, lookup.cached)  # type: ignore[arg-type]

    def request_count(self, request: Request) -> RequestCount:
        """This request's count, taken on the first call (reading the generations when there is
        a cached answer to check), the same on every later one."""
        if self.counted is None:
            trading = getattr(self, "action", None) in self.trading_actions
            rate_class, key = rate_class_and_key(request, trading=trading)
            if self.response_lookup is None:
                self.response_lookup = response_cache.lookup_for(self, request)
            remembered = getattr(request.user, "verified_generation", None) is not None
            self.counted = count_request_reading_generations(
                rate_class=rate_class, key=key, generations=remembered or self.response_lookup is not None
            )
        return self.counted

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        """Authenticates and counts the request before DRF's own steps (content negotiation,
        permissions, throttles), so that every answer of the view is counted and carries the
        headers; a refusal of the credentials is raised once the request is counted."""
        # The bearer authenticator may answer from its memory: this view checks what it gave.
        request.credential_cache_allowed = True  # type: ignore[attr-defined]
        refusal = _authentication_refusal(request)
        self.check_throttles(request)  # counts the request; past the limit, 429
        if refusal is None:
            refusal = self._remembered_credential_check(request)
        # For `cached_response`: the entry built under the generation read with the count.
        lookup, generations = self.response_lookup, self.request_count(request).generations
        if lookup is not None and lookup.generation is None and generations is not None:
            lookup.found(generation=generations.responses)
        if refusal is not None:
            raise refusal
        super().initial(request, *args, **kwargs)

    def _remembered_credential_check(self, request: Request) -> Exception | None:
        """Verifies a remembered credential again (through the authenticator that gave it) when
        keys or sessions changed since it was remembered, or that cannot be known; returns the
        refusal, if any. The request stays counted against the credential it named."""
        remembered = getattr(request.user, "verified_generation", None)
        generations = self.request_count(request).generations
        authenticator = request.successful_authenticator
        if remembered is None or not isinstance(authenticator, BaseAuthentication):
            return None
        if generations is not None and generations.credentials == remembered:
            return None
        request.credential_cache_allowed = generations is not None  # type: ignore[attr-defined]
        request.credentials_generation = generations.credentials if generations else None  # type: ignore[attr-defined]
        try:
            verified = authenticator.authenticate(request)
        except (APIException, ApplicationError) as exc:
            return exc
        if verified is not None:
            request.user, request.auth = verified
        return None

    def throttled(self, request: Request, wait: float | None) -> NoReturn:
        usage = self.request_count(request).usage
        limit = usage.limit if usage is not None else 0
        retry_after = int(wait) if wait is not None else 1
        raise RateLimited(
            f"Rate limit of {limit} requests per window exceeded; retry in {retry_after} s.",
            headers={"Retry-After": str(retry_after)},
        )

    def finalize_response(self, request: Request, response: Response, *args: Any, **kwargs: Any) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)
        usage = self.counted.usage if self.counted is not None else None
        if usage is not None:
            for name, value in usage.headers().items():
                response[name] = value
        return response


def _authentication_refusal(request: Request) -> Exception | None:
    """Runs DRF's authentication (`request.user`); the refusal, if any, is returned to be raised
    once the request is counted (DRF has then left the request unauthenticated)."""
    try:
        request.user  # noqa: B018  # evaluated for its authentication, as DRF's perform_authentication does
    except (APIException, ApplicationError) as exc:
        return exc
    return None
