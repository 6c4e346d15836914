import json
import threading
import time

import pytest
from django.db import connection, connections, transaction

from agents.models import AgentStatus
from chat.models import ChatMessage
from chat.services import chat_message_post
from tests.agents.factories import (
    AgentFactory,
    agent_key_for,
    bearer,
    revoked_agent_key_for,
    service_key,
    user_key_for,
    wallet_session_for,
)

pytestmark = pytest.mark.django_db

ADDRESS = "0x" + "ab" * 20
TYPE_RULE = "allowed: chat, status, trade (system is staff-only)"
MESSAGE_RULE = "must be 1 to 2000 characters, not only whitespace or zero-width ones, and no NUL (U+0000)"


@pytest.fixture
def agent():
    return AgentFactory(instance_id="poster", name="Poster", status=AgentStatus.RUNNING)


@pytest.fixture
def agent_key(agent):
    return agent_key_for(agent)


def _post(api_client, token, body, **headers):
    return api_client.post(
        "/api/chat", data=json.dumps(body), content_type="application/json", **bearer(token), **headers
    )


def _problem(status, code, title, detail, **extra):
    return {"type": f"urn:problem:{code}", "title": title, "status": status, "detail": detail, "code": code, **extra}


def test_agent_key_posts_and_gets_201_with_the_message_in_feed_shape(api_client, agent, agent_key):
    response = _post(api_client, agent_key, {"message": "  hello world ", "message_type": "status"})

    assert response.status_code == 201
    stored = ChatMessage.objects.get()
    assert response.json() == {
        "id": str(stored.pk),
        "sender_name": "Poster",
        "sender_instance_id": "poster",
        "message": "hello world",
        "message_type": "status",
        "created_at": stored.created_at.isoformat().replace("+00:00", "Z"),
    }
    assert response.json()["created_at"].endswith("Z")
    assert (stored.agent_id, stored.message, stored.message_type) == (agent.pk, "hello world", "status")
    assert "Idempotent-Replayed" not in response
    assert response["X-RateLimit-Limit"] == "500"
    # And it is in the feed.
    assert api_client.get("/api/chat").json() == [response.json()]


def test_message_type_defaults_to_chat(api_client, agent_key):
    response = _post(api_client, agent_key, {"message": "hi"})

    assert response.status_code == 201
    assert response.json()["message_type"] == "chat"


def test_message_of_exactly_2000_characters_is_accepted(api_client, agent_key):
    assert _post(api_client, agent_key, {"message": "x" * 2000, "message_type": "trade"}).status_code == 201


def test_anonymous_post_is_401_and_stores_nothing(api_client):
    response = api_client.post("/api/chat", data='{"message": "hi"}', content_type="application/json")

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    assert response.json() == _problem(
        401, "not_authenticated", "Unauthorized", "Authentication credentials were not provided."
    )
    assert not ChatMessage.objects.exists()


@pytest.mark.parametrize("credential", ["user", "service", "wallet"])
def test_non_agent_credentials_are_403_and_store_nothing(api_client, credential):
    token = {
        "user": lambda: user_key_for(ADDRESS),
        "service": lambda: service_key(["read", "ingest"]),
        "wallet": lambda: wallet_session_for(ADDRESS),
    }[credential]()

    response = _post(api_client, token, {"message": "hi"})

    assert response.status_code == 403
    assert response.json() == _problem(403, "forbidden", "Forbidden", "Only an agent API key may do this.")
    assert not ChatMessage.objects.exists()


def test_revoked_agent_key_is_401_and_stores_nothing(api_client, agent):
    response = _post(api_client, revoked_agent_key_for(agent), {"message": "hi"})

    assert response.status_code == 401
    assert response.json()["detail"] == "Invalid or revoked credentials."
    assert not ChatMessage.objects.exists()


def test_wrong_agent_key_is_401_and_stores_nothing(api_client, agent_key):
    response = _post(api_client, agent_key[:-2] + "xx", {"message": "hi"})

    assert response.status_code == 401
    assert not ChatMessage.objects.exists()


@pytest.mark.parametrize("status", [AgentStatus.PAUSED, AgentStatus.PENDING, AgentStatus.STOPPED, AgentStatus.ERROR])
def test_agent_that_is_not_running_gets_409_and_stores_nothing(api_client, agent, agent_key, status):
    agent.__class__.objects.filter(pk=agent.pk).update(status=status)

    response = _post(api_client, agent_key, {"message": "hi"})

    assert response.status_code == 409
    assert response.json() == _problem(
        409, "agent_not_running", "Conflict", f"Agent poster is {status}; only running agents may post to the chat."
    )
    assert not ChatMessage.objects.exists()


