"""Per-class rate limits counted in Redis (through django-ratelimit), with X-RateLimit headers.

Classes (DECISIONS.md): public, per client IP; authenticated, per key or wallet session;
trading, per key. Windows are fixed and one period long; django-ratelimit staggers each
counter's window start by a hash of its key so that all clients do not reset at once, and
`X-RateLimit-Reset` gives the epoch second at which the caller's own window ends.

When Redis cannot be reached the limits fail open: the request is served without the
X-RateLimit headers (no count is known) and a warning is logged. Reads keep working while the
counter store is down; README.md says so.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django_ratelimit.core import get_usage
from redis.exceptions import RedisError
from rest_framework.request import Request
from rest_framework.response import Response

from agentplatform.errors import RateLimited

logger = logging.getLogger(__name__)

PUBLIC = "public"
AUTHENTICATED = "authenticated"
TRADING = "trading"


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


def client_ip(request: HttpRequest) -> str:
    """REMOTE_ADDR, or the address TRUSTED_PROXY_COUNT hops from the right of X-Forwarded-For."""
    proxies = settings.TRUSTED_PROXY_COUNT
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if proxies > 0 and forwarded:
        hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
        if len(hops) >= proxies:
            return hops[-proxies]
    return request.META.get("REMOTE_ADDR", "") or "unknown"


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


def rate_limit_hit(request: Request, *, trading: bool = False) -> RateLimitUsage | None:
    """Counts this request against its class and returns the usage, or None if Redis is down."""
    credential = credential_id(request)
    if trading:
        rate_class, key = TRADING, credential or f"ip:{client_ip(request)}"
    elif credential:
        rate_class, key = AUTHENTICATED, credential
    else:
        rate_class, key = PUBLIC, f"ip:{client_ip(request)}"
    try:
        usage: dict[str, Any] | None = get_usage(
            request,
            group=f"rl:{rate_class}",
            key=lambda _group, _request: key,
            rate=_rate_for(rate_class),
            increment=True,
        )
    except (RedisError, OSError):
        logger.warning("Rate-limit counters unavailable (Redis); serving without limits")
        return None
    if usage is None:
        return None
    limit = usage["limit"]
    return RateLimitUsage(
        limit=limit,
        remaining=max(limit - usage["count"], 0),
        reset_epoch=int(time.time()) + max(usage["time_left"], 0),
        exceeded=usage["should_limit"],
    )


class RateLimitedViewMixin:
    """For DRF views: counts every request (also those refused by auth) and adds the headers.

    Set `trading_actions` to the names of viewset actions that move tokens.
    """

    trading_actions: frozenset[str] = frozenset()

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        request._rate_limit_usage = None  # type: ignore[attr-defined]
        try:
            self.perform_authentication(request)  # type: ignore[attr-defined]
        finally:
            # Counted even when the credentials are refused: a key guesser is limited per IP.
            trading = getattr(self, "action", None) in self.trading_actions
            usage = rate_limit_hit(request, trading=trading)
            request._rate_limit_usage = usage  # type: ignore[attr-defined]
        if usage is not None and usage.exceeded:
            retry_after = max(usage.reset_epoch - int(time.time()), 1)
            raise RateLimited(
                f"Rate limit of {usage.limit} requests per window exceeded; retry in {retry_after} s.",
                headers={"Retry-After": str(retry_after)},
            )
        super().initial(request, *args, **kwargs)  # type: ignore[misc]

    def finalize_response(self, request: Request, response: Response, *args: Any, **kwargs: Any) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc]
        usage: RateLimitUsage | None = getattr(request, "_rate_limit_usage", None)
        if usage is not None:
            for name, value in usage.headers().items():
                response[name] = value
        return response
