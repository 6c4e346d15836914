"""One bounded in-process cache for everything a worker process keeps in memory.

Verified bearer tokens, rendered responses, asset bytes by blob SHA, the asset row a content URL
names and query embeddings all live in the memory of each web (or Celery) worker, shared by its
threads. They follow one rule: bounded by a number of entries, by a total size, or both; the
least recently used entry goes first; an entry may carry its own time to live. A bound may be a
callable, read on every `put`, so that a cache sized by a setting follows the setting (tests
override it).

Not `functools.lru_cache` (no expiry, no size in bytes, no clear per key) nor `cachetools`
(not thread-safe: it would need the same lock around it, and an extra dependency).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

Bound = int | Callable[[], int] | None
_FOREVER = float("inf")


def _bound(value: Bound) -> int | None:
    return value() if callable(value) else value


class BoundedCache(Generic[K, V]):
    """A thread-safe least-recently-used map with optional per-entry expiry.

    `max_entries` bounds the number of entries; `max_size` with `size_of` bounds the total size
    (an entry larger than the whole budget is not stored). `hits` and `misses` count lookups.
    """

    def __init__(
        self,
        *,
        max_entries: Bound = None,
        max_size: Bound = None,
        size_of: Callable[[V], int] | None = None,
    ) -> None:
        if max_size is not None and size_of is None:
            raise ValueError("max_size needs size_of")
        self._max_entries = max_entries
        self._max_size = max_size
        self._size_of = size_of
        # key -> (expiry on the monotonic clock, size, value), least recently used first.
        self._entries: OrderedDict[K, tuple[float, int, V]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def max_entries(self) -> int | None:
        return _bound(self._max_entries)

    @property
    def max_size(self) -> int | None:
        return _bound(self._max_size)

    @property
    def size(self) -> int:
        """The total size of the entries (0 without `size_of`)."""
        return self._size

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] <= time.monotonic():
                self._drop(key)
                entry = None
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry[2]

    def put(self, key: K, value: V, *, ttl_seconds: float | None = None) -> None:
        """Stores `value` (for `ttl_seconds`, else until evicted), evicting the least recently
        used entries beyond the bounds."""
        max_entries, max_size = self.max_entries, self.max_size
        size = self._size_of(value) if self._size_of is not None else 0
        if (max_size is not None and size > max_size) or max_entries == 0:
            return
        expires = _FOREVER if ttl_seconds is None else time.monotonic() + ttl_seconds
        with self._lock:
            self._drop(key)
            self._entries[key] = (expires, size, value)
            self._size += size
            while (max_entries is not None and len(self._entries) > max_entries) or (
                max_size is not None and self._size > max_size
            ):
                _key, (_expires, evicted_size, _value) = self._entries.popitem(last=False)
                self._size -= evicted_size

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._size = 0
            self.hits = self.misses = 0

    def _drop(self, key: K) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._size -= entry[1]
