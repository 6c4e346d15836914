"""How the sources-missing threshold is chosen, and the cross-encoder beside today's evidence,
left-one-repository-out from a features file (issue 23).

    python benchmarks/retrieval.py --eval-set ../shared/eval-dev --no-ferrite --written \\
        --written-second-batch --written-third-batch --refusal-evidence --assessed-out var/assessed.jsonl
    python benchmarks/refusal_thresholds.py var/assessed.jsonl \\
        [--cross-encoder var/cross/label-groups.pkl]   # from `cross_encoder.py label-fit`
    # (or var/tagger/scores.spread.pkl: `support_tagger.py fit` writes its scores in the same form)

The service fits its sources-missing model (`abstention_fit.sources_missing_fit`: today's
features and the prior over questions) and refuses below the threshold that refuses at most 5%
of the answerable questions it was fitted on, of every collection. The development set's FAQ
questions score higher than the written questions, which ask about every part of the
documentation, so that threshold refuses far fewer than 5% of the FAQ questions and catches few
of their unanswerable ones. This measures other ways to choose it, on the same models:

- `every collection` (the service's): at most 5% of the training answerable questions refused;
- `development set`: at most 5% of the training development set's answerable questions (its FAQ
  style, which is also the independent set's);
- `development set, each repository`: the same, and at most 0.10 of any one training
  repository's;
- `both styles alike`: the largest threshold at which the mean of the development set's and the
  written questions' refused shares is at most 5%;
- `answer found`: at most 5% of the training answerable questions whose answer the search ranked
  within the first 3 (refusing a question whose answer was not found is no harm done);
- `question stream`: no label of the measured repository, but the questions it is asked: each
  repository's logits are moved by the median logit of the questions of the same collection asked
  about it, for training and measured repositories alike, and the threshold is the development
  set's rule on the moved logits. A service could learn that median from the questions it is
  asked; a repository whose questions all score low (terse documentation) would refuse less.

For each development-set repository the model is fitted on the other eleven's development-set
questions and first two batches of written questions (the third batch is in no fit: it measures
transfer) and measured on the repository left out: caught / refused per format and pooled, the
worst repository's refused share and how many exceed 0.10, and each written batch. In-sample
(fitted on every repository) beside it. With `--cross-encoder`, every rule also with the
cross-encoder's probability of the first passage as a seventh feature (its scores come from the
fine-tuned copy that did not see the question's repository), and again with its logit in
place of the probability (the model is linear in each feature, so the two weigh differently).
`--nested` also chooses the features and the rule without the measured repository: for each
repository left out, every choice is rotated over the other eleven and the one that catches most
within the refusal limits there is applied to it (a nested cross-validation of the choice). The
choices are today's features, today's with each of `--extra-features`, and with `--cross-encoder`
its two forms, alone and beside each extra feature.

Other fits, measured by the same rotation and rules (2026-11-29, none helps; docs/benchmarks.md):

- `--answer-removed FILE` (`retrieval.py --answer-removed-out FILE`): every answerable question
  of the fitted collections asked again with the chunks of its answer removed from the index,
  joins the fits as an unanswerable question (a seeded share of each repository's, for each of
  `--answer-removed-shares`); they are never measured;
- `--extra-features a,b`: each feature of the file added alone to today's;
- `--per-format`: each repository's model fitted on the repositories of its own format alone.

`--missed` lists, for each fit, the development set's unanswerable questions it does not refuse at
the service's rule, cross-validated and in-sample: which questions no evidence here catches.
"""

from __future__ import annotations

import argparse
import json
import math
import pickle
import random
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.evaluation_sets import ANSWER_REMOVED, WRITTEN_BATCHES, WRITTEN_QUESTIONS
from groundtruth.search.abstention_fit import DEFAULT_FEATURES, LabelledEvidence, sources_missing_fit

