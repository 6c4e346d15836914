"""Fitting the re-ranking weights (`reranking.py`) on questions with known answers.

Each sample is one question's re-ranked candidates: their evidence and whether each holds the
answer. The fit is a pairwise logistic regression (RankNet with a linear scorer): for each
question, the best-placed answering candidate against every candidate that does not answer,
P(answer above other) = 1 / (1 + exp(-w . (evidence_answer - evidence_other))), with a light
L2 penalty on standardised differences and every weight kept at or above zero (each piece of
evidence is built so that more of it is more relevant). Each question weighs the same however
many candidates it has. Only the ratios of the weights order the candidates, so they are scaled
to a dense weight of 1. Used fold by fold by `benchmarks/retrieval.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from groundtruth.search.reranking import RERANK_FEATURES

DEFAULT_REGULARISATION = 3.0  # the inverse strength of the L2 penalty: smaller is stronger


@dataclass(frozen=True)
class RankedCandidates:
    """One question's candidates: their evidence (`RERANK_FEATURES` values) and which answer."""

    evidence: list[dict[str, float]]
    answers: list[bool]


def rerank_weights_fit(
    samples: Sequence[RankedCandidates], *, regularisation: float = DEFAULT_REGULARISATION
) -> dict[str, float]:
    """The weights of RERANK_FEATURES fitted on `samples`; questions without an answering
    candidate, or with nothing else, teach nothing and are skipped."""
    import numpy as np
    from scipy.optimize import minimize

    differences, question_weights = [], []
    for sample in samples:
        rows = np.array([[values[name] for name in RERANK_FEATURES] for values in sample.evidence], dtype=float)
        answers = np.array(sample.answers, dtype=bool)
        if not answers.any() or answers.all():
            continue
        answer = rows[answers][0]
        others = rows[~answers]
        differences.append(answer - others)
        question_weights.append(np.full(len(others), 1.0 / len(others)))
    if not differences:
        raise ValueError("fitting needs questions with an answering candidate among others")
    matrix = np.vstack(differences)
    weights_of_rows = np.concatenate(question_weights)
    scale = matrix.std(axis=0)
    scale[scale == 0] = 1.0
    standardised = matrix / scale

    def loss_and_gradient(weights: np.ndarray) -> tuple[float, np.ndarray]:
        margins = standardised @ weights
        loss = np.sum(weights_of_rows * np.logaddexp(0.0, -margins)) + 0.5 / regularisation * np.sum(weights**2)
        residual = -weights_of_rows / (1.0 + np.exp(margins))
        return float(loss), standardised.T @ residual + weights / regularisation

    bounds = [(0.0, None)] * len(RERANK_FEATURES)
    result = minimize(loss_and_gradient, np.zeros(len(RERANK_FEATURES)), jac=True, method="L-BFGS-B", bounds=bounds)
    if not result.success:
        raise ValueError(f"the fit did not converge: {result.message}")
    weights = result.x / scale
    dense = weights[RERANK_FEATURES.index("dense")]
    if dense <= 0:
        raise ValueError("the fit gave the dense score no weight")
    return {name: round(float(weight / dense), 4) for name, weight in zip(RERANK_FEATURES, weights, strict=True)}
