"""Refusal thresholds calibrated on each corpus's own mined pairs, not on labelled questions.

A fitted judge scores the held-out mined queries of the corpus (`fitting.py`): each query's own
passage (a positive) and the passages retrieval put near it (negatives). The refusal threshold
of a repository is the score below which `refusal_share` of its held-out positives fall:
"sources missing" when the best passage scores lower than the judge scores all but that share
of the passages the repository's maintainers wrote to answer a title. A repository with fewer
than MIN_POSITIVES held-out positives takes the pooled threshold. The one constant is the share
(how many of its own answers a corpus may refuse), the same for every corpus; the thresholds
themselves move with each corpus's scores.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

MIN_POSITIVES = 5


@dataclass(frozen=True)
class HeldOutScores:
    """The judge's scores on one held-out mined query: its positive and its negatives."""

    repository: str
    positive: float
    negatives: tuple[float, ...]


def held_out_accuracy(scored: Sequence[HeldOutScores]) -> tuple[float, float]:
    """(share of queries whose positive scores above all its negatives, share of pairs where the
    positive scores above the negative)."""
    if not scored:
        return 0.0, 0.0
    first = sum(all(item.positive > negative for negative in item.negatives) for item in scored) / len(scored)
    pairs = [item.positive > negative for item in scored for negative in item.negatives]
    return first, sum(pairs) / len(pairs) if pairs else 0.0


def score_quantile(scores: Sequence[float], *, share: float) -> float:
    """The score below which `share` of `scores` fall (the lowest when the share is 0)."""
    if not scores:
        raise ValueError("a threshold needs scores")
    ordered = sorted(scores)
    return ordered[min(len(ordered) - 1, math.floor(share * len(ordered)))]


def refusal_thresholds(scored: Sequence[HeldOutScores], *, share: float) -> tuple[dict[str, float], float]:
    """(threshold by repository, pooled threshold), each rounded down to 4 decimals."""
    pooled = math.floor(score_quantile([item.positive for item in scored], share=share) * 10000) / 10000
    by_repository: dict[str, list[float]] = {}
    for item in scored:
        by_repository.setdefault(item.repository, []).append(item.positive)
    thresholds = {
        repository: math.floor(score_quantile(positives, share=share) * 10000) / 10000
        for repository, positives in sorted(by_repository.items())
        if len(positives) >= MIN_POSITIVES
    }
    return thresholds, pooled
