"""Weighted reciprocal rank fusion of the two legs, scaled by the trust tier of each chunk.

RRF uses ranks, not scores: BM25 scores and cosine similarities live on unrelated scales, and
ranks need no per-corpus normalisation. Each leg contributes weight / (k + rank) (rank 1-based);
the sum is multiplied by the weight of the chunk's trust tier, so a canonical passage outranks
an equally relevant community or transcript one. Weights, k and tiers come from settings
(SEARCH_LEXICAL_WEIGHT, SEARCH_DENSE_WEIGHT, SEARCH_RRF_K, SEARCH_TRUST_WEIGHTS).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class FusedHit:
    chunk_id: int
    score: float
    lexical_rank: int | None
    dense_rank: int | None


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
