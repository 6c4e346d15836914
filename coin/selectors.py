"""Reads of wallet balances and the token's price history."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Generic, TypeVar

from django.db import connection

from agentplatform.plumbing.errors import NotFound
from agentplatform.plumbing.prepared_statements import prepared_cursor
from agentplatform.plumbing.renderers import RenderedJSON
from agentplatform.plumbing.sql_json import json_array, serializer_json_object
from coin.models import PricePoint, Wallet
from coin.serializers import PriceSampleSerializer

NO_PRICE_DATA = "There is no price data yet."
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


# The samples as rows, or as JSON PostgreSQL wrote in PriceSampleSerializer's shape (RenderedJSON).
Samples = TypeVar("Samples", list[PriceSample], RenderedJSON)


@dataclass(frozen=True)
class PriceHistory(Generic[Samples]):
    current: CurrentPrice
    price_change_percent: Decimal
    history: Samples


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
_PERIOD_POINTS = """
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
), points AS (
    SELECT last_point.timestamp, last_point.price, last_point.price_float
    FROM newest n
    CROSS JOIN buckets
    CROSS JOIN LATERAL (
        SELECT p.timestamp, p.price, p.price::float8 AS price_float FROM {table} p
        WHERE p.timestamp >= buckets.low AND p.timestamp < buckets.high
        ORDER BY p.timestamp DESC LIMIT 1
    ) AS last_point
)
"""
_FIRST_PRICE = "(SELECT f.price FROM {table} f WHERE f.timestamp > n.period_start ORDER BY f.timestamp LIMIT 1)"
# The points as rows, for the admin's chart.
_HISTORY_SQL = (
    _PERIOD_POINTS
    + f"""
SELECT points.timestamp, points.price, n.timestamp, n.price, n.supply, {_FIRST_PRICE}
FROM newest n CROSS JOIN points
ORDER BY points.timestamp
"""
)
# A point as PriceSampleSerializer writes it, rendered by PostgreSQL (agentplatform/plumbing/sql_json.py).
# The price as float8 once per point (json_number refers to its value four times, and PostgreSQL
# converts a numeric to float8 through text).
_SAMPLE_JSON = serializer_json_object(
    PriceSampleSerializer, {"price": "points.price_float", "timestamp": "points.timestamp"}
)
_HISTORY_JSON_SQL = (
    _PERIOD_POINTS
    + f"""
SELECT n.timestamp, n.price, n.supply, {_FIRST_PRICE},
       (SELECT {json_array(_SAMPLE_JSON, order_by="points.timestamp")} FROM points)
FROM newest n
"""
)


def _history_query(sql: str, *, period: timedelta, limit: int) -> tuple[str, dict[str, Any]]:
    params = {"period": period, "period_us": period // timedelta(microseconds=1), "limit": limit}
    # replace(), not format(): the JSON builders' SQL holds braces.
    return sql.replace("{table}", connection.ops.quote_name(PricePoint._meta.db_table)), params


def _change_percent(newest_price: Decimal, first_price: Decimal) -> Decimal:
    return ((newest_price - first_price) / first_price * 100).quantize(PERCENT_PLACES, rounding=ROUND_HALF_UP)


def _market_cap(price: Decimal, supply: Decimal) -> Decimal:
    return (price * supply).quantize(MONEY_PLACES, rounding=ROUND_HALF_UP)


def price_history_get(*, period: timedelta, limit: int) -> PriceHistory[list[PriceSample]]:
    """The newest price point and at most `limit` points covering `period`, oldest first.

    The period ends at the newest price point, so `current` and `history` always describe the
    same moment, also when the price feed has paused. Each point is the last price of its time
    bucket (period / limit wide). price_change_percent = (newest - first) / first * 100 over
    the raw points of the period, rounded half-up to 2 decimals. One SQL query; 404 when there
    is no price data at all.
    """
    with connection.cursor() as cursor:
        cursor.execute(*_history_query(_HISTORY_SQL, period=period, limit=limit))
        rows = cursor.fetchall()
    if not rows:
        raise NotFound(NO_PRICE_DATA, code="no_price_data")
    _, _, newest_at, newest_price, supply, first_price = rows[0]
    samples = [PriceSample(price=price, timestamp=timestamp) for timestamp, price, *_ in rows]
    return _price_history(newest_at, newest_price, supply, first_price, history=samples)


def price_history_json(*, period: timedelta, limit: int) -> PriceHistory[RenderedJSON]:
    """What price_history_get reads, in one query that also writes the history as JSON
    (GET /api/<COIN_SEGMENT>/history sends it through PriceHistorySerializer); 404 when there is
    no price data at all."""
    with prepared_cursor() as cursor:
        cursor.execute(*_history_query(_HISTORY_JSON_SQL, period=period, limit=limit))
        row = cursor.fetchone()
    if row is None:
        raise NotFound(NO_PRICE_DATA, code="no_price_data")
    newest_at, newest_price, supply, first_price, history = row
    return _price_history(newest_at, newest_price, supply, first_price, history=RenderedJSON(history))


def _price_history(
    newest_at: datetime,
    newest_price: Decimal,
    supply: Decimal,
    first_price: Decimal,
    *,
    history: Samples,
) -> PriceHistory[Samples]:
    return PriceHistory(
        current=CurrentPrice(
            price=newest_price,
            supply=supply,
            market_cap=_market_cap(newest_price, supply),
            timestamp=newest_at,
        ),
        price_change_percent=_change_percent(newest_price, first_price),
        history=history,
    )
