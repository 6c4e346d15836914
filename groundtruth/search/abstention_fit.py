"""Fitting the sources-missing model (`abstention_model.py`) on questions with known answers.

Samples are the evidence features of questions the documentation answers and of questions it
cannot answer. The model is an L2-regularised logistic regression on standardised features,
with both kinds of question weighted equally however many there are of each, and with every
weight kept at or above zero: each feature is built so that more of it is more evidence of an
answer, and a negative weight would only be two correlated features cancelling each other out
on the sample (it does not carry over to other documentation). It is fitted by SciPy's bounded
L-BFGS-B. The standardisation is folded back into the coefficients, so the configuration holds
plain weights of the raw features. The threshold is then chosen so that at most a given share
of the answerable questions is declared unanswerable (wrongly saying "sources missing" to a
question the docs answer costs the user the answer; the other error costs a wrong citation).

The prior over questions (`abstention_model.QuestionPrior`, the `question_prior` feature) is an
L2-regularised logistic model of the same labels over the questions' vectors and their products
with their first passages' vectors (`abstention_model.prior_inputs`), without the bound (a
dimension of the embedding has no direction of its own). The sources-missing model must weigh
it as it behaves on questions it was not fitted on, so each sample's prior comes from a prior
fitted without the sample's repository (`group`); the prior that ships is then fitted on every
sample (`sources_missing_fit`).

Used by `manage.py abstention_fit` and, fold by fold, by `benchmarks/retrieval.py`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from groundtruth.search.abstention_model import (
    PRIOR_FEATURE,
    PRIOR_INPUTS,
    AbstentionModel,
    QuestionPrior,
    WithoutPrior,
    prior_inputs,
)

DEFAULT_REGULARISATION = 0.3  # the inverse strength of the L2 penalty: smaller is stronger
# The prior's inverse L2 strength on the standardised inputs: its separation moves < 0.02 between
# 3e-4 and 1e-2 (benchmarks/question_prior.py prints them side by side; 1e-3 is the middle).
PRIOR_REGULARISATION = 1e-3
# Below this standard deviation a dimension of the question vectors counts as constant: a few of
# MiniLM's are, up to float noise, which standardised would become features.
PRIOR_CONSTANT_SCALE = 1e-4

# The features a fit uses unless told otherwise. Evidence measured against the question itself
# (how much of it the passages hold, how far the best passage stands out, whether both legs
# agree, whether the names it uses are documented) carries over from one documentation set to
# another; absolute passage similarity does not: it runs lower for a product with a vocabulary
# of its own, so a threshold learnt on other documentation would refuse its answerable questions
# (measured by holding out whole repositories in benchmarks/retrieval.py). The title similarity
# is kept: a title that asks the user's question is the strongest single sign of an answer.
DEFAULT_FEATURES = (
    "heading_similarity",
    "peak",
    "coverage",
    "agreement",
    "vocabulary_scaled_known",
    "names_together",
)


@dataclass(frozen=True)
class LabelledEvidence:
    features: dict[str, float]
    answerable: bool
    # For the prior over questions: the question's vector, its first result's passage vector (empty:
    # nothing found), and the repository it is about (the prior of a sample is fitted without its
    # group's samples).
    question_vector: tuple[float, ...] = field(default=(), repr=False)
    passage_vector: tuple[float, ...] = field(default=(), repr=False)
    group: str = ""


def question_prior_fit(
    samples: Sequence[LabelledEvidence],
    *,
    encoder: str,
    regularisation: float = PRIOR_REGULARISATION,
    inputs: Sequence[str] = PRIOR_INPUTS,
) -> QuestionPrior:
    """The prior over questions fitted on `samples`' vectors (both kinds must be present), each
    kind of question weighing half of the loss."""
    intercept, weights = balanced_logistic_fit(
        [prior_inputs(sample.question_vector, sample.passage_vector, inputs=inputs) for sample in samples],
        [sample.answerable for sample in samples],
        regularisation=regularisation,
        non_negative=False,
        constant_scale=PRIOR_CONSTANT_SCALE,
    )
    return QuestionPrior(encoder=encoder, intercept=intercept, weights=tuple(weights), inputs=tuple(inputs))


def question_prior_out_of_fold(
    samples: Sequence[LabelledEvidence], *, encoder: str, regularisation: float = PRIOR_REGULARISATION
) -> list[LabelledEvidence]:
    """`samples` (in their order) with `question_prior` from a prior fitted on the other groups'."""
    groups = sorted({sample.group for sample in samples})
    if len(groups) < 2 or any(not sample.question_vector for sample in samples):
        raise ValueError("the prior over questions needs each question's vector and at least two repositories")
    priors = {
        group: question_prior_fit(
            [sample for sample in samples if sample.group != group], encoder=encoder, regularisation=regularisation
        )
        for group in groups
    }
    return [
        replace(
            sample,
            features={
                **sample.features,
                PRIOR_FEATURE: priors[sample.group].probability(
                    sample.question_vector, encoder=encoder, passage=sample.passage_vector
                ),
            },
        )
        for sample in samples
    ]


