"""The live chat page in Chromium, subscribed to a real stream process: a message posted through
the API appears without a reload; a hidden one does not."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import httpx
import pytest
from django.utils import timezone

from agents.models import AgentStatus
from chat.announcements import chat_message_announce
from chat.models import ChatMessage, MessageType
from tests import celeryworker
from tests.agents.factories import AgentFactory, agent_key_for
from tests.chat.factories import ChatMessageFactory
from tests.streamserver import stream_server

pytestmark = pytest.mark.slow

# A missed Redis notice is found within half a second; no model to load before uvicorn listens.
STREAM_ENVIRONMENT = {"CHAT_STREAM_POLL_SECONDS": "0.5", "EMBEDDING_BACKEND": "none"}


@pytest.fixture(scope="module")
def stream_base_url(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[str]:
    """A stream process on the live server's test database and the tests' Redis."""
    with django_db_blocker.unblock():
        environment = {**STREAM_ENVIRONMENT, "DATABASE_URL": celeryworker.test_database_url()}
    with stream_server(environment=environment, log_path=tmp_path_factory.mktemp("stream") / "uvicorn.log") as url:
        yield url


@pytest.fixture
def stream_url(stream_base_url, settings) -> str:
    # The page's EventSource reads the stream process started above, not STREAM_PORT.
    settings.CHAT_STREAM_URL = f"{stream_base_url}/api/chat/stream"
    return settings.CHAT_STREAM_URL


def test_a_message_posted_through_the_api_appears_on_the_live_chat_page_without_a_reload(
    browser, live_server, stream_url
):
    agent = AgentFactory(instance_id="atlas-trader", name="Atlas Trader", status=AgentStatus.RUNNING)
    key = agent_key_for(agent)
    earlier = ChatMessageFactory(agent=agent, message="gm, markets open")

    browser.open("/")
    browser.find("#where a[href='/chat/']").click()
    assert browser.path == "/chat/"
    browser.wait_for_text("#stream-state", "live")
    assert browser.texts("#messages .text") == ["gm, markets open"]
    browser.driver.execute_script("window.notReloaded = true")

    # Stored hidden and announced, as a message hidden the moment it arrives would be.
    hidden = ChatMessage.objects.create(agent=agent, message="hidden by a moderator", hidden_at=timezone.now())
    chat_message_announce(message_id=hidden.pk)
    response = httpx.post(
        f"{live_server.url}/api/chat",
        json={"message": "<b>bought</b> 3 ETH & sold 2"},
        headers={"Authorization": f"Bearer {key}"},
        timeout=10,
    )
    assert response.status_code == 201, response.text
    posted = response.json()

    browser.wait_for(f"#message-{posted['id']}")
    assert browser.driver.execute_script("return window.notReloaded") is True
    assert browser.texts("#messages .text") == ["gm, markets open", "<b>bought</b> 3 ETH & sold 2"]
    assert browser.find_all(f"#message-{hidden.pk}") == []
    assert browser.find_all("#messages b") == []  # the text stayed text
    assert browser.text(f"#message-{posted['id']} .sender") == "Atlas Trader\natlas-trader"
    assert browser.text(f"#message-{posted['id']} time") == posted["created_at"][11:19]
    assert browser.find(f"#message-{posted['id']} time").get_attribute("title") == posted["created_at"]
    shown_ids = [item.get_attribute("id") for item in browser.find_all("#messages li")]
    assert shown_ids == [f"message-{earlier.pk}", f"message-{posted['id']}"]
    assert browser.horizontal_overflow("html") == 0
    browser.screenshot("live-chat")
    assert browser.console_errors() == []


def test_a_long_feed_shows_its_newest_messages_at_the_bottom_of_a_scrolled_list(browser, stream_url):
    agent = AgentFactory(instance_id="atlas-trader", name="Atlas Trader")
    ChatMessageFactory.create_batch(30, agent=agent)
    ChatMessageFactory(agent=None, message="Maintenance tonight at 23:00 UTC.", message_type=MessageType.SYSTEM)
    ChatMessageFactory(agent=agent, message="A long one: " + "the quick brown fox jumps over the lazy dog " * 8)

    browser.open("/chat/")
    browser.wait_for_text("#stream-state", "live")

    assert len(browser.find_all("#messages li")) == 32
    assert browser.texts("#messages .message-system .text") == ["SYSTEM Maintenance tonight at 23:00 UTC."]
    # Scrolled to the newest message (the bottom of the list).
    assert browser.driver.execute_script(
        "const list = document.getElementById('messages');"
        "return list.scrollHeight - list.scrollTop - list.clientHeight < 1"
    )
    assert browser.horizontal_overflow("html") == 0
    browser.screenshot("live-chat-long-feed")
    assert browser.console_errors() == []


def test_a_backlog_of_several_days_dates_its_older_messages_and_shows_its_first_row_whole(browser, stream_url):
    agent = AgentFactory(instance_id="atlas-trader", name="Atlas Trader")
    now = timezone.now().replace(microsecond=0)
    for days_ago in range(8, 0, -1):
        for hour in (9, 15):
            ChatMessageFactory(
                agent=agent,
                message=f"{days_ago} days ago at {hour}:00",
                created_at=(now - timedelta(days=days_ago)).replace(hour=hour, minute=0, second=0),
            )
    ChatMessageFactory(agent=agent, message="just now", created_at=now)
    oldest = (now - timedelta(days=8)).replace(hour=9, minute=0, second=0)

    browser.open("/chat/")
    browser.wait_for_text("#stream-state", "live")
    browser.screenshot("live-chat-backlog-newest")
    assert _topmost_shown_row_is_whole(browser)
    browser.driver.execute_script("document.getElementById('messages').scrollTop = 0")

    times = browser.texts("#messages time")
    assert times[0] == f"{oldest:%Y-%m-%d} 09:00:00"
    assert times[-1] == f"{now:%H:%M:%S}"
    first_row_top, list_top, heading_bottom = browser.driver.execute_script(
        "const list = document.getElementById('messages');"
        "return [list.firstElementChild.getBoundingClientRect().top, list.getBoundingClientRect().top,"
        " document.querySelector('#chat h2').getBoundingClientRect().bottom];"
    )
    assert first_row_top >= list_top >= heading_bottom
    browser.screenshot("live-chat-backlog-oldest")
    assert browser.console_errors() == []


def _topmost_shown_row_is_whole(browser) -> bool:
    return browser.driver.execute_script(
        "const list = document.getElementById('messages');"
        "const top = list.getBoundingClientRect().top + list.clientTop;"
        "const shown = [...list.children].find((row) => row.getBoundingClientRect().bottom > top + 1);"
        "return shown.getBoundingClientRect().top >= top - 1;"
    )
