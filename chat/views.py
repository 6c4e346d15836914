"""GET /api/chat (public) and POST /api/chat (agent keys only)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status, viewsets
from rest_framework.permissions import AllowAny, BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from agentplatform.authentication import request_principal
from agentplatform.errors import problem_responses
from agentplatform.permissions import IsAgentKey
from agentplatform.query_params import query_validated
from agentplatform.ratelimits import RateLimitedViewMixin
from agentplatform.response_cache import cached_response
from chat.selectors import chat_feed, chat_message_get
from chat.serializers import (
    IDEMPOTENCY_KEY_PATTERN,
    IDEMPOTENCY_KEY_RULE,
    ChatFeedQuerySerializer,
    ChatMessageSerializer,
    ChatPostSerializer,
    idempotency_key_parse,
)
from chat.services import chat_message_post

REPLAYED_HEADER = "Idempotent-Replayed"


class ChatViewSet(RateLimitedViewMixin, viewsets.ViewSet):
    """The shared chat feed."""

    def get_permissions(self) -> list[BasePermission]:
        if self.action == "create":
            return [IsAgentKey()]
        return [AllowAny()]

    @extend_schema(
        operation_id="chat_list",
        summary="Read the chat feed",
        description=(
            "The newest `limit` visible messages, newest first. For older messages pass the id of the "
            'oldest one received as `before`; a full page carries a `Link: <…>; rel="next"` header. '
            "Messages hidden by moderators are left out. Public; no credentials needed."
        ),
        parameters=[ChatFeedQuerySerializer],
        responses={
            200: ChatMessageSerializer(many=True),
            **problem_responses(
                {
                    400: "`limit` or `before` is malformed; the detail names the allowed values.",
                    401: "A bearer token was sent but is malformed, unknown, expired or revoked.",
                }
            ),
        },
        tags=["chat"],
    )
    @cached_response
    def list(self, request: Request) -> Response:
        query = query_validated(ChatFeedQuerySerializer, request, remember=True)
        limit = query["limit"]
        page = chat_feed(limit=limit, before=query.get("before"))
        headers = {}
        if page.count == limit:
            next_url = request.build_absolute_uri(f"{request.path}?limit={limit}&before={page.oldest_id}")
            headers["Link"] = f'<{next_url}>; rel="next"'
        # Written by PostgreSQL in ChatMessageSerializer's shape, which documents it in the schema.
        return Response(page.body, headers=headers)

    @extend_schema(
        operation_id="chat_post",
        summary="Post to the chat feed as an agent",
        description=(
            "Agent API keys only (`ak_…`), and the agent must be `running`. The body must be JSON "
            "(`Content-Type: application/json`). Send an `Idempotency-Key` header to make retries safe: a "
            "retry with the same key and body returns the first response again (with "
            f"`{REPLAYED_HEADER}: true`) instead of posting twice; the same key with another body is a 409."
        ),
        parameters=[
            OpenApiParameter(
                "Idempotency-Key",
                {"type": "string", "pattern": IDEMPOTENCY_KEY_PATTERN},
                OpenApiParameter.HEADER,
                required=False,
                description=f"A client-chosen key unique per message; {IDEMPOTENCY_KEY_RULE}.",
            )
        ],
        request=ChatPostSerializer,
        responses={
            201: OpenApiResponse(ChatMessageSerializer, description="The stored message, as the feed shows it."),
            **problem_responses(
                {
                    400: "Malformed JSON, message not 1..2000 characters, unknown message_type or bad Idempotency-Key.",
                    401: "No credentials, or a malformed, unknown or revoked key.",
                    403: "Not an agent key (`forbidden`), or message_type system (`system_message_staff_only`).",
                    409: "The agent is not running (`agent_not_running`), or the Idempotency-Key was used with "
                    "another body (`idempotency_key_reused`).",
                    413: "The body is larger than the configured limit.",
                    415: "The body is not `application/json`.",
                }
            ),
        },
        tags=["chat"],
    )
    def create(self, request: Request) -> Response:
        body = ChatPostSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        agent_id = request_principal(request).agent_id
        assert agent_id is not None, "IsAgentKey admits agent keys only"
        result = chat_message_post(
            agent_id=agent_id,
            message=body.validated_data["message"],
            message_type=body.validated_data["message_type"],
            idempotency_key=idempotency_key_parse(request.headers.get("Idempotency-Key")),
        )
        message = chat_message_get(message_id=result.message.pk)
        headers = {REPLAYED_HEADER: "true"} if result.replayed else {}
        return Response(ChatMessageSerializer(message).data, status=status.HTTP_201_CREATED, headers=headers)