@dataclass(frozen=True)
class SourcesMissingFit:
    model: AbstentionModel
    threshold: float
    samples: list[LabelledEvidence]  # as the model read them (with their out-of-fold prior)
    # With a prior: the model fitted on the same samples without it (for questions it cannot read).
    without_prior: WithoutPrior | None = None


def sources_missing_fit(
    samples: Sequence[LabelledEvidence],
    *,
    features: Sequence[str] = DEFAULT_FEATURES,
    question_prior_encoder: str | None = None,
    regularisation: float = DEFAULT_REGULARISATION,
    prior_regularisation: float = PRIOR_REGULARISATION,
    answerable_missing: float,
) -> SourcesMissingFit:
    """The sources-missing model of `features` and its threshold (at most `answerable_missing` of
    the answerable samples declared unanswerable); with `question_prior_encoder`, `question_prior`
    too: weighed and thresholded on out-of-fold priors, shipped with the prior fitted on every
    sample, beside the model fitted without it."""
    evidence = [name for name in features if name != PRIOR_FEATURE]
    if question_prior_encoder is None:
        model = abstention_model_fit(samples, features=evidence, regularisation=regularisation)
        threshold = abstention_threshold_choose(model, samples, answerable_missing=answerable_missing)
        return SourcesMissingFit(model=model, threshold=threshold, samples=list(samples))
    plain = sources_missing_fit(
        samples, features=evidence, regularisation=regularisation, answerable_missing=answerable_missing
    )
    without_prior = WithoutPrior(model=plain.model, threshold=plain.threshold)
    samples = question_prior_out_of_fold(samples, encoder=question_prior_encoder, regularisation=prior_regularisation)
    model = abstention_model_fit(samples, features=[*evidence, PRIOR_FEATURE], regularisation=regularisation)
    prior = question_prior_fit(samples, encoder=question_prior_encoder, regularisation=prior_regularisation)
    model = replace(model, question_prior=prior)
    threshold = abstention_threshold_choose(model, samples, answerable_missing=answerable_missing)
    return SourcesMissingFit(model=model, threshold=threshold, samples=samples, without_prior=without_prior)


def abstention_model_fit(
    samples: Sequence[LabelledEvidence],
    *,
    features: Sequence[str] = DEFAULT_FEATURES,
    regularisation: float = DEFAULT_REGULARISATION,
) -> AbstentionModel:
    """The logistic model of `features` fitted on `samples` (both kinds must be present).

    `regularisation` is the inverse strength of the L2 penalty on the standardised weights.
    """
    intercept, weights = balanced_logistic_fit(
        [[sample.features[name] for name in features] for sample in samples],
        [sample.answerable for sample in samples],
        regularisation=regularisation,
        non_negative=True,
    )
    return AbstentionModel(
        intercept=intercept, weights={name: weight for name, weight in zip(features, weights, strict=True)}
    )


def balanced_logistic_fit(
    rows: Sequence[Sequence[float]],
    labels: Sequence[bool],
    *,
    regularisation: float,
    non_negative: bool,
    constant_scale: float = 0.0,
) -> tuple[float, list[float]]:
    """(intercept, weights) of an L2-regularised logistic regression of `labels` on the standardised
    columns of `rows`, each label weighing half of the loss however many there are of each, the
    standardisation folded back into plain weights of the raw columns. A column whose standard
    deviation is at most `constant_scale` counts as constant and gets weight 0. With
    `non_negative`, every weight is kept at or above zero (bounded L-BFGS-B)."""
    import numpy as np
    from scipy.optimize import minimize

    target = np.array(labels, dtype=float)
    answerable = target.sum()
    if answerable in (0, len(target)):
        raise ValueError("fitting needs both answerable and unanswerable questions")
    matrix = np.array(rows, dtype=float)
    mean = matrix.mean(axis=0)
    scale = matrix.std(axis=0)
    scale[scale <= constant_scale] = np.inf
    standardised = (matrix - mean) / scale
    # Each kind of question weighs half of the loss, however many there are of each.
    sample_weights = np.where(
        target == 1, len(target) / (2 * answerable), len(target) / (2 * (len(target) - answerable))
    )

    def loss_and_gradient(parameters: np.ndarray) -> tuple[float, np.ndarray]:
        intercept, weights = parameters[0], parameters[1:]
        logits = intercept + standardised @ weights
        loss = np.sum(sample_weights * (np.logaddexp(0.0, logits) - target * logits))
        loss += 0.5 / regularisation * np.sum(weights * weights)
        residual = sample_weights * (1.0 / (1.0 + np.exp(-logits)) - target)
        gradient = np.concatenate([[residual.sum()], standardised.T @ residual + weights / regularisation])
        return float(loss), gradient

    bounds = [(None, None)] + [(0.0, None) if non_negative else (None, None)] * matrix.shape[1]
    result = minimize(loss_and_gradient, np.zeros(matrix.shape[1] + 1), jac=True, method="L-BFGS-B", bounds=bounds)
    if not result.success:
        raise ValueError(f"the fit did not converge: {result.message}")
    weights = result.x[1:] / scale
    return float(result.x[0] - (weights * mean).sum()), [float(weight) for weight in weights]


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
