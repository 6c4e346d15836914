"""How the admin's change lists show moments and durations: short enough that a list of a dozen
columns fits a 1400-pixel window (Django's default, "Nov. 22, 2026, 7:43 p.m.", takes twice the
room of `2026-11-22 19:43`)."""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone
from django.utils.formats import date_format


def moment_text(moment: datetime | None) -> str:
    """`2026-11-22 19:43` in the current time zone (settings.TIME_ZONE), or `—` for none: the
    DATETIME_FORMAT the change pages use too (agentplatform/plumbing/formats/en/formats.py)."""
    if moment is None:
        return "—"
    return date_format(timezone.localtime(moment), "DATETIME_FORMAT")


def duration_text(seconds: float) -> str:
    """A duration as a person reads it: `850 ms`, `4.2 s`, `3 min 5 s`, `2 h 4 min`."""
    if seconds < 1:
        return f"{round(seconds * 1000)} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"