ENCODER = "features file"  # every vector of the file is the packaged model's
REFUSED_SHARE = 0.05
REPOSITORY_REFUSED_LIMIT = 0.10
FOUND_WITHIN = 3
FITTED_COLLECTIONS = ("eval-dev", "written", "written-2")
CROSS_ENCODER_FEATURE = "cross_encoder_first"
CROSS_ENCODER_LOGIT_FEATURE = "cross_encoder_first_logit"
NO_PASSAGE_LOGIT = -10.0


@dataclass(frozen=True)
class Question:
    id: str
    repository: str
    format: str
    collection: str
    answerable: bool
    answer_rank: int | None  # the first rank holding the answer, None: not in the results
    sample: LabelledEvidence
    answer_removed: bool = False  # an answerable question asked with its answer removed: fitted on, never measured


@dataclass(frozen=True)
class Scored:
    question: Question
    probability: float  # of the answer, by the model fitted without the question's repository

    @property
    def logit(self) -> float:
        probability = min(max(self.probability, 1e-9), 1 - 1e-9)
        return math.log(probability / (1 - probability))


def collections_read() -> dict[str, str]:
    """Each written question's collection (batch), by its id."""
    collection_of = {}
    for folder, collection in WRITTEN_BATCHES:
        for path in sorted((WRITTEN_QUESTIONS / folder).glob("*.jsonl")):
            for line in path.read_text().splitlines():
                if line.strip():
                    collection_of[json.loads(line)["id"]] = collection
    return collection_of


def questions_read(path: Path, cross_encoder: dict[str, list[float]] | None) -> list[Question]:
    collection_of = collections_read()
    questions = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        original_id = row["id"].removesuffix(ANSWER_REMOVED)
        features = dict(row["features"])
        if cross_encoder is not None:
            scores = cross_encoder[row["id"]]
            # The head's logit of the first passage, and as a probability; no passage: the lowest.
            features[CROSS_ENCODER_LOGIT_FEATURE] = scores[0] if scores else NO_PASSAGE_LOGIT
            features[CROSS_ENCODER_FEATURE] = 1 / (1 + math.exp(-features[CROSS_ENCODER_LOGIT_FEATURE]))
        passages = row["passage_vectors"]
        questions.append(
            Question(
                id=row["id"],
                repository=row["fold"],
                format=row["format"],
                collection=collection_of[original_id] if row["written"] else "eval-dev",
                answerable=row["answerable"],
                answer_rank=row["answer_ranks"][0] if row["answer_ranks"] else None,
                sample=LabelledEvidence(
                    features=features,
                    answerable=row["answerable"],
                    question_vector=tuple(row["question_vector"]),
                    passage_vector=tuple(passages[0]) if passages else (),
                    group=row["fold"],
                ),
                answer_removed=row["id"] != original_id,
            )
        )
    return questions


def answer_removed_sample(removed: Sequence[Question], share: float) -> list[Question]:
    """A seeded `share` of each repository's answer-removed questions, in file order."""
    kept: list[Question] = []
    for repository in sorted({question.repository for question in removed}):
        own = [question for question in removed if question.repository == repository]
        chosen = set(random.Random(f"{repository} {share}").sample(range(len(own)), round(share * len(own))))
        kept.extend(question for position, question in enumerate(own) if position in chosen)
    return kept


def fit_and_score(
    training: Sequence[Question], measured: Sequence[Question], features: Sequence[str]
) -> tuple[list[Scored], list[Scored]]:
    """The service's fit on `training`: its training questions as it weighed them (out-of-fold
    priors) and `measured` as it would score them."""
    fit = sources_missing_fit(
        [question.sample for question in training],
        features=features,
        question_prior_encoder=ENCODER,
        answerable_missing=REFUSED_SHARE,
    )
    model, prior = fit.model, fit.model.question_prior
    assert prior is not None
    trained = [
        Scored(question, model.probability(sample.features))
        for question, sample in zip(training, fit.samples, strict=True)
    ]
    scored = []
    for question in measured:
        sample = question.sample
        question_prior = prior.probability(sample.question_vector, encoder=ENCODER, passage=sample.passage_vector)
        scored.append(Scored(question, model.probability({**sample.features, "question_prior": question_prior})))
    return trained, scored


