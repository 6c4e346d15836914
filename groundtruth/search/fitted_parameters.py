"""The parameters search and /ask learnt from data, read from the files that record each fit.

A fit's numbers are data, not configuration: they are versioned beside the code that uses them,
in `groundtruth/search/fitted/`, each file with the fit that produced it (`fit`: the command, the
date, the commit, the data). `manage.py abstention_fit --output FILE` and `benchmarks/retrieval.py`
write this format.

- `abstention.json`: the sources-missing model of /ask (abstention_model.py) and its threshold.
  A model that weighs a prior over questions holds it (`question_prior`: the encoder, the
  `inputs` its weights read in order (abstention_model.PRIOR_INPUTS; a file without them reads the
  question alone), the intercept and one weight per dimension of the encoder's vectors and input)
  and the model and threshold fitted on the same questions without it (`without_prior`), which
  decides for a question whose vector the prior cannot read (another embedding model).
- `reranking.json`: the weights of the re-ranking's evidence (reranking.py).
- `adapted/`: the same two, fitted on an adapted encoder's evidence (docs/ground-truth-adaptation.md),
  in use while an adapted encoder is active.

A deployment that refits on its own documentation points ASK_ABSTENTION_FIT_FILE or
SEARCH_RERANK_FIT_FILE at its own file (the environment names a file, never single numbers, so
every number in use has its provenance beside it). Each file is read and checked once per process
(GroundTruthConfig.ready reads both, so a bad one stops start-up naming the variable).
"""

from __future__ import annotations

import datetime
import functools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from django.conf import settings

from groundtruth.search.abstention_fit import SourcesMissingFit
from groundtruth.search.abstention_model import (
    PRIOR_FEATURE,
    PRIOR_INPUTS,
    QUESTION_INPUT,
    AbstentionModel,
    AbstentionModelInvalid,
    QuestionPrior,
    WithoutPrior,
    abstention_model_parse,
)
from groundtruth.search.reranking import RERANK_FEATURES

FITTED_DIR = Path(__file__).resolve().parent / "fitted"
ADAPTED_FITTED_DIR = FITTED_DIR / "adapted"
PROVENANCE_FIELDS = ("command", "date", "data")
# The prior's weights are kept to this many significant digits (its probability moves < 1e-4).
PRIOR_DIGITS = 6


class FitInvalid(ValueError):
    """A fit file that cannot be used; the message says what is wrong in it."""


@dataclass(frozen=True)
class AbstentionFit:
    model: AbstentionModel
    threshold: float
    provenance: Mapping[str, str]
    without_prior: WithoutPrior | None = None

    def for_question(self, vector: Sequence[float] | None, *, encoder: str) -> tuple[AbstentionModel, float]:
        """The model and threshold that decide for a question with this vector (None: no vector):
        the fit's own, unless it weighs a prior over questions that cannot read the vector."""
        prior = self.model.question_prior
        if prior is None or self.without_prior is None or (vector is not None and prior.reads(vector, encoder=encoder)):
            return self.model, self.threshold
        return self.without_prior.model, self.without_prior.threshold


@dataclass(frozen=True)
class RerankFit:
    weights: Mapping[str, float]
    provenance: Mapping[str, str]


def fit_provenance(*, command: str, data: str, **more: str) -> dict[str, str]:
    """The `fit` record of a file written today."""
    return {"command": command, "date": datetime.date.today().isoformat(), "data": data, **more}


def _model_document(model: AbstentionModel, threshold: float) -> dict[str, Any]:
    return {
        "intercept": round(model.intercept, 4),
        "weights": {name: round(weight, 4) for name, weight in model.weights.items() if weight},
        "threshold": round(threshold, 3),
    }


def abstention_fit_document(
    *,
    model: AbstentionModel,
    threshold: float,
    provenance: Mapping[str, str],
    without_prior: WithoutPrior | None = None,
) -> str:
    """The text of an abstention fit file (round-trips through `abstention_fit_read`); a model with
    a prior over questions goes with the model fitted `without_prior`."""
    if (model.question_prior is None) != (without_prior is None):
        raise ValueError(
            "a model with a prior over questions is written with the model fitted without it, and only then"
        )
    document: dict[str, Any] = {"fit": dict(provenance), **_model_document(model, threshold)}
    if without_prior is not None:
        document["without_prior"] = _model_document(without_prior.model, without_prior.threshold)
    if (prior := model.question_prior) is not None:
        document["question_prior"] = {
            "encoder": prior.encoder,
            "inputs": list(prior.inputs),
            "intercept": float(f"{prior.intercept:.{PRIOR_DIGITS}g}"),
            "weights": [float(f"{weight:.{PRIOR_DIGITS}g}") for weight in prior.weights],
        }
    text = json.dumps(document, indent=2)
    if prior is not None:
        # The prior's weights on one line, not hundreds (json.dumps indents them 4 deeper).
        weights = document["question_prior"]["weights"]
        text = text.replace(json.dumps(weights, indent=2).replace("\n", "\n    "), json.dumps(weights))
    return text + "\n"


