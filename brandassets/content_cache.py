"""An in-process cache of asset bytes keyed by git blob SHA, bounded by total size.

A blob SHA names its bytes forever, so entries never go stale and need no invalidation: a
registry change that points an asset at new bytes points it at a new SHA. The cache lives in
each web worker's memory (no network round trip, which is what lets the content endpoint keep
up with a static file view) and evicts least recently used blobs once the total passes
ASSET_CONTENT_CACHE_BYTES. A blob larger than the whole budget is never cached.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

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
