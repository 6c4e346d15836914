"""Who may use the MCP endpoint, decided before the MCP SDK sees the request.

Every HTTP request to /mcp goes through `McpAccessView`, a DRF view like the REST endpoints':
the same bearer authentication (a service key; its verification and per-worker cache,
agentplatform/plumbing/authentication.py), the same permission (scope `read`), the same rate limit
(the `authenticated` class per key, `public` per IP for a refused key; agentplatform/plumbing/ratelimits.py)
and the same problem details. A refusal (401, 403, 429, 503) is that view's response, sent as it
is; an admitted request goes on to the MCP transport with the X-RateLimit headers added to
whatever it answers.
"""

from __future__ import annotations

import io
import logging
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import DisallowedHost
from django.core.handlers.asgi import ASGIRequest
from django.db import close_old_connections
from django.http.response import HttpResponseBase
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agentplatform.plumbing.authentication import BearerCredentialAuthentication
from agentplatform.plumbing.errors import problem_response
from agentplatform.plumbing.permissions import HasServiceReadScope
from agentplatform.plumbing.ratelimits import RateLimitedViewMixin
from agentplatform.plumbing.renderers import FirstRendererNegotiation, JSONRenderer

logger = logging.getLogger(__name__)


class McpAccessView(RateLimitedViewMixin, APIView):
    """Admits a request with a service key holding scope `read` (204, never sent: the MCP
    transport answers it); refuses anything else with the REST endpoints' problem."""

    authentication_classes = [BearerCredentialAuthentication]
    permission_classes = [HasServiceReadScope]
    renderer_classes = [JSONRenderer]
    content_negotiation_class = FirstRendererNegotiation

    def post(self, request: Request) -> Response:  # the only method /mcp serves (agentplatform/mcp_app.py)
        return Response(status=204)


_access_view = McpAccessView.as_view()


@dataclass(frozen=True)
class AccessDecision:
    admitted: bool
    status: int
    headers: list[tuple[bytes, bytes]]  # of the refusal, or the rate-limit headers to add
    body: bytes
    caller: object = None  # the admitted request's request.user (a Principal), for the tools


_RATE_LIMIT_HEADERS = ("x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset")


def mcp_access_decide(scope: dict[str, Any]) -> AccessDecision:
    """Runs the gate view for the ASGI request `scope` (its headers; the body is left for MCP).
    Blocking (database, Redis): call it on a worker thread."""
    close_old_connections()
    try:
        request = ASGIRequest(scope, io.BytesIO())
        try:
            request.get_host()  # ALLOWED_HOSTS, as Django checks every request the web tier serves
        except DisallowedHost:
            response: HttpResponseBase = problem_response(
                status=400, code="bad_request", detail="The Host header names a host this server does not serve."
            )
        else:
            response = _access_view(request)
            if hasattr(response, "render"):
                response.render()
    finally:
        close_old_connections()
    headers = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in response.items()]
    if response.status_code == 204:
        limits = [(name, value) for name, value in headers if name.decode() in _RATE_LIMIT_HEADERS]
        # DRF sets the authenticated principal on the Django request too.
        return AccessDecision(admitted=True, status=204, headers=limits, body=b"", caller=request.user)
    return AccessDecision(
        admitted=False, status=response.status_code, headers=headers, body=getattr(response, "content", b"")
    )
