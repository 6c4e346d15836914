"""Test-only urlconf: the real routes plus views that exist only to exercise the platform layer."""

from django.http import HttpRequest, HttpResponse
from django.urls import include, path
from rest_framework import viewsets
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agentplatform.plumbing.ratelimits import RateLimitedViewMixin


class TradingProbeViewSet(RateLimitedViewMixin, viewsets.ViewSet):
    """`trade` stands for an endpoint that moves tokens (none exists in the API yet)."""

    trading_actions = frozenset({"trade"})
    permission_classes = [IsAuthenticated]

    def trade(self, request: Request) -> Response:
        return Response({"traded": True})

    def quote(self, request: Request) -> Response:
        return Response({"quote": 1})


class ExplodingApiView(RateLimitedViewMixin, APIView):
    def get(self, request: Request) -> Response:
        raise RuntimeError("an unexpected failure with a secret-looking detail: sk_123")


def exploding_django_view(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("an unexpected failure outside DRF")


urlpatterns = [
    path("api/test/trade", TradingProbeViewSet.as_view({"post": "trade"})),
    path("api/test/quote", TradingProbeViewSet.as_view({"get": "quote"})),
    path("api/test/explode", ExplodingApiView.as_view()),
    path("api/test/explode-plain", exploding_django_view),
    path("", include("agentplatform.urls")),
]
