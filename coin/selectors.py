"""Reads of wallet balances and the token's price history."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

from django.db import connection

from agentplatform.errors import NotFound
from coin.models import PricePoint, Wallet

PERCENT_PLACES = Decimal("0.01")
MONEY_PLACES = Decimal("0.00000001")


def wallet_balance_get(*, address: str) -> Decimal:
    """The balance of a lower-case address; an address without a wallet row holds 0."""
    balance = Wallet.objects.filter(address=address).values_list("balance", flat=True).first()
    return balance if balance is not None else Decimal("0")


@dataclass(frozen=True)
class PriceSample:
    price: Decimal
    timestamp: datetime


@dataclass(frozen=True)
class CurrentPrice:
    price: Decimal
    supply: Decimal
    market_cap: Decimal
    timestamp: datetime


@dataclass(frozen=True)
class PriceHistory:
    current: CurrentPrice
    price_change_percent: Decimal
    history: list[PriceSample]


# One statement: the newest point anchors the window (period ending at the newest point), the
# window's points are put in `limit` equal time buckets, and DISTINCT ON keeps the last point
# of each bucket. Bucket numbers use exact NUMERIC arithmetic on epoch seconds, so a point on a
# bucket boundary always lands in the same bucket; the newest point (exactly at the window's
# end) is clamped into the last bucket. `first_price` is the earliest raw point of the window,
# the base of price_change_percent.
_HISTORY_SQL = """
WITH newest AS (
    SELECT timestamp, price, supply FROM {table} ORDER BY timestamp DESC LIMIT 1
), in_window AS (
    SELECT p.timestamp, p.price,
           LEAST(
               FLOOR(EXTRACT(EPOCH FROM p.timestamp - (n.timestamp - %(period)s)) * %(limit)s / %(period_seconds)s),
               %(limit)s - 1
           ) AS bucket
    FROM {table} p CROSS JOIN newest n
    WHERE p.timestamp > n.timestamp - %(period)s AND p.timestamp <= n.timestamp
), bucket_last AS (
    SELECT DISTINCT ON (bucket) bucket, timestamp, price FROM in_window ORDER BY bucket, timestamp DESC
)
SELECT b.timestamp, b.price, n.timestamp, n.price, n.supply,
       (SELECT w.price FROM in_window w ORDER BY w.timestamp LIMIT 1)
FROM bucket_last b CROSS JOIN newest n
ORDER BY b.timestamp
"""


def price_history_get(*, period: timedelta, limit: int) -> PriceHistory:
    """The newest price point and at most `limit` points covering `period`, oldest first.

    The period ends at the newest price point, so `current` and `history` always describe the
    same moment, also when the price feed has paused. Each point is the last price of its time
    bucket (period / limit wide). price_change_percent = (newest - first) / first * 100 over
    the raw points of the period, rounded half-up to 2 decimals. One SQL query; 404 when there
    is no price data at all.
    """
    sql = _HISTORY_SQL.format(table=connection.ops.quote_name(PricePoint._meta.db_table))
    params = {"period": period, "period_seconds": int(period.total_seconds()), "limit": limit}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    if not rows:
        raise NotFound("There is no price data yet.", code="no_price_data")
    _, _, newest_at, newest_price, supply, first_price = rows[0]
    change = ((newest_price - first_price) / first_price * 100).quantize(PERCENT_PLACES, rounding=ROUND_HALF_UP)
    return PriceHistory(
        current=CurrentPrice(
            price=newest_price,
            supply=supply,
            market_cap=(newest_price * supply).quantize(MONEY_PLACES, rounding=ROUND_HALF_UP),
            timestamp=newest_at,
        ),
        price_change_percent=change,
        history=[PriceSample(price=price, timestamp=timestamp) for timestamp, price, *_ in rows],
    )
