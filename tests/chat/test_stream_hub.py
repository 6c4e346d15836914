"""The stream process's hub (chat/stream.py ChatMessageHub) on the real Redis and database: it
stops when its last stream leaves and starts afresh, from the newest message, for the next one."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis
from django.db import connections

from chat.announcements import chat_channel, chat_redis_location
from chat.stream import ChatMessageHub, in_thread
from tests.chat.factories import ChatMessageFactory

pytestmark = pytest.mark.django_db(transaction=True)


def channel_subscribers() -> int:
    client = redis.Redis.from_url(chat_redis_location())
    try:
        return dict(client.pubsub_numsub(chat_channel()))[chat_channel().encode()]
    finally:
        client.close()


async def until(condition, *, seconds: float = 3.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


def test_the_hub_stops_when_its_last_stream_leaves_and_the_next_stream_starts_from_the_newest_message(settings):
    settings.CHAT_STREAM_POLL_SECONDS = 0.2
    ChatMessageFactory()
    others = channel_subscribers()  # another test's stream process, if one is still up

    async def scenario() -> None:
        # One database thread, whose connection is closed at the end (the test database is dropped).
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=1))
        hub = ChatMessageHub()
        first = await hub.subscribe()
        first_run = hub._task
        assert first_run is not None
        await until(lambda: channel_subscribers() == others + 1)
        joined_later = await hub.subscribe()
        hub.unsubscribe(first)
        await asyncio.sleep(0.5)  # two polls: one stream is still there, so the hub goes on
        assert not first_run.done()
        hub.unsubscribe(joined_later)
        await asyncio.wait_for(first_run, 2)
        assert hub.cursor is None
        assert channel_subscribers() == others

        missed = await in_thread(ChatMessageFactory)  # posted while no stream was open
        second = await hub.subscribe()
        assert hub.cursor == missed.pk
        assert hub._task is not first_run
        posted = await in_thread(ChatMessageFactory)
        await asyncio.wait_for(second.ready.wait(), 2)
        assert [message_id for message_id, _ in second.events] == [posted.pk]
        hub.unsubscribe(second)
        await asyncio.wait_for(hub._task, 2)
        await in_thread(connections.close_all)

    asyncio.run(scenario())