def quantile_threshold(values: Sequence[float], share: float = REFUSED_SHARE) -> float:
    """The largest threshold refusing at most `share` of `values` (refused: below it)."""
    ordered = sorted(values)
    return ordered[math.floor(share * len(ordered))]


# A rule: from the training questions' scores, whether each measured question is refused.
Rule = Callable[[Sequence[Scored], Sequence[Scored]], list[bool]]


def _by_probability(threshold: float, measured: Sequence[Scored]) -> list[bool]:
    # Rounded down to 3 decimals, as the service stores its threshold (abstention_threshold_choose).
    threshold = math.floor(threshold * 1000) / 1000
    return [item.probability < threshold for item in measured]


def every_collection(trained: Sequence[Scored], measured: Sequence[Scored]) -> list[bool]:
    threshold = quantile_threshold([item.probability for item in trained if item.question.answerable])
    return _by_probability(threshold, measured)


def development_set(trained: Sequence[Scored], measured: Sequence[Scored]) -> list[bool]:
    threshold = quantile_threshold(
        [item.probability for item in trained if item.question.answerable and item.question.collection == "eval-dev"]
    )
    return _by_probability(threshold, measured)


def development_set_capped(trained: Sequence[Scored], measured: Sequence[Scored]) -> list[bool]:
    answerable = [item for item in trained if item.question.answerable and item.question.collection == "eval-dev"]
    by_repository = defaultdict(list)
    for item in answerable:
        by_repository[item.question.repository].append(item.probability)
    threshold = 0.0
    for candidate in sorted(item.probability for item in answerable):
        pooled = sum(item.probability < candidate for item in answerable) / len(answerable)
        worst = max(sum(value < candidate for value in values) / len(values) for values in by_repository.values())
        if pooled > REFUSED_SHARE or worst > REPOSITORY_REFUSED_LIMIT:
            break
        threshold = candidate
    return _by_probability(threshold, measured)


def both_styles_alike(trained: Sequence[Scored], measured: Sequence[Scored]) -> list[bool]:
    answerable = [item for item in trained if item.question.answerable]
    faq = [item.probability for item in answerable if item.question.collection == "eval-dev"]
    written = [item.probability for item in answerable if item.question.collection != "eval-dev"]
    threshold = 0.0
    for candidate in sorted(faq + written):
        refused = (
            sum(value < candidate for value in faq) / len(faq)
            + sum(value < candidate for value in written) / len(written)
        ) / 2
        if refused > REFUSED_SHARE:
            break
        threshold = candidate
    return _by_probability(threshold, measured)


def answer_found(trained: Sequence[Scored], measured: Sequence[Scored]) -> list[bool]:
    threshold = quantile_threshold(
        [
            item.probability
            for item in trained
            if item.question.answerable
            and item.question.answer_rank is not None
            and item.question.answer_rank <= FOUND_WITHIN
        ]
    )
    return _by_probability(threshold, measured)


def question_stream(trained: Sequence[Scored], measured: Sequence[Scored]) -> list[bool]:
    def centres(items: Sequence[Scored]) -> dict[tuple[str, str], float]:
        logits = defaultdict(list)
        for item in items:
            logits[(item.question.repository, item.question.collection)].append(item.logit)
        return {key: statistics.median(values) for key, values in logits.items()}

    def moved(item: Scored, centre: dict[tuple[str, str], float]) -> float:
        return item.logit - centre[(item.question.repository, item.question.collection)]

    trained_centres, measured_centres = centres(trained), centres(measured)
    threshold = quantile_threshold(
        [
            moved(item, trained_centres)
            for item in trained
            if item.question.answerable and item.question.collection == "eval-dev"
        ]
    )
    return [moved(item, measured_centres) < threshold for item in measured]


RULES: dict[str, Rule] = {
    "every collection": every_collection,
    "development set": development_set,
    "development set, each repository": development_set_capped,
    "both styles alike": both_styles_alike,
    "answer found": answer_found,
    "question stream": question_stream,
}


