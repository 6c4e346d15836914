"""GET /api/chat/stream: new chat messages as Server-Sent Events, from an ASGI process.

How a message reaches the streams:
- chat/services.py stores every message under one advisory lock, so messages commit in id order,
  and publishes the id on Redis once the message commits (chat/announcements.py).
- Each stream process has one hub (ChatMessageHub) with one Redis pub/sub connection for all of its
  streams. A notice wakes it; it reads the visible messages after the last id it has read (one
  query for every stream of the process), writes each as an SSE event once, and hands the same
  bytes to every stream.
- A stream first sends from the database what its client missed (ids above `Last-Event-ID`),
  then what the hub hands it, skipping ids it has already sent: no gap and no duplicate. It
  joins the hub before reading the database, so a message is in one or the other.
- The hub also reads the database every CHAT_STREAM_POLL_SECONDS while nothing arrives and PINGs
  Redis: a notice that was never published (Redis was down for the poster) is picked up there,
  and a Redis that does not answer (down, or frozen: no PONG by the next interval) is left for
  REDIS_RETRY_INTERVAL_SECONDS while the hub goes on reading the database at that interval.
  Every Redis call has a deadline, so no stream waits on Redis.
- When its last stream has left, the hub stops at its next notice or poll: it unsubscribes and
  reads nothing more until a stream joins again, which starts it afresh from the newest message.
- A client that reads too slowly (STREAM_BUFFER_MAX events waiting) loses its stream; it
  reconnects with Last-Event-ID and is sent the rest from the database.

Open streams per client IP are counted in Redis (StreamSlots): a sorted set per IP (named by a
SHA-256 of the IP), one member per open stream whose score is the end of its lease; each stream
renews its lease every heartbeat, so the streams of a process that died stop counting when their
leases end (STREAM_LEASE_SECONDS). Without Redis each process counts its own streams.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import logging
import time
import uuid
import weakref
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import redis.asyncio
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections
from redis.exceptions import RedisError

from agentplatform.plumbing.errors import DATABASE_UNAVAILABLE_ERRORS
from agentplatform.plumbing.redis_breaker import REDIS_RETRY_INTERVAL_SECONDS, redis_breaker
from chat.announcements import chat_channel, chat_redis_location
from chat.selectors import chat_messages_after, chat_newest_message_id

logger = logging.getLogger(__name__)

HEARTBEAT = b": ping\n\n"
# Events waiting for one slow client before its stream is closed.
STREAM_BUFFER_MAX = 1000
# Messages read from the database at a time (replays, and the hub's reads).
READ_PAGE = 500
# Every Redis call of a stream process answers within this (a frozen Redis accepts, never answers).
REDIS_TIMEOUT_SECONDS = 0.5

T = TypeVar("T")


async def in_thread(function: Callable[..., T], /, **kwargs: Any) -> T:
    """Runs a database (or django-redis) call in the event loop's small thread pool.

    Not thread_sensitive: that would run it in a thread of the request's own, one per open
    stream. Each pool thread keeps its own database connection, closed when it has outlived
    CONN_MAX_AGE or failed.
    """

    def call() -> T:
        close_old_connections()
        return function(**kwargs)

    return await sync_to_async(call, thread_sensitive=False)()


def sse_event(message_id: int, message_json: str) -> bytes:
    """One SSE event: `id:` the message id, `data:` the message as the feed sends it.

    The JSON is one line (it escapes line breaks); U+2028 and U+2029 are escaped as the feed's
    renderer does (agentplatform/plumbing/renderers.py), so the bytes are the feed's.
    """
    data = message_json.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return f"id: {message_id}\ndata: {data}\n\n".encode()


class StreamSubscription:
    """The events the hub hands one stream, until the stream takes them."""

    __slots__ = ("events", "overflowed", "ready")

    def __init__(self) -> None:
        self.events: deque[tuple[int, bytes]] = deque()
        self.ready = asyncio.Event()
        self.overflowed = False

    def deliver(self, event: tuple[int, bytes]) -> None:
        if self.overflowed:
            return
        if len(self.events) >= STREAM_BUFFER_MAX:
            self.overflowed = True
            self.events.clear()
        else:
            self.events.append(event)
        self.ready.set()


class ChatMessageHub:
    """The messages of one stream process: one Redis subscription, one database read per notice."""

    def __init__(self) -> None:
        self.subscriptions: set[StreamSubscription] = set()
        # Every message up to this id was handed out (or committed before the first stream came).
        self.cursor: int | None = None
        self._task: asyncio.Task[None] | None = None
        self._redis_down = False
        self._database_down = False

    async def subscribe(self) -> StreamSubscription:
        """Joins the hub. From here on every message above the hub's cursor reaches the stream;
        every one up to it had committed before this returned. Raises the database's error
        when it is down."""
        if self.cursor is None:
            newest = await in_thread(chat_newest_message_id)
            if self.cursor is None:
                self.cursor = newest
        if self._task is None or self._task.done():
            # A context of its own, not the first request's: that one's thread executor and
            # state end with its stream.
            self._task = asyncio.get_running_loop().create_task(self._run(), context=contextvars.Context())
        subscription = StreamSubscription()
        self.subscriptions.add(subscription)
        return subscription

    def unsubscribe(self, subscription: StreamSubscription) -> None:
        self.subscriptions.discard(subscription)

    async def _run(self) -> None:
        while self.subscriptions:
            try:
                await self._listen()
            except (RedisError, OSError, TimeoutError) as exc:
                if not self._redis_down:
                    self._redis_down = True
                    logger.warning(
                        "Chat stream: Redis unavailable (%s: %s); reading the database every %.1f s, "
                        "Redis retried every %.0f s",
                        type(exc).__name__,
                        exc,
                        settings.CHAT_STREAM_POLL_SECONDS,
                        REDIS_RETRY_INTERVAL_SECONDS,
                    )
                await self._poll_for(REDIS_RETRY_INTERVAL_SECONDS)
            except Exception:
                # Anything else (a notice that is not an id) must not end the hub under its streams.
                logger.exception("Chat stream: the hub's Redis subscription failed; reading the database meanwhile")
                await self._poll_for(REDIS_RETRY_INTERVAL_SECONDS)
        # No stream is left, and none joined since that was checked (no await in between): the
        # next one to join starts a new run, from the newest message then, not from this cursor.
        self.cursor = None

    async def _listen(self) -> None:
        poll = float(settings.CHAT_STREAM_POLL_SECONDS)
        loop = asyncio.get_running_loop()
        client = redis.asyncio.Redis.from_url(
            chat_redis_location(), socket_connect_timeout=REDIS_TIMEOUT_SECONDS, socket_timeout=poll + 1
        )
        pubsub = client.pubsub()
        try:
            await asyncio.wait_for(pubsub.subscribe(chat_channel()), REDIS_TIMEOUT_SECONDS)
            await self._read_new_messages()  # what was posted while the hub was not subscribed
            pong_due: float | None = None
            while self.subscriptions:
                message = await asyncio.wait_for(
                    pubsub.get_message(ignore_subscribe_messages=True, timeout=poll), poll + REDIS_TIMEOUT_SECONDS
                )
                if message is None:
                    if pong_due is not None and loop.time() > pong_due:
                        raise TimeoutError(f"no answer to PING within {poll} s")
                    if pong_due is None:
                        await asyncio.wait_for(pubsub.ping(), REDIS_TIMEOUT_SECONDS)
                        pong_due = loop.time() + poll
                    await self._read_new_messages()
                    continue
                pong_due = None
                if self._redis_down:
                    self._redis_down = False
                    logger.warning("Chat stream: Redis available again")
                if message["type"] == "message" and int(message["data"]) > (self.cursor or 0):
                    await self._read_new_messages()
        finally:
            # Closing must not wait on a Redis that does not answer either.
            try:
                await asyncio.wait_for(pubsub.aclose(), REDIS_TIMEOUT_SECONDS)
                await asyncio.wait_for(client.aclose(), REDIS_TIMEOUT_SECONDS)
            except (RedisError, OSError, TimeoutError):
                pass

    async def _poll_for(self, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        until = loop.time() + seconds
        while (left := until - loop.time()) > 0 and self.subscriptions:
            await self._read_new_messages()
            await asyncio.sleep(min(float(settings.CHAT_STREAM_POLL_SECONDS), left))

    async def _read_new_messages(self) -> None:
        """Hands every visible message above the cursor to every stream, in id order. A database
        that is down is logged once and read again at the next notice or poll."""
        try:
            if self.cursor is None:
                self.cursor = await in_thread(chat_newest_message_id)
            while True:
                rows = await in_thread(chat_messages_after, after_id=self.cursor, limit=READ_PAGE)
                # No await from here to the cursor's update: a stream joining sees both or neither.
                for message_id, message_json in rows:
                    event = (message_id, sse_event(message_id, message_json))
                    for subscription in self.subscriptions:
                        subscription.deliver(event)
                if rows:
                    self.cursor = rows[-1][0]
                if len(rows) < READ_PAGE:
                    break
        except DATABASE_UNAVAILABLE_ERRORS as exc:
            if not self._database_down:
                self._database_down = True
                logger.error("Chat stream: database unavailable (%s: %s); streams wait for it", type(exc).__name__, exc)
            return
        if self._database_down:
            self._database_down = False
            logger.warning("Chat stream: database available again")


def stream_lease_seconds() -> float:
    """How long a stream's slot counts without renewal (it is renewed every heartbeat)."""
    return max(60.0, 4 * float(settings.CHAT_STREAM_HEARTBEAT_SECONDS))


