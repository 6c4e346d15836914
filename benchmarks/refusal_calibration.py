"""Refusals calibrated per corpus: candidate ways measured leave-one-repository-out (issue 23).

    python benchmarks/retrieval.py --eval-set DIR --no-ferrite --refusal-calibration

Today `/ask` says `sources_missing` when a logistic model over evidence features
(`groundtruth/search/abstention.py`), fitted on the development set's labelled questions, falls
below one global threshold. Issue 23 asks for a decision calibrated per corpus from what the
corpus itself provides. This measures candidates beside today's model, on the same searches:

- corpus statistics, no label: each repository's own pseudo-queries (`pair_mining.pairs_mine`: a
  section's title path, up to `queries_per_repository` per repository in the seeded order the
  judge uses), searched within that repository through the service's search with the section
  present ("answer present") and with the section's chunks removed from every list the evidence
  reads ("answer absent"; the repository-wide word counts behind `known` still include it), and
  the relevance judge's scores (`groundtruth/judge/`, MiniLM's own token space: what `judge_fit`
  stores with its defaults, which train nothing) of each pseudo-query's own passage and of its
  mined negatives;
- feature variants: today's features plus one of: the question's `peak` as a quantile among the
  corpus's "answer absent" peaks, its `similarity` minus their median (the corpus is the
  repository of the best dense passage); the judge's best score over the first
  SEARCH_JUDGE_DEPTH results, raw, scaled by the corpus's mined scores ((score - negatives'
  median) / (positives' median - negatives' median)), or as a quantile among the corpus's mined
  positives (the corpus is the repository of the best judged passage);
- model variants, on today's features: fitted on the labelled questions plus every corpus's
  pseudo-queries (present as answerable, absent as not), or on the pseudo-queries alone (the
  model reads no label, nor `named_known` and `names_together`, which titles leave constant; the
  threshold is still chosen on the labelled questions);
- threshold variants, on today's features: per corpus from its pseudo-queries (the probability
  that best separates present from absent, Youden's J; the 5% quantile of present; the global
  threshold moved, in logit, by how far the corpus's median absent logit lies from the others').

Everything fitted on labels is cross-validated by repository: the model and the global
threshold (at most 5% of the training answerable questions refused) are fitted on the other
eleven repositories' paraphrased and unanswerable questions and measured on the one left out.
The re-ranking stays as shipped (`retrieval.py` without this option rotates it too), for every
variant alike. Reported per format, pooled and per repository, in-sample in brackets, with the
spread of the thresholds.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from benchmarks.evaluation_sets import TOP, EvaluationSet, Question, repository_format

ANSWERABLE_MISSING_TARGET = 0.05
PRESENT_QUANTILE = 0.05
REPOSITORY_REFUSED_LIMIT = 0.10  # no repository may refuse more of its answerable questions


@dataclass(frozen=True)
class PseudoQuery:
    """One section title of a repository asked of that repository, with no label."""

    repository: str
    present: dict[str, float]  # evidence features with the section searchable
    absent: dict[str, float]  # with the section's chunks removed from the evidence
    judge_positive: float  # the judge's score of the section's own passage
    judge_negatives: tuple[float, ...]  # of its mined negatives


@dataclass
class Assessed:
    """One paraphrased or unanswerable question searched across every repository."""

    question: Question
    features: dict[str, float]
    dense_repository: str | None  # of the best dense passage
    judge_repository: str | None  # of the best judged passage
    # The ranks, among the first few results, of those holding the answer (refusal_evidence.py).
    answer_ranks: tuple[int, ...] = ()
    # The question's own vector (question_prior.py); empty in files written before 2026-11-28.
    question_vector: tuple[float, ...] = ()
    # The first results' passage vectors, best first (the pair prior's measure); empty before 2026-11-28.
    passage_vectors: tuple[tuple[float, ...], ...] = ()


@dataclass(frozen=True)
class Variant:
    name: str
    features: tuple[str, ...]
    # None: the global threshold fitted on labels; else (model, corpus pseudo-queries, the
    # other corpora's pseudo-queries, global threshold) -> the corpus's threshold.
    corpus_threshold: Callable[[object, list[PseudoQuery], list[PseudoQuery], float], float] | None = None
    # Pseudo-queries as training samples (present: answerable, absent: not): "" none, "added" to
    # the labelled questions, "only" (the model reads no label; its threshold still does).
    pseudo_training: str = ""


def _logit(probability: float) -> float:
    probability = min(max(probability, 1e-9), 1 - 1e-9)
    return math.log(probability / (1 - probability))


def _sigmoid(value: float) -> float:
    return 1.0 / (1.0 + math.exp(-value))


def _separating(model, own: list[PseudoQuery], others: list[PseudoQuery], global_threshold: float) -> float:
    from groundtruth.judge.calibration import separating_score

    return separating_score(
        [model.probability(item.present) for item in own], [model.probability(item.absent) for item in own]
    )


def _present_quantile(model, own: list[PseudoQuery], others: list[PseudoQuery], global_threshold: float) -> float:
    from groundtruth.judge.calibration import score_quantile

    return score_quantile([model.probability(item.present) for item in own], share=PRESENT_QUANTILE)


def _absent_shift(model, own: list[PseudoQuery], others: list[PseudoQuery], global_threshold: float) -> float:
    own_median = statistics.median(_logit(model.probability(item.absent)) for item in own)
    others_median = statistics.median(_logit(model.probability(item.absent)) for item in others)
    return _sigmoid(_logit(global_threshold) + own_median - others_median)


def variants() -> list[Variant]:
    from groundtruth.search.abstention_fit import DEFAULT_FEATURES as today

    title_varying = tuple(name for name in today if name not in ("named_known", "names_together"))
    return [
        Variant("today: global threshold", today),
        Variant("+ peak quantile among corpus absent", (*today, "peak_corpus_quantile")),
        Variant("+ similarity - corpus absent median", (*today, "similarity_corpus_shift")),
        Variant("+ judge best score", (*today, "judge")),
        Variant("+ judge scaled by corpus mined pairs", (*today, "judge_corpus_scaled")),
        Variant("+ judge quantile among corpus positives", (*today, "judge_corpus_quantile")),
        Variant("threshold: corpus present/absent separation", today, _separating),
        Variant("threshold: 5% of corpus present", today, _present_quantile),
        Variant("threshold: global moved by corpus absent", today, _absent_shift),
        Variant("model: labels + every corpus's pseudo-queries", today, pseudo_training="added"),
        # `named_known` is 1 for every title (its words are the corpus's own) and `names_together`
        # nearly: on pseudo-queries alone their weights run away, so the model reads the others.
        Variant("model: pseudo-queries only", title_varying, pseudo_training="only"),
    ]


def pseudo_queries_assess(*, queries_per_repository: int, judge) -> list[PseudoQuery]:
    """Each repository's mined pseudo-queries searched within it, present and absent, and the
    judge's scores of their mined pairs."""
    from groundtruth.judge.fitting import held_out_score, mined_tokenise
    from groundtruth.judge.pair_mining import pairs_mine
    from groundtruth.models import Chunk, Repository
    from groundtruth.search.abstention import evidence_features
    from groundtruth.search.hybrid_search import chunk_search

    repositories = list(Repository.objects.filter(enabled=True, chunk_count__gt=0).order_by("name"))
    mined = pairs_mine(repositories=repositories, queries_per_repository=queries_per_repository, seed=0)
    judged = held_out_score(judge.model, mined_tokenise(mined, passage_tokens=judge.model.passage_tokens))
    by_name = {repository.name: repository for repository in repositories}
    pseudo = []
    for item, scores in zip(mined, judged, strict=True):
        repository = by_name[item.repository]
        section = Chunk.objects.values_list("path", "heading").get(pk=item.chunk_id)
        own = set(
            Chunk.objects.filter(repository=repository, path=section[0], heading=section[1]).values_list(
                "pk", flat=True
            )
        )
        outcome = chunk_search(query=item.query, repositories=[repository], limit=TOP, judge=False)
        present, _ = evidence_features(outcome, question=item.query)
        removed = replace(
            outcome,
            hits=[hit for hit in outcome.hits if hit.chunk.pk not in own],
            dense_hits=[hit for hit in outcome.dense_hits if hit.chunk_id not in own],
            lexical_hits=[hit for hit in outcome.lexical_hits if hit.chunk_id not in own],
        )
        absent, _ = evidence_features(removed, question=item.query)
        pseudo.append(
            PseudoQuery(
                repository=item.repository,
                present=present,
                absent=absent,
                judge_positive=scores.positive,
                judge_negatives=scores.negatives,
            )
        )
    return pseudo


