"""The dense ranking, and weighted reciprocal rank fusion of the two legs scaled by trust tier.

Dense ranking: a chunk's dense score is the similarity of its passage, lifted towards the
similarity of its own section title when that is higher: `(1 - h) * passage + h * title` with
h = SEARCH_HEADING_WEIGHT, else the passage's (a chunk without a title scores its passage
alone). A question often says what a title says ("How do I use a proxy?") in other words than
the body's; a title that says less than its body (reference sections under "Options") must not
sink it.

RRF uses ranks, not scores: BM25 scores and cosine similarities live on unrelated scales, and
ranks need no per-corpus normalisation. Each leg contributes weight / (k + rank) (rank 1-based);
the sum is multiplied by the weight of the chunk's trust tier. The tier weights are close to 1
(SEARCH_TRUST_WEIGHTS, at least 0.9 each): they break near-ties in favour of the more trusted
passage and never let a weakly matching canonical passage outrank a strongly matching
community one. Weights, k and tiers come from settings (SEARCH_LEXICAL_WEIGHT,
SEARCH_DENSE_WEIGHT, SEARCH_RRF_K, SEARCH_TRUST_WEIGHTS), tuned on real documentation by
`benchmarks/retrieval.py`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from django.conf import settings

from groundtruth.search.dense_search import DenseHit
from groundtruth.search.fitted_parameters import rerank_fit_current


@dataclass(frozen=True)
class FusionParameters:
    heading_weight: float
    lexical_weight: float
    dense_weight: float
    rank_constant: float
    trust_weights: Mapping[str, float]
    # The re-ranking of the best fused candidates (reranking.py): how many, and the weights.
    rerank_depth: int
    rerank_weights: Mapping[str, float]


def fusion_parameters_configured() -> FusionParameters:
    return FusionParameters(
        heading_weight=settings.SEARCH_HEADING_WEIGHT,
        lexical_weight=settings.SEARCH_LEXICAL_WEIGHT,
        dense_weight=settings.SEARCH_DENSE_WEIGHT,
        rank_constant=settings.SEARCH_RRF_K,
        trust_weights=settings.SEARCH_TRUST_WEIGHTS,
        rerank_depth=settings.SEARCH_RERANK_DEPTH,
        rerank_weights=rerank_fit_current().weights,
    )


@dataclass(frozen=True)
class FusedHit:
    chunk_id: int
    score: float
    lexical_rank: int | None
    dense_rank: int | None


def dense_score(hit: DenseHit, *, heading_weight: float) -> float:
    """The passage similarity, lifted towards the title's when the title matches better: a
    title can raise a passage, never lower it (reference sections under generic titles, such as
    "Options", would otherwise sink below passages whose titles merely sound right)."""
    if hit.heading_similarity is None or hit.heading_similarity <= hit.similarity:
        return hit.similarity
    return (1.0 - heading_weight) * hit.similarity + heading_weight * hit.heading_similarity


def dense_ranking(hits: Sequence[DenseHit], *, heading_weight: float) -> list[DenseHit]:
    """The dense leg's hits, best dense score first (ties by chunk id)."""
    return sorted(hits, key=lambda hit: (-dense_score(hit, heading_weight=heading_weight), hit.chunk_id))


def reciprocal_rank_fusion(
    *,
    lexical_ids: Sequence[int],
    dense_ids: Sequence[int],
    trust_by_chunk: Mapping[int, str],
    lexical_weight: float,
    dense_weight: float,
    rank_constant: float,
    trust_weights: Mapping[str, float],
) -> list[FusedHit]:
    """All chunks of both lists, best first (ties broken by chunk id for stable output)."""
    lexical_rank = {chunk_id: rank for rank, chunk_id in enumerate(lexical_ids, start=1)}
    dense_rank = {chunk_id: rank for rank, chunk_id in enumerate(dense_ids, start=1)}
    fused: list[FusedHit] = []
    for chunk_id in dict.fromkeys([*lexical_ids, *dense_ids]):
        score = 0.0
        if (rank := lexical_rank.get(chunk_id)) is not None:
            score += lexical_weight / (rank_constant + rank)
        if (rank := dense_rank.get(chunk_id)) is not None:
            score += dense_weight / (rank_constant + rank)
        score *= trust_weights.get(trust_by_chunk.get(chunk_id, ""), 0.0)
        fused.append(
            FusedHit(
                chunk_id=chunk_id,
                score=score,
                lexical_rank=lexical_rank.get(chunk_id),
                dense_rank=dense_rank.get(chunk_id),
            )
        )
    fused.sort(key=lambda hit: (-hit.score, hit.chunk_id))
    return fused
