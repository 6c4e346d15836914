import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.conf import settings

from tests.coin.factories import PricePointFactory

pytestmark = pytest.mark.django_db

URL = f"/api/{settings.COIN_SEGMENT}/history"
T0 = datetime(2026, 5, 1, tzinfo=UTC)
PERIOD_RULE = (
    "must be a positive integer followed by a unit h, d or w (e.g. 24h, 7d, 4w), at most 365 days (8760h, 365d, 52w)"
)
LIMIT_RULE = "must be an integer from 1 to 1000"


def _hourly(prices: list[str], *, start: datetime = T0, supply: str = "1000000") -> None:
    """One price point per hour: prices[i] at start + i hours."""
    for hours, price in enumerate(prices):
        PricePointFactory(timestamp=start + timedelta(hours=hours), price=Decimal(price), supply=Decimal(supply))


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_history_downsamples_to_last_price_of_each_time_bucket(api_client):
    # Hours 0..10 with price = hour + 1; the newest point is at hour 10 and anchors the period.
    _hourly([str(hour + 1) for hour in range(11)], supply="2000")

    response = api_client.get(URL, {"period": "10h", "limit": "5"})

    assert response.status_code == 200
    # Period (hour 0, hour 10] in 5 buckets of 2 h: {1}, {2,3}, {4,5}, {6,7}, {8,9,10}; the point
    # at hour 0 lies on the open start of the period and is left out.
    assert response.json() == {
        "current": {"price": 11.0, "supply": 2000.0, "market_cap": 22000.0},
        "price_change_percent": 450.0,  # first price in the period 2 (hour 1), last 11
        "history": [
            {"price": 2.0, "timestamp": _iso(T0 + timedelta(hours=1))},
            {"price": 4.0, "timestamp": _iso(T0 + timedelta(hours=3))},
            {"price": 6.0, "timestamp": _iso(T0 + timedelta(hours=5))},
            {"price": 8.0, "timestamp": _iso(T0 + timedelta(hours=7))},
            {"price": 11.0, "timestamp": _iso(T0 + timedelta(hours=10))},
        ],
    }


def test_history_with_limit_above_point_count_returns_every_point_of_the_period(api_client):
    _hourly(["1.5", "2.5", "3.5", "4.5"])

    body = api_client.get(URL, {"period": "3h", "limit": "1000"}).json()

    assert body["history"] == [
        {"price": 2.5, "timestamp": _iso(T0 + timedelta(hours=1))},
        {"price": 3.5, "timestamp": _iso(T0 + timedelta(hours=2))},
        {"price": 4.5, "timestamp": _iso(T0 + timedelta(hours=3))},
    ]
    assert body["price_change_percent"] == 80.0


def test_history_with_limit_one_is_the_newest_point(api_client):
    _hourly(["1", "2", "3"])

    body = api_client.get(URL, {"period": "1d", "limit": "1"}).json()

    assert body["history"] == [{"price": 3.0, "timestamp": _iso(T0 + timedelta(hours=2))}]
    assert body["price_change_percent"] == 200.0


def test_default_period_is_seven_days_and_default_limit_one_hundred(api_client):
    # 10 days of hourly points: the default 7 days hold 168 of them, downsampled to 100.
    _hourly(["1"] * (24 * 10))

    body = api_client.get(URL).json()

    assert len(body["history"]) == 100
    newest = T0 + timedelta(hours=24 * 10 - 1)
    assert body["history"][-1]["timestamp"] == _iso(newest)
    # The first bucket (1.68 h wide) holds only the point 1 h into the period.
    assert body["history"][0]["timestamp"] == _iso(newest - timedelta(days=7) + timedelta(hours=1))


def test_weeks_are_seven_days(api_client):
    _hourly(["1"] * (24 * 15))

    body = api_client.get(URL, {"period": "2w", "limit": "1000"}).json()

    assert len(body["history"]) == 24 * 14


def test_price_change_percent_rounds_half_up_to_two_decimals(api_client):
    # +0.005 %: half-even would give 0.0
    _hourly(["8", "8.0004"])

    assert api_client.get(URL, {"period": "1d"}).json()["price_change_percent"] == 0.01


