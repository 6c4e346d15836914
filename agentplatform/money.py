"""Amounts of the platform token: one column shape for every table and expression that holds one."""

from __future__ import annotations

MONEY = {"max_digits": 20, "decimal_places": 8}