def questions_assess(evaluation: EvaluationSet, *, judge, depth: int) -> list[Assessed]:
    from groundtruth.judge.scoring import passages_judge
    from groundtruth.search.abstention import evidence_features
    from groundtruth.search.hybrid_search import chunk_search, search_scope_resolve

    repositories = search_scope_resolve(names=None)
    names = {repository.pk: repository.name for repository in repositories}
    assessed = []
    for question in evaluation.questions:
        text = question.texts["paraphrase"]
        outcome = chunk_search(query=text, repositories=repositories, limit=TOP, judge=False)
        features, _ = evidence_features(outcome, question=text)
        head = [hit.chunk for hit in outcome.hits[:depth]]
        scores = passages_judge(judge, query=text, chunks=head) if head else {}
        best = max(head, key=lambda chunk: (scores[chunk.pk], -chunk.pk)) if head else None
        features["judge"] = scores[best.pk] if best else 0.0
        assessed.append(
            Assessed(
                question=question,
                features=features,
                dense_repository=dense_first_repository(outcome, names=names),
                judge_repository=best.repository.name if best else None,
            )
        )
    return assessed


def dense_first_repository(outcome, *, names: dict[int, str]) -> str | None:
    """The name of the repository of the dense leg's nearest passage (None without a dense leg)."""
    if not outcome.dense_hits:
        return None
    return names.get(outcome.candidates[outcome.dense_hits[0].chunk_id].repository_id)


