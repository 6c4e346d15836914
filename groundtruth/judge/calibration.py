"""Refusal thresholds calibrated on each corpus's own mined pairs, not on labelled questions.

A fitted judge scores the held-out mined queries of the corpus (`fitting.py`): each query's own
passage (a positive) and the passages retrieval put near it (negatives). Two rules set a
repository's refusal threshold from them:

- POSITIVE_QUANTILE (the default): the score below which `refusal_share` of its held-out
  positives fall: "sources missing" when the best passage scores lower than the judge scores all
  but that share of the passages the maintainers wrote to answer a title;
- SEPARATION: the score that best separates its held-out positives from its held-out negatives:
  "sources missing" when the best passage scores like a passage retrieval put near a title.

Measured on the whole development set (docs/ground-truth-judge.md) the first refuses almost
nothing and the second too much of what is answerable where the mined negatives score high. A
repository with fewer than MIN_POSITIVES held-out positives takes the pooled threshold. No
constant is fitted to labelled questions; the thresholds move with each corpus's scores.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

MIN_POSITIVES = 5
SEPARATION, POSITIVE_QUANTILE = "separation", "positive_quantile"
CALIBRATIONS = (SEPARATION, POSITIVE_QUANTILE)


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


def separating_score(positives: Sequence[float], negatives: Sequence[float]) -> float:
    """The score that best separates `positives` from `negatives`: the threshold t (one of the
    scores) maximising share(positives >= t) - share(negatives >= t) (Youden's J); among equals
    the lowest, which refuses fewest positives."""
    if not positives or not negatives:
        raise ValueError("a separation needs positive and negative scores")

    def separation(threshold: float) -> float:
        kept = sum(score >= threshold for score in positives) / len(positives)
        return kept - sum(score >= threshold for score in negatives) / len(negatives)

    return max(sorted(set(positives) | set(negatives)), key=lambda threshold: (separation(threshold), -threshold))


def refusal_thresholds(
    scored: Sequence[HeldOutScores], *, share: float, calibration: str = POSITIVE_QUANTILE
) -> tuple[dict[str, float], float]:
    """(threshold by repository, pooled threshold), each rounded down to 4 decimals.
    POSITIVE_QUANTILE: the score below which `share` of the repository's held-out positives fall;
    SEPARATION: the score that best separates its held-out positives from its held-out negatives."""
    if calibration not in CALIBRATIONS:
        raise ValueError(f"calibration {calibration!r} is not one of {', '.join(CALIBRATIONS)}")

    def threshold(items: Sequence[HeldOutScores]) -> float:
        positives = [item.positive for item in items]
        if calibration == POSITIVE_QUANTILE:
            value = score_quantile(positives, share=share)
        else:
            value = separating_score(positives, [negative for item in items for negative in item.negatives])
        return math.floor(value * 10000) / 10000

    by_repository: dict[str, list[HeldOutScores]] = {}
    for item in scored:
        by_repository.setdefault(item.repository, []).append(item)
    thresholds = {
        repository: threshold(items)
        for repository, items in sorted(by_repository.items())
        if len(items) >= MIN_POSITIVES
    }
    return thresholds, threshold(scored)
