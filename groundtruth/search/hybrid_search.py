"""Hybrid search: the lexical and dense legs over one snapshot, fused, with the chunks loaded."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection, transaction

from agentplatform.errors import InvalidInput
from groundtruth.models import Chunk, Repository
from groundtruth.search.dense_search import DenseHit, dense_candidates
from groundtruth.search.fusion import reciprocal_rank_fusion
from groundtruth.search.lexical_search import LexicalHit, LexicalQuery, lexical_candidates, lexical_query_build
from groundtruth.search.query_embedding import QueryEmbedding, query_embed


@dataclass(frozen=True)
class SearchHit:
    chunk: Chunk
    score: float
    lexical_rank: int | None
    dense_rank: int | None
    similarity: float | None
    matched_lexemes: tuple[str, ...]


@dataclass
class SearchOutcome:
    query: str
    repositories: list[Repository]
    hits: list[SearchHit]
    lexical_query: LexicalQuery
    lexical_hits: list[LexicalHit] = field(default_factory=list)
    dense_hits: list[DenseHit] = field(default_factory=list)
    embedding: QueryEmbedding | None = None


def search_scope_resolve(*, names: list[str] | None) -> list[Repository]:
    """The enabled repositories to search: all of them, or those named (each must exist and be
    enabled; the error names every one that does not)."""
    enabled = Repository.objects.filter(enabled=True).order_by("name")
    if names is None:
        return list(enabled)
    wanted = list(dict.fromkeys(names))
    found = {repository.name: repository for repository in enabled.filter(name__in=wanted)}
    if unknown := [name for name in wanted if name not in found]:
        known = ", ".join(enabled.values_list("name", flat=True)) or "none"
        raise InvalidInput(
            f"Unknown repository {', '.join(unknown)}; indexed repositories: {known}.",
            code="unknown_repository",
            errors=[{"field": "repo", "message": f"unknown repository {name}"} for name in unknown],
        )
    return [found[name] for name in wanted]


@contextlib.contextmanager
def _consistent_snapshot() -> Iterator[None]:
    """One snapshot for both legs and the chunk fetch: an ingest committing between them could
    otherwise swap the chunks that a leg just returned. REPEATABLE READ when we open the
    transaction; inside an outer one (tests, callers) its snapshot rules."""
    if connection.in_atomic_block:
        with transaction.atomic():
            yield
        return
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        yield


def chunk_search(*, query: str, repositories: list[Repository], limit: int) -> SearchOutcome:
    """The `limit` best chunks for `query` in `repositories`, fused from both legs.

    The query is embedded before the transaction opens (no transaction held during model
    inference); with EMBEDDING_BACKEND=none only the lexical leg runs.
    """
    embedding = query_embed(text=query)
    depth = max(settings.SEARCH_CANDIDATE_DEPTH, limit)
    repository_ids = [repository.pk for repository in repositories]
    with _consistent_snapshot():
        lexical_query = lexical_query_build(text=query)
        lexical_hits = lexical_candidates(query=lexical_query, repository_ids=repository_ids, depth=depth)
        dense_hits = (
            dense_candidates(
                embedding=embedding.vector,
                model_name=embedding.model_name,
                repository_ids=repository_ids,
                depth=depth,
            )
            if embedding is not None
            else []
        )
        candidate_ids = {hit.chunk_id for hit in lexical_hits} | {hit.chunk_id for hit in dense_hits}
        chunks = {chunk.pk: chunk for chunk in Chunk.objects.filter(pk__in=candidate_ids).select_related("repository")}
    fused = reciprocal_rank_fusion(
        lexical_ids=[hit.chunk_id for hit in lexical_hits if hit.chunk_id in chunks],
        dense_ids=[hit.chunk_id for hit in dense_hits if hit.chunk_id in chunks],
        trust_by_chunk={chunk_id: chunk.trust for chunk_id, chunk in chunks.items()},
        lexical_weight=settings.SEARCH_LEXICAL_WEIGHT,
        dense_weight=settings.SEARCH_DENSE_WEIGHT,
        rank_constant=settings.SEARCH_RRF_K,
        trust_weights=settings.SEARCH_TRUST_WEIGHTS,
    )
    similarity = {hit.chunk_id: hit.similarity for hit in dense_hits}
    matched = {hit.chunk_id: hit.matched_lexemes for hit in lexical_hits}
    hits = [
        SearchHit(
            chunk=chunks[hit.chunk_id],
            score=hit.score,
            lexical_rank=hit.lexical_rank,
            dense_rank=hit.dense_rank,
            similarity=similarity.get(hit.chunk_id),
            matched_lexemes=matched.get(hit.chunk_id, ()),
        )
        for hit in fused[:limit]
    ]
    return SearchOutcome(
        query=query,
        repositories=repositories,
        hits=hits,
        lexical_query=lexical_query,
        lexical_hits=lexical_hits,
        dense_hits=dense_hits,
        embedding=embedding,
    )