# KEYS[1] the IP's set; ARGV: now, lease end, limit, member, key lifetime. 1 if the slot was taken.
_ACQUIRE_SCRIPT = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
    return 0
end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4])
redis.call('EXPIRE', KEYS[1], ARGV[5])
return 1
"""


@dataclass
class StreamSlot:
    """One open stream's place in its client's count."""

    ip: str
    key: str
    member: str
    in_redis: bool
    renewed_at: float = field(default_factory=time.monotonic)


class StreamSlots:
    """Open streams per client IP, at most CHAT_STREAM_MAX_PER_IP (see the module's docstring)."""

    def __init__(self) -> None:
        self._client: redis.asyncio.Redis | None = None
        self._script: Any = None
        self._local: Counter[str] = Counter()
        self._releases: set[asyncio.Task[None]] = set()

    def _redis(self) -> tuple[redis.asyncio.Redis, Any]:
        if self._client is None:
            self._client = redis.asyncio.Redis.from_url(
                chat_redis_location(),
                socket_connect_timeout=REDIS_TIMEOUT_SECONDS,
                socket_timeout=REDIS_TIMEOUT_SECONDS,
            )
            self._script = self._client.register_script(_ACQUIRE_SCRIPT)
        return self._client, self._script

    @staticmethod
    def _key(ip: str) -> str:
        prefix = settings.CACHES["counters"]["KEY_PREFIX"]
        return f"{prefix}:chat-stream-slots:{hashlib.sha256(ip.encode()).hexdigest()}"

    async def acquire(self, ip: str) -> StreamSlot | None:
        """A slot for one more stream of `ip`, or None when it has CHAT_STREAM_MAX_PER_IP open."""
        limit = int(settings.CHAT_STREAM_MAX_PER_IP)
        slot = StreamSlot(ip=ip, key=self._key(ip), member=uuid.uuid4().hex, in_redis=False)
        now, lease = time.time(), stream_lease_seconds()
        taken = await self._redis_call(
            lambda client, script: script(keys=[slot.key], args=[now, now + lease, limit, slot.member, int(lease) + 1])
        )
        if taken is None:  # Redis unavailable: this process's own count
            if self._local[ip] >= limit:
                return None
        elif not taken:
            return None
        else:
            slot.in_redis = True
        self._local[ip] += 1
        return slot

    async def renew_if_due(self, slot: StreamSlot) -> None:
        if time.monotonic() - slot.renewed_at < float(settings.CHAT_STREAM_HEARTBEAT_SECONDS):
            return
        slot.renewed_at = time.monotonic()
        if slot.in_redis:
            lease_end = time.time() + stream_lease_seconds()
            await self._redis_call(lambda client, script: client.zadd(slot.key, {slot.member: lease_end}))

    def release(self, slot: StreamSlot) -> None:
        """Frees the slot now in this process, and in Redis as soon as Redis answers (it must not
        wait on anything: it runs as a stream closes)."""
        self._local[slot.ip] -= 1
        if self._local[slot.ip] <= 0:
            del self._local[slot.ip]
        if slot.in_redis:
            task = asyncio.get_running_loop().create_task(
                self._redis_call(lambda client, script: client.zrem(slot.key, slot.member)),
                context=contextvars.Context(),
            )
            self._releases.add(task)
            task.add_done_callback(self._releases.discard)

    async def _redis_call(self, call: Callable[[redis.asyncio.Redis, Any], Any]) -> Any:
        """The call's answer, or None when Redis is unavailable (logged, then left alone for a while)."""
        location = chat_redis_location()
        if redis_breaker.is_open(location):
            return None
        client, script = self._redis()
        try:
            return await asyncio.wait_for(call(client, script), REDIS_TIMEOUT_SECONDS)
        except (RedisError, OSError, TimeoutError) as exc:
            redis_breaker.trip(location)
            logger.warning(
                "Chat stream slots: Redis unavailable (%s: %s); streams counted per process for %.0f s",
                type(exc).__name__,
                exc,
                REDIS_RETRY_INTERVAL_SECONDS,
            )
            return None


@dataclass
class StreamProcess:
    hub: ChatMessageHub
    slots: StreamSlots


# One hub and one slot counter per event loop (uvicorn runs one): Redis's asyncio clients belong
# to the loop they were made in.
_processes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, StreamProcess] = weakref.WeakKeyDictionary()


