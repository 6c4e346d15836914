import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.urls import reverse

from tests.adminpages import changelist_cells, changelist_headers
from tests.coin.factories import PricePointFactory, WalletFactory

pytestmark = pytest.mark.django_db


def _polylines(content: bytes) -> list[list[tuple[float, float]]]:
    lines = re.findall(rb'<polyline class="price-line" points="([^"]+)"', content)
    return [[tuple(float(v) for v in pair.split(b",")) for pair in line.split()] for line in lines]


def test_price_point_list_draws_the_history_as_inline_svg(admin_client):
    start = datetime(2026, 6, 1, tzinfo=UTC)
    for hour, price in enumerate(["1", "3", "2"]):
        PricePointFactory(timestamp=start + timedelta(hours=hour), price=Decimal(price))

    response = admin_client.get(reverse("admin:coin_pricepoint_changelist"))

    assert response.status_code == 200
    charts = re.findall(rb'<figure class="price-chart".*?</figure>', response.content, re.S)
    assert len(charts) == 2
    # Drawn on the server: nothing is fetched from elsewhere.
    assert all(re.findall(rb"https?://[^\"]*", chart) == [b"http://www.w3.org/2000/svg"] for chart in charts)
    # 7 days: every point, oldest left, the highest price at the top. 90 days in 240 buckets of 9 h:
    # the three hours share one bucket, whose last price is drawn alone in the middle.
    assert _polylines(response.content) == [[(88.0, 212.0), (418.0, 12.0), (748.0, 112.0)], [(418.0, 112.0)]]
    assert b"Price, last 7 days (3 points)" in response.content
    assert b"+100.00 % over the period" in response.content


def test_coin_app_page_shows_the_chart(admin_client):
    PricePointFactory(timestamp=datetime(2026, 6, 1, tzinfo=UTC), price=Decimal("0.05"))

    response = admin_client.get(reverse("admin:app_list", args=["coin"]))

    assert response.status_code == 200
    assert _polylines(response.content) == [[(418.0, 112.0)]]


def test_chart_without_price_data_says_so(admin_client):
    response = admin_client.get(reverse("admin:coin_pricepoint_changelist"))

    assert response.status_code == 200
    assert b"No price data for the last 7 days yet." in response.content
    assert b'class="price-chart"' not in response.content


def test_wallets_are_listed_read_only_and_found_by_checksummed_address(admin_client):
    WalletFactory(address="0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed", balance=Decimal("12"))
    WalletFactory(address="0x" + "1" * 40)
    url = reverse("admin:coin_wallet_changelist")

    response = admin_client.get(url, {"q": "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"})

    assert [w.address for w in response.context["cl"].result_list] == ["0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed"]
    assert admin_client.get(reverse("admin:coin_wallet_add")).status_code == 403


def test_wallet_balances_show_two_decimals(admin_client):
    WalletFactory(address="0x" + "2" * 40, balance=Decimal("15000.00000000"))
    WalletFactory(address="0x" + "3" * 40, balance=Decimal("0.12500000"))

    response = admin_client.get(reverse("admin:coin_wallet_changelist"))

    assert changelist_headers(response) == ["Address", "Balance", "Updated at"]
    assert [row[:2] for row in changelist_cells(response)] == [
        ["0x" + "2" * 40, "15,000.00"],
        ["0x" + "3" * 40, "0.13"],
    ]


def test_price_points_show_the_price_at_the_tokens_precision_and_amounts_rounded(admin_client):
    at = datetime(2026, 6, 1, 12, tzinfo=UTC)
    PricePointFactory(timestamp=at, price=Decimal("0.05420352"), supply=Decimal("1026861165.00000000"))
    PricePointFactory(timestamp=at + timedelta(hours=1), price=Decimal("12.50000000"), supply=Decimal("1000.4"))

    response = admin_client.get(reverse("admin:coin_pricepoint_changelist"))

    assert changelist_headers(response) == ["Timestamp", "Price", "Supply", "Market cap"]
    assert [row[1:] for row in changelist_cells(response)] == [
        ["12.5", "1,000", "12,505.00"],
        ["0.05420352", "1,026,861,165", "55,659,489.69"],
    ]
