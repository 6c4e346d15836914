"""Query embeddings with a bounded in-process LRU cache.

In process rather than in Redis: a hit costs a dictionary lookup instead of a network round trip
and the unpickling of 384 floats, and the cache is tiny (SEARCH_EMBEDDING_CACHE_SIZE entries of
about 3 KB each). Each web worker keeps its own; a popular query is embedded once per worker.
Keys include the model name, so a model change never serves a stale vector.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from agentplatform.plumbing.bounded_cache import BoundedCache


@dataclass(frozen=True)
class QueryEmbedding:
    vector: list[float]
    model_name: str
    cached: bool


# (model name, normalised query) -> its vector, in each web process.
_cache: BoundedCache[tuple[str, str], list[float]] = BoundedCache(
    max_entries=lambda: settings.SEARCH_EMBEDDING_CACHE_SIZE
)


def query_embedding_cache() -> BoundedCache[tuple[str, str], list[float]]:
    return _cache


def _normalised(text: str) -> str:
    return " ".join(text.split())


def query_embed(*, text: str) -> QueryEmbedding | None:
    """The embedding of a search query, or None when no embedding backend is configured
    (EMBEDDING_BACKEND=none) or the local model is still being prepared: the dense leg is skipped."""
    from agentplatform.plumbing.database_backend.deadlines import ProcessKind, process_kind
    from groundtruth.embeddings import EmbeddingModelNotReady, LocalSentenceTransformer, embedding_backend_get

    backend = embedding_backend_get()
    if backend is None:
        return None
    if isinstance(backend, LocalSentenceTransformer) and not backend.loaded and process_kind() == ProcessKind.SERVING:
        # A model this process has not loaded yet (the index switched to an adapted encoder since
        # it started) is prepared in the background, its first export included: no request waits
        # for it, search is lexical meanwhile.
        backend.prepare_in_background()
        if not backend.loaded:
            return None
    key = (backend.model_name, _normalised(text))
    cache = query_embedding_cache()
    if (vector := cache.get(key)) is not None:
        return QueryEmbedding(vector=vector, model_name=backend.model_name, cached=True)
    try:
        vector = [float(value) for value in backend.embed([key[1]])[0]]
    except EmbeddingModelNotReady:
        return None
    cache.put(key, vector)
    return QueryEmbedding(vector=vector, model_name=backend.model_name, cached=False)
