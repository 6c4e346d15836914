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


# One statement, whose cost grows with `limit`, not with the number of points in the period:
# the newest point anchors the period (start, end]; generate_series makes the `limit` equal time
# buckets, and for each bucket one backward probe of the unique timestamp index fetches its last
# point (LATERAL ... ORDER BY timestamp DESC LIMIT 1). Empty buckets give no row.
#
# Bucket b holds the points whose offset e from the start satisfies b <= e * limit / period < b + 1.
# Timestamps have microsecond resolution, so the bounds are taken as whole microseconds rounded up
# (integer arithmetic, exact): e >= P*b/L  <=>  e >= ceil_us(P*b/L). The first bucket excludes the
# start itself and the last one is open-ended, which holds the newest point at exactly `end`. The
# microsecond counts stay below 2**53 (365 days is 3.2e13 us), so scaling the interval by them is exact.
# `first_price` is the earliest point of the period, the base of price_change_percent.
_HISTORY_SQL = """
WITH newest AS (
    SELECT timestamp, price, supply, timestamp - %(period)s AS period_start
    FROM {table} ORDER BY timestamp DESC LIMIT 1
), buckets AS (
    SELECT
        n.period_start
            + ((%(period_us)s * b + %(limit)s - 1) / %(limit)s) * INTERVAL '1 microsecond'
            + CASE WHEN b = 0 THEN INTERVAL '1 microsecond' ELSE INTERVAL '0' END AS low,
        CASE WHEN b = %(limit)s - 1 THEN 'infinity'::timestamptz
             ELSE n.period_start + ((%(period_us)s * (b + 1) + %(limit)s - 1) / %(limit)s) * INTERVAL '1 microsecond'
        END AS high
    FROM newest n CROSS JOIN generate_series(0::bigint, %(limit)s - 1) AS b
)
SELECT last_point.timestamp, last_point.price, n.timestamp, n.price, n.supply,
       (SELECT f.price FROM {table} f WHERE f.timestamp > n.period_start ORDER BY f.timestamp LIMIT 1)
FROM newest n
CROSS JOIN buckets
CROSS JOIN LATERAL (
    SELECT p.timestamp, p.price FROM {table} p
    WHERE p.timestamp >= buckets.low AND p.timestamp < buckets.high
    ORDER BY p.timestamp DESC LIMIT 1
) AS last_point
ORDER BY last_point.timestamp
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
    params = {"period": period, "period_us": period // timedelta(microseconds=1), "limit": limit}
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