def stream_process() -> StreamProcess:
    loop = asyncio.get_running_loop()
    process = _processes.get(loop)
    if process is None:
        process = _processes[loop] = StreamProcess(hub=ChatMessageHub(), slots=StreamSlots())
    return process


@dataclass
class OpenStream:
    """A stream that has joined the hub and read its first page: what the view still needs to send."""

    subscription: StreamSubscription
    slot: StreamSlot
    cursor: int
    first_page: list[tuple[int, str]]


async def chat_stream_open(*, slot: StreamSlot, last_event_id: int | None) -> OpenStream:
    """Joins the hub and reads the first page of what the client missed (ids above
    `last_event_id`; without one, nothing: the stream starts at the newest message). Raises the
    database's error when it is down (the view answers 503), having left the hub again."""
    hub = stream_process().hub
    subscription = await hub.subscribe()
    try:
        if last_event_id is None:
            return OpenStream(subscription, slot, await in_thread(chat_newest_message_id), [])
        first_page = await in_thread(chat_messages_after, after_id=last_event_id, limit=READ_PAGE)
    except BaseException:
        hub.unsubscribe(subscription)
        raise
    return OpenStream(subscription, slot, last_event_id, first_page)


async def chat_stream_events(stream: OpenStream) -> AsyncIterator[bytes]:
    """The bytes of the stream: the replay, then live messages and heartbeats, until the client
    leaves (or reads too slowly). Leaves the hub and frees the slot however it ends."""
    process = stream_process()
    subscription, cursor, page = stream.subscription, stream.cursor, stream.first_page
    heartbeat = float(settings.CHAT_STREAM_HEARTBEAT_SECONDS)
    try:
        while page:
            for message_id, message_json in page:
                cursor = message_id
                yield sse_event(message_id, message_json)
            if len(page) < READ_PAGE:
                break
            page = await in_thread(chat_messages_after, after_id=cursor, limit=READ_PAGE)
        while True:
            subscription.ready.clear()
            while subscription.events:
                message_id, event = subscription.events.popleft()
                if message_id > cursor:
                    cursor = message_id
                    yield event
            if subscription.overflowed:
                return
            try:
                # asyncio.timeout, not wait_for: no task made per wake-up (a sizeable share of the
                # CPU per event with a thousand streams).
                async with asyncio.timeout(heartbeat):
                    await subscription.ready.wait()
            except TimeoutError:
                yield HEARTBEAT
            await process.slots.renew_if_due(stream.slot)
    finally:
        process.hub.unsubscribe(subscription)
        process.slots.release(stream.slot)
