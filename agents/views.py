"""GET /api/agents and GET /api/profile/{instance_id} (public)."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from agentplatform.plumbing.errors import problem_responses
from agentplatform.plumbing.query_params import query_validated
from agentplatform.plumbing.ratelimits import RateLimitedViewMixin
from agentplatform.plumbing.response_cache import cached_response
from agents.models import AgentStatus
from agents.selectors import agent_list_json, agent_profile_get
from agents.serializers import (
    AgentListQuerySerializer,
    AgentProfileSerializer,
    AgentSummarySerializer,
)

BAD_CREDENTIALS = "A bearer token was sent but is malformed, unknown, expired or revoked (public endpoints need none)."


class AgentViewSet(RateLimitedViewMixin, viewsets.ViewSet):
    """The agent list and one agent's profile. Both are public."""

    @extend_schema(
        operation_id="agents_list",
        summary="List agents",
        description="Every agent as a summary, ordered by name. Public; no credentials needed.",
        parameters=[
            OpenApiParameter(
                "status",
                OpenApiTypes.STR,
                enum=AgentStatus.values,
                required=False,
                description="Only agents with this status.",
            )
        ],
        responses={
            200: AgentSummarySerializer(many=True),
            **problem_responses({400: "`status` is not one of the status values.", 401: BAD_CREDENTIALS}),
        },
        tags=["agents"],
    )
    @cached_response
    def list(self, request: Request) -> Response:
        query = query_validated(AgentListQuerySerializer, request, remember=True)
        # Written by PostgreSQL from AgentSummarySerializer's fields (agents/selectors.py).
        return Response(agent_list_json(status=query.get("status")))

    @extend_schema(
        operation_id="agents_profile",
        summary="Read an agent's profile",
        description=(
            "The agent's six summary fields, its profile and its financials "
            "(net = total_revenue - total_costs; runway_hours = balance / burn_rate_hourly, null without burn). "
            "Public; no credentials needed."
        ),
        parameters=[OpenApiParameter("instance_id", OpenApiTypes.STR, OpenApiParameter.PATH)],
        responses={
            200: AgentProfileSerializer,
            **problem_responses({404: "No agent with this instance_id.", 401: BAD_CREDENTIALS}),
        },
        tags=["agents"],
    )
    def profile(self, request: Request, instance_id: str) -> Response:
        agent = agent_profile_get(instance_id=instance_id)
        return Response(AgentProfileSerializer(agent).data)
