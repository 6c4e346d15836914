"""A prior over questions: which questions documentation tends not to answer, learned from labelled
questions' own vectors (issue 23, item 3; measured by `retrieval.py --refusal-evidence`).

Every feature of the sources-missing model reads the question against the documentation. This
reads two vectors only: an L2-regularised logistic model over the question's MiniLM vector (the
one /ask already computes) and its product dimension by dimension with the first result's passage
vector (`abstention_model.prior_inputs`; a features file written before 2026-11-28 has no
passage vectors, and the product then reads as zeros), fitted on other repositories' labelled
questions, gives `question_prior`, the probability that a question like this one, with a first
passage like this one, is answerable. Its question half is the
"hypothesis-only" model of the natural-language-inference literature: what the way a question is
asked says before any passage is read (questions about another product, an installation
platform, a protocol, a password in front of a server are asked more often than documentation
answers them). A prior learned from who wrote the questions can learn their habits rather than
documentation's gaps, so it is measured where neither the repository nor the writer was seen:
left-one-repository-out (nested: a training question's prior comes from a model fitted without
its own repository and without the held-out one), on the written questions of other authors, and
fitted on every question here and measured on another set (`--transfer-check`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from benchmarks.evaluation_sets import is_written, repository_format
from benchmarks.refusal_calibration import (
    REPOSITORY_REFUSED_LIMIT,
    Assessed,
    Decisions,
    Variant,
    _decide,
    _rates,
    auc,
)
from groundtruth.search.abstention_fit import PRIOR_REGULARISATION
from groundtruth.search.abstention_model import PRIOR_FEATURE, QuestionPrior

PRIOR_REGULARISATIONS = (1e-4, 3e-4, PRIOR_REGULARISATION, 1e-2)
# Question vectors are kept to this many decimals, in memory as in the features file, so that a
# measure read back from the file gives the figures of the run that wrote it.
VECTOR_DECIMALS = 6
# The features file does not name the encoder; every vector in it is the packaged model's.
ENCODER = "features file"


def question_prior_fit(items: Sequence[Assessed], *, regularisation: float = PRIOR_REGULARISATION) -> QuestionPrior:
    """The service's prior (abstention_fit.question_prior_fit) fitted on `items`."""
    from groundtruth.search.abstention_fit import LabelledEvidence
    from groundtruth.search.abstention_fit import question_prior_fit as fit

    return fit(
        [
            LabelledEvidence(
                features={},
                answerable=item.question.answerable,
                question_vector=item.question_vector,
                passage_vector=_first_passage(item),
            )
            for item in items
        ],
        encoder=ENCODER,
        regularisation=regularisation,
    )


def _first_passage(item: Assessed) -> tuple[float, ...]:
    return item.passage_vectors[0] if item.passage_vectors else ()


def _with_prior(items: Sequence[Assessed], prior: QuestionPrior) -> list[Assessed]:
    return [
        replace(
            item,
            features={
                **item.features,
                PRIOR_FEATURE: prior.probability(item.question_vector, encoder=ENCODER, passage=_first_passage(item)),
            },
        )
        for item in items
    ]


def _by_fold(items: Sequence[Assessed]) -> dict[str, list[Assessed]]:
    folds: dict[str, list[Assessed]] = {}
    for item in items:
        folds.setdefault(item.question.fold, []).append(item)
    return folds


def out_of_fold(items: Sequence[Assessed], *, regularisation: float, without: str | None = None) -> list[Assessed]:
    """`items` (minus repository `without`) with each question's prior from a model fitted on the
    other repositories' questions (and never on `without`'s)."""
    of = _by_fold(items)
    scored = []
    for fold, members in of.items():
        if fold == without:
            continue
        training = [item for other, rest in of.items() if other not in (fold, without) for item in rest]
        scored.extend(_with_prior(members, question_prior_fit(training, regularisation=regularisation)))
    return scored


