"""Amounts of the platform token: one column shape for every table and expression that holds one."""

from __future__ import annotations

from typing import TypedDict


class MoneyColumn(TypedDict):
    # Typed so that `DecimalField(**MONEY)` is checked keyword by keyword.
    max_digits: int
    decimal_places: int


MONEY: MoneyColumn = {"max_digits": 20, "decimal_places": 8}