def _share_below(values: Sequence[float], value: float) -> float:
    return sum(item < value for item in values) / len(values) if values else 0.0


def corpus_features_add(assessed: list[Assessed], pseudo: list[PseudoQuery]) -> None:
    """The features that read the corpus's own pseudo-queries (no label)."""
    by_corpus: dict[str, list[PseudoQuery]] = {}
    for item in pseudo:
        by_corpus.setdefault(item.repository, []).append(item)
    for answer in assessed:
        features = answer.features
        dense_corpus = by_corpus.get(answer.dense_repository or "", [])
        features["peak_corpus_quantile"] = _share_below(
            [item.absent["peak"] for item in dense_corpus], features["peak"]
        )
        features["similarity_corpus_shift"] = features["similarity"] - (
            statistics.median(item.absent["similarity"] for item in dense_corpus) if dense_corpus else 0.0
        )
        judge_corpus = by_corpus.get(answer.judge_repository or "", [])
        positives = [item.judge_positive for item in judge_corpus]
        negatives = [score for item in judge_corpus for score in item.judge_negatives]
        if positives and negatives:
            positive_median, negative_median = statistics.median(positives), statistics.median(negatives)
            spread = positive_median - negative_median
            features["judge_corpus_scaled"] = (features["judge"] - negative_median) / spread if spread > 0 else 0.0
        else:
            features["judge_corpus_scaled"] = 0.0
        features["judge_corpus_quantile"] = _share_below(positives, features["judge"])


@dataclass
class Decisions:
    refused: dict[str, bool]  # question id -> sources_missing
    thresholds: list[float]  # every threshold used (per fold, or per fold and corpus)


def _decide(variant: Variant, training: list[Assessed], measured: list[Assessed], pseudo: list[PseudoQuery]):
    from groundtruth.search.abstention_fit import LabelledEvidence, abstention_model_fit, abstention_threshold_choose

    samples = [LabelledEvidence(features=item.features, answerable=item.question.answerable) for item in training]
    # Every corpus's pseudo-queries, the held-out one's included: they carry no label.
    pseudo_samples = [LabelledEvidence(features=query.present, answerable=True) for query in pseudo] + [
        LabelledEvidence(features=query.absent, answerable=False) for query in pseudo
    ]
    fitted_on = {"": samples, "added": samples + pseudo_samples, "only": pseudo_samples}[variant.pseudo_training]
    model = abstention_model_fit(fitted_on, features=variant.features)
    if variant.pseudo_training == "only":
        from groundtruth.judge.calibration import score_quantile

        # Not rounded to 3 decimals: fitted on titles, which share far more words with their
        # passages than questions do, the model gives real questions probabilities below 0.001.
        threshold = score_quantile(
            [model.probability(sample.features) for sample in samples if sample.answerable],
            share=ANSWERABLE_MISSING_TARGET,
        )
    else:
        threshold = abstention_threshold_choose(model, samples, answerable_missing=ANSWERABLE_MISSING_TARGET)
    thresholds: dict[str, float] = {}
    refused = {}
    for item in measured:
        corpus = item.dense_repository or ""
        if variant.corpus_threshold is None:
            chosen = threshold
        else:
            if corpus not in thresholds:
                own = [query for query in pseudo if query.repository == corpus]
                others = [query for query in pseudo if query.repository != corpus]
                thresholds[corpus] = variant.corpus_threshold(model, own, others, threshold) if own else threshold
            chosen = thresholds[corpus]
        refused[item.question.id] = model.probability(item.features) < chosen
    return refused, (list(thresholds.values()) if variant.corpus_threshold else [threshold])