def decisions_rotate(
    questions: Sequence[Question], features: Sequence[str], *, same_format: bool = False
) -> dict[str, list[tuple[Question, bool]]]:
    """Each rule's decision on every question, its repository left out of the fit (and with
    `same_format`, the repositories of the other format too)."""
    decided: dict[str, list[tuple[Question, bool]]] = {name: [] for name in RULES}
    for repository in sorted({question.repository for question in questions if question.collection == "eval-dev"}):
        measured = [q for q in questions if q.repository == repository and not q.answer_removed]
        training = [
            q
            for q in questions
            if q.repository != repository
            and q.collection in FITTED_COLLECTIONS
            and (not same_format or q.format == measured[0].format)
        ]
        trained, scored = fit_and_score(training, measured, features)
        for name, rule in RULES.items():
            decided[name].extend(zip(measured, rule(trained, scored), strict=True))
    return decided


def repository_refused_shares(development: Sequence[tuple[Question, bool]]) -> dict[str, float]:
    """Each repository's share of its answerable questions refused, by name."""
    shares = {}
    for repository in sorted({q.repository for q, _ in development}):
        answerable = [refused for q, refused in development if q.repository == repository and q.answerable]
        shares[repository] = sum(answerable) / len(answerable)
    return shares


def choice_score(decided: Sequence[tuple[Question, bool]]) -> tuple[bool, float, float]:
    """How a choice of features and rule did on the development set's questions, for ordering
    choices: within the refusal limits first (at most 5% of the answerable questions refused and
    none of a repository's above 0.10), then the share of unanswerable ones caught, then fewer
    refused."""
    development = [(q, refused) for q, refused in decided if q.collection == "eval-dev"]
    unanswerable = [refused for q, refused in development if not q.answerable]
    answerable = [refused for q, refused in development if q.answerable]
    refused_share = sum(answerable) / len(answerable)
    worst = max(repository_refused_shares(development).values())
    within = refused_share <= REFUSED_SHARE and worst <= REPOSITORY_REFUSED_LIMIT
    return within, sum(unanswerable) / len(unanswerable), -refused_share


def nested_fold(
    repository: str, questions: Sequence[Question], feature_sets: Mapping[str, Sequence[str]]
) -> tuple[list[tuple[Question, bool]], str]:
    """`repository`'s questions decided by the features and rule chosen without it: every choice
    is rotated over the other repositories, and the best by `choice_score` is fitted on all of
    them and applied to it. Also which choice that was."""
    rest = [q for q in questions if q.repository != repository]
    choices: list[tuple[tuple[bool, float, float], str, str]] = []
    for label, features in feature_sets.items():
        inner = decisions_rotate(rest, features)
        choices.extend((choice_score(inner[name]), label, name) for name in RULES)
    _, label, name = max(choices)
    training = [q for q in rest if q.collection in FITTED_COLLECTIONS]
    measured = [q for q in questions if q.repository == repository and not q.answer_removed]
    trained, scored = fit_and_score(training, measured, feature_sets[label])
    decided = list(zip(measured, RULES[name](trained, scored), strict=True))
    return decided, f"{repository.split('/')[-1]}: {label}, {name}"


def decisions_nested(
    questions: Sequence[Question], feature_sets: Mapping[str, Sequence[str]], *, processes: int = 1
) -> tuple[list[tuple[Question, bool]], list[str]]:
    """Every question decided by the features and rule chosen without its repository
    (`nested_fold`, one repository per process), and what each repository got."""
    repositories = sorted({question.repository for question in questions if question.collection == "eval-dev"})
    with ProcessPoolExecutor(max_workers=processes) as pool:
        folds = list(
            pool.map(nested_fold, repositories, [questions] * len(repositories), [feature_sets] * len(repositories))
        )
    return [pair for decided, _ in folds for pair in decided], [chosen for _, chosen in folds]


