"""Amounts of the platform token: one column shape for every table and expression that holds one,
and one way to show one to staff."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from typing import TypedDict


class MoneyColumn(TypedDict):
    # Typed so that `DecimalField(**MONEY)` is checked keyword by keyword.
    max_digits: int
    decimal_places: int


MONEY: MoneyColumn = {"max_digits": 20, "decimal_places": 8}


def money_text(amount: Decimal, places: int = 2) -> str:
    """An amount as staff read it in the admin: rounded half up to `places` decimals, with thousands
    separators (`14,102.31`). Stored amounts keep all MONEY decimal places."""
    quantum = Decimal(1).scaleb(-places)
    return f"{amount.quantize(quantum, rounding=ROUND_HALF_UP):,.{places}f}"
