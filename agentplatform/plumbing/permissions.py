"""Who may call what (DECISIONS.md, Authentication), by the kind and scopes of the principal
that agentplatform/plumbing/authentication.py put on the request."""

from __future__ import annotations

from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView

from agentplatform.plumbing.authentication import AGENT, SERVICE

# Scopes a service key may hold.
READ_SCOPE = "read"
INGEST_SCOPE = "ingest"


def _principal_kind(request: Request) -> str | None:
    return getattr(request.user, "kind", None)


class IsAgentKey(BasePermission):
    message = "Only an agent API key may do this."

    def has_permission(self, request: Request, view: APIView) -> bool:
        return _principal_kind(request) == AGENT


class _ServiceScope(BasePermission):
    """A service key holding `scope`, or a signed-in staff user (admin session)."""

    scope: str

    def has_permission(self, request: Request, view: APIView) -> bool:
        user = request.user
        if user is not None and getattr(user, "is_staff", False) and getattr(user, "is_active", False):
            return True
        return _principal_kind(request) == SERVICE and self.scope in getattr(user, "scopes", ())

    @property
    def message(self) -> str:
        return f"A service key with scope '{self.scope}' is required."


class HasServiceReadScope(_ServiceScope):
    scope = READ_SCOPE


class HasServiceIngestScope(_ServiceScope):
    scope = INGEST_SCOPE