def nested_feature_sets(extra: Sequence[str], cross_encoder_forms: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """The choices `--nested` rotates, by label: today's features, with each extra feature, and
    with each of the cross-encoder's forms (its first passage's probability or logit), alone and
    beside each extra feature."""
    added: list[tuple[str, ...]] = [(), *((name,) for name in extra)]
    for form in cross_encoder_forms:
        feature = {"probability": CROSS_ENCODER_FEATURE, "logit": CROSS_ENCODER_LOGIT_FEATURE}[form]
        added.extend([(feature,), *((feature, name) for name in extra)])
    return {" + ".join(names) or "today's": (*DEFAULT_FEATURES, *names) for names in added}


def decisions_in_sample(
    questions: Sequence[Question], features: Sequence[str], *, same_format: bool = False
) -> dict[str, list[tuple[Question, bool]]]:
    """Each rule's decision on every question by the fit on every repository (with `same_format`,
    on every repository of the question's format)."""
    groups: list[str | None] = [*sorted({q.format for q in questions})] if same_format else [None]
    decided: dict[str, list[tuple[Question, bool]]] = {name: [] for name in RULES}
    for group in groups:
        kept = [q for q in questions if group is None or q.format == group]
        training = [q for q in kept if q.collection in FITTED_COLLECTIONS]
        measured = [q for q in kept if not q.answer_removed]
        trained, scored = fit_and_score(training, measured, features)
        for name, rule in RULES.items():
            decided[name].extend(zip(measured, rule(trained, scored), strict=True))
    return decided


def _rates(decided: Sequence[tuple[Question, bool]]) -> str:
    unanswerable = [refused for question, refused in decided if not question.answerable]
    answerable = [refused for question, refused in decided if question.answerable]
    return f"{sum(unanswerable) / len(unanswerable):.3f} / {sum(answerable) / len(answerable):.3f}"


def decisions_line(decided: Sequence[tuple[Question, bool]]) -> str:
    """caught / refused per format, pooled, the worst repository, each written batch."""
    development = [(q, refused) for q, refused in decided if q.collection == "eval-dev"]
    cells = [_rates([(q, r) for q, r in development if q.format == name]) for name in ("rst", "Markdown")]
    cells.append(_rates(development))
    refused_share = repository_refused_shares(development)
    worst = max(refused_share, key=lambda name: refused_share[name])
    over = sum(share > REPOSITORY_REFUSED_LIMIT for share in refused_share.values())
    cells.append(f"{worst.split('/')[-1]} {refused_share[worst]:.3f} ({over} over)")
    for _, collection in WRITTEN_BATCHES:
        cells.append(_rates([(q, r) for q, r in decided if q.collection == collection]))
    return " | ".join(cells)


def missed_line(decided: Sequence[tuple[Question, bool]]) -> str:
    """The development set's unanswerable questions not refused, by format."""
    cells = []
    for name in ("rst", "Markdown"):
        missed = sorted(
            q.id
            for q, refused in decided
            if q.collection == "eval-dev" and q.format == name and not q.answerable and not refused
        )
        cells.append(f"{name} {', '.join(missed) or '-'}")
    return "; ".join(cells)


def report(
    questions: Sequence[Question],
    features: Sequence[str],
    label: str,
    *,
    same_format: bool = False,
    missed: bool = False,
) -> None:
    started = time.monotonic()
    rotated = decisions_rotate(questions, features, same_format=same_format)
    inside = decisions_in_sample(questions, features, same_format=same_format)
    print(f"\n{label} ({time.monotonic() - started:.0f} s); caught / refused")
    batches = " | ".join(collection for _, collection in WRITTEN_BATCHES)
    print(f"threshold rule | rst | Markdown | pooled | worst repository refused | {batches}")
    for name in RULES:
        print(f"{name} | {decisions_line(rotated[name])}")
        print(f"  in-sample | {decisions_line(inside[name])}")
    if missed:
        service_rule = "every collection"
        print(f"missed at the service's rule ({service_rule}): {missed_line(rotated[service_rule])}")
        print(f"  in-sample: {missed_line(inside[service_rule])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("assessed", type=Path, help="the features file of `retrieval.py --assessed-out`")
    parser.add_argument(
        "--cross-encoder", type=Path, help="the scores `cross_encoder.py label-fit` wrote (its `--out` file)"
    )
    parser.add_argument(
        "--nested",
        action="store_true",
        help="also choose the features (today's, with each extra feature, with the cross-encoder's forms)"
        " and the rule without the measured repository",
    )
    parser.add_argument(
        "--cross-encoder-forms",
        default="probability,logit",
        help="with --nested and --cross-encoder: the forms of its score to choose among (probability, logit)",
    )
    parser.add_argument("--processes", type=int, default=1, help="--nested: repositories left out at once")
    parser.add_argument(
        "--answer-removed",
        type=Path,
        help="the features file of `retrieval.py --answer-removed-out`: the questions asked with their answer"
        " removed join the fits as unanswerable (never the measured questions), in each of --answer-removed-shares",
    )
    parser.add_argument(
        "--answer-removed-shares",
        default="1,0.25",
        help="comma-separated shares of the answer-removed questions to fit on (a seeded sample of each repository's)",
    )
    parser.add_argument(
        "--extra-features",
        default="",
        help="comma-separated features of the file, each added alone to today's (the model keeps every weight >= 0)",
    )
    parser.add_argument(
        "--missed",
        action="store_true",
        help="also list the development set's unanswerable questions each fit misses at the service's rule",
    )
    parser.add_argument(
        "--per-format",
        action="store_true",
        help="also fit each repository's model on the other repositories of its own format only",
    )
    args = parser.parse_args()
    forms = [value for value in args.cross_encoder_forms.split(",") if value]
    if unknown := sorted(set(forms) - {"probability", "logit"}):
        parser.error(f"--cross-encoder-forms: {', '.join(unknown)} is not probability or logit")
    if args.answer_removed and args.cross_encoder:
        parser.error("the cross-encoder scored no answer-removed question: give one of the two")
    scores = pickle.loads(args.cross_encoder.read_bytes())["questions"] if args.cross_encoder else None
    questions = questions_read(args.assessed, scores)
    removed = questions_read(args.answer_removed, None) if args.answer_removed else []
    development = [q for q in questions if q.collection == "eval-dev"]
    print(
        f"{len(questions)} questions: {len(development)} of the development set"
        f" ({sum(q.answerable for q in development)} answerable), {len(questions) - len(development)} written"
    )
    report(questions, DEFAULT_FEATURES, "today's features and the prior over questions", missed=args.missed)
    extra = [value for value in args.extra_features.split(",") if value]
    for name in extra:
        report(questions, (*DEFAULT_FEATURES, name), f"today's features and {name}", missed=args.missed)
    if args.per_format:
        report(
            questions,
            DEFAULT_FEATURES,
            "today's features, fitted on the measured format's repositories alone",
            same_format=True,
        )
    for share in [float(value) for value in args.answer_removed_shares.split(",")] if removed else []:
        sample = answer_removed_sample(removed, share)
        report(
            [*questions, *sample],
            DEFAULT_FEATURES,
            f"the same, fitted also on {len(sample)} questions asked with their answer removed (share {share:g})",
        )
    if scores is not None:
        report(
            questions,
            (*DEFAULT_FEATURES, CROSS_ENCODER_FEATURE),
            "with the cross-encoder's probability of the first passage",
            missed=args.missed,
        )
        report(
            questions,
            (*DEFAULT_FEATURES, CROSS_ENCODER_LOGIT_FEATURE),
            "with the cross-encoder's logit of the first passage instead",
            missed=args.missed,
        )
    if args.nested:
        started = time.monotonic()
        feature_sets = nested_feature_sets(extra, forms if scores is not None else [])
        decided, chosen = decisions_nested(questions, feature_sets, processes=args.processes)
        print(
            f"\nthe features and the rule chosen without the measured repository, among"
            f" {', '.join(feature_sets)} ({time.monotonic() - started:.0f} s); caught / refused"
        )
        print(f"nested | {decisions_line(decided)}")
        print("chosen: " + "; ".join(chosen))


if __name__ == "__main__":
    main()