def sources_missing_fit_document(fitted: SourcesMissingFit, *, provenance: Mapping[str, str]) -> str:
    """The fit file of a fit made by `abstention_fit.sources_missing_fit`."""
    return abstention_fit_document(
        model=fitted.model, threshold=fitted.threshold, provenance=provenance, without_prior=fitted.without_prior
    )


def rerank_fit_document(*, weights: Mapping[str, float], provenance: Mapping[str, str]) -> str:
    """The text of a re-ranking fit file (round-trips through `rerank_fit_read`)."""
    document = {"fit": dict(provenance), "weights": {name: round(weights[name], 4) for name in weights}}
    return json.dumps(document, indent=2) + "\n"


def _document(path: Path, *, keys: set[str], optional: frozenset[str] = frozenset()) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text())
    except OSError as exc:
        raise FitInvalid(f"{path}: cannot be read ({exc.strerror})") from exc
    except json.JSONDecodeError as exc:
        raise FitInvalid(f"{path}: not JSON ({exc.msg}, line {exc.lineno})") from exc
    if not isinstance(document, dict) or not keys <= set(document) <= keys | optional:
        also = f" (and optionally {', '.join(sorted(optional))})" if optional else ""
        raise FitInvalid(f"{path}: must be an object with exactly {', '.join(sorted(keys))}{also}")
    provenance = document["fit"]
    if (
        not isinstance(provenance, dict)
        or not all(isinstance(value, str) for value in provenance.values())
        or not all(provenance.get(name, "").strip() for name in PROVENANCE_FIELDS)
    ):
        raise FitInvalid(f"{path}: `fit` must record the {', '.join(PROVENANCE_FIELDS)} of the fit, as text")
    try:
        datetime.date.fromisoformat(provenance["date"])
    except ValueError:
        raise FitInvalid(f"{path}: `fit.date` must be a date such as 2026-11-23, got {provenance['date']!r}") from None
    return document


def _numbers(path: Path, name: str, values: object) -> dict[str, float]:
    if not isinstance(values, dict) or not all(_finite(value) for value in values.values()):
        raise FitInvalid(f"{path}: `{name}` must map names to finite numbers")
    return {key: float(value) for key, value in values.items()}


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _question_prior(path: Path, value: object) -> QuestionPrior:
    # A prior written before it read first passages has no `inputs`: it reads the question alone.
    inputs = value.get("inputs", [QUESTION_INPUT]) if isinstance(value, dict) else None
    if (
        not isinstance(value, dict)
        or set(value) - {"inputs"} != {"encoder", "intercept", "weights"}
        or not isinstance(inputs, list)
        or not inputs
        or len(set(map(str, inputs))) != len(inputs)
        or not set(map(str, inputs)) <= set(PRIOR_INPUTS)
        or not isinstance(value["encoder"], str)
        or not value["encoder"].strip()
        or not _finite(value["intercept"])
        or not isinstance(value["weights"], list)
        or not value["weights"]
        or not all(_finite(weight) for weight in value["weights"])
    ):
        raise FitInvalid(
            f"{path}: `question_prior` must hold the `encoder` it reads (a name), the `inputs` its weights read "
            f"(distinct, of {', '.join(PRIOR_INPUTS)}; absent: {QUESTION_INPUT}), its `intercept` and its "
            "`weights` (a list of finite numbers, one per dimension of the encoder's vectors and input)"
        )
    return QuestionPrior(
        encoder=value["encoder"],
        intercept=float(value["intercept"]),
        weights=tuple(float(weight) for weight in value["weights"]),
        inputs=tuple(inputs),
    )


def _model_read(path: Path, document: Mapping[str, Any], *, where: str = "") -> tuple[AbstentionModel, float]:
    weights = _numbers(path, f"{where}weights", document["weights"])
    try:
        model = abstention_model_parse({"intercept": document["intercept"], **weights})
    except AbstentionModelInvalid as exc:
        raise FitInvalid(f"{path}: {where}{exc}") from exc
    threshold = document["threshold"]
    if not isinstance(threshold, int | float) or isinstance(threshold, bool) or not 0 <= threshold <= 1:
        raise FitInvalid(f"{path}: `{where}threshold` must be a probability from 0 to 1, got {threshold!r}")
    return model, float(threshold)


