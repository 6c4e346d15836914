"""Candidate evidence for the re-ranking (issue 23): what a second vector per chunk, or evidence
from the candidates themselves, would add to today's four.

    python benchmarks/retrieval.py --eval-set DIR --no-ferrite --written --written-second-batch --rerank-evidence

The re-ranking (`groundtruth/search/reranking.py`) weighs four pieces of evidence per candidate.
Its `question_title` finds a paraphrased FAQ entry, and on questions about other sections it
lifts FAQ entries whose title only sounds near (docs/benchmarks.md, "Questions written to fit
on"). Measured here, each beside today's four on the same candidates (the shipped search's first
SEARCH_RERANK_DEPTH fused candidates, every paraphrased answerable question):

- `body`: the question's similarity to the passage without its title: the chunk's text with its
  heading and markup lines removed (`pair_mining.judge_passage`, the text the relevance judge
  reads) behind the repository's label, embedded by the configured model. Shipping it would
  store a second vector per chunk and embed every chunk twice at ingest;
- `passage`: the question's similarity to the passage vector alone (today's dense score lifts it
  by a better-matching title: `fusion.dense_score`); free, the index has it;
- `feedback`: the similarity to the question moved towards the mean of the three candidates
  today's relevance ranks first (Rocchio's pseudo-relevance feedback, half their weight);
- `file_best`: today's relevance of the best other candidate of the same file (a document that
  answers often has several candidates); `neighbour`: of the section before or after it.

Each variant's weights are fitted left-one-repository-out (`rerank_fit.rerank_weights_fit`, the
fit that ships today's weights, each repository counting the same): on the development set's
questions alone (as shipped), and on every collection with `--written` (both batches with
`--written-second-batch`). Printed: recall@1 and
MRR@10 per collection and format, cross-validated. The ranking is the fitted relevance over the
candidates only (the benchmark's full rotation also orders the rest in fused order; over the
candidates it gives the same recall@1 and MRR@10: the first rows reproduce it).

Also printed: how well each body similarity tells answerable from unanswerable questions (AUC),
beside the abstention model's strongest features.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from benchmarks.evaluation_sets import TOP, EvaluationSet, Question, is_written, repository_format
from benchmarks.refusal_calibration import auc

TODAY = ("dense", "question_title", "lexical", "coverage")
VARIANTS: tuple[tuple[str, ...], ...] = (
    (),
    ("body",),
    ("passage",),
    ("feedback",),
    ("file_best",),
    ("neighbour",),
    ("body", "passage"),
    ("body", "feedback", "file_best"),
)
FEEDBACK_DEPTH, FEEDBACK_WEIGHT = 3, 0.5


@dataclass
class Collected:
    """One question's re-ranked candidates: their evidence (today's and the candidates') and
    which hold the answer; for an unanswerable question only the body similarities."""

    question: Question
    evidence: list[dict[str, float]]
    answers: list[bool]
    features: dict[str, float]


def _unit(vector):
    import numpy as np

    return vector / max(float(np.linalg.norm(vector)), 1e-12)


def body_vectors() -> dict:
    """Every chunk's body (its text without heading and markup lines, behind the repository's
    label) embedded by the configured model: chunk id -> unit vector."""
    import numpy as np

    from groundtruth.embeddings import embedding_backend
    from groundtruth.ingest.index_text import repository_label
    from groundtruth.judge.pair_mining import judge_passage
    from groundtruth.models import Chunk

    rows = list(Chunk.objects.order_by("pk").values_list("pk", "path", "text", "repository__name"))
    texts = [
        f"{repository_label(name)}:\n{judge_passage(path=path, text=text) or text}" for _, path, text, name in rows
    ]
    started = time.monotonic()
    backend = embedding_backend()
    vectors = [vector for start in range(0, len(texts), 256) for vector in backend.embed(texts[start : start + 256])]
    print(f"{len(texts)} chunk bodies embedded in {time.monotonic() - started:.0f} s")
    return {pk: _unit(np.asarray(vector, dtype=np.float32)) for (pk, *_), vector in zip(rows, vectors, strict=True)}


def questions_collect(evaluation: EvaluationSet, bodies: dict, shipped: dict[str, float]) -> list[Collected]:
    """Every paraphrased question through the shipped search, its candidates' evidence extended."""
    import numpy as np

    from benchmarks.retrieval import Location, overlaps
    from groundtruth.embeddings import embedding_backend
    from groundtruth.models import Chunk
    from groundtruth.search.abstention import evidence_features
    from groundtruth.search.fusion import fusion_parameters_configured
    from groundtruth.search.hybrid_search import chunk_search, search_scope_resolve

    fusion = fusion_parameters_configured()
    repositories = search_scope_resolve(names=None)
    backend = embedding_backend()
    collected = []
    for question in evaluation.questions:
        text = question.texts.get("paraphrase")
        if text is None:
            continue
        outcome = chunk_search(query=text, repositories=repositories, limit=10, fusion=fusion)
        features, _ = evidence_features(outcome, question=text)
        ids = list(outcome.rerank_evidence)
        if not ids:
            continue
        rows = Chunk.objects.filter(pk__in=ids).values_list(
            "pk", "path", "start_line", "end_line", "ordinal", "embedding"
        )
        chunks = {
            pk: (path, start, end, ordinal, _unit(np.asarray(vector, dtype=np.float32)))
            for pk, path, start, end, ordinal, vector in rows
        }
        asked = _unit(np.asarray(backend.embed([" ".join(text.split())])[0], dtype=np.float32))
        evidence = [outcome.rerank_evidence[pk].as_dict() for pk in ids]
        today = np.array([sum(weight * row[name] for name, weight in shipped.items()) for row in evidence])
        passages = np.stack([chunks[pk][4] for pk in ids])
        first = np.argsort(-today, kind="stable")
        moved = _unit(asked + FEEDBACK_WEIGHT * passages[first[:FEEDBACK_DEPTH]].mean(axis=0))
        for index, (pk, row) in enumerate(zip(ids, evidence, strict=True)):
            path, _, _, ordinal, vector = chunks[pk]
            same_file = [other for other in range(len(ids)) if other != index and chunks[ids[other]][0] == path]
            row["body"] = float(bodies[pk] @ asked)
            row["passage"] = float(vector @ asked)
            row["feedback"] = float(vector @ moved)
            row["file_best"] = max((float(today[other]) for other in same_file), default=0.0)
            row["neighbour"] = max(
                (float(today[other]) for other in same_file if abs(chunks[ids[other]][3] - ordinal) == 1), default=0.0
            )
        features["body_first"] = evidence[int(first[0])]["body"]
        features["body_best"] = max(row["body"] for row in evidence)
        answers = [
            bool(question.answerable) and overlaps(question, Location(chunks[pk][0], chunks[pk][1], chunks[pk][2]))
            for pk in ids
        ]
        collected.append(Collected(question=question, evidence=evidence, answers=answers, features=features))
    return collected


