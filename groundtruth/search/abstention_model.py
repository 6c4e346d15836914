"""The sources-missing model of /ask: logistic regression over evidence features.

    P(the passages answer the question) = 1 / (1 + exp(-(intercept + sum of weight * feature)))

The sources are missing when P is below the fit's threshold. The features are computed by
`groundtruth.search.abstention` from a search outcome; their names are FEATURES. Coefficients
and threshold are data, recorded with their fit in groundtruth/search/fitted/abstention.json
(fitted_parameters.py; `manage.py abstention_fit` writes that file). A feature the fit leaves out
weighs 0.

One feature belongs to the model rather than to the evidence: `question_prior`, the probability
that a question like this one, with a best passage like this one, is answerable, read from two
vectors alone (the question's, and its product with the first result's passage vector) by a
logistic model fitted on other repositories' labelled questions (`QuestionPrior`; docs/
ground-truth.md, /ask and its refusals). It reads only vectors of the encoder it was fitted on;
for any other question (another embedding model, EMBEDDING_BACKEND=none) /ask decides with the model
fitted beside it without the prior (`fitted_parameters.AbstentionFit.without_prior`).

Plain Python, no Django.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# Every evidence feature, each a number in [0, 1] (see groundtruth/search/abstention.py).
# `named_*` features are measured within the repositories that the question names (or all the
# searched ones when it names none).
FEATURES = (
    "similarity",
    "heading_similarity",
    "peak",
    "coverage",
    "known",
    "rare_together",
    "agreement",
    "lexical",
    "named_similarity",
    "named_coverage",
    "named_known",
    "vocabulary_scaled_known",
    "named_rare_together",
    "names_known",
    "names_together",
    "question_prior",
)
PRIOR_FEATURE = "question_prior"


# What a prior's weights read, in this order, each a vector of the encoder's dimension: the
# question's unit vector, and its elementwise product with the first result's unit passage vector
# (how the passage meets the question dimension by dimension; zeros when nothing was found).
QUESTION_INPUT = "question"
PASSAGE_INPUT = "question_times_first_passage"
PRIOR_INPUTS = (QUESTION_INPUT, PASSAGE_INPUT)


def prior_inputs(question: Sequence[float], passage: Sequence[float], *, inputs: Sequence[str]) -> list[float]:
    """The values a prior reading `inputs` weighs, for these question and first-passage vectors."""
    unit_question = _unit(question)
    unit_passage = _unit(passage) if len(passage) == len(question) else [0.0] * len(question)
    values: list[float] = []
    for name in inputs:
        if name == QUESTION_INPUT:
            values.extend(unit_question)
        elif name == PASSAGE_INPUT:
            values.extend(left * right for left, right in zip(unit_question, unit_passage, strict=True))
        else:
            raise ValueError(f"unknown prior input {name!r}; known: {', '.join(PRIOR_INPUTS)}")
    return values


def _unit(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(value * value for value in vector))
    return [value / norm for value in vector] if norm else [0.0] * len(vector)


@dataclass(frozen=True)
class QuestionPrior:
    """P(answerable) from the question's vector and its first passage's: 1 / (1 + exp(-(intercept +
    weights . prior_inputs(...)))), for vectors of `encoder` (the embedding model's name); 1 for
    any other."""

    encoder: str
    intercept: float
    weights: tuple[float, ...]
    inputs: tuple[str, ...] = PRIOR_INPUTS

    def reads(self, vector: Sequence[float], *, encoder: str) -> bool:
        """Whether this is a vector of the encoder the prior was fitted on."""
        return encoder == self.encoder and len(vector) * len(self.inputs) == len(self.weights)

    def probability(self, vector: Sequence[float], *, encoder: str, passage: Sequence[float] = ()) -> float:
        """The prior's probability for a question's `vector` whose first result has the passage
        vector `passage` (empty: nothing found); 1 for a vector it does not `read`."""
        if not self.reads(vector, encoder=encoder):
            return 1.0
        values = prior_inputs(vector, passage, inputs=self.inputs)
        logit = self.intercept + sum(weight * value for weight, value in zip(self.weights, values, strict=True))
        return _sigmoid(logit)


def _sigmoid(logit: float) -> float:
    if logit >= 0:
        return 1.0 / (1.0 + math.exp(-logit))
    exponential = math.exp(logit)
    return exponential / (1.0 + exponential)


@dataclass(frozen=True)
class WithoutPrior:
    """The model and threshold fitted beside a prior over questions, on the same questions, without
    it: they decide for questions whose vectors the prior cannot read."""

    model: AbstentionModel
    threshold: float


class AbstentionModelInvalid(ValueError):
    """The configuration text of a model cannot be read."""


@dataclass(frozen=True)
class AbstentionModel:
    intercept: float
    weights: Mapping[str, float]
    # Computes the `question_prior` feature; None: that feature is 1 (and the model does not weigh it).
    question_prior: QuestionPrior | None = None

    def probability(self, features: Mapping[str, float]) -> float:
        """P(the passages answer), from the features (a missing feature counts as 0)."""
        return _sigmoid(self.intercept + sum(weight * features.get(name, 0.0) for name, weight in self.weights.items()))

    def configuration(self) -> str:
        """`intercept=...,<feature>=<weight>,...`: the model in one line, as reports print it."""
        parts = [f"intercept={self.intercept:.4g}"]
        parts.extend(f"{name}={self.weights[name]:.4g}" for name in FEATURES if self.weights.get(name))
        return ",".join(parts)


def abstention_model_parse(values: Mapping[str, str | float]) -> AbstentionModel:
    """A model from `name=value` pairs: `intercept` and any of FEATURES."""
    unknown = sorted(set(values) - {"intercept", *FEATURES})
    if unknown:
        raise AbstentionModelInvalid(f"unknown feature {', '.join(unknown)}; known: intercept, {', '.join(FEATURES)}")
    try:
        numbers = {name: float(value) for name, value in values.items()}
    except (TypeError, ValueError) as exc:
        raise AbstentionModelInvalid("every value must be a number") from exc
    if not all(math.isfinite(number) for number in numbers.values()):
        raise AbstentionModelInvalid("every value must be a finite number")
    intercept = numbers.pop("intercept", 0.0)
    return AbstentionModel(intercept=intercept, weights={name: numbers[name] for name in FEATURES if name in numbers})
