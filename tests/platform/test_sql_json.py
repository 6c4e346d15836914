"""JSON written by PostgreSQL is byte for byte what DRF writes from the serializers for the same rows.

The agent list, the chat feed and the price history are rendered in SQL generated from their
serializers (agentplatform/plumbing/sql_json.py), which also document the shape. These tests render the
same rows both ways, with values chosen where the two could part: escapes, non-ASCII, U+2028,
whole and tiny amounts, the largest column value, microseconds and none, NULL.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.conf import settings
from django.db import connection
from rest_framework.renderers import JSONRenderer

from agentplatform.plumbing.renderers import JSONRenderer as APIJSONRenderer
from agentplatform.plumbing.renderers import RenderedJSON
from agentplatform.plumbing.sql_json import json_number, json_object, json_text, json_timestamp
from agents.models import Agent, AgentStatus
from agents.serializers import AgentSummarySerializer
from chat.models import MessageType
from chat.selectors import chat_messages_with_sender
from chat.serializers import ChatMessageSerializer
from coin.selectors import price_history_get
from coin.serializers import PriceHistorySerializer
from tests.agents.factories import AgentFactory
from tests.chat.factories import ChatMessageFactory
from tests.coin.factories import PricePointFactory

pytestmark = pytest.mark.django_db

AWKWARD_TEXTS = [
    'quote " backslash \\ slash /',
    "tab\tnewline\nreturn\rbackspace\bformfeed\f",
    "control \x01 \x1f and delete \x7f",
    "non-ASCII: é ß 東京 😀",
    "line separators \u2028 and \u2029",
    "",
]
AMOUNTS = [
    "0",
    "0.00000001",
    "0.00009999",
    "0.0001",
    "300",
    "1000.12345678",
    "18678.25",
    "123456789012.12345678",
    "999999999999.99999999",
]


def drf_rendering(data: object) -> bytes:
    return JSONRenderer().render(data)


def select_one(sql: str, params: list[object]) -> str:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()[0]


# --- the builders ---------------------------------------------------------------------------


def test_numbers_are_written_as_python_writes_the_float_of_the_decimal():
    rng = random.Random(7)
    values = [Decimal(amount) for amount in AMOUNTS] + [
        Decimal(rng.randrange(10**12 * 10**8)).scaleb(-rng.randint(0, 8)) for _ in range(5000)
    ]
    values = [value for value in values if value < Decimal("1e12")]

    written = select_one(
        f"SELECT string_agg({json_number('v')}, ' ' ORDER BY i)"
        " FROM unnest(%s::numeric(20, 8)[]) WITH ORDINALITY AS t(v, i)",
        [values],
    )

    assert written.split(" ") == [json.dumps(float(value)) for value in values]


@pytest.mark.parametrize("text", AWKWARD_TEXTS)
def test_strings_are_escaped_as_the_json_module_escapes_them(text):
    assert select_one(f"SELECT {json_text('%s::text')}", [text]) == json.dumps(text, ensure_ascii=False)


@pytest.mark.parametrize(
    "moment",
    [
        datetime(2026, 5, 1, tzinfo=UTC),
        datetime(2026, 5, 1, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(2026, 5, 1, 0, 0, 0, 120000, tzinfo=UTC),
        datetime(1999, 12, 31, 23, 0, 1, 5, tzinfo=UTC),
    ],
)
def test_timestamps_are_written_as_the_serializers_write_them(moment):
    row = {"id": 1, "sender_name": "", "sender_instance_id": "", "message": "", "message_type": "chat"}
    expected = json.dumps(ChatMessageSerializer({**row, "created_at": moment}).data["created_at"])

    assert select_one(f"SELECT {json_timestamp('t')} FROM (SELECT %s::timestamptz AS t) AS v", [moment]) == expected


def test_null_is_null_and_keys_keep_their_order():
    sql = json_object([("b", json_text("NULL")), ("a", json_number("NULL")), ("c", json_timestamp("NULL"))])

    assert select_one(f"SELECT {sql}", []) == '{"b":null,"a":null,"c":null}'


def test_a_key_that_is_not_a_plain_name_is_refused():
    with pytest.raises(ValueError, match="not a plain name"):
        json_object([('a"b', json_text("1"))])


def test_an_object_with_a_member_written_by_the_database_is_sent_with_that_member_as_written():
    data = {"amount": Decimal("1.50"), "rows": RenderedJSON('[{"a":"\u2028"}]'), "text": "é\u2029"}

    assert APIJSONRenderer().render(data) == '{"amount":1.5,"rows":[{"a":"\\u2028"}],"text":"é\\u2029"}'.encode()
    assert APIJSONRenderer().render(data, "application/json; indent=2") == drf_rendering_indented(
        {"amount": 1.5, "rows": [{"a": "\u2028"}], "text": "é\u2029"}
    )


def drf_rendering_indented(data: object) -> bytes:
    return JSONRenderer().render(data, "application/json; indent=2")


# --- the endpoints ------------------------------------------------------------------------------


def test_agent_list_is_what_drf_writes_from_the_summary_serializer(api_client):
    for n, (text, amount) in enumerate(zip(AWKWARD_TEXTS, AMOUNTS, strict=False)):
        AgentFactory(
            instance_id=f"awkward-{n}",
            name=f"{text} {n}",
            status=AgentStatus.values[n % len(AgentStatus.values)],
            balance=Decimal(amount),
            total_revenue=Decimal(AMOUNTS[-1 - n]),
            total_costs=Decimal("0"),
            burn_rate_hourly=Decimal("0.00000001"),
        )
    AgentFactory(instance_id="same-name-b", name="Same")
    AgentFactory(instance_id="same-name-a", name="Same")

    every = api_client.get("/api/agents", HTTP_CACHE_CONTROL="no-cache")
    running = api_client.get("/api/agents", {"status": AgentStatus.RUNNING}, HTTP_CACHE_CONTROL="no-cache")

    agents = Agent.objects.order_by("name", "id")
    assert every.content == drf_rendering(AgentSummarySerializer(agents, many=True).data)
    assert running.content == drf_rendering(AgentSummarySerializer(agents.filter(status="running"), many=True).data)
    assert b"\\u2028" in every.content and b'"balance":1000.12345678' in every.content


def test_chat_feed_is_what_drf_writes_from_the_message_serializer(api_client):
    agent = AgentFactory(name="Sender \u2029 é")
    start = datetime(2026, 5, 1, tzinfo=UTC)
    for n, text in enumerate(AWKWARD_TEXTS[:-1]):
        ChatMessageFactory(agent=agent, message=text, created_at=start + timedelta(seconds=n, microseconds=n * 7))
    ChatMessageFactory(agent=None, message="maintenance at noon", message_type=MessageType.SYSTEM, created_at=start)

    response = api_client.get("/api/chat", {"limit": "4"}, HTTP_CACHE_CONTROL="no-cache")
    older = api_client.get("/api/chat", {"limit": "4", "before": response.json()[-1]["id"]})

    visible = chat_messages_with_sender().filter(hidden_at__isnull=True).order_by("-id")
    assert response.content == drf_rendering(ChatMessageSerializer(visible[:4], many=True).data)
    assert older.content == drf_rendering(ChatMessageSerializer(visible[4:8], many=True).data)
    assert len(older.json()) == 2


def test_price_history_is_what_drf_writes_from_the_history_serializer(api_client):
    start = datetime(2026, 5, 1, tzinfo=UTC)
    for n, price in enumerate(["0.00000001", "300", "1000.12345678", "0.0001", "999999999999.99999999", "2.5"]):
        PricePointFactory(
            timestamp=start + timedelta(hours=n, microseconds=n * 11), price=Decimal(price), supply=Decimal("1000000")
        )

    for period, limit in (("1d", 100), ("5h", 3), ("1h", 1)):
        response = api_client.get(
            f"/api/{settings.COIN_SEGMENT}/history",
            {"period": period, "limit": str(limit)},
            HTTP_CACHE_CONTROL="no-cache",
        )

        hours = int(period[:-1]) * (24 if period.endswith("d") else 1)
        history = price_history_get(period=timedelta(hours=hours), limit=limit)
        assert response.content == drf_rendering(PriceHistorySerializer(history).data)


def test_price_history_asked_indented_is_what_drf_writes_indented(api_client):
    start = datetime(2026, 5, 1, tzinfo=UTC)
    for n, price in enumerate(["0.5", "300", "2.00000001"]):
        PricePointFactory(timestamp=start + timedelta(hours=n), price=Decimal(price), supply=Decimal("1000000"))

    response = api_client.get(
        f"/api/{settings.COIN_SEGMENT}/history", {"period": "1d"}, HTTP_ACCEPT="application/json; indent=2"
    )

    history = price_history_get(period=timedelta(days=1), limit=100)
    assert response.content == drf_rendering_indented(PriceHistorySerializer(history).data)
    assert response.content.startswith(b'{\n  "current": {\n    "price": 2.00000001,')