def variant_measure(
    variant: Variant, assessed: list[Assessed], pseudo: list[PseudoQuery]
) -> tuple[Decisions, Decisions]:
    """(left-one-repository-out decisions, in-sample decisions)."""
    folds = sorted({item.question.fold for item in assessed})
    cross = Decisions({}, [])
    for fold in folds:
        training = [item for item in assessed if item.question.fold != fold]
        measured = [item for item in assessed if item.question.fold == fold]
        # The held-out repository's pseudo-queries calibrate its threshold: they carry no label.
        refused, thresholds = _decide(variant, training, measured, pseudo)
        cross.refused.update(refused)
        cross.thresholds.extend(thresholds)
    refused, thresholds = _decide(variant, assessed, assessed, pseudo)
    return cross, Decisions(refused, thresholds)


def _rates(decisions: Decisions, items: list[Assessed]) -> tuple[float, float]:
    answerable = [decisions.refused[item.question.id] for item in items if item.question.answerable]
    unanswerable = [decisions.refused[item.question.id] for item in items if not item.question.answerable]
    return (
        sum(answerable) / len(answerable) if answerable else float("nan"),
        sum(unanswerable) / len(unanswerable) if unanswerable else float("nan"),
    )


def _cell(cross: Decisions, inside: Decisions, items: list[Assessed]) -> str:
    (answerable, unanswerable), (answerable_in, unanswerable_in) = _rates(cross, items), _rates(inside, items)
    return f"{unanswerable:.3f}/{answerable:.3f} ({unanswerable_in:.3f}/{answerable_in:.3f})"


def auc(positives: Sequence[float], negatives: Sequence[float]) -> float:
    pairs = [(p > n) + 0.5 * (p == n) for p in positives for n in negatives]
    return sum(pairs) / len(pairs) if pairs else float("nan")


def refused_to_catch(model, assessed: list[Assessed], caught: float) -> float:
    """The share of the answerable questions `model` refuses at the lowest threshold that
    refuses `caught` of the unanswerable ones."""
    answerable = [model.probability(item.features) for item in assessed if item.question.answerable]
    unanswerable = sorted(model.probability(item.features) for item in assessed if not item.question.answerable)
    threshold = unanswerable[math.ceil(caught * len(unanswerable)) - 1]
    return sum(probability <= threshold for probability in answerable) / len(answerable)


def limits_print(assessed: list[Assessed], pseudo: list[PseudoQuery]) -> None:
    """Where today's model, fitted on every repository, stands: what catching more of the
    unanswerable questions costs, and how its probabilities of the corpus's pseudo-queries
    compare with the questions'."""
    from groundtruth.search.abstention_fit import DEFAULT_FEATURES, LabelledEvidence, abstention_model_fit

    model = abstention_model_fit(
        [LabelledEvidence(features=item.features, answerable=item.question.answerable) for item in assessed],
        features=DEFAULT_FEATURES,
    )
    answerable = [model.probability(item.features) for item in assessed if item.question.answerable]
    unanswerable = sorted(model.probability(item.features) for item in assessed if not item.question.answerable)
    print("\ntoday's model fitted on every repository (in-sample):")
    for caught in (0.85, 0.90):
        refused = refused_to_catch(model, assessed, caught)
        print(f"  catching {caught:.2f} of unanswerable questions refuses {refused:.3f} of answerable ones")
    present = [model.probability(item.present) for item in pseudo]
    absent = [model.probability(item.absent) for item in pseudo]
    print(
        f"  median probability: answerable questions {statistics.median(answerable):.3f}, unanswerable"
        f" {statistics.median(unanswerable):.3f}; pseudo-queries with their section {statistics.median(present):.3f},"
        f" without {statistics.median(absent):.3f} (AUC present/absent {auc(present, absent):.3f})"
    )


