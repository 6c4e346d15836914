"""Fit files made by a test: the real format (groundtruth/search/fitted_parameters.py), written
where the test says and put in use through the setting a deployment would use."""

from __future__ import annotations

import itertools
from pathlib import Path

from groundtruth.search.abstention_model import AbstentionModel, WithoutPrior
from groundtruth.search.fitted_parameters import abstention_fit_document

# Each file gets a name of its own: a fit file is read once per process (cached by path).
_numbers = itertools.count()


def abstention_fit_use(
    settings, directory: Path, *, model: AbstentionModel, threshold: float, without_prior: WithoutPrior | None = None
) -> Path:
    """Writes a fit of `model` and `threshold` (and the model `without_prior`, for a model with a
    prior over questions) under `directory` and points ASK_ABSTENTION_FIT_FILE at it."""
    path = directory / f"abstention-fit-{next(_numbers)}.json"
    provenance = {"command": "written by a test", "date": "2026-11-26", "data": "none: set by hand"}
    path.write_text(
        abstention_fit_document(model=model, threshold=threshold, provenance=provenance, without_prior=without_prior)
    )
    settings.ASK_ABSTENTION_FIT_FILE = str(path)
    return path