@pytest.mark.parametrize(
    ("content_type", "data"),
    [("text/plain", "hello"), ("application/x-www-form-urlencoded", "message=hi"), ("application/xml", "<m/>")],
)
def test_non_json_body_is_415_and_stores_nothing(api_client, agent_key, content_type, data):
    response = api_client.post("/api/chat", data=data, content_type=content_type, **bearer(agent_key))

    assert response.status_code == 415
    assert response.json() == _problem(
        415,
        "unsupported_media_type",
        "Unsupported Media Type",
        f'Unsupported media type "{content_type}" in request.',
    )
    assert not ChatMessage.objects.exists()


def test_malformed_json_is_400_and_stores_nothing(api_client, agent_key):
    response = api_client.post("/api/chat", data='{"message": ', content_type="application/json", **bearer(agent_key))

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_json"
    assert not ChatMessage.objects.exists()


def test_json_that_is_not_an_object_is_400(api_client, agent_key):
    response = _post(api_client, agent_key, ["hi"])

    assert response.status_code == 400
    assert response.json()["code"] == "invalid"
    assert not ChatMessage.objects.exists()


@pytest.mark.parametrize("body", [{}, {"message": ""}, {"message": "   "}, {"message": "x" * 2001}, {"message": 42}])
def test_message_outside_1_to_2000_characters_is_400(api_client, agent_key, body):
    response = _post(api_client, agent_key, body)

    assert response.status_code == 400
    assert response.json() == _problem(
        400,
        "invalid",
        "Invalid input",
        f"message: {MESSAGE_RULE}",
        errors=[{"field": "message", "message": MESSAGE_RULE}],
    )
    assert not ChatMessage.objects.exists()


@pytest.mark.parametrize(
    "message",
    [
        " \u200b\t\u200c\u200d\u2060\ufeff ",  # zero-width and format characters between spaces
        "\u00ad\u180e\u2800\u3164",  # soft hyphen, Mongolian separator, Braille and Hangul blanks
        "gm\u0000",  # PostgreSQL text cannot hold NUL
        "\u0000",
    ],
)
def test_an_invisible_message_or_one_with_nul_is_400_with_the_rule_once_and_stores_nothing(
    api_client, agent_key, message
):
    response = _post(api_client, agent_key, {"message": message})

    assert response.status_code == 400
    assert response.json() == _problem(
        400,
        "invalid",
        "Invalid input",
        f"message: {MESSAGE_RULE}",
        errors=[{"field": "message", "message": MESSAGE_RULE}],
    )
    assert not ChatMessage.objects.exists()


def test_a_message_with_zero_width_characters_around_visible_text_is_stored_as_sent(api_client, agent_key):
    response = _post(api_client, agent_key, {"message": "\u200bg\u200dm\ufeff"})

    assert response.status_code == 201
    assert list(ChatMessage.objects.values_list("message", flat=True)) == ["\u200bg\u200dm\ufeff"]


def test_a_body_repeating_a_key_is_400_invalid_json_and_stores_nothing(api_client, agent_key):
    body = '{"message": "first", "message_type": "chat", "message": "second"}'
    response = api_client.post("/api/chat", data=body, content_type="application/json", **bearer(agent_key))

    assert response.status_code == 400
    assert response.json() == _problem(
        400,
        "invalid_json",
        "Bad Request",
        'The body is not accepted: the key "message" appears twice in one object.',
    )
    assert not ChatMessage.objects.exists()


def test_a_key_repeated_in_a_nested_object_is_refused_too(api_client, agent_key):
    body = '{"message": "hi", "extra": {"a": 1, "a": 2}}'
    response = api_client.post("/api/chat", data=body, content_type="application/json", **bearer(agent_key))

    assert (response.status_code, response.json()["code"]) == (400, "invalid_json")
    assert response.json()["detail"] == 'The body is not accepted: the key "a" appears twice in one object.'
    assert not ChatMessage.objects.exists()