def refusal_calibration_measure(evaluation: EvaluationSet, *, queries_per_repository: int = 40) -> None:
    from django.conf import settings

    from groundtruth.judge.late_interaction import LateInteractionJudge
    from groundtruth.judge.scoring import ActiveJudge
    from groundtruth.models import RelevanceJudge

    # MiniLM's own token space: nothing trained, so no fit is needed (and no label is read).
    judge = ActiveJudge(row=RelevanceJudge(), model=LateInteractionJudge(passage_tokens=128))
    paraphrased = replace(
        evaluation, questions=[question for question in evaluation.questions if "paraphrase" in question.texts]
    )
    started = time.monotonic()
    pseudo = pseudo_queries_assess(queries_per_repository=queries_per_repository, judge=judge)
    print(
        f"\n{len(pseudo)} pseudo-queries (section titles) searched present and absent, judged, in "
        f"{time.monotonic() - started:.0f} s"
    )
    started = time.monotonic()
    assessed = questions_assess(paraphrased, judge=judge, depth=settings.SEARCH_JUDGE_DEPTH)
    print(
        f"{len(assessed)} paraphrased and unanswerable questions searched and judged in "
        f"{time.monotonic() - started:.0f} s"
    )
    corpus_features_add(assessed, pseudo)

    answerable = [item for item in assessed if item.question.answerable]
    unanswerable = [item for item in assessed if not item.question.answerable]
    print("\nseparation of answerable from unanswerable questions by one feature alone (AUC):")
    for name in (
        "similarity",
        "peak",
        "peak_corpus_quantile",
        "similarity_corpus_shift",
        "judge",
        "judge_corpus_scaled",
        "judge_corpus_quantile",
    ):
        value = auc([item.features[name] for item in answerable], [item.features[name] for item in unanswerable])
        print(f"  {name:<26} {value:.3f}")

    folds = sorted({item.question.fold for item in assessed})
    groups: list[tuple[str, list[Assessed]]] = [
        (name, [item for item in assessed if repository_format(item.question.fold) == name])
        for name in ("rst", "Markdown")
    ]
    groups.append(("pooled", assessed))
    groups.extend((fold, [item for item in assessed if item.question.fold == fold]) for fold in folds)
    measured = [(variant, *variant_measure(variant, assessed, pseudo)) for variant in variants()]
    print(
        "\nsources_missing on unanswerable/answerable questions, left-one-repository-out (in-sample);"
        f" target >= 0.85 / <= {ANSWERABLE_MISSING_TARGET} per format, no repository above {REPOSITORY_REFUSED_LIMIT}"
    )
    for variant, cross, inside in measured:
        over = [fold for fold, items in groups[3:] if _rates(cross, items)[0] > REPOSITORY_REFUSED_LIMIT]
        print(f"\n  {variant.name}: features {', '.join(variant.features)}")
        for name, items in groups[:3]:
            print(f"    {name:<24} {_cell(cross, inside, items)}")
        print(
            f"    thresholds {min(cross.thresholds):.3f}-{max(cross.thresholds):.3f} left-one-out"
            f" (spread {max(cross.thresholds) - min(cross.thresholds):.3f}),"
            f" {min(inside.thresholds):.3f}-{max(inside.thresholds):.3f} in-sample;"
            f" repositories refusing more than {REPOSITORY_REFUSED_LIMIT} of answerable: {', '.join(over) or 'none'}"
        )
    limits_print(assessed, pseudo)
    print("\nper repository, unanswerable/answerable refused, left-one-repository-out (in-sample):")
    for fold, items in groups[3:]:
        cells = "  ".join(_cell(cross, inside, items) for _, cross, inside in measured)
        print(f"  {fold:<24} {cells}")
    print("  columns: " + "; ".join(variant.name for variant, _, _ in measured))