def test_price_change_percent_is_negative_for_a_fall(api_client):
    _hourly(["3", "2"])

    assert api_client.get(URL, {"period": "1d"}).json()["price_change_percent"] == -33.33


def test_single_price_point_has_zero_change(api_client):
    PricePointFactory(timestamp=T0, price=Decimal("0.05"), supply=Decimal("1000000000"))

    assert api_client.get(URL).json() == {
        "current": {"price": 0.05, "supply": 1000000000.0, "market_cap": 50000000.0},
        "price_change_percent": 0.0,
        "history": [{"price": 0.05, "timestamp": _iso(T0)}],
    }


def test_no_price_data_is_404_problem(api_client):
    response = api_client.get(URL)

    assert response.status_code == 404
    assert response.json() == {
        "type": "urn:problem:no_price_data",
        "title": "Not Found",
        "status": 404,
        "detail": "There is no price data yet.",
        "code": "no_price_data",
    }


@pytest.mark.parametrize("period", ["8760h", "365d", "52w", "1h"])
def test_periods_up_to_365_days_are_accepted(api_client, period):
    _hourly(["1"])

    assert api_client.get(URL, {"period": period}).status_code == 200


@pytest.mark.parametrize(
    "period", ["", "0d", "7", "d", "7x", "7D", "-1d", "1.5d", " 7d", "07d", "366d", "8761h", "53w", "9999999999d"]
)
def test_malformed_period_is_400_naming_allowed_values(api_client, period):
    _hourly(["1"])

    response = api_client.get(URL, {"period": period})

    assert response.status_code == 400
    assert response.json() == {
        "type": "urn:problem:invalid",
        "title": "Invalid input",
        "status": 400,
        "detail": f"period: {PERIOD_RULE}",
        "code": "invalid",
        "errors": [{"field": "period", "message": PERIOD_RULE}],
    }


@pytest.mark.parametrize("limit", ["0", "1001", "-5", "abc", "", "2.5", "1e3", "10.0", "+10"])
def test_malformed_limit_is_400_naming_the_range(api_client, limit):
    _hourly(["1"])

    response = api_client.get(URL, {"limit": limit})

    assert response.status_code == 400
    assert response.json()["errors"] == [{"field": "limit", "message": LIMIT_RULE}]
    assert response.json()["detail"] == f"limit: {LIMIT_RULE}"


def test_history_runs_one_query(api_client, django_assert_num_queries):
    _hourly(["1"] * 200)

    with django_assert_num_queries(1):
        assert len(api_client.get(URL, {"period": "8d", "limit": "50"}).json()["history"]) == 50


def test_bucket_bounds_are_exact_to_the_microsecond(api_client):
    # period 1 h in 7 buckets: the first bound is 3600 s / 7 = 514.2857142857... s after the start.
    newest = T0 + timedelta(hours=1)
    just_before = T0 + timedelta(microseconds=514_285_714)  # still in bucket 0
    on_or_after = T0 + timedelta(microseconds=514_285_715)  # the first microsecond of bucket 1
    for moment, price in [(just_before, "1"), (on_or_after, "2"), (newest, "3")]:
        PricePointFactory(timestamp=moment, price=Decimal(price))

    body = api_client.get(URL, {"period": "1h", "limit": "7"}).json()

    assert body["history"] == [
        {"price": 1.0, "timestamp": "2026-05-01T00:08:34.285714Z"},
        {"price": 2.0, "timestamp": "2026-05-01T00:08:34.285715Z"},
        {"price": 3.0, "timestamp": "2026-05-01T01:00:00Z"},
    ]


def test_the_published_period_pattern_admits_exactly_the_periods_of_1_to_365_days():
    from coin.serializers import MAX_PERIOD, PERIOD_PATTERN, PERIOD_UNITS

    spelled = {f"{count}{unit}": count * length for unit, length in PERIOD_UNITS.items() for count in range(10000)}
    admitted = {text for text in spelled if re.fullmatch(PERIOD_PATTERN, text)}

    assert admitted == {text for text, period in spelled.items() if timedelta(0) < period <= MAX_PERIOD}
    assert len(admitted) == 8760 + 365 + 52
    assert re.fullmatch(PERIOD_PATTERN, "07d") is None
