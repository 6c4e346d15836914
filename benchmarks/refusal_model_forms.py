"""Is the sources-missing decision limited by its model's form or by its evidence? (issue 23)

    python benchmarks/retrieval.py --eval-set ../shared/eval-dev --written --written-second-batch \
        --no-cross-validation --features-out var/features.jsonl
    python benchmarks/refusal_model_forms.py var/features.jsonl

`/ask` refuses when a logistic model over evidence features (groundtruth/search/abstention.py)
falls below a threshold. The target (at least 0.85 of the unanswerable questions caught with at
most 0.05 of the answerable ones refused, per format) is far from today's figures. A model that
can bend (interactions between features, thresholds within a feature) might separate what a
weighted sum cannot. This fits other forms on the same features, each leave-one-repository-out
(fitted on every other repository's questions of every collection, threshold refusing at most
5% of those answerable questions, measured on the repository left out) and in-sample beside it:

- `logistic`: the shipped form and features (`abstention_fit.abstention_model_fit`);
- `logistic, every feature`: the same on all of FEATURES;
- `logistic, pair products`: the shipped features and their pairwise products;
- `boosted trees`: gradient-boosted trees (scikit-learn's HistGradientBoostingClassifier) on the
  shipped features, each constrained to raise the answer's probability as it grows (as the
  logistic weights are kept at or above zero), both kinds of question weighing half, seeded.
  Depth 2 and 3, and unlimited depth with at least 40 questions a leaf.

Beside the decisions, two figures that need no threshold: the mean over repositories of the
area under the ROC curve of the held-out scores (how well the form orders one repository's
questions), and `ceiling`: the share of unanswerable questions caught when the threshold over
the pooled held-out scores is chosen knowing the labels, refusing exactly 5% of the answerable
ones. A form whose ceiling is no higher cannot reach the target by a better threshold either:
what is missing is evidence.

The features file holds the evidence of the shipped search (re-ranking fitted on every
repository); the features themselves involve no label but the re-ranking's, so the rotation
here is over the decision alone.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.evaluation_sets import ANSWERABLE_MISSING_TARGET, repository_format
from benchmarks.refusal_calibration import auc
from groundtruth.search.abstention_fit import (
    DEFAULT_FEATURES,
    LabelledEvidence,
    abstention_model_fit,
)
from groundtruth.search.abstention_model import FEATURES

SEED = 23


@dataclass(frozen=True)
class Sample:
    collection: str
    fold: str
    answerable: bool
    features: dict[str, float]


# A form: fitted on training samples, it scores training and measured samples alike.
Scorer = Callable[[Sequence[Sample]], np.ndarray]
Form = Callable[[Sequence[Sample]], Scorer]


def samples_read(path: Path) -> list[Sample]:
    """The paraphrased questions' evidence (an unanswerable question has that wording only)."""
    samples = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record["wording"] == "paraphrase":
            samples.append(
                Sample(
                    collection=record["collection"],
                    fold=record["fold"],
                    answerable=record["answerable"],
                    features=record["features"],
                )
            )
    return samples


def logistic(features: Sequence[str], expand: Callable[[dict[str, float]], dict[str, float]] | None = None) -> Form:
    def fit(training: Sequence[Sample]) -> Scorer:
        def evidence(sample: Sample) -> dict[str, float]:
            return expand(sample.features) if expand else sample.features

        model = abstention_model_fit(
            [LabelledEvidence(features=evidence(sample), answerable=sample.answerable) for sample in training],
            features=features,
        )
        return lambda samples: np.array([model.probability(evidence(sample)) for sample in samples])

    return fit


def pair_products(features: dict[str, float]) -> dict[str, float]:
    expanded = dict(features)
    for first, second in itertools.combinations(DEFAULT_FEATURES, 2):
        expanded[f"{first}*{second}"] = features[first] * features[second]
    return expanded


def boosted_trees(features: Sequence[str], **parameters: object) -> Form:
    from sklearn.ensemble import HistGradientBoostingClassifier

    def matrix(samples: Sequence[Sample]) -> np.ndarray:
        return np.array([[sample.features[name] for name in features] for sample in samples])

    def fit(training: Sequence[Sample]) -> Scorer:
        labels = np.array([sample.answerable for sample in training], dtype=int)
        answerable = labels.sum()
        weights = np.where(labels == 1, len(labels) / (2 * answerable), len(labels) / (2 * (len(labels) - answerable)))
        model = HistGradientBoostingClassifier(monotonic_cst=[1] * len(features), random_state=SEED, **parameters).fit(
            matrix(training), labels, sample_weight=weights
        )
        return lambda samples: model.predict_proba(matrix(samples))[:, 1]

    return fit


