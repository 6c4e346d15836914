"""Query embeddings with a bounded in-process LRU cache.

In process rather than in Redis: a hit costs a dictionary lookup instead of a network round trip
and the unpickling of 384 floats, and the cache is tiny (SEARCH_EMBEDDING_CACHE_SIZE entries of
about 3 KB each). Each web worker keeps its own; a popular query is embedded once per worker.
Keys include the model name, so a model change never serves a stale vector.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from django.conf import settings


@dataclass(frozen=True)
class QueryEmbedding:
    vector: list[float]
    model_name: str
    cached: bool


class LruCache:
    """A thread-safe least-recently-used map with a fixed number of entries."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[tuple[str, str], list[float]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: tuple[str, str]) -> list[float] | None:
        with self._lock:
            value = self._entries.get(key)
            if value is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: tuple[str, str], value: list[float]) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)


_cache: LruCache | None = None


def query_embedding_cache() -> LruCache:
    global _cache
    if _cache is None or _cache.capacity != settings.SEARCH_EMBEDDING_CACHE_SIZE:
        _cache = LruCache(settings.SEARCH_EMBEDDING_CACHE_SIZE)
    return _cache


def _normalised(text: str) -> str:
    return " ".join(text.split())


def query_embed(*, text: str) -> QueryEmbedding | None:
    """The embedding of a search query, or None when no embedding backend is configured
    (EMBEDDING_BACKEND=none: the dense leg is skipped)."""
    from groundtruth.embeddings import embedding_backend_get

    backend = embedding_backend_get()
    if backend is None:
        return None
    key = (backend.model_name, _normalised(text))
    cache = query_embedding_cache()
    if (vector := cache.get(key)) is not None:
        return QueryEmbedding(vector=vector, model_name=backend.model_name, cached=True)
    vector = [float(value) for value in backend.embed([key[1]])[0]]
    cache.put(key, vector)
    return QueryEmbedding(vector=vector, model_name=backend.model_name, cached=False)
