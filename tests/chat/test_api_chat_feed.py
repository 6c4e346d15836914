from datetime import UTC, datetime

import pytest
from django.utils import timezone

from chat.models import ChatMessage, MessageType
from tests.agents.factories import AgentFactory, bearer
from tests.chat.factories import ChatMessageFactory

pytestmark = pytest.mark.django_db

LIMIT_RULE = "must be an integer from 1 to 200"
BEFORE_RULE = "must be a message id (a positive integer)"


def test_feed_is_newest_first_in_feed_shape(api_client):
    agent = AgentFactory(instance_id="bot-1", name="Bot One")
    older = ChatMessageFactory(
        agent=agent, message="hello", created_at=datetime(2026, 2, 3, 4, 5, 6, 789000, tzinfo=UTC)
    )
    newer = ChatMessageFactory(
        agent=agent,
        message="bought 5",
        message_type=MessageType.TRADE,
        created_at=datetime(2026, 2, 3, 4, 6, tzinfo=UTC),
    )

    response = api_client.get("/api/chat")

    assert response.status_code == 200
    assert response.json() == [
        {
            "id": str(newer.pk),
            "sender_name": "Bot One",
            "sender_instance_id": "bot-1",
            "message": "bought 5",
            "message_type": "trade",
            "created_at": "2026-02-03T04:06:00Z",
        },
        {
            "id": str(older.pk),
            "sender_name": "Bot One",
            "sender_instance_id": "bot-1",
            "message": "hello",
            "message_type": "chat",
            "created_at": "2026-02-03T04:05:06.789000Z",
        },
    ]
    assert "Link" not in response


def test_system_message_has_system_sender(api_client):
    message = ChatMessage.objects.create(agent=None, message="maintenance at 5", message_type=MessageType.SYSTEM)

    body = api_client.get("/api/chat").json()

    assert body[0]["id"] == str(message.pk)
    assert (body[0]["sender_name"], body[0]["sender_instance_id"], body[0]["message_type"]) == ("System", "", "system")


def test_hidden_messages_leave_the_feed(api_client):
    shown = ChatMessageFactory()
    ChatMessageFactory(hidden_at=timezone.now())

    assert [message["id"] for message in api_client.get("/api/chat").json()] == [str(shown.pk)]


def test_default_limit_is_fifty_and_full_page_links_to_the_next(api_client):
    messages = ChatMessageFactory.create_batch(55, agent=AgentFactory())

    response = api_client.get("/api/chat")

    body = response.json()
    assert len(body) == 50
    assert body[0]["id"] == str(messages[-1].pk)
    assert body[-1]["id"] == str(messages[5].pk)
    assert response["Link"] == f'<http://testserver/api/chat?limit=50&before={messages[5].pk}>; rel="next"'


def test_before_pages_to_older_messages(api_client):
    messages = ChatMessageFactory.create_batch(5, agent=AgentFactory())

    first = api_client.get("/api/chat", {"limit": "2"})
    second = api_client.get("/api/chat", {"limit": "2", "before": first.json()[-1]["id"]})
    last = api_client.get("/api/chat", {"limit": "2", "before": second.json()[-1]["id"]})

    ids = [[int(m["id"]) for m in page.json()] for page in (first, second, last)]
    assert ids == [[messages[4].pk, messages[3].pk], [messages[2].pk, messages[1].pk], [messages[0].pk]]
    assert "Link" not in last


def test_before_an_id_older_than_every_message_is_empty(api_client):
    message = ChatMessageFactory()

    assert api_client.get("/api/chat", {"before": str(message.pk)}).json() == []


@pytest.mark.parametrize("limit", ["0", "201", "-1", "ten", "", "1.5", "2.0", " 5", "+5", "١٢"])
def test_malformed_limit_is_400_naming_the_range(api_client, limit):
    response = api_client.get("/api/chat", {"limit": limit})

    assert response.status_code == 400
    assert response.json() == {
        "type": "urn:problem:invalid",
        "title": "Invalid input",
        "status": 400,
        "detail": f"limit: {LIMIT_RULE}",
        "code": "invalid",
        "errors": [{"field": "limit", "message": LIMIT_RULE}],
    }


@pytest.mark.parametrize("before", ["0", "-3", "abc", "", "12.0", str(2**63)])
def test_malformed_before_is_400(api_client, before):
    response = api_client.get("/api/chat", {"before": before})

    assert response.status_code == 400
    assert response.json()["errors"] == [{"field": "before", "message": BEFORE_RULE}]


def test_limit_two_hundred_is_allowed(api_client):
    ChatMessageFactory.create_batch(3)

    assert len(api_client.get("/api/chat", {"limit": "200"}).json()) == 3


def test_feed_runs_one_query_whatever_the_number_of_senders(api_client, django_assert_num_queries):
    ChatMessageFactory.create_batch(3)
    with django_assert_num_queries(1):
        assert len(api_client.get("/api/chat").json()) == 3
    ChatMessageFactory.create_batch(30)
    with django_assert_num_queries(1):
        assert len(api_client.get("/api/chat").json()) == 33


def test_feed_with_wrong_key_is_401(api_client):
    response = api_client.get("/api/chat", **bearer("uk_nope_nope"))

    assert response.status_code == 401
