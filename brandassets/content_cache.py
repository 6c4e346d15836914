"""In-process caches of the content endpoint: asset bytes keyed by git blob SHA, bounded by total
size, and the short-lived resolution of a URL to its asset row.

A blob SHA names its bytes forever, so entries never go stale and need no invalidation: a
registry change that points an asset at new bytes points it at a new SHA. The cache lives in
each web worker's memory (no network round trip, which is what lets the content endpoint keep
up with a static file view) and evicts least recently used blobs once the total passes
ASSET_CONTENT_CACHE_BYTES. A blob larger than the whole budget is never cached.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any

from django.conf import settings


class BlobContentCache:
    def __init__(self, *, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, bytes] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    @property
    def size_bytes(self) -> int:
        return self._size

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, blob_sha: str) -> bytes | None:
        with self._lock:
            data = self._entries.get(blob_sha)
            if data is not None:
                self._entries.move_to_end(blob_sha)
            return data

    def put(self, blob_sha: str, data: bytes) -> None:
        if len(data) > self.max_bytes:
            return
        with self._lock:
            previous = self._entries.pop(blob_sha, None)
            if previous is not None:
                self._size -= len(previous)
            self._entries[blob_sha] = data
            self._size += len(data)
            while self._size > self.max_bytes:
                _evicted_sha, evicted = self._entries.popitem(last=False)
                self._size -= len(evicted)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._size = 0


_cache: BlobContentCache | None = None
_cache_lock = threading.Lock()


def blob_content_cache() -> BlobContentCache:
    """The process-wide cache, sized from settings.ASSET_CONTENT_CACHE_BYTES on first use.

    A changed setting (tests use `settings` overrides) gets a fresh cache of the new size.
    """
    global _cache
    with _cache_lock:
        if _cache is None or _cache.max_bytes != settings.ASSET_CONTENT_CACHE_BYTES:
            _cache = BlobContentCache(max_bytes=settings.ASSET_CONTENT_CACHE_BYTES)
        return _cache


class AssetRecordCache:
    """Which asset row a (product, kind, assetIndex) names, kept in process for a few seconds.

    Resolving the URL to a row is a database query that costs more than handing out the cached
    bytes; keeping the answer for ASSET_RECORD_CACHE_SECONDS lets the content endpoint skip it.
    A sync clears the cache of the process that ran it at once; other web workers follow within
    the TTL, serving the previous (still consistent: bytes and ETag from the same blob) answer
    until then. Only found, served assets are kept; misses always ask the database.
    """

    max_entries = 4096

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str, int], tuple[float, Any]] = {}
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, int]) -> Any | None:
        entry = self._entries.get(key)
        if entry is None or entry[0] < time.monotonic():
            return None
        return entry[1]

    def put(self, key: tuple[str, str, int], record: Any, *, ttl_seconds: float) -> None:
        with self._lock:
            if len(self._entries) >= self.max_entries:
                self._entries.clear()
            self._entries[key] = (time.monotonic() + ttl_seconds, record)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


asset_record_cache = AssetRecordCache()