def test_the_schema_states_the_message_rule_as_a_pattern(api_client):
    schema = json.loads(api_client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").content)
    message = schema["components"]["schemas"]["ChatPostRequest"]["properties"]["message"]

    invisible = r"\s\u00ad\u034f\u115f\u1160\u180e\u200b-\u200f\u202a-\u202e\u2060-\u206f\u2800\u3164\ufeff\uffa0"
    # drf-spectacular writes Python's \x00 as ECMA-262's \u0000.
    assert message["pattern"] == rf"^[^\u0000]*[^\u0000{invisible}][^\u0000]*$"
    assert (message["minLength"], message["maxLength"]) == (1, 2000)
    chat_post = schema["paths"]["/api/chat"]["post"]["responses"]["400"]
    assert chat_post["description"].startswith("Malformed JSON or a key repeated within one object (`invalid_json`)")


def test_unknown_message_type_is_400_naming_allowed_values(api_client, agent_key):
    response = _post(api_client, agent_key, {"message": "hi", "message_type": "shout"})

    assert response.status_code == 400
    message = f'"shout" is not a message_type; {TYPE_RULE}'
    assert response.json() == _problem(
        400,
        "invalid",
        "Invalid input",
        f"message_type: {message}",
        errors=[{"field": "message_type", "message": message}],
    )
    assert not ChatMessage.objects.exists()


def test_system_message_from_an_agent_is_403(api_client, agent_key):
    response = _post(api_client, agent_key, {"message": "hi", "message_type": "system"})

    assert response.status_code == 403
    assert response.json() == _problem(
        403, "system_message_staff_only", "Forbidden", "Only staff may post system messages."
    )
    assert not ChatMessage.objects.exists()


def test_retry_with_same_idempotency_key_returns_the_first_result(api_client, agent, agent_key):
    body = {"message": "once", "message_type": "trade"}
    first = _post(api_client, agent_key, body, HTTP_IDEMPOTENCY_KEY="order-42")
    # Since then the agent was paused: the retry still returns what the first request returned.
    agent.__class__.objects.filter(pk=agent.pk).update(status=AgentStatus.PAUSED)

    retry = _post(api_client, agent_key, body, HTTP_IDEMPOTENCY_KEY="order-42")

    assert first.status_code == retry.status_code == 201
    assert retry.json() == first.json()
    assert retry["Idempotent-Replayed"] == "true"
    assert ChatMessage.objects.count() == 1


def test_same_idempotency_key_with_another_body_is_409_and_stores_nothing(api_client, agent_key):
    first = _post(api_client, agent_key, {"message": "once"}, HTTP_IDEMPOTENCY_KEY="k1")

    response = _post(api_client, agent_key, {"message": "twice"}, HTTP_IDEMPOTENCY_KEY="k1")

    assert response.status_code == 409
    assert response.json() == _problem(
        409,
        "idempotency_key_reused",
        "Conflict",
        "This Idempotency-Key was already used with a different request body; use a new key for a new message.",
    )
    assert list(ChatMessage.objects.values_list("pk", "message")) == [(int(first.json()["id"]), "once")]


def test_idempotency_keys_belong_to_one_agent(api_client, agent_key):
    other_key = agent_key_for(AgentFactory(instance_id="other", status=AgentStatus.RUNNING))

    first = _post(api_client, agent_key, {"message": "same"}, HTTP_IDEMPOTENCY_KEY="k")
    second = _post(api_client, other_key, {"message": "same"}, HTTP_IDEMPOTENCY_KEY="k")

    assert first.status_code == second.status_code == 201
    assert first.json()["id"] != second.json()["id"]
    assert ChatMessage.objects.count() == 2


def test_posts_without_idempotency_key_are_not_deduplicated(api_client, agent_key):
    _post(api_client, agent_key, {"message": "same"})
    _post(api_client, agent_key, {"message": "same"})

    assert ChatMessage.objects.count() == 2


@pytest.mark.parametrize("key", ["", "has space", "x" * 256, "ключ"])
def test_malformed_idempotency_key_is_400_and_stores_nothing(api_client, agent_key, key):
    response = _post(api_client, agent_key, {"message": "hi"}, HTTP_IDEMPOTENCY_KEY=key)

    assert response.status_code == 400
    rule = "must be 1 to 255 visible ASCII characters"
    assert response.json()["errors"] == [{"field": "Idempotency-Key", "message": rule}]
    assert not ChatMessage.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_concurrent_retry_waits_for_the_first_insert_and_returns_it():
    """The second request passes the look-up before the first commits, then meets the unique
    constraint and returns the first request's message."""
    agent = AgentFactory(status=AgentStatus.RUNNING)
    results = []

    def retry() -> None:
        try:
            results.append(chat_message_post(agent_id=agent.pk, message="m", idempotency_key="same"))
        finally:
            connections.close_all()

    with transaction.atomic():
        first = chat_message_post(agent_id=agent.pk, message="m", idempotency_key="same")
        thread = threading.Thread(target=retry)
        thread.start()
        _wait_until_a_backend_waits_on_a_lock()
    thread.join(timeout=30)

    assert len(results) == 1
    assert results[0].replayed is True
    assert results[0].message.pk == first.message.pk
    assert ChatMessage.objects.count() == 1


def _wait_until_a_backend_waits_on_a_lock() -> None:
    deadline = time.monotonic() + 20
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            # Statistics views are snapshotted per transaction, and we are inside one.
            cursor.execute("SELECT pg_stat_clear_snapshot()")
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            if cursor.fetchone()[0]:
                return
            time.sleep(0.02)
    raise AssertionError("the concurrent insert never waited on the first one's lock")
