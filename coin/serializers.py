"""Query parsing and response shapes of the token endpoints."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import ROUND_HALF_UP
from typing import Any

from rest_framework import serializers

from agents.serializers import FlatRowSerializer, MoneyField, QueryIntegerField
from coin.addresses import ADDRESS_RULE, wallet_address_normalize

PERIOD_UNITS: dict[str, timedelta] = {"h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1)}
MAX_PERIOD = timedelta(days=365)
DEFAULT_PERIOD = timedelta(days=7)
PERIOD_RULE = (
    "must be a positive integer followed by a unit h, d or w (e.g. 24h, 7d, 4w), at most 365 days (8760h, 365d, 52w)"
)
# Six digits are enough for 8760h; a longer number is refused before int() sees it.
_PERIOD_PATTERN = re.compile(r"([1-9][0-9]{0,5})([hdw])")
HISTORY_LIMIT_MAX = 1000
HISTORY_LIMIT_DEFAULT = 100
HISTORY_LIMIT_RULE = f"must be an integer from 1 to {HISTORY_LIMIT_MAX}"


class WalletAddressField(serializers.CharField):
    """A wallet address, normalised to lower case (see coin.addresses)."""

    def __init__(self, **kwargs: Any) -> None:
        message = f"required: {ADDRESS_RULE}"
        kwargs.setdefault("error_messages", {"required": message, "blank": message})
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        text = super().to_internal_value(data)
        try:
            return wallet_address_normalize(text)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from exc


class PeriodField(serializers.CharField):
    """`<positive int><h|d|w>`, parsed to a timedelta of at most 365 days."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("error_messages", {"blank": PERIOD_RULE, "invalid": PERIOD_RULE})
        super().__init__(trim_whitespace=False, **kwargs)

    def to_internal_value(self, data: Any) -> timedelta:
        match = _PERIOD_PATTERN.fullmatch(super().to_internal_value(data))
        if match is None:
            raise serializers.ValidationError(PERIOD_RULE)
        period = int(match[1]) * PERIOD_UNITS[match[2]]
        if period > MAX_PERIOD:
            raise serializers.ValidationError(PERIOD_RULE)
        return period


class BalanceQuerySerializer(serializers.Serializer):
    user_id = WalletAddressField()


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


class PriceHistorySerializer(serializers.Serializer):
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
