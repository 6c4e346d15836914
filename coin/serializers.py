"""Query parsing and response shapes of the token endpoints."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import ROUND_HALF_UP
from typing import Any

from rest_framework import serializers

from agentplatform.plumbing.query_params import QueryIntegerField
from agentplatform.plumbing.serializer_fields import FlatRowSerializer, MoneyField, WalletAddressField
from agentplatform.plumbing.wallet_addresses import ADDRESS_RULE

PERIOD_UNITS: dict[str, timedelta] = {"h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1)}
MAX_PERIOD = timedelta(days=365)
DEFAULT_PERIOD = timedelta(days=7)
PERIOD_RULE = (
    "must be a positive integer followed by a unit h, d or w (e.g. 24h, 7d, 4w), at most 365 days (8760h, 365d, 52w)"
)
# Exactly the periods of 1 to 365 days: 1-8760h, 1-365d, 1-52w (no sign, no leading zero). The
# OpenAPI schema publishes it, so a client can check a period before sending it.
PERIOD_PATTERN = (
    r"^(?:(?:[1-9][0-9]{0,2}|[1-7][0-9]{3}|8[0-6][0-9]{2}|87[0-5][0-9]|8760)h"
    r"|(?:[1-9][0-9]?|[12][0-9]{2}|3[0-5][0-9]|36[0-5])d"
    r"|(?:[1-9]|[1-4][0-9]|5[0-2])w)$"
)
_PERIOD_PATTERN = re.compile(PERIOD_PATTERN)
HISTORY_LIMIT_MAX = 1000
HISTORY_LIMIT_DEFAULT = 100
HISTORY_LIMIT_RULE = f"must be an integer from 1 to {HISTORY_LIMIT_MAX}"


class PeriodField(serializers.CharField):
    """`<positive int><h|d|w>`, parsed to a timedelta of at most 365 days."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("error_messages", {"blank": PERIOD_RULE, "invalid": PERIOD_RULE})
        super().__init__(trim_whitespace=False, **kwargs)

    def to_internal_value(self, data: Any) -> timedelta:  # type: ignore[override]  # parsed, not a string
        text = super().to_internal_value(data)
        if _PERIOD_PATTERN.fullmatch(text) is None:
            raise serializers.ValidationError(PERIOD_RULE)
        period = int(text[:-1]) * PERIOD_UNITS[text[-1]]
        assert period <= MAX_PERIOD  # the pattern admits nothing longer
        return period


class BalanceQuerySerializer(serializers.Serializer):
    user_id = WalletAddressField(help_text=f"The wallet address: {ADDRESS_RULE}.")


class BalanceSerializer(serializers.Serializer):
    """A wallet's token balance."""

    balance = MoneyField(help_text="Token balance of the wallet; 0 for an address that never held tokens.")


class HistoryQuerySerializer(serializers.Serializer):
    # The default is the parsed value: DRF does not run defaults through to_internal_value.
    period = PeriodField(required=False, default=DEFAULT_PERIOD)
    limit = QueryIntegerField(
        required=False,
        default=HISTORY_LIMIT_DEFAULT,
        min_value=1,
        max_value=HISTORY_LIMIT_MAX,
        error_messages={
            key: HISTORY_LIMIT_RULE for key in ("invalid", "min_value", "max_value", "max_string_length", "null")
        },
    )


class CurrentPriceSerializer(FlatRowSerializer):
    """The newest price point."""

    price = MoneyField()
    supply = MoneyField()
    market_cap = MoneyField(help_text="price x supply")


class PriceSampleSerializer(FlatRowSerializer):
    """One point of the history: the last price of its time bucket."""

    price = MoneyField()
    timestamp = serializers.DateTimeField(read_only=True)


class PriceHistorySerializer(FlatRowSerializer):
    """The token's newest price and its history over the requested period."""

    current = CurrentPriceSerializer(read_only=True, help_text="The newest price point.")
    price_change_percent = MoneyField(
        decimal_places=2,
        rounding=ROUND_HALF_UP,
        help_text="(last - first) / first x 100 over the prices of the period, rounded half-up to 2 decimals.",
    )
    history = PriceSampleSerializer(
        many=True,
        read_only=True,
        help_text=(
            "At most `limit` points, oldest first: the period is cut into `limit` equal time buckets and each "
            "non-empty bucket gives its last price."
        ),
    )
