"""Hybrid search: the lexical and dense legs over one snapshot, fused and re-ranked, with the chunks
loaded."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import QuerySet

from agentplatform.plumbing.errors import InvalidInput
from groundtruth.embeddings import EmbeddingError
from groundtruth.judge.scoring import ActiveJudge, judge_in_use, passages_judge
from groundtruth.models import Chunk, Repository
from groundtruth.search.citations import citation_for
from groundtruth.search.dense_search import DenseHit, dense_candidates
from groundtruth.search.fusion import (
    FusedHit,
    FusionParameters,
    dense_ranking,
    dense_score,
    fusion_parameters_configured,
    reciprocal_rank_fusion,
)
from groundtruth.search.lexical_search import (
    LexicalHit,
    LexicalQuery,
    bm25_share,
    chunks_lexemes_matched,
    idf_share,
    lexical_candidates,
    lexical_query_build,
)
from groundtruth.search.query_embedding import QueryEmbedding, query_embed
from groundtruth.search.reranking import RerankEvidence, relevance, rerank_evidence, titles_repeated

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SearchHit:
    chunk: Chunk
    score: float
    lexical_rank: int | None
    dense_rank: int | None
    similarity: float | None  # of the passage vector
    heading_similarity: float | None  # of the title vector
    dense_score: float | None  # the two mixed (fusion.dense_score)
    matched_lexemes: tuple[str, ...]
    relevance: float | None = None  # reranking.relevance; None outside the re-ranked candidates
    judge_score: float | None = None  # the relevance judge's; None without a judge or outside its depth

    @property
    def citation(self) -> dict[str, Any]:
        """The citation of the whole chunk, as /search gives it."""
        return citation_for(self.chunk, start_line=self.chunk.start_line, end_line=self.chunk.end_line)


@dataclass(frozen=True)
class Candidate:
    """What fusion and re-ranking read of a candidate of either leg; full rows are loaded for
    the results only (SearchOutcome.chunks)."""

    chunk_id: int
    repository_id: int
    trust: str
    heading: list[str]


@dataclass
class SearchOutcome:
    query: str
    repositories: list[Repository]
    hits: list[SearchHit]
    lexical_query: LexicalQuery
    lexical_hits: list[LexicalHit] = field(default_factory=list)
    dense_hits: list[DenseHit] = field(default_factory=list)  # best dense score first
    embedding: QueryEmbedding | None = None
    # Every candidate of either leg, as ranking reads it.
    candidates: dict[int, Candidate] = field(default_factory=dict)
    # Full rows of the `limit` results and of the candidates the judge read (not of every candidate).
    chunks: dict[int, Chunk] = field(default_factory=dict)
    fusion: FusionParameters | None = None
    rerank_evidence: dict[int, RerankEvidence] = field(default_factory=dict)  # of the re-ranked candidates
    judge: ActiveJudge | None = None
    judge_scores: dict[int, float] = field(default_factory=dict)  # of the judged candidates
    relevances: dict[int, float] = field(default_factory=dict)  # of the re-ranked candidates


def search_scope_resolve(*, names: list[str] | None, visible: QuerySet[Repository] | None = None) -> list[Repository]:
    """The enabled repositories to search, of `visible` (all when None: selectors.
    repository_visible_queryset): all of them, or those named (each must exist, be enabled and
    visible; the error names every one that does not, and lists only visible ones as known)."""
    enabled = (visible if visible is not None else Repository.objects.all()).filter(enabled=True).order_by("name")
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
    transaction; inside an outer one (tests, callers) its snapshot rules. (The dense leg's
    planner settings are its own: dense_search.dense_candidates.)"""
    if connection.in_atomic_block:
        with transaction.atomic():
            yield
        return
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        yield


