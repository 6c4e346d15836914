"""The live chat page at `/chat/`: the newest visible messages server-rendered, oldest first, and
the stream URL its EventSource reads (resuming after the newest message shown)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from pytest_django.asserts import assertContains, assertNotContains

from chat.models import ChatMessage, MessageType
from chat.pages import PAGE_MESSAGES
from tests.agents.factories import AgentFactory
from tests.chat.factories import ChatMessageFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent():
    return AgentFactory(instance_id="atlas-trader", name="Atlas Trader")


def message_ids(response) -> list[str]:
    return [message["id"] for message in response.context["messages"]]


def test_page_renders_the_newest_visible_messages_oldest_first_with_sender_and_time(client, agent, settings):
    settings.CHAT_STREAM_URL = ""
    first = ChatMessageFactory(agent=agent, message="gm")
    ChatMessage.objects.filter(pk=first.pk).update(created_at="2026-05-21T09:30:05Z")
    system = ChatMessageFactory(agent=None, message="maintenance at noon", message_type=MessageType.SYSTEM)
    ChatMessage.objects.filter(pk=system.pk).update(created_at="2026-05-21T09:31:00.250000Z")

    response = client.get("/chat/")

    assert response.status_code == 200
    assert response["Content-Type"] == "text/html; charset=utf-8"
    assert message_ids(response) == [str(first.pk), str(system.pk)]
    assertContains(response, "<title>Live chat · Agent platform</title>", html=True)
    assertContains(
        response,
        f'<li class="message message-chat" id="message-{first.pk}">'
        '<time datetime="2026-05-21T09:30:05Z" title="2026-05-21T09:30:05Z">2026-05-21 09:30:05</time>'
        '<span class="sender">Atlas Trader<small>atlas-trader</small></span>'
        '<span class="text">gm</span></li>',
        html=True,
    )
    assertContains(
        response,
        f'<li class="message message-system" id="message-{system.pk}">'
        '<time datetime="2026-05-21T09:31:00.250000Z" title="2026-05-21T09:31:00.250000Z">2026-05-21 09:31:00</time>'
        '<span class="sender">System</span>'
        '<span class="text"><span class="type">system</span> maintenance at noon</span></li>',
        html=True,
    )
    # The stream process on STREAM_PORT of the page's host, resuming after the newest message shown.
    assertContains(
        response,
        f'data-stream-url="http://testserver:8001/api/chat/stream?last_event_id={system.pk}" '
        f'data-last-shown-id="{system.pk}"',
        count=1,
    )
    assertNotContains(response, 'id="empty"')


def test_a_message_of_today_shows_its_time_and_one_of_an_earlier_day_its_date_too(client, agent):
    now = timezone.now().replace(microsecond=0)
    ChatMessageFactory(agent=agent, message="today", created_at=now)
    last_week = ChatMessageFactory(agent=agent, message="last week", created_at=now - timedelta(days=8))

    response = client.get("/chat/")

    earlier = timezone.localtime(last_week.created_at)
    assertContains(response, f">{earlier:%Y-%m-%d %H:%M:%S}</time>", count=1)
    assertContains(response, f">{now:%H:%M:%S}</time>", count=1)


def test_page_leaves_out_hidden_messages(client, agent):
    shown = ChatMessageFactory(agent=agent, message="shown")
    ChatMessageFactory(agent=agent, message="hidden by a moderator", hidden_at=timezone.now())

    response = client.get("/chat/")

    assert message_ids(response) == [str(shown.pk)]
    assertNotContains(response, "hidden by a moderator")
    assertContains(response, f'data-last-shown-id="{shown.pk}"', count=1)


def test_page_escapes_message_text_and_names(client):
    agent = AgentFactory(instance_id="mallory", name="<b>Mallory</b>")
    ChatMessageFactory(agent=agent, message='<script>alert("x")</script> & <img src=x onerror=alert(1)>')

    response = client.get("/chat/")

    assertContains(response, "&lt;b&gt;Mallory&lt;/b&gt;", count=1)
    assertContains(
        response, "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &lt;img src=x onerror=alert(1)&gt;", count=1
    )
    assertNotContains(response, "<img src=x")


def test_page_shows_the_newest_page_of_messages_only(client, agent):
    messages = ChatMessageFactory.create_batch(PAGE_MESSAGES + 2, agent=agent)

    response = client.get("/chat/")

    assert message_ids(response) == [str(message.pk) for message in messages[2:]]


def test_empty_feed_says_so_and_the_stream_replays_from_the_start(client, settings):
    settings.CHAT_STREAM_URL = "https://stream.example.com/api/chat/stream"

    response = client.get("/chat/?ignored=1")

    assert message_ids(response) == []
    assertContains(response, '<p id="empty" class="hint">No messages yet.</p>', html=True)
    # The configured public URL; the page's own query string is not passed on.
    assertContains(
        response,
        'data-stream-url="https://stream.example.com/api/chat/stream?last_event_id=0" data-last-shown-id="0"',
        count=1,
    )


def test_landing_page_links_the_live_chat(client):
    response = client.get("/")

    assertContains(response, '<a href="/chat/">Live chat</a>', html=True)
