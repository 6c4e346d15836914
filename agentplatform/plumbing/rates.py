"""The one syntax of a rate limit (`100/m`, `10/5m`): the settings check it at start-up and the
rate limiter reads it. Plain Python, no Django: the settings module imports it.
"""

from __future__ import annotations

import re

RATE_PATTERN = re.compile(r"(?P<count>[1-9]\d*)/(?P<multiplier>[1-9]\d*)?(?P<unit>[smhd])")
RATE_RULE = "must look like 100/m (count/[n]s|m|h|d)"
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def rate_parse(rate: str) -> tuple[int, int]:
    """`"100/m"` -> (100, 60); `"5/10s"` -> (5, 10): (count, period in seconds). Raises ValueError."""
    match = RATE_PATTERN.fullmatch(rate.strip())
    if match is None:
        raise ValueError(f"rate {rate!r} {RATE_RULE}")
    multiplier = int(match["multiplier"] or 1)
    return int(match["count"]), multiplier * UNIT_SECONDS[match["unit"]]
