"""Fitting the sources-missing model (`abstention_model.py`) on questions with known answers.

Samples are the evidence features of questions the documentation answers and of questions it
cannot answer. The model is an L2-regularised logistic regression (scikit-learn) on
standardised features, with both kinds of question weighted equally however many there are of
each; the standardisation is folded back into the coefficients, so the configuration holds
plain weights of the raw features. The threshold is then chosen so that at most a given share
of the answerable questions is declared unanswerable (wrongly saying "sources missing" to a
question the docs answer costs the user the answer; the other error costs a wrong citation).

Used by `manage.py abstention_fit` and, fold by fold, by `benchmarks/retrieval.py`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from groundtruth.search.abstention_model import FEATURES, AbstentionModel

DEFAULT_REGULARISATION = 0.3  # scikit-learn's C: smaller is stronger


@dataclass(frozen=True)
class LabelledEvidence:
    features: dict[str, float]
    answerable: bool


def abstention_model_fit(
    samples: Sequence[LabelledEvidence],
    *,
    features: Sequence[str] = FEATURES,
    regularisation: float = DEFAULT_REGULARISATION,
) -> AbstentionModel:
    """The logistic model of `features` fitted on `samples` (both kinds must be present)."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    labels = np.array([sample.answerable for sample in samples], dtype=int)
    if labels.min() == labels.max():
        raise ValueError("fitting needs both answerable and unanswerable questions")
    matrix = np.array([[sample.features[name] for name in features] for sample in samples], dtype=float)
    mean = matrix.mean(axis=0)
    scale = matrix.std(axis=0)
    scale[scale == 0] = 1.0
    regression = LogisticRegression(C=regularisation, class_weight="balanced", max_iter=1000)
    regression.fit((matrix - mean) / scale, labels)
    weights = regression.coef_[0] / scale
    intercept = float(regression.intercept_[0] - (weights * mean).sum())
    return AbstentionModel(
        intercept=intercept, weights={name: float(weight) for name, weight in zip(features, weights, strict=True)}
    )


def abstention_threshold_choose(
    model: AbstentionModel, samples: Sequence[LabelledEvidence], *, answerable_missing: float
) -> float:
    """The largest threshold that declares at most `answerable_missing` of the answerable
    samples unanswerable (a probability, rounded down to 3 decimals)."""
    probabilities = sorted(model.probability(sample.features) for sample in samples if sample.answerable)
    if not probabilities:
        raise ValueError("choosing a threshold needs answerable questions")
    allowed = math.floor(answerable_missing * len(probabilities))
    return math.floor(probabilities[allowed] * 1000) / 1000


@dataclass(frozen=True)
class AbstentionRates:
    answerable_missing: float  # share of answerable questions declared unanswerable (wrong)
    unanswerable_missing: float  # share of unanswerable questions declared unanswerable (right)


def abstention_rates(model: AbstentionModel, threshold: float, samples: Sequence[LabelledEvidence]) -> AbstentionRates:
    def missing_share(kind: bool) -> float:
        chosen = [sample for sample in samples if sample.answerable is kind]
        if not chosen:
            return 0.0
        return sum(model.probability(sample.features) < threshold for sample in chosen) / len(chosen)

    return AbstentionRates(answerable_missing=missing_share(True), unanswerable_missing=missing_share(False))
