"""Tells every stream process that a chat message was stored: its id, published on Redis.

The notice carries only the id: a stream process reads the messages themselves from the
database (chat/stream.py), so a notice that is lost (Redis down, a publish that failed) delays a
message until that process polls the database, and never skips or reorders one.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django_redis import get_redis_connection
from django_redis.exceptions import ConnectionInterrupted
from redis.exceptions import RedisError

from agentplatform.plumbing.redis_breaker import REDIS_RETRY_INTERVAL_SECONDS, redis_breaker

logger = logging.getLogger(__name__)

# The counters cache's Redis (django-redis, one connection per thread, 0.5 s socket timeouts).
REDIS_CACHE = "counters"


def chat_channel() -> str:
    """The pub/sub channel of new messages, under the cache key prefix (runs sharing a Redis stay apart)."""
    return f"{settings.CACHES[REDIS_CACHE]['KEY_PREFIX']}:chat:messages"


def chat_redis_location() -> str:
    return str(settings.CACHES[REDIS_CACHE]["LOCATION"])


def chat_message_announce(*, message_id: int) -> None:
    """Publishes the id of a committed message. A Redis that is down or hangs costs the poster at
    most one socket timeout every REDIS_RETRY_INTERVAL_SECONDS (agentplatform/plumbing/redis_breaker.py);
    the streams then find the message by polling."""
    location = chat_redis_location()
    if redis_breaker.is_open(location):
        return
    try:
        get_redis_connection(REDIS_CACHE).publish(chat_channel(), str(message_id))
    except (RedisError, OSError, ConnectionInterrupted) as exc:
        redis_breaker.trip(location)
        logger.warning(
            "Chat message %s not announced on Redis (%s: %s); streams find it by polling, Redis retried in %.0f s",
            message_id,
            type(exc).__name__,
            exc,
            REDIS_RETRY_INTERVAL_SECONDS,
        )
