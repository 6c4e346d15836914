"""Remembers, per Redis location, until when Redis is considered down.

After a failed call Redis is not tried again for REDIS_RETRY_INTERVAL_SECONDS, so that a Redis
that hangs (each attempt waits for the socket timeout) does not add that wait to every request.
Used by the rate-limit counters and the cache generations.
"""

from __future__ import annotations

import threading
import time

REDIS_RETRY_INTERVAL_SECONDS = 5.0


class RedisBreaker:
    def __init__(self) -> None:
        self._down_until: dict[str, float] = {}
        self._lock = threading.Lock()

    def is_open(self, location: str, now: float | None = None) -> bool:
        return self._down_until.get(location, 0.0) > (time.time() if now is None else now)

    def trip(self, location: str, now: float | None = None) -> None:
        with self._lock:
            self._down_until[location] = (time.time() if now is None else now) + REDIS_RETRY_INTERVAL_SECONDS


redis_breaker = RedisBreaker()
