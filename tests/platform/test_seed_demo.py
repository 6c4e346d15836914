import itertools
import json
import stat
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from agentplatform.demo.platform import demo_platform_seed
from agents.models import Agent, ApiKey
from chat.models import ChatMessage
from coin.models import PricePoint, Wallet
from tests.agents.factories import bearer

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 5, 21, 12, 34, 56, tzinfo=UTC)


@pytest.fixture
def var_dir(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    return tmp_path


def _snapshot() -> dict:
    return {
        "agents": list(
            Agent.objects.order_by("instance_id").values_list(
                "instance_id", "status", "balance", "total_revenue", "total_costs", "burn_rate_hourly", "owner_address"
            )
        ),
        "prices": list(PricePoint.objects.order_by("timestamp").values_list("timestamp", "price", "supply")),
        "wallets": list(Wallet.objects.order_by("address").values_list("address", "balance")),
        "chat": list(
            ChatMessage.objects.order_by("id").values_list(
                "agent__instance_id", "message", "message_type", "created_at"
            )
        ),
    }


def test_seed_creates_agents_in_every_state_prices_wallets_and_chat():
    platform = demo_platform_seed(now=NOW)

    statuses = sorted(Agent.objects.values_list("status", flat=True))
    assert statuses == ["error"] + ["paused"] * 2 + ["pending"] * 2 + ["running"] * 5 + ["stopped"] * 2
    timestamps = list(PricePoint.objects.order_by("timestamp").values_list("timestamp", flat=True))
    assert len(timestamps) == 90 * 24 + 1
    assert timestamps[-1] == datetime(2026, 5, 21, 12, tzinfo=UTC)
    assert timestamps[0] == datetime(2026, 5, 21, 12, tzinfo=UTC) - timedelta(days=90)
    assert all(b - a == timedelta(hours=1) for a, b in itertools.pairwise(timestamps))
    assert Wallet.objects.count() == 30
    assert Wallet.objects.get(address=platform.user_wallet_address).balance == Decimal("15000")
    assert ChatMessage.objects.count() == 400
    assert ChatMessage.objects.filter(hidden_at__isnull=False).count() == 2
    assert ChatMessage.objects.filter(message_type="system", agent__isnull=True).count() == 3
    assert (platform.agent_count, platform.price_point_count, platform.wallet_count, platform.chat_message_count) == (
        12,
        2161,
        30,
        400,
    )


def test_seed_is_deterministic():
    demo_platform_seed(now=NOW)
    first = _snapshot()
    for model in (ChatMessage, PricePoint, Wallet, ApiKey, Agent):
        model.objects.all().delete()

    demo_platform_seed(now=NOW)

    assert _snapshot() == first


def test_seed_twice_creates_nothing_the_second_time():
    demo_platform_seed(now=NOW)
    before = _snapshot()

    assert demo_platform_seed(now=NOW + timedelta(days=1)) is None
    assert _snapshot() == before
    assert ApiKey.objects.count() == 3


def test_demo_credentials_work_against_the_api(api_client):
    platform = demo_platform_seed(now=NOW)

    post = api_client.post("/api/chat", {"message": "hello from the demo"}, format="json", **bearer(platform.agent_key))
    balance = api_client.get(
        f"/api/{settings.COIN_SEGMENT}/balance",
        {"user_id": platform.user_wallet_address},
        **bearer(platform.user_key),
    )

    assert post.status_code == 201
    assert post.json()["sender_instance_id"] == "atlas-trader"
    assert balance.json() == {"balance": 15000.0}
    service = ApiKey.objects.get(kind="service")
    assert service.scopes == ["ingest", "read"]


def test_command_prints_credentials_once_and_writes_them_owner_only(var_dir):
    out = StringIO()

    call_command("seed_demo", "--once", stdout=out)

    path = var_dir / "demo-credentials.json"
    credentials = json.loads(path.read_text())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert set(credentials) == {
        "agent_key",
        "agent_instance_id",
        "user_key",
        "user_wallet_address",
        "service_key",
        "service_key_scopes",
    }
    assert credentials["agent_key"].startswith("ak_")
    assert credentials["user_key"].startswith("uk_")
    assert credentials["service_key"].startswith("sk_")
    assert credentials["service_key_scopes"] == ["read", "ingest"]
    printed = out.getvalue()
    assert f"AGENT_KEY={credentials['agent_key']}" in printed
    assert f"USER_KEY={credentials['user_key']}" in printed
    assert f"SERVICE_KEY={credentials['service_key']}" in printed


def test_command_with_once_does_nothing_when_demo_data_exists(var_dir):
    call_command("seed_demo", "--once", stdout=StringIO())
    written = (var_dir / "demo-credentials.json").read_text()
    out = StringIO()

    call_command("seed_demo", "--once", stdout=out)

    assert out.getvalue() == "Demo data already present; nothing to do.\n"
    assert (var_dir / "demo-credentials.json").read_text() == written
    assert Agent.objects.count() == 12
    assert ApiKey.objects.count() == 3


def test_command_without_once_refuses_to_seed_twice(var_dir):
    call_command("seed_demo", stdout=StringIO())

    with pytest.raises(CommandError, match="Demo data is already present"):
        call_command("seed_demo", stdout=StringIO())

    assert Agent.objects.count() == 12