def _rank(item: Collected, weights: dict[str, float]) -> int | None:
    scores = [sum(weight * row[name] for name, weight in weights.items()) for row in item.evidence]
    order = sorted(range(len(scores)), key=lambda index: -scores[index])  # stable: fused order on ties
    return next((place for place, index in enumerate(order, start=1) if item.answers[index]), None)


def rotated_ranks(items: list[Collected], features: tuple[str, ...], trains_on: Callable[[Collected], bool]):
    """Each held-out repository's ranks under weights fitted on the other repositories' questions
    that `trains_on` admits; and the mean fitted weights."""
    from groundtruth.search.rerank_fit import RankedCandidates, rerank_weights_fit

    answerable = [item for item in items if item.question.answerable]
    folds = sorted({item.question.fold for item in answerable})
    ranks: dict[str, int | None] = {}
    fitted = []
    for fold in folds:
        training = [item for item in answerable if item.question.fold != fold and trains_on(item)]
        questions_of = Counter(item.question.fold for item in training)
        samples = [
            RankedCandidates(
                evidence=item.evidence, answers=item.answers, weight=1.0 / questions_of[item.question.fold]
            )
            for item in training
        ]
        weights = rerank_weights_fit(samples, features=features)
        fitted.append(weights)
        ranks.update({item.question.id: _rank(item, weights) for item in answerable if item.question.fold == fold})
    mean = {name: statistics.mean(weights[name] for weights in fitted) for name in features}
    return ranks, mean


def _cell(items: list[Collected], ranks: dict[str, int | None]) -> str:
    """R@1/MRR@10 as the full rotation counts them (`retrieval.RankMetrics`: a rank beyond TOP is a miss)."""
    from benchmarks.retrieval import RankMetrics

    if not items:
        return f"{'-':>11}"
    placed = [ranks[item.question.id] for item in items]
    metrics = RankMetrics.of([place if place is not None and place <= TOP else None for place in placed])
    return f"{metrics.recall_1:.3f}/{metrics.mrr_10:.3f}"


def rerank_evidence_measure(evaluation: EvaluationSet) -> None:
    from groundtruth.search.fusion import fusion_parameters_configured

    shipped = dict(fusion_parameters_configured().rerank_weights)
    bodies = body_vectors()
    started = time.monotonic()
    items = questions_collect(evaluation, bodies, shipped)
    print(f"{len(items)} questions searched in {time.monotonic() - started:.0f} s")
    collections = list(dict.fromkeys(item.question.collection for item in items))
    groups = [
        (f"{collection} {kind or 'pooled'}", collection, kind)
        for collection in collections
        for kind in ("rst", "Markdown", None)
    ]

    def members(collection: str, kind: str | None) -> list[Collected]:
        return [
            item
            for item in items
            if item.question.answerable
            and item.question.collection == collection
            and (kind is None or repository_format(item.question.fold) == kind)
        ]

    print("\nparaphrased R@1/MRR@10 over the re-ranked candidates, left-one-repository-out")
    print(f"  {'fitted on / evidence':<56} " + " ".join(f"{label:>17}" for label, _, _ in groups))
    fits: list[tuple[str, Callable[[Collected], bool]]] = [
        ("the development set", lambda item: not is_written(item.question.collection))
    ]
    if any(is_written(collection) for collection in collections):
        fits.append(("every collection", lambda item: True))
    for fitted_on, trains_on in fits:
        for extra in VARIANTS:
            features = TODAY + extra
            ranks, weights = rotated_ranks(items, features, trains_on)
            label = f"{fitted_on}: {'today + ' + ' + '.join(extra) if extra else 'today'}"
            row = " ".join(f"{_cell(members(collection, kind), ranks):>17}" for _, collection, kind in groups)
            print(f"  {label:<56} {row}")
            print(f"  {'':<56}   weights {', '.join(f'{name}={value:.3f}' for name, value in weights.items())}")

    print("\nAUC, answerable against unanswerable (paraphrased):")
    for feature in ("body_first", "body_best", "heading_similarity", "peak", "coverage"):
        cells: list[str] = []
        for collection in collections:
            chosen = [item for item in items if item.question.collection == collection]
            positives = [item.features[feature] for item in chosen if item.question.answerable]
            negatives = [item.features[feature] for item in chosen if not item.question.answerable]
            cells.append(f"{collection} {auc(positives, negatives):.3f}")
        print(f"  {feature:<20} " + "   ".join(cells))