def _rerank_evidence(
    *,
    fused: list[FusedHit],
    dense_hits: list[DenseHit],
    lexical_hits: list[LexicalHit],
    candidates: dict[int, Candidate],
    query: LexicalQuery,
    fusion: FusionParameters,
) -> dict[int, RerankEvidence]:
    """The evidence of the first `fusion.rerank_depth` fused candidates that the dense leg scored
    (reranking.py); the words of those outside the lexical leg's candidates are looked up (one
    query). Nothing without a dense leg."""
    dense = {hit.chunk_id: hit for hit in dense_hits}
    head = [hit.chunk_id for hit in fused[: fusion.rerank_depth] if hit.chunk_id in dense]
    if not head:
        return {}
    idf = query.capped_idf()
    lexical = {hit.chunk_id: hit for hit in lexical_hits}
    looked_up = chunks_lexemes_matched(chunk_ids=[i for i in head if i not in lexical], lexemes=sorted(idf))
    return {
        chunk_id: rerank_evidence(
            dense_score=dense_score(dense[chunk_id], heading_weight=fusion.heading_weight),
            heading_similarity=dense[chunk_id].heading_similarity,
            heading=candidates[chunk_id].heading,
            lexical_share=bm25_share(lexical[chunk_id].score, idf=idf) if chunk_id in lexical else 0.0,
            coverage=idf_share(
                lexical[chunk_id].matched_lexemes if chunk_id in lexical else looked_up.get(chunk_id, set()), idf=idf
            ),
        )
        for chunk_id in head
    }


def _reranked(fused: list[FusedHit], *, relevances: dict[int, float], titled: set[int]) -> list[FusedHit]:
    """The re-ranked candidates, those whose title the query repeats (`titled`) first, by relevance
    (ties by chunk id); then the others in fused order."""
    head = sorted(
        (hit for hit in fused if hit.chunk_id in relevances),
        key=lambda hit: (hit.chunk_id not in titled, -relevances[hit.chunk_id], hit.chunk_id),
    )
    return head + [hit for hit in fused if hit.chunk_id not in relevances]


def _judged(
    fused: list[FusedHit],
    *,
    judge: ActiveJudge,
    query: str,
    chunks: dict[int, Chunk],
    relevances: dict[int, float],
    titled: set[int],
    depth: int,
    relevance_weight: float,
) -> tuple[list[FusedHit], dict[int, float]]:
    """The first `depth` candidates ordered by the judge's score (plus `relevance_weight` times
    their relevance), those whose title the query repeats first, ties by their order before; then
    the others as they were. And the scores."""
    head = fused[:depth]
    scores = passages_judge(judge, query=query, chunks=[chunks[hit.chunk_id] for hit in head])
    position = {hit.chunk_id: index for index, hit in enumerate(head)}
    ordered = sorted(
        head,
        key=lambda hit: (
            hit.chunk_id not in titled,
            -(scores[hit.chunk_id] + relevance_weight * relevances.get(hit.chunk_id, 0.0)),
            position[hit.chunk_id],
        ),
    )
    return ordered + fused[depth:], scores


def _candidates_fetch(*, chunk_ids: set[int]) -> dict[int, Candidate]:
    """Of the ~145 candidates of a query only what ranking reads: building full Chunk rows (text,
    four JSON fields) for each was a seventh of a /search request under load (docs/inference.md).
    One array parameter rather than the ORM's `pk__in`, whose one placeholder per id (built,
    quoted and sent) cost 2.0 ms of CPU per request against 0.4 ms."""
    if not chunk_ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, repository_id, trust, heading FROM {Chunk._meta.db_table} WHERE id = ANY(%s)",
            [sorted(chunk_ids)],
        )
        return {
            chunk_id: Candidate(
                chunk_id=chunk_id,
                repository_id=repository_id,
                trust=trust,
                # Django's connection reads jsonb as text (its JSONField decodes it).
                heading=json.loads(heading) if isinstance(heading, str) else heading,
            )
            for chunk_id, repository_id, trust, heading in cursor.fetchall()
        }


def _chunks_fetch(*, chunk_ids: list[int], repositories: list[Repository]) -> dict[int, Chunk]:
    """The full rows of `chunk_ids` without their vectors, each given its repository from
    `repositories` (both legs filter by them) instead of joining it, which built a Repository and
    decoded its JSON fields for every row."""
    repository_by_id = {repository.pk: repository for repository in repositories}
    chunks = {}
    for chunk in (
        Chunk.objects.filter(pk__in=chunk_ids).order_by().defer("embedding", "heading_embedding", "search_vector")
    ):
        if chunk.repository_id in repository_by_id:
            chunk.repository = repository_by_id[chunk.repository_id]
        chunks[chunk.pk] = chunk
    return chunks


