"""Test-only urlconf: the real routes plus a probe that echoes who the bearer credential is."""

from django.urls import include, path
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agentplatform.plumbing.ratelimits import RateLimitedViewMixin


class WhoAmIView(RateLimitedViewMixin, APIView):
    permission_classes = [IsAuthenticated]

    def get(self, request: Request) -> Response:
        principal = request.user
        return Response(
            {
                "kind": principal.kind,
                "credential_id": principal.credential_id,
                "agent_id": principal.agent_id,
                "wallet_address": principal.wallet_address,
                "scopes": sorted(principal.scopes),
            }
        )


class WhoAmIWithoutRateLimitView(APIView):
    """A view without RateLimitedViewMixin: nothing checks remembered credentials for it."""

    permission_classes = [IsAuthenticated]

    def get(self, request: Request) -> Response:
        return Response({"credential_id": request.user.credential_id})


urlpatterns = [
    path("api/probe/whoami", WhoAmIView.as_view()),
    path("api/probe/whoami-unlimited", WhoAmIWithoutRateLimitView.as_view()),
    path("", include("agentplatform.urls")),
]
