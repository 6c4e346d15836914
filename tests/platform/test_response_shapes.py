"""The bodies PostgreSQL writes (agentplatform/plumbing/sql_json.py) have exactly the shape the served
OpenAPI schema documents, and their SQL cannot leave a serializer field out.

The agent list, the chat feed (and the stream's events) and the price history's samples are JSON
written by SQL generated from their serializers (`serializer_json_object`). These tests read real
rows through the endpoints and hold every object to the schema of its operation's 200 response:
the same members in the schema's order, each of the schema's type (an enum value, a date-time, a
number, null only where the schema allows it). test_sql_json.py holds the same bodies to DRF's own
rendering byte for byte.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.conf import settings
from rest_framework import serializers

from agentplatform.plumbing.serializer_fields import MoneyField
from agentplatform.plumbing.sql_json import serializer_json_object
from agents.models import AgentStatus
from chat.models import MessageType
from chat.selectors import chat_messages_after
from tests.agents.factories import AgentFactory
from tests.chat.factories import ChatMessageFactory
from tests.coin.factories import PricePointFactory

pytestmark = pytest.mark.django_db

NUMBER_TYPES = (int, float)


@pytest.fixture(scope="module")
def schema(django_db_blocker) -> dict[str, Any]:
    from rest_framework.test import APIClient

    with django_db_blocker.unblock():
        response = APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return response.json()


def resolved(node: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """`node` with a `$ref` (or drf-spectacular's one-element allOf around one) followed; its own
    keys (nullable, readOnly) kept."""
    if "allOf" in node and len(node["allOf"]) == 1:
        node = {**{key: value for key, value in node.items() if key != "allOf"}, **node["allOf"][0]}
    if "$ref" in node:
        target = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
        node = {**{key: value for key, value in node.items() if key != "$ref"}, **target}
    return node


def assert_shape(value: Any, node: dict[str, Any], schema: dict[str, Any], where: str) -> None:
    node = resolved(node, schema)
    if value is None:
        assert node.get("nullable"), f"{where}: null, which the schema does not allow"
        return
    kind = node["type"]
    if kind == "object":
        assert isinstance(value, dict), f"{where}: {value!r} is not an object"
        assert list(value) == list(node["properties"]), f"{where}: members differ from the schema's"
        for name, member in node["properties"].items():
            assert_shape(value[name], member, schema, f"{where}.{name}")
    elif kind == "array":
        assert isinstance(value, list), f"{where}: {value!r} is not an array"
        for position, item in enumerate(value):
            assert_shape(item, node["items"], schema, f"{where}[{position}]")
    elif kind == "string":
        assert isinstance(value, str), f"{where}: {value!r} is not a string"
        if "enum" in node:
            assert value in node["enum"], f"{where}: {value!r} is not one of {node['enum']}"
        if node.get("format") == "date-time":
            assert value.endswith("Z") and datetime.fromisoformat(value).tzinfo is not None, where
    elif kind == "number":
        assert isinstance(value, NUMBER_TYPES) and not isinstance(value, bool), f"{where}: {value!r} is not a number"
    elif kind == "integer":
        assert isinstance(value, int) and not isinstance(value, bool), f"{where}: {value!r} is not an integer"
    elif kind == "boolean":
        assert isinstance(value, bool), f"{where}: {value!r} is not a boolean"
    else:
        raise AssertionError(f"{where}: schema type {kind!r} not checked here")


def response_schema(schema: dict[str, Any], path: str) -> dict[str, Any]:
    return schema["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]


def test_the_agent_list_has_the_documented_shape_for_every_status(api_client, schema):
    for n, status in enumerate(AgentStatus.values):
        AgentFactory(instance_id=f"agent-{n}", status=status, balance=Decimal("0.00000001") * n)

    body = api_client.get("/api/agents", HTTP_CACHE_CONTROL="no-cache").json()

    assert len(body) == len(AgentStatus.values)
    assert_shape(body, response_schema(schema, "/api/agents"), schema, "agents")
    assert sorted(agent["status"] for agent in body) == sorted(AgentStatus.values)


def test_the_chat_feed_and_the_streams_events_have_the_documented_shape(api_client, schema):
    agent = AgentFactory(name="Atlas")
    for message_type in (MessageType.CHAT, MessageType.STATUS, MessageType.TRADE):
        ChatMessageFactory(agent=agent, message=f"a {message_type} message", message_type=message_type)
    ChatMessageFactory(agent=None, message="maintenance at noon", message_type=MessageType.SYSTEM)

    feed = api_client.get("/api/chat", HTTP_CACHE_CONTROL="no-cache").json()
    events = [json.loads(text) for _, text in chat_messages_after(after_id=0, limit=10)]

    feed_schema = response_schema(schema, "/api/chat")
    assert len(feed) == 4
    assert_shape(feed, feed_schema, schema, "feed")
    assert_shape(events, feed_schema, schema, "stream")
    assert events == feed[::-1]
    assert {message["message_type"] for message in feed} == set(MessageType.values)


def test_the_price_history_has_the_documented_shape(api_client, schema):
    start = datetime(2026, 5, 1, tzinfo=UTC)
    for n, price in enumerate(["0.5", "300", "2.00000001"]):
        PricePointFactory(timestamp=start + timedelta(hours=n), price=Decimal(price), supply=Decimal("1000000"))
    path = f"/api/{settings.COIN_SEGMENT}/history"

    body = api_client.get(path, {"period": "1d"}, HTTP_CACHE_CONTROL="no-cache").json()

    assert len(body["history"]) == 3
    assert_shape(body, response_schema(schema, path), schema, "history")


# --- the generator ---------------------------------------------------------------------------


class SampleSerializer(serializers.Serializer):
    label = serializers.CharField()
    amount = MoneyField()
    at = serializers.DateTimeField()


def test_sql_for_a_serializer_follows_its_fields_in_order():
    sql = serializer_json_object(SampleSerializer, {"at": "t.at", "label": "t.label", "amount": "t.amount"})

    assert sql.index('"label":') < sql.index('"amount":') < sql.index('"at":')
    assert "(t.amount)::float8" in sql and "to_json((t.label)::text)" in sql and "(t.at) AT TIME ZONE 'UTC'" in sql


def test_a_field_without_sql_or_sql_without_a_field_is_refused():
    with pytest.raises(ValueError) as refused:
        serializer_json_object(SampleSerializer, {"label": "t.label", "amount": "t.amount", "extra": "t.extra"})

    assert str(refused.value) == (
        "SampleSerializer's SQL expressions do not match its fields: missing ['at'], unknown ['extra']"
    )


def test_a_field_type_without_an_sql_builder_is_refused():
    class WithInteger(serializers.Serializer):
        count = serializers.IntegerField()

    with pytest.raises(TypeError, match="no SQL JSON builder for IntegerField"):
        serializer_json_object(WithInteger, {"count": "t.count"})
