"""GET /api/<COIN_SEGMENT>/balance (wallet credentials) and GET /api/<COIN_SEGMENT>/history (public)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from agentplatform.plumbing.authentication import request_principal
from agentplatform.plumbing.errors import problem_responses
from agentplatform.plumbing.query_params import query_validated
from agentplatform.plumbing.ratelimits import RateLimitedViewMixin
from agentplatform.plumbing.response_cache import cached_response
from coin.permissions import IsWalletCredential, wallet_read_ensure_allowed
from coin.selectors import price_history_json, wallet_balance_get
from coin.serializers import (
    HISTORY_LIMIT_DEFAULT,
    HISTORY_LIMIT_MAX,
    HISTORY_LIMIT_RULE,
    PERIOD_PATTERN,
    PERIOD_RULE,
    BalanceQuerySerializer,
    BalanceSerializer,
    HistoryQuerySerializer,
    PriceHistorySerializer,
)


class CoinViewSet(RateLimitedViewMixin, viewsets.ViewSet):
    """The platform token: one wallet's balance and the price history."""

    @extend_schema(
        operation_id="coin_balance",
        summary="Read a wallet's token balance",
        description=(
            "Needs a wallet session (`ws_…`, from POST /api/auth/wallet) for this address or a user API key "
            "(`uk_…`) bound to it. The address is matched case-insensitively; an address that never held "
            "tokens has balance 0."
        ),
        parameters=[BalanceQuerySerializer],
        responses={
            200: BalanceSerializer,
            **problem_responses(
                {
                    400: "`user_id` is missing or not a valid address.",
                    401: "No credentials, or a malformed, unknown, expired or revoked token.",
                    403: "An agent or service key, or credentials bound to another address.",
                }
            ),
        },
        tags=["token"],
    )
    @action(detail=False, methods=["get"], permission_classes=[IsWalletCredential])
    def balance(self, request: Request) -> Response:
        address = query_validated(BalanceQuerySerializer, request)["user_id"]
        wallet_read_ensure_allowed(principal=request_principal(request), address=address)
        return Response(BalanceSerializer({"balance": wallet_balance_get(address=address)}).data)

    @extend_schema(
        operation_id="coin_history",
        summary="Read the token's price history",
        description=(
            "`current` is the newest price point. The period ends at that point; `history` holds at most "
            "`limit` points covering it, oldest first (the period is cut into `limit` equal time buckets, "
            "each non-empty bucket giving its last price). Public; no credentials needed."
        ),
        parameters=[
            OpenApiParameter(
                "period",
                {"type": "string", "pattern": PERIOD_PATTERN, "default": "7d"},
                required=False,
                description=f"`period` {PERIOD_RULE}.",
            ),
            OpenApiParameter(
                "limit",
                {"type": "integer", "minimum": 1, "maximum": HISTORY_LIMIT_MAX, "default": HISTORY_LIMIT_DEFAULT},
                required=False,
                description=f"Most points in `history`; {HISTORY_LIMIT_RULE}.",
            ),
        ],
        responses={
            200: PriceHistorySerializer,
            **problem_responses(
                {
                    400: "`period` or `limit` is malformed; the detail names the allowed values.",
                    401: "A bearer token was sent but is malformed, unknown, expired or revoked.",
                    404: "There is no price data at all (`no_price_data`).",
                }
            ),
        },
        tags=["token"],
    )
    @action(detail=False, methods=["get"])
    @cached_response
    def history(self, request: Request) -> Response:
        query = query_validated(HistoryQuerySerializer, request, remember=True)
        # `history` was written by PostgreSQL from PriceSampleSerializer's fields (coin/selectors.py).
        history = price_history_json(period=query["period"], limit=query["limit"])
        return Response(PriceHistorySerializer(history).data)