def chunk_search(
    *,
    query: str,
    repositories: list[Repository],
    limit: int,
    fusion: FusionParameters | None = None,
    judge: ActiveJudge | bool | None = True,
) -> SearchOutcome:
    """The `limit` best chunks for `query` in `repositories`, fused from both legs and the best
    of them re-ranked by relevance (reranking.py), with the configured (or the given, for
    benchmarks) fusion parameters.

    The query is embedded before the transaction opens (no transaction held during model
    inference); with EMBEDDING_BACKEND=none only the lexical leg runs. `judge`: True for the
    relevance judge in use (`judge_scores.judge_in_use`; none fitted: no judging), False for none
    (benchmarks measure both), or a given one.
    """
    fusion = fusion or fusion_parameters_configured()
    embedding = query_embed(text=query)
    # The judge reads with the embedding model: without it (lexical search) nothing is judged.
    # Chosen before the snapshot: the candidates it reads need their full rows fetched in it.
    active = (judge_in_use() if judge is True else (judge or None)) if embedding is not None else None
    judge_depth = max(settings.SEARCH_JUDGE_DEPTH, limit)
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
        candidates = _candidates_fetch(
            chunk_ids={hit.chunk_id for hit in lexical_hits} | {hit.chunk_id for hit in dense_hits}
        )
        dense_hits = [
            hit for hit in dense_ranking(dense_hits, heading_weight=fusion.heading_weight) if hit.chunk_id in candidates
        ]
        lexical_hits = [hit for hit in lexical_hits if hit.chunk_id in candidates]
        fused = reciprocal_rank_fusion(
            lexical_ids=[hit.chunk_id for hit in lexical_hits],
            dense_ids=[hit.chunk_id for hit in dense_hits],
            trust_by_chunk={chunk_id: candidate.trust for chunk_id, candidate in candidates.items()},
            lexical_weight=fusion.lexical_weight,
            dense_weight=fusion.dense_weight,
            rank_constant=fusion.rank_constant,
            trust_weights=fusion.trust_weights,
        )
        evidence = _rerank_evidence(
            fused=fused,
            dense_hits=dense_hits,
            lexical_hits=lexical_hits,
            candidates=candidates,
            query=lexical_query,
            fusion=fusion,
        )
        relevances = {
            chunk_id: relevance(
                found,
                weights=fusion.rerank_weights,
                trust_weight=fusion.trust_weights.get(candidates[chunk_id].trust, 0.0),
            )
            for chunk_id, found in evidence.items()
        }
        titled = titles_repeated(query, {chunk_id: candidates[chunk_id].heading for chunk_id in evidence})
        fused = _reranked(fused, relevances=relevances, titled=titled)
        # Full rows for the results, or for every candidate the judge may read (it re-orders its
        # head, so any of them may become a result). The vectors and the tsvector stay in the
        # database: parsing two 384-dimension vectors per row would cost more than the search.
        chunks = _chunks_fetch(
            chunk_ids=[hit.chunk_id for hit in fused[: judge_depth if active is not None else limit]],
            repositories=repositories,
        )
    judge_scores: dict[int, float] = {}
    if active is not None:
        try:
            fused, judge_scores = _judged(
                fused,
                judge=active,
                query=query,
                chunks=chunks,
                relevances=relevances,
                titled=titled,
                depth=judge_depth,
                relevance_weight=settings.SEARCH_JUDGE_RELEVANCE_WEIGHT,
            )
        except EmbeddingError as exc:  # the model stopped answering since the query was embedded
            logger.warning("Relevance judge skipped for this search: %s", exc)
            active = None
    dense = {hit.chunk_id: hit for hit in dense_hits}
    matched = {hit.chunk_id: hit.matched_lexemes for hit in lexical_hits}
    hits = []
    for hit in fused[:limit]:
        dense_hit = dense.get(hit.chunk_id)
        hits.append(
            SearchHit(
                chunk=chunks[hit.chunk_id],
                score=hit.score,
                lexical_rank=hit.lexical_rank,
                dense_rank=hit.dense_rank,
                similarity=dense_hit.similarity if dense_hit else None,
                heading_similarity=dense_hit.heading_similarity if dense_hit else None,
                dense_score=dense_score(dense_hit, heading_weight=fusion.heading_weight) if dense_hit else None,
                matched_lexemes=matched.get(hit.chunk_id, ()),
                relevance=relevances.get(hit.chunk_id),
                judge_score=judge_scores.get(hit.chunk_id),
            )
        )
    return SearchOutcome(
        query=query,
        repositories=repositories,
        hits=hits,
        lexical_query=lexical_query,
        lexical_hits=lexical_hits,
        dense_hits=dense_hits,
        embedding=embedding,
        candidates=candidates,
        chunks=chunks,
        fusion=fusion,
        rerank_evidence=evidence,
        judge=active,
        judge_scores=judge_scores,
        relevances=relevances,
    )