def _cells(decisions: Decisions, items: list[Assessed]) -> str:
    cells = []
    for label, kind in (("rst", "rst"), ("Markdown", "Markdown"), ("pooled", None)):
        chosen = [item for item in items if kind is None or repository_format(item.question.fold) == kind]
        answerable, unanswerable = _rates(decisions, chosen)
        cells.append(f"{label} {unanswerable:.3f}/{answerable:.3f}")
    worst, worst_fold = 0.0, "-"
    over = 0
    for members in _by_fold([item for item in items if item.question.answerable]).values():
        share = sum(decisions.refused[item.question.id] for item in members) / len(members)
        if share > worst:
            worst, worst_fold = share, members[0].question.fold
        over += share > REPOSITORY_REFUSED_LIMIT
    return f"{', '.join(cells)}; per repository max {worst:.3f} {worst_fold} ({over} above)"


def _aucs(items: list[Assessed]) -> str:
    def one(chosen: list[Assessed]) -> float:
        return auc(
            [item.features[PRIOR_FEATURE] for item in chosen if item.question.answerable],
            [item.features[PRIOR_FEATURE] for item in chosen if not item.question.answerable],
        )

    return " ".join(
        f"{one([item for item in items if kind is None or repository_format(item.question.fold) == kind]):.3f}"
        for kind in (None, "rst", "Markdown")
    )


def question_prior_measure(assessed: list[Assessed], transfer: list[Assessed], today: tuple[str, ...]) -> None:
    """The prior alone and beside today's features: left-one-repository-out (nested), in-sample,
    and fitted on every question here, measured on `transfer`."""
    if not all(item.question_vector for item in assessed):
        print("\nquestion prior: no question vectors in these features (written before 2026-11-28)")
        return
    development = [item for item in assessed if not is_written(item.question.collection)]
    written = [item for item in assessed if is_written(item.question.collection)]
    print(
        "\na prior over questions (their vectors alone), learned from the other repositories' labelled questions:"
        " AUC pooled, rst, Markdown, left-one-repository-out"
    )
    for regularisation in PRIOR_REGULARISATIONS:
        scored = out_of_fold(assessed, regularisation=regularisation)
        ids = {item.question.id for item in development}
        beside = f"   written {_aucs([item for item in scored if item.question.id not in ids])}" if written else ""
        print(
            f"  C={regularisation:<7g}{' (used)' if regularisation == PRIOR_REGULARISATION else '':<8}"
            f" {_aucs([item for item in scored if item.question.id in ids])}{beside}"
        )
    variant = Variant(f"today + {PRIOR_FEATURE}", (*today, PRIOR_FEATURE))
    of = _by_fold(assessed)
    refused: dict[str, bool] = {}
    for fold, members in of.items():
        training = out_of_fold(assessed, regularisation=PRIOR_REGULARISATION, without=fold)
        prior = question_prior_fit(
            [item for other, rest in of.items() if other != fold for item in rest], regularisation=PRIOR_REGULARISATION
        )
        refused.update(_decide(variant, training, _with_prior(members, prior), [])[0])
    cross = Decisions(refused, [])
    everything = question_prior_fit(assessed, regularisation=PRIOR_REGULARISATION)
    # In-sample: the model weighs the prior as it behaves on questions it was not fitted on (out
    # of fold), then decides with the prior fitted on every question.
    inside_refused = _decide(
        variant, out_of_fold(assessed, regularisation=PRIOR_REGULARISATION), _with_prior(assessed, everything), []
    )[0]
    inside = Decisions(inside_refused, [])
    print(f"\n  {variant.name}: {', '.join(variant.features)}")
    print(f"    left-one-repository-out: {_cells(cross, development)}")
    print(f"    in-sample:               {_cells(inside, development)}")
    if written:
        print(f"    written, left-one-repository-out: {_cells(cross, written)}")
        print(f"    written, in-sample:               {_cells(inside, written)}")
    if transfer and all(item.question_vector for item in transfer):
        fitted_on = out_of_fold(assessed, regularisation=PRIOR_REGULARISATION)
        measured = _with_prior(transfer, everything)
        print(f"    transfer set, prior alone AUC {_aucs(measured)}")
        for name, features in (("today", today), (variant.name, variant.features)):
            decided = _decide(Variant(name, features), fitted_on, measured, [])[0]
            print(f"    transfer set, {name}: {_cells(Decisions(decided, []), measured)}")