def abstention_fit_read(path: Path) -> AbstentionFit:
    """The sources-missing model and threshold recorded in `path`, checked."""
    document = _document(
        path,
        keys={"fit", "intercept", "weights", "threshold"},
        optional=frozenset({"question_prior", "without_prior"}),
    )
    model, threshold = _model_read(path, document)
    without_prior = None
    held = {"question_prior", "without_prior"} & set(document)
    if model.weights.get(PRIOR_FEATURE) and len(held) < 2:
        raise FitInvalid(
            f"{path}: weighs `{PRIOR_FEATURE}`, so it must hold the `question_prior` that computes it and the "
            "model fitted `without_prior` (for questions the prior cannot read)"
        )
    if len(held) == 1:
        raise FitInvalid(f"{path}: `question_prior` and `without_prior` go together, got only `{held.pop()}`")
    if held:
        model = replace(model, question_prior=_question_prior(path, document["question_prior"]))
        other = document["without_prior"]
        if not isinstance(other, dict) or set(other) != {"intercept", "weights", "threshold"}:
            raise FitInvalid(f"{path}: `without_prior` must be an object with exactly intercept, threshold, weights")
        fallback, fallback_threshold = _model_read(path, other, where="without_prior.")
        if fallback.weights.get(PRIOR_FEATURE):
            raise FitInvalid(f"{path}: `without_prior` must not weigh `{PRIOR_FEATURE}`")
        without_prior = WithoutPrior(model=fallback, threshold=fallback_threshold)
    return AbstentionFit(model=model, threshold=threshold, provenance=document["fit"], without_prior=without_prior)


def rerank_fit_read(path: Path) -> RerankFit:
    """The re-ranking weights recorded in `path`, checked: known evidence, each at least 0."""
    document = _document(path, keys={"fit", "weights"})
    weights = _numbers(path, "weights", document["weights"])
    if not weights or set(weights) - set(RERANK_FEATURES) or any(weight < 0 for weight in weights.values()):
        raise FitInvalid(
            f"{path}: `weights` takes {', '.join(RERANK_FEATURES)}, each a number of at least 0, got {weights}"
        )
    return RerankFit(weights=weights, provenance=document["fit"])


def shipped_fits_dir(*, adapted: bool | None = None) -> Path:
    """The shipped fits for the index's vector space: `fitted/adapted/` while an adapted encoder
    is active (its evidence has other scales: the packaged model's fits applied to it refuse
    more answerable questions, docs/ground-truth-adaptation.md), else `fitted/`. `adapted`: ask
    for one of them; None: the one the active encoder calls for."""
    if adapted is None:
        from groundtruth.adaptation.active import active_encoder_directory

        adapted = active_encoder_directory() is not None
    return ADAPTED_FITTED_DIR if adapted else FITTED_DIR


def abstention_fit_path(*, adapted: bool | None = None) -> Path:
    if settings.ASK_ABSTENTION_FIT_FILE:
        return Path(settings.ASK_ABSTENTION_FIT_FILE)
    return shipped_fits_dir(adapted=adapted) / "abstention.json"


def rerank_fit_path(*, adapted: bool | None = None) -> Path:
    if settings.SEARCH_RERANK_FIT_FILE:
        return Path(settings.SEARCH_RERANK_FIT_FILE)
    return shipped_fits_dir(adapted=adapted) / "reranking.json"


# Cached by path: a file is read once per process; pointing the setting elsewhere (a test's own
# fit) reads that file.
_abstention_fit_cached = functools.cache(abstention_fit_read)
_rerank_fit_cached = functools.cache(rerank_fit_read)


def abstention_fit_current(*, adapted: bool | None = None) -> AbstentionFit:
    """The fit /ask uses: ASK_ABSTENTION_FIT_FILE, else the shipped abstention.json of the index's
    vector space (`shipped_fits_dir`)."""
    return _abstention_fit_cached(abstention_fit_path(adapted=adapted))


def rerank_fit_current(*, adapted: bool | None = None) -> RerankFit:
    """The fit search uses: SEARCH_RERANK_FIT_FILE, else the shipped reranking.json of the index's
    vector space (`shipped_fits_dir`)."""
    return _rerank_fit_cached(rerank_fit_path(adapted=adapted))
