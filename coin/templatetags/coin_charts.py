from __future__ import annotations

from datetime import timedelta
from typing import Any

from django import template

from agentplatform.plumbing.errors import NotFound
from coin.charts import price_chart_build
from coin.selectors import price_history_get

register = template.Library()


@register.inclusion_tag("admin/coin/price_chart.html")
def price_chart(days: int, points: int = 240) -> dict[str, Any]:
    """The price of the last `days` days, downsampled to `points` (one SQL query), as an SVG chart."""
    period = timedelta(days=days)
    try:
        history = price_history_get(period=period, limit=points)
    except NotFound:
        return {"chart": None, "days": days}
    return {"chart": price_chart_build(history=history, period=period), "days": days}
