"""Fitting the re-ranking weights (`reranking.py`) on questions with known answers.

Each sample is one question's re-ranked candidates: their evidence and whether each holds the
answer. The fit is a listwise logistic regression (a softmax over each question's candidates
with a linear scorer): for each question, the best-placed answering candidate against every
candidate that does not answer,

    P(answer first) = exp(w . evidence_answer) / sum over the answer and the others of exp(w . evidence),

maximised with a weak L2 penalty on the weights of standardised evidence differences and every
weight kept at or above zero (each piece of evidence is built so that more of it is more
relevant). Each question weighs its sample's weight however many candidates it has. Only the ratios of the
weights order the candidates, so they are scaled to a dense weight of 1. Used fold by fold by
`benchmarks/retrieval.py`.

Why listwise: the first citation is what a user reads, and a softmax spends its effort on the
few candidates that come close to the answer; a pairwise fit (RankNet, used until 2026-11-27)
weighs the answer against each of its 40 candidates alike, most of them far behind it already.
Left-one-repository-out on the development set (docs/benchmarks.md), paraphrased recall@1 rose
from 0.887 to 0.896 (reStructuredText) and from 0.835 to 0.887 (Markdown), MRR@10 from 0.925 to
0.930 and from 0.900 to 0.929.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from groundtruth.search.reranking import RERANK_FEATURES

# The inverse strength of the L2 penalty (smaller is stronger). Weak: it only keeps the optimum
# finite when some evidence tells every answer apart on its own; left-one-repository-out, every
# value from 300 up to no penalty gives the development set the same recall per format (3 gave
# 0.861 and 0.814 recall@1 against 0.896 and 0.887).
DEFAULT_REGULARISATION = 1000.0


@dataclass(frozen=True)
class RankedCandidates:
    """One question's candidates: their evidence (`RERANK_FEATURES` values) and which answer."""

    evidence: list[dict[str, float]]
    answers: list[bool]
    # How much the question counts against the others. `benchmarks/retrieval.py` gives each
    # question 1 / its repository's questions, so that each repository counts the same: with a
    # weight per question, the ferrite corpus's 115 questions outweighed the development set's
    # 12 repositories (left-one-repository-out paraphrased recall@1 on its reStructuredText half
    # 0.835 against 0.896).
    weight: float = 1.0


def rerank_weights_fit(
    samples: Sequence[RankedCandidates],
    *,
    regularisation: float = DEFAULT_REGULARISATION,
    features: Sequence[str] = RERANK_FEATURES,
) -> dict[str, float]:
    """The weights of `features` (the service's RERANK_FEATURES unless a benchmark weighs
    candidate evidence, `benchmarks/rerank_evidence.py`; "dense" among them) fitted on `samples`;
    questions without an answering candidate, or with nothing else, teach nothing and are skipped."""
    import numpy as np
    from scipy.optimize import minimize

    differences, question_weights = [], []
    for sample in samples:
        rows = np.array([[values[name] for name in features] for values in sample.evidence], dtype=float)
        answers = np.array(sample.answers, dtype=bool)
        if not answers.any() or answers.all():
            continue
        differences.append(rows[~answers] - rows[answers][0])  # each other candidate against the answer
        question_weights.append(sample.weight)
    if not differences:
        raise ValueError("fitting needs questions with an answering candidate among others")
    weights_of_questions = np.array(question_weights) / sum(question_weights)
    scale = np.vstack(differences).std(axis=0)
    scale[scale == 0] = 1.0
    # Padded to one array: question x candidate x evidence, `present` marking the real candidates.
    width = max(len(rows) for rows in differences)
    standardised = np.zeros((len(differences), width, len(features)))
    present = np.zeros((len(differences), width), dtype=bool)
    for index, rows in enumerate(differences):
        standardised[index, : len(rows)] = rows / scale
        present[index, : len(rows)] = True

    def loss_and_gradient(weights: np.ndarray) -> tuple[float, np.ndarray]:
        # -log P(answer first) = log(1 + sum of exp(margin of each other candidate over the answer))
        margins = np.where(present, standardised @ weights, -np.inf)
        top = np.maximum(margins.max(axis=1), 0.0)
        exponentials = np.exp(margins - top[:, None])
        partition = np.exp(-top) + exponentials.sum(axis=1)
        loss = weights_of_questions @ (top + np.log(partition)) + 0.5 / regularisation * np.sum(weights**2)
        shares = exponentials / partition[:, None]
        gradient = np.einsum("q,qc,qcf->f", weights_of_questions, shares, standardised) + weights / regularisation
        return float(loss), gradient

    bounds = [(0.0, None)] * len(features)
    result = minimize(loss_and_gradient, np.zeros(len(features)), jac=True, method="L-BFGS-B", bounds=bounds)
    if not result.success:
        raise ValueError(f"the fit did not converge: {result.message}")
    weights = result.x / scale
    dense = weights[list(features).index("dense")]
    if dense <= 0:
        raise ValueError("the fit gave the dense score no weight")
    return {name: round(float(weight / dense), 4) for name, weight in zip(features, weights, strict=True)}