def forms() -> dict[str, Form]:
    products = [f"{first}*{second}" for first, second in itertools.combinations(DEFAULT_FEATURES, 2)]
    trees = {"min_samples_leaf": 40, "learning_rate": 0.05}
    return {
        "logistic (shipped)": logistic(DEFAULT_FEATURES),
        "logistic, every feature": logistic(FEATURES),
        "logistic, pair products": logistic([*DEFAULT_FEATURES, *products], pair_products),
        "boosted trees, depth 2": boosted_trees(DEFAULT_FEATURES, max_depth=2, max_iter=100, **trees),
        "boosted trees, depth 3": boosted_trees(DEFAULT_FEATURES, max_depth=3, max_iter=100, **trees),
        "boosted trees, any depth": boosted_trees(DEFAULT_FEATURES, max_depth=None, max_iter=200, **trees),
    }


def threshold_choose(scores: np.ndarray, answerable: np.ndarray) -> float:
    """The score below which at most ANSWERABLE_MISSING_TARGET of the answerable are refused."""
    ordered = np.sort(scores[answerable])
    return float(ordered[math.floor(ANSWERABLE_MISSING_TARGET * len(ordered))])


@dataclass(frozen=True)
class Scored:
    held_out: np.ndarray  # each sample's score from the form fitted without its repository
    held_out_refused: np.ndarray
    in_sample_refused: np.ndarray


def rotate(form: Form, samples: Sequence[Sample]) -> Scored:
    answerable = np.array([sample.answerable for sample in samples])
    held_out, refused = np.zeros(len(samples)), np.zeros(len(samples), dtype=bool)
    for fold in sorted({sample.fold for sample in samples}):
        inside = np.array([sample.fold != fold for sample in samples])
        training = [sample for sample, keep in zip(samples, inside, strict=True) if keep]
        scorer = form(training)
        threshold = threshold_choose(scorer(training), answerable[inside])
        measured = [sample for sample, keep in zip(samples, inside, strict=True) if not keep]
        held_out[~inside] = scorer(measured)
        refused[~inside] = held_out[~inside] < threshold
    scorer = form(samples)
    everything = scorer(samples)
    return Scored(
        held_out=held_out,
        held_out_refused=refused,
        in_sample_refused=everything < threshold_choose(everything, answerable),
    )


def groups(samples: Sequence[Sample]) -> dict[str, np.ndarray]:
    """Each collection; the development set's per format too; every question pooled."""
    chosen: dict[str, np.ndarray] = {}
    for collection in sorted({sample.collection for sample in samples}):
        chosen[collection] = np.array([sample.collection == collection for sample in samples])
        if collection == "eval-dev":
            for format_name in ("rst", "Markdown"):
                in_format = np.array([repository_format(sample.fold) == format_name for sample in samples])
                chosen[f"{collection} {format_name}"] = chosen[collection] & in_format
    chosen["pooled"] = np.ones(len(samples), dtype=bool)
    return chosen


def caught_refused(refused: np.ndarray, answerable: np.ndarray, chosen: np.ndarray) -> str:
    return f"{refused[chosen & ~answerable].mean():.3f}/{refused[chosen & answerable].mean():.3f}"


def fold_auc(samples: Sequence[Sample], scores: np.ndarray) -> float:
    values = []
    for fold in sorted({sample.fold for sample in samples}):
        in_fold = [
            (sample.answerable, score) for sample, score in zip(samples, scores, strict=True) if sample.fold == fold
        ]
        positives = [score for answerable, score in in_fold if answerable]
        negatives = [score for answerable, score in in_fold if not answerable]
        if positives and negatives:
            values.append(auc(positives, negatives))
    return sum(values) / len(values)


def ceiling(scores: np.ndarray, answerable: np.ndarray) -> float:
    return float((scores[~answerable] < threshold_choose(scores, answerable)).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("features", type=Path, help="the file `retrieval.py --features-out` wrote")
    args = parser.parse_args()
    samples = samples_read(args.features)
    answerable = np.array([sample.answerable for sample in samples])
    chosen = groups(samples)
    print(
        f"{len(samples)} paraphrased questions ({answerable.sum()} answerable) over "
        f"{len({sample.fold for sample in samples})} repositories; threshold refusing at most "
        f"{ANSWERABLE_MISSING_TARGET:.0%} of the training answerable questions"
    )
    print("sources missing on unanswerable/answerable, held out by repository (in-sample):")
    print(f"  {'form':26s}" + "".join(f"{name:>28s}" for name in chosen) + f"{'fold AUC':>10s}{'ceiling':>9s}")
    for name, form in forms().items():
        scored = rotate(form, samples)
        cells = [
            f"{caught_refused(scored.held_out_refused, answerable, group)} "
            f"({caught_refused(scored.in_sample_refused, answerable, group)})"
            for group in chosen.values()
        ]
        print(
            f"  {name:26s}"
            + "".join(f"{cell:>28s}" for cell in cells)
            + f"{fold_auc(samples, scored.held_out):>10.3f}{ceiling(scored.held_out, answerable):>9.3f}"
        )


if __name__ == "__main__":
    main()
