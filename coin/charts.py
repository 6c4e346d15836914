"""The price chart of the coin admin: a line drawn as inline SVG on the server (no script, no CDN)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from coin.selectors import PriceHistory

WIDTH, HEIGHT = 760, 240
LEFT, RIGHT, TOP, BOTTOM = 88, 12, 12, 28  # room for the axis labels


@dataclass(frozen=True)
class AxisLabel:
    x: float
    y: float
    text: str


@dataclass(frozen=True)
class PriceChart:
    title: str
    width: int
    height: int
    line_points: str  # SVG polyline points, "x,y x,y ..."
    area_points: str  # the same line closed down to the x axis
    grid_lines: list[AxisLabel]  # horizontal lines at these y, labelled with the price
    time_labels: list[AxisLabel]
    current_price: Decimal
    price_change_percent: Decimal
    sample_count: int
    plot_left: int
    plot_right: int
    plot_bottom: int


def price_text(price: Decimal) -> str:
    """A price at the token's precision without trailing zeros: 8 decimals below 1, else 4."""
    return f"{price:,.8f}".rstrip("0").rstrip(".") if price < 1 else f"{price:,.4f}".rstrip("0").rstrip(".")


def price_chart_build(*, history: PriceHistory, period: timedelta) -> PriceChart:
    """Scales the history into the plot area: time left to right over its own span, price bottom to
    top between the lowest and highest price (a flat series is drawn mid-height)."""
    samples = history.history
    plot_width, plot_height = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    first_at, last_at = samples[0].timestamp, samples[-1].timestamp
    span = (last_at - first_at).total_seconds()
    low = min(sample.price for sample in samples)
    high = max(sample.price for sample in samples)

    def x_of(moment: datetime) -> float:
        if span == 0:
            return LEFT + plot_width / 2
        return LEFT + (moment - first_at).total_seconds() / span * plot_width

    def y_of(price: Decimal) -> float:
        if high == low:
            return TOP + plot_height / 2
        return TOP + float((high - price) / (high - low)) * plot_height

    coordinates = [(round(x_of(s.timestamp), 1), round(y_of(s.price), 1)) for s in samples]
    line = " ".join(f"{x},{y}" for x, y in coordinates)
    bottom = TOP + plot_height
    area = f"{coordinates[0][0]},{bottom} {line} {coordinates[-1][0]},{bottom}"
    levels = [high, (high + low) / 2, low] if high != low else [high]
    days = period.days or 1
    date_format = "%Y-%m-%d %H:%M" if days <= 2 else "%Y-%m-%d"
    return PriceChart(
        title=f"Price, last {days} day{'s' if days != 1 else ''} ({len(samples)} points)",
        width=WIDTH,
        height=HEIGHT,
        line_points=line,
        area_points=area,
        grid_lines=[AxisLabel(x=LEFT - 6, y=round(y_of(level), 1), text=price_text(level)) for level in levels],
        time_labels=[
            AxisLabel(x=LEFT, y=HEIGHT - 8, text=first_at.strftime(date_format)),
            AxisLabel(x=WIDTH - RIGHT, y=HEIGHT - 8, text=last_at.strftime(date_format)),
        ],
        current_price=history.current.price,
        price_change_percent=history.price_change_percent,
        sample_count=len(samples),
        plot_left=LEFT,
        plot_right=WIDTH - RIGHT,
        plot_bottom=bottom,
    )
