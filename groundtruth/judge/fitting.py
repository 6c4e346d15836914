"""Fitting a relevance judge on the indexed documentation: mine, train, score the held-out
queries, calibrate the refusal thresholds, store the artifact and its row.

Bounded: at most `queries_per_repository` mined queries per repository (the training time grows
with the pairs, not with the corpus), a few encoder layers and short inputs
(`training.JudgeHyperparameters`). The time and the peak resident memory of the process are
measured and kept on the row.
"""

from __future__ import annotations

import logging
import resource
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from agentplatform.plumbing.errors import InvalidInput
from groundtruth.embeddings import packaged_model_path
from groundtruth.ingest.index_text import INDEX_VERSION
from groundtruth.judge.calibration import refusal_thresholds
from groundtruth.judge.pair_mining import MinedQuery, pairs_mine
from groundtruth.judge.training import (
    JudgeHyperparameters,
    held_out_accuracy,
    held_out_score,
    judge_train,
)
from groundtruth.models import RelevanceJudge, Repository

logger = logging.getLogger(__name__)

# Fewer mined queries than this teach a judge nothing worth trusting more than today's model.
MIN_TRAINING_QUERIES = 20
# Every fifth mined query of a repository (in seeded order) is held out: its accuracy, and the
# positives its refusal threshold is calibrated on.
HELD_OUT_EVERY = 5


@dataclass(frozen=True)
class JudgeFitOptions:
    hyperparameters: JudgeHyperparameters = field(default_factory=JudgeHyperparameters)
    queries_per_repository: int | None = 36
    negatives: int = 3
    refusal_share: float = 0.05


def held_out_split(queries: Sequence[MinedQuery]) -> tuple[list[MinedQuery], list[MinedQuery]]:
    """(training, held out): every HELD_OUT_EVERY-th query of each repository, in mined order."""
    training: list[MinedQuery] = []
    held_out: list[MinedQuery] = []
    position: dict[str, int] = {}
    for mined in queries:
        index = position.get(mined.repository, 0)
        position[mined.repository] = index + 1
        (held_out if index % HELD_OUT_EVERY == 0 else training).append(mined)
    return training, held_out


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def judge_fit(*, repository_names: list[str] | None = None, options: JudgeFitOptions | None = None) -> RelevanceJudge:
    """Fits a judge on the enabled (or the named) repositories' chunks and stores it; the
    previous judge stays in use when this one cannot be fitted (InvalidInput says why)."""
    options = options or JudgeFitOptions()
    repositories = list(Repository.objects.filter(enabled=True, chunk_count__gt=0).order_by("name"))
    if repository_names is not None:
        repositories = [repository for repository in repositories if repository.name in repository_names]
    started = time.monotonic()
    mined = pairs_mine(
        repositories=repositories,
        negatives=options.negatives,
        queries_per_repository=options.queries_per_repository,
        seed=options.hyperparameters.seed,
    )
    training, held_out = held_out_split(mined)
    if len(training) < MIN_TRAINING_QUERIES or not held_out:
        raise InvalidInput(
            f"Too little documentation to fit a relevance judge: {len(mined)} sections with a title and a text "
            f"were found (at least {MIN_TRAINING_QUERIES + 2} needed); the previous judge stays in use.",
            code="judge_corpus_too_small",
        )
    mining_seconds = time.monotonic() - started
    judge, report = judge_train(training, model_path=packaged_model_path(), hyperparameters=options.hyperparameters)
    scored = held_out_score(judge, held_out)
    accuracy, pairwise = held_out_accuracy(scored)
    thresholds, pooled = refusal_thresholds(scored, share=options.refusal_share)
    directory = Path(settings.JUDGE_DIR) / time.strftime("judge-%Y%m%dT%H%M%S")
    judge.save(directory, hyperparameters=options.hyperparameters)
    row = RelevanceJudge.objects.create(
        index_version=INDEX_VERSION,
        chunk_count=sum(repository.chunk_count for repository in repositories),
        repositories=[repository.name for repository in repositories],
        pair_count=report.pairs,
        query_count=report.queries,
        held_out_query_count=len(held_out),
        held_out_accuracy=round(accuracy, 4),
        held_out_pairwise_accuracy=round(pairwise, 4),
        thresholds=thresholds,
        default_threshold=pooled,
        seed=options.hyperparameters.seed,
        fit_seconds=round(time.monotonic() - started, 1),
        peak_rss_mb=round(peak_rss_mb(), 1),
        artifact=str(directory),
    )
    logger.info(
        "Relevance judge %s fitted: %d queries, %d pairs, mining %.0f s, training %.0f s, held-out accuracy %.3f",
        row.pk,
        report.queries,
        report.pairs,
        mining_seconds,
        report.seconds,
        accuracy,
    )
    return row
