"""Retrieval quality of /search and /ask on real documentation, cross-validated by repository.

    python benchmarks/retrieval.py --eval-set DIR            # a development set, the ferrite corpus beside it
    python benchmarks/retrieval.py --ferrite                 # the project's own corpus alone (questions.yml)
    python benchmarks/retrieval.py --eval-set DIR --misses   # also list what the shipped configuration missed
    python benchmarks/retrieval.py --eval-set DIR --no-ferrite --ingest-only  # index it, then `manage.py judge_fit`
    python benchmarks/retrieval.py --eval-set DIR --no-ferrite --judge  # today's build beside the fitted judge
    python benchmarks/retrieval.py --eval-set DIR --only A/B,C/D ...    # a subset of the set's repositories
    python benchmarks/retrieval.py --eval-set DIR --no-ferrite --refusal-calibration  # per-corpus refusal calibrations
    python benchmarks/retrieval.py --eval-set DIR --no-ferrite --refusal-evidence  # candidate refusal evidence
    python benchmarks/retrieval.py --eval-set DIR --no-ferrite --written --rerank-evidence  # candidate ranking evidence

`--judge` asks every question once and reports, per format (rst, Markdown), pooled and per
repository, today's build (shipped configuration) beside the relevance judge (`groundtruth/judge/`)
on the same search: paraphrased recall@1/@5/MRR@10 with the judge ordering the first
SEARCH_JUDGE_DEPTH results (alone, and mixed with today's relevance), FAQ-wording recall@1, /ask
first-citation hits and citations per answer, and `sources_missing` on unanswerable and
answerable questions (today's model; the judge's calibrated thresholds; either). The judge is
fitted on the corpus without its questions, so its figures need no rotation by repository.

The development set (`--eval-set DIR`, required except with --ferrite) is not part of this
repository: it is distributed with the project's shared contract (`shared/eval-dev`, beside the
checkouts of the development machines; its README.md describes the format and its check.py
verifies the files). It holds the
documentation of real open-source projects (`corpus/<owner>__<name>/`, byte for byte at a pinned
commit), FAQ questions whose maintainers wrote the answer (`questions.jsonl`: the answer's path
and lines, the FAQ's own wording and a paraphrase as a user would type it) and questions the
documentation cannot answer. Each corpus folder is committed into a git repository of its own
under var/bench/retrieval, all of them are listed in a registry repository (`sources.yml`,
include `**/*.rst` and `**/*.md`), and the real ingest pipeline indexes them into a database of
its own (gt_bench_retrieval; nothing else is touched; an unchanged corpus is not re-embedded).
Every question then goes through the service functions that /search and /ask call.

A hit is a retrieved chunk (or, for /ask, a cited snippet) in the answer's file whose lines
overlap the answer's lines. Printed, per wording (FAQ wording, paraphrase):
- recall@1/5/10 and MRR@10 of the lexical leg, the dense leg (passage vector alone, and passage
  and title vectors mixed), their fusion before re-ranking (its first SEARCH_RERANK_DEPTH) and
  the service's ranking (hybrid: fused and re-ranked);
- /ask: `sources_missing` on answerable and on unanswerable questions, how often the first
  citation holds the answer, how often any citation does, and citations per answer.

Tuned parameters are reported cross-validated by repository, beside the shipped (in-sample)
figures: for each repository, the re-ranking weights are fitted on the other repositories'
paraphrased questions (`groundtruth/search/rerank_fit.py`, on the candidates the shipped run
re-ranked, each repository counting the same), every question is asked again with them, the
sources-missing model is fitted on the other repositories' paraphrased and unanswerable
questions (threshold: at most 5% of their answerable questions declared missing), and the
held-out repository's questions are measured.
(The reciprocal-rank-fusion parameters that pick the candidates stay as configured.)
An unanswerable question is held out with the repository it asks about (its `absent_scope`, or
the project it names), else spread evenly.

`--written` adds the questions written to fit on (benchmarks/written_questions, 648 about the
development set's repositories, by authors who never saw its questions) as their own collection:
each is held out with its repository, so the sources-missing fit of a fold uses the other
repositories' questions of both collections (the re-ranking fit too with `--written-reranking`),
and both collections' figures are printed apart. `--written-second-batch` adds the second batch
(648 more, `written_questions/second-batch`, written after the shipped fits) as a third
collection: it joins the fits of the rotation like the first, and its in-sample figures are the
shipped fits' on questions they never saw. `--written-third-batch` adds the third batch (648 more,
`written_questions/third-batch`, more of them unanswerable) the same way.

The project's own corpus (benchmarks/corpus/ferrite with benchmarks/questions.yml: reference
documentation of a webhook service, written for the benchmarks) is indexed beside the set as one
more repository (`--no-ferrite` leaves it out): one more documentation style to tune for and to
hold out. Its figures are printed apart.

Also printed: the re-ranking weights and the model fitted on all repositories, as the fit files
that ship them (groundtruth/search/fitted/*.json, the format `manage.py abstention_fit` writes).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.benchmark_database import ROOT, benchmark_database_use
from benchmarks.benchmark_git import git
from benchmarks.evaluation_sets import (
    ANSWERABLE_MISSING_TARGET,
    TOP,
    WORDINGS,
    EvaluationSet,
    Question,
    eval_dev_load,
    ferrite_load,
    is_written,
    repository_format,
    written_load,
)


# --- git repositories and ingest -----------------------------------------------------------------
def _commit_tree(directory: Path, files: dict[str, bytes]) -> None:
    """Makes `directory` a git repository whose main branch holds exactly `files`."""
    if not (directory / ".git").exists():
        directory.mkdir(parents=True, exist_ok=True)
        git(directory, "init", "-q", "-b", "main")
    for existing in directory.iterdir():
        if existing.name != ".git":
            shutil.rmtree(existing) if existing.is_dir() else existing.unlink()
    for relative, content in files.items():
        target = directory / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    git(directory, "add", "-A")
    if git(directory, "status", "--porcelain"):
        git(directory, "commit", "-q", "-m", "benchmark corpus")


def repositories_prepare(evaluation: EvaluationSet, workdir: Path) -> Path:
    """One git repository per corpus folder and a registry listing them; returns the registry."""
    entries = []
    for repository in evaluation.repositories:
        files = {
            str(path.relative_to(repository.directory)): path.read_bytes()
            for path in repository.directory.rglob("*")
            if path.is_file()
        }
        target = workdir / repository.name.replace("/", "__")
        _commit_tree(target, files)
        entries.append(
            {"name": repository.name, "url": str(target), "trust": "canonical", "include": list(repository.include)}
        )
    registry = workdir / "registry"
    sources = {"defaults": {"ref": "main", "trust": "reviewed"}, "repos": entries}
    _commit_tree(registry, {"sources.yml": yaml.safe_dump(sources, sort_keys=False).encode()})
    return registry


def corpus_ingest() -> None:
    from groundtruth.ingest.foreground import ingest_foreground
    from groundtruth.models import IngestStatus, IngestTrigger

    started = time.monotonic()
    runs = ingest_foreground(repository_name=None, ref=None, trigger=IngestTrigger.COMMAND)
    for run in runs:
        if run.status in (IngestStatus.QUEUED, IngestStatus.RUNNING):
            # An earlier benchmark stopped mid-ingest left its run claimed.
            raise SystemExit(
                f"ingest of {run.repository.name}: run {run.pk} is still {run.status}, left by a stopped run of"
                " this script; drop the benchmark's database and start again"
            )
        if run.status != IngestStatus.SUCCEEDED:
            raise SystemExit(f"ingest of {run.repository.name} failed: {run.error}")
        print(
            f"  {run.repository.name} at {run.commit[:12]}: {run.chunks_added} chunks added, "
            f"{run.chunks_unchanged} unchanged, {run.chunks_removed} removed, {run.chunks_embedded} embedded"
        )
    print(f"  ingest took {time.monotonic() - started:.1f} s")


# --- measuring ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Location:
    path: str
    start: int
    end: int


def overlaps(question: Question, location: Location) -> bool:
    """Whether `location` overlaps the lines that answer `question`."""
    assert question.lines is not None
    return location.path == question.path and location.start <= question.lines[1] and location.end >= question.lines[0]


def hit_rank(question: Question, located: Iterable[Location], *, depth: int = TOP) -> int | None:
    for rank, location in enumerate(located, start=1):
        if rank > depth:
            return None
        if overlaps(question, location):
            return rank
    return None


@dataclass(frozen=True)
class Candidates:
    """The candidates the service re-ranked for one question, in fused order: enough to fit the
    re-ranking weights."""

    evidence: list[dict[str, float]]  # reranking.RerankEvidence.as_dict()
    locations: list[Location]


@dataclass
class Answered:
    """One question in one wording, asked through the service with one set of parameters."""

    question: Question
    wording: str
    ranks: dict[str, int | None]  # method -> rank of the first hit within TOP
    candidates: Candidates
    features: dict[str, float]
    sources_missing: bool
    citations: list[Location]
    # The question's vector, its first result's passage vector and its encoder (the prior over
    # questions is fitted on them).
    question_vector: tuple[float, ...] = field(default=(), repr=False)
    passage_vector: tuple[float, ...] = field(default=(), repr=False)
    encoder: str = ""


@dataclass
class Run:
    """Every question asked once with one configuration."""

    answers: list[Answered] = field(default_factory=list)

    def select(
        self, *, wording: str, answerable: bool = True, folds: set[str] | None = None, collection: str | None = None
    ) -> list[Answered]:
        return [
            answer
            for answer in self.answers
            if answer.wording == wording
            and answer.question.answerable is answerable
            and (folds is None or answer.question.fold in folds)
            and (collection is None or answer.question.collection == collection)
        ]


def _locations(chunk_ids: list[int], chunks: dict) -> list[Location]:
    return [Location(chunks[i].path, chunks[i].start_line, chunks[i].end_line) for i in chunk_ids if i in chunks]


def questions_ask(
    evaluation: EvaluationSet,
    *,
    fusion,
    abstention_model=None,
    abstention_threshold=None,
    folds: set[str] | None = None,
) -> Run:
    """Every question (of `folds`) through the service: search legs, fused ranking, /ask."""
    from groundtruth.models import Chunk
    from groundtruth.search.abstention import evidence_features, first_passage_vector
    from groundtruth.search.ask import question_answer
    from groundtruth.search.fusion import dense_ranking
    from groundtruth.search.hybrid_search import chunk_search, search_scope_resolve

    repositories = search_scope_resolve(names=None)
    run = Run()
    for question in evaluation.questions:
        if folds is not None and question.fold not in folds:
            continue
        for wording, text in question.texts.items():
            outcome = chunk_search(query=text, repositories=repositories, limit=TOP, fusion=fusion)
            features, _ = evidence_features(outcome, question=text)
            # The search loads full rows of its results only; the ranks read every candidate's lines.
            chunks = Chunk.objects.only("path", "start_line", "end_line").in_bulk(list(outcome.candidates))
            answer = question_answer(
                question=text,
                repository_names=None,
                fusion=fusion,
                abstention_model=abstention_model,
                abstention_threshold=abstention_threshold,
            )
            citations = [Location(c["path"], c["line"], c["end_line"]) for c in answer.citations]
            ranks: dict[str, int | None] = {}
            if question.answerable:
                methods = {
                    "lexical": [hit.chunk_id for hit in outcome.lexical_hits],
                    "dense, passage vector": [
                        hit.chunk_id for hit in dense_ranking(outcome.dense_hits, heading_weight=0.0)
                    ],
                    "dense": [hit.chunk_id for hit in outcome.dense_hits],
                    "fused, before re-ranking": list(outcome.rerank_evidence),
                    "hybrid": [hit.chunk.pk for hit in outcome.hits],
                }
                ranks = {method: hit_rank(question, _locations(ids, chunks)) for method, ids in methods.items()}
            run.answers.append(
                Answered(
                    question=question,
                    wording=wording,
                    ranks=ranks,
                    candidates=Candidates(
                        evidence=[evidence.as_dict() for evidence in outcome.rerank_evidence.values()],
                        locations=_locations(list(outcome.rerank_evidence), chunks),
                    ),
                    features=features,
                    sources_missing=answer.sources_missing,
                    citations=citations,
                    question_vector=tuple(outcome.embedding.vector) if outcome.embedding else (),
                    passage_vector=first_passage_vector(outcome),
                    encoder=outcome.embedding.model_name if outcome.embedding else "",
                )
            )
    return run


# --- metrics -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class RankMetrics:
    recall_1: float
    recall_5: float
    recall_10: float
    mrr_10: float

    @classmethod
    def of(cls, ranks: list[int | None]) -> RankMetrics:
        count = len(ranks) or 1

        def recall(k: int) -> float:
            return sum(1 for rank in ranks if rank is not None and rank <= k) / count

        mrr = sum(1 / rank for rank in ranks if rank is not None) / count
        return cls(recall(1), recall(5), recall(10), mrr)

    def row(self) -> str:
        return f"{self.recall_1:>6.3f} {self.recall_5:>6.3f} {self.recall_10:>6.3f} {self.mrr_10:>7.3f}"


@dataclass(frozen=True)
class AskMetrics:
    missing_answerable: float
    missing_unanswerable: float | None
    first_citation_hits: float
    any_citation_hits: float
    citations_per_answer: float

    @classmethod
    def of(cls, answerable: list[Answered], unanswerable: list[Answered]) -> AskMetrics:
        answered = [answer for answer in answerable if not answer.sources_missing]
        count = len(answerable) or 1
        return cls(
            missing_answerable=sum(answer.sources_missing for answer in answerable) / count,
            missing_unanswerable=(
                sum(answer.sources_missing for answer in unanswerable) / len(unanswerable) if unanswerable else None
            ),
            first_citation_hits=sum(
                bool(answer.citations) and overlaps(answer.question, answer.citations[0]) for answer in answerable
            )
            / count,
            any_citation_hits=sum(
                any(overlaps(answer.question, citation) for citation in answer.citations) for answer in answerable
            )
            / count,
            citations_per_answer=statistics.mean(len(answer.citations) for answer in answered) if answered else 0.0,
        )


# --- tuning --------------------------------------------------------------------------------------
def rerank_fit(run: Run, folds: set[str], base, *, written: bool = False):
    """The fusion parameters `base` with re-ranking weights fitted on the paraphrased questions
    of `folds` (their candidates as the run re-ranked them); the written questions among them only
    with `written`."""
    from groundtruth.search.rerank_fit import RankedCandidates, rerank_weights_fit

    answers = [
        answer
        for answer in run.select(wording="paraphrase", folds=folds)
        if written or not is_written(answer.question.collection)
    ]
    # Each repository counts the same, however many questions it has (`RankedCandidates.weight`).
    questions_of = Counter(answer.question.fold for answer in answers)
    samples = [
        RankedCandidates(
            evidence=answer.candidates.evidence,
            answers=[overlaps(answer.question, location) for location in answer.candidates.locations],
            weight=1.0 / questions_of[answer.question.fold],
        )
        for answer in answers
    ]
    return replace(base, rerank_weights=rerank_weights_fit(samples))


def abstention_samples(run: Run, folds: set[str]) -> list:
    from groundtruth.search.abstention_fit import LabelledEvidence

    answers = run.select(wording="paraphrase", folds=folds) + run.select(
        wording="paraphrase", answerable=False, folds=folds
    )
    return [
        LabelledEvidence(
            features=answer.features,
            answerable=answer.question.answerable,
            question_vector=answer.question_vector,
            passage_vector=answer.passage_vector,
            group=answer.question.fold,
        )
        for answer in answers
    ]


def abstention_fit(run: Run, folds: set[str]):
    """The sources-missing fit (`abstention_fit.SourcesMissingFit`) as `manage.py abstention_fit`
    fits it, on the paraphrased and unanswerable questions of `folds`: with the prior over
    questions, each question's prior from a prior fitted without its repository (nested inside
    the rotation's fold)."""
    from groundtruth.search.abstention_fit import sources_missing_fit

    encoders = {answer.encoder for answer in run.answers}
    return sources_missing_fit(
        abstention_samples(run, folds),
        question_prior_encoder=encoders.pop() if len(encoders) == 1 and "" not in encoders else None,
        answerable_missing=ANSWERABLE_MISSING_TARGET,
    )


# --- report --------------------------------------------------------------------------------------
def _weights_text(weights) -> str:
    return ",".join(f"{name}={weight:g}" for name, weight in weights.items())


def rank_table(title: str, rows: list[tuple[str, RankMetrics]]) -> None:
    print(f"\n{title}")
    print(f"  {'':<44} {'R@1':>6} {'R@5':>6} {'R@10':>6} {'MRR@10':>7}")
    for label, metrics in rows:
        print(f"  {label:<44} {metrics.row()}")


def ask_table(title: str, rows: list[tuple[str, AskMetrics]]) -> None:
    print(f"\n{title}")
    print(
        f"  {'':<44} {'missing on answerable':>22} {'on unanswerable':>16} {'1st citation hits':>18} "
        f"{'any citation hits':>18} {'citations/answer':>17}"
    )
    for label, metrics in rows:
        unanswerable = "" if metrics.missing_unanswerable is None else f"{metrics.missing_unanswerable:.3f}"
        print(
            f"  {label:<44} {metrics.missing_answerable:>22.3f} {unanswerable:>16} "
            f"{metrics.first_citation_hits:>18.3f} {metrics.any_citation_hits:>18.3f} "
            f"{metrics.citations_per_answer:>17.2f}"
        )


def features_write(run: Run, path: Path) -> None:
    """One JSON line per answer: the question, its collection, fold and label, and its evidence
    features (benchmarks/refusal_model_forms.py reads them)."""
    with path.open("w") as out:
        for answer in run.answers:
            record = {
                "id": answer.question.id,
                "collection": answer.question.collection,
                "fold": answer.question.fold,
                "wording": answer.wording,
                "answerable": answer.question.answerable,
                "ranks": answer.ranks,
                "citation_hits": [
                    answer.question.answerable and overlaps(answer.question, location) for location in answer.citations
                ],
                "sources_missing": answer.sources_missing,
                "features": answer.features,
            }
            out.write(json.dumps(record) + "\n")
    print(f"evidence features of {len(run.answers)} answers written to {path}")


def evaluate(
    evaluation: EvaluationSet,
    *,
    misses: bool,
    cross_validate: bool,
    features_out: Path | None,
    written_reranking: bool = False,
) -> None:
    from groundtruth.search.fusion import fusion_parameters_configured

    configured = fusion_parameters_configured()
    started = time.monotonic()
    shipped = questions_ask(evaluation, fusion=configured)
    print(f"\nevery question asked in {time.monotonic() - started:.0f} s")
    if features_out is not None:
        features_write(shipped, features_out)
    from groundtruth.search.fitted_parameters import rerank_fit_path

    rerank_file = rerank_fit_path()
    print(
        f"shipped configuration: SEARCH_HEADING_WEIGHT={configured.heading_weight:g} "
        f"SEARCH_LEXICAL_WEIGHT={configured.lexical_weight:g} SEARCH_DENSE_WEIGHT={configured.dense_weight:g} "
        f"SEARCH_RRF_K={configured.rank_constant:g} SEARCH_RERANK_DEPTH={configured.rerank_depth} "
        f"re-ranking ({rerank_file.relative_to(ROOT) if rerank_file.is_relative_to(ROOT) else rerank_file}) "
        f"{_weights_text(configured.rerank_weights)}"
    )

    cross: Run | None = None
    if cross_validate and len(evaluation.folds) > 1:
        cross = Run()
        chosen = []
        for fold in evaluation.folds:
            training = set(evaluation.folds) - {fold}
            fusion = rerank_fit(shipped, training, configured, written=written_reranking)
            fold_run = questions_ask(evaluation, fusion=fusion)
            fitted = abstention_fit(fold_run, training)
            threshold = fitted.threshold
            held_out = questions_ask(
                evaluation,
                fusion=fusion,
                abstention_model=fitted.model,
                abstention_threshold=threshold,
                folds={fold},
            )
            cross.answers.extend(held_out.answers)
            chosen.append((fold, fusion, threshold))
        print("\nper held-out repository, the parameters chosen on the others:")
        for fold, fusion, threshold in chosen:
            print(
                f"  {fold:<22} re-ranking {_weights_text(fusion.rerank_weights)}; abstention threshold {threshold:.3f}"
            )

    for collection in evaluation.collections:
        questions = [question for question in evaluation.questions if question.collection == collection]
        answerable = [question for question in questions if question.answerable]
        wordings = [wording for wording in WORDINGS if any(wording in question.texts for question in answerable)]
        repositories = sorted({question.fold for question in answerable})
        print(
            f"\n=== {collection}: {len(answerable)} answerable questions ({', '.join(wordings)}), "
            f"{len(questions) - len(answerable)} unanswerable, {len(repositories)} repositories"
        )
        for wording in wordings:
            selected = shipped.select(wording=wording, collection=collection)
            rank_rows = [
                (f"{method} (shipped)", RankMetrics.of([answer.ranks[method] for answer in selected]))
                for method in ("lexical", "dense, passage vector", "dense", "fused, before re-ranking", "hybrid")
            ]
            if cross is not None:
                held_out_answers = cross.select(wording=wording, collection=collection)
                rank_rows.append(
                    ("hybrid, cross-validated", RankMetrics.of([answer.ranks["hybrid"] for answer in held_out_answers]))
                )
            rank_table(f"/search, {WORDINGS[wording]} questions (a hit: the answer's file and lines):", rank_rows)
        for wording in wordings:
            rows = [
                (
                    "shipped (in-sample)",
                    AskMetrics.of(
                        shipped.select(wording=wording, collection=collection),
                        shipped.select(wording=wording, answerable=False, collection=collection),
                    ),
                )
            ]
            if cross is not None:
                rows.append(
                    (
                        "cross-validated by repository",
                        AskMetrics.of(
                            cross.select(wording=wording, collection=collection),
                            cross.select(wording=wording, answerable=False, collection=collection),
                        ),
                    )
                )
            ask_table(f"/ask, {WORDINGS[wording]} questions (unanswerable questions have one wording):", rows)

    if cross is not None:
        breakdown_print(evaluation, shipped, cross)

    if len(evaluation.folds) > 1:
        fusion = rerank_fit(shipped, set(evaluation.folds), configured, written=written_reranking)
        final = questions_ask(evaluation, fusion=fusion)
        fitted = abstention_fit(final, set(evaluation.folds))
        model, threshold = fitted.model, fitted.threshold
        from groundtruth.search.fitted_parameters import (
            fit_provenance,
            rerank_fit_document,
            sources_missing_fit_document,
        )

        provenance = fit_provenance(
            command=" ".join([".venv/bin/python", *sys.argv]),
            data=f"{len(evaluation.questions)} questions over {len(evaluation.folds)} repositories: "
            + ", ".join(sorted(evaluation.folds)),
        )
        print("\nfitted on every repository (the fit files that ship these figures, groundtruth/search/fitted/):")
        print("reranking.json:")
        print(rerank_fit_document(weights=fusion.rerank_weights, provenance=provenance), end="")
        print("abstention.json:")
        print(sources_missing_fit_document(fitted, provenance=provenance), end="")
        fit_rates_print(evaluation, final, model, threshold)

    if misses:
        misses_print(shipped)


def fit_rates_print(evaluation: EvaluationSet, run: Run, model, threshold: float) -> None:
    """The sources-missing rates of the fit above on the questions it was fitted on (in-sample; the
    questions' prior is the shipped one, fitted on them too), per collection and format, from the
    run's evidence: the figures the next run's in-sample column will show."""
    from groundtruth.search.abstention_model import PRIOR_FEATURE

    def refused(answer: Answered) -> bool:
        prior = model.question_prior
        features = {
            **answer.features,
            PRIOR_FEATURE: (
                prior.probability(answer.question_vector, encoder=answer.encoder, passage=answer.passage_vector)
                if prior
                else 1.0
            ),
        }
        return model.probability(features) < threshold

    print("the fit above, in-sample: sources missing on unanswerable / on answerable paraphrased questions")
    for collection in evaluation.collections:
        folds = sorted({question.fold for question in evaluation.questions if question.collection == collection})
        cells = []
        for name in ("rst", "Markdown", "pooled"):
            chosen = {fold for fold in folds if name == "pooled" or repository_format(fold) == name}
            answerable = run.select(wording="paraphrase", folds=chosen, collection=collection)
            unanswerable = run.select(wording="paraphrase", answerable=False, folds=chosen, collection=collection)
            if answerable:
                caught = _share([refused(answer) for answer in unanswerable]) if unanswerable else 0.0
                cells.append(f"{name} {caught:.3f} / {_share([refused(answer) for answer in answerable]):.3f}")
        print(f"  {collection}: {', '.join(cells)}")


def _breakdown_row(label: str, shipped: Run, cross: Run, folds: set[str], collection: str) -> str:
    """One line of figures for `folds`' questions of `collection`: cross-validated, in-sample in
    brackets."""

    def figures(run: Run) -> tuple[RankMetrics, str, AskMetrics]:
        paraphrased = run.select(wording="paraphrase", folds=folds, collection=collection)
        verbatim = run.select(wording="verbatim", folds=folds, collection=collection)
        verbatim_recall = f"{RankMetrics.of([answer.ranks['hybrid'] for answer in verbatim]).recall_1:.3f}"
        ranks = RankMetrics.of([answer.ranks["hybrid"] for answer in paraphrased])
        asked = AskMetrics.of(
            paraphrased, run.select(wording="paraphrase", answerable=False, folds=folds, collection=collection)
        )
        return ranks, verbatim_recall if verbatim else "  -  ", asked

    (ranks, verbatim, asked), (ranks_in, verbatim_in, asked_in) = figures(cross), figures(shipped)
    unanswerable = "   -  " if asked.missing_unanswerable is None else f"{asked.missing_unanswerable:.3f}"
    unanswerable_in = "  -  " if asked_in.missing_unanswerable is None else f"{asked_in.missing_unanswerable:.3f}"
    return (
        f"  {label:<22} {ranks.recall_1:.3f} ({ranks_in.recall_1:.3f})  {ranks.recall_5:.3f} ({ranks_in.recall_5:.3f})"
        f"  {ranks.mrr_10:.3f} ({ranks_in.mrr_10:.3f})  {verbatim} ({verbatim_in})"
        f"  {asked.first_citation_hits:.3f} ({asked_in.first_citation_hits:.3f})"
        f"  {asked.missing_answerable:.3f} ({asked_in.missing_answerable:.3f})"
        f"  {unanswerable} ({unanswerable_in})"
    )


def breakdown_print(evaluation: EvaluationSet, shipped: Run, cross: Run) -> None:
    """The service's figures per format (rst, Markdown), pooled and per repository: paraphrased
    hybrid R@1, R@5 and MRR@10, FAQ-wording R@1, /ask first-citation hits and sources_missing on
    answerable and unanswerable questions, cross-validated by repository, in-sample in brackets."""
    for collection in evaluation.collections:
        print(
            f"\n{collection}: per format and per repository, cross-validated (in-sample):\n"
            "  folds                  para R@1         R@5              MRR@10           FAQ R@1          "
            "1st citation     missing answ.    missing unansw."
        )
        folds = sorted({question.fold for question in evaluation.questions if question.collection == collection})
        for name in ("rst", "Markdown"):
            of_format = {fold for fold in folds if repository_format(fold) == name}
            if of_format:
                print(_breakdown_row(f"{name} ({len(of_format)})", shipped, cross, of_format, collection))
        print(_breakdown_row("pooled", shipped, cross, set(folds), collection))
        for fold in folds:
            print(_breakdown_row(fold, shipped, cross, {fold}, collection))


def misses_print(run: Run) -> None:
    for answer in run.answers:
        question = answer.question
        text = question.texts[answer.wording]
        if question.answerable:
            assert question.lines is not None  # every answerable question has its answer's lines
            rank = answer.ranks["hybrid"]
            first = answer.citations[0] if answer.citations else None
            if rank != 1 or answer.sources_missing or first is None or not overlaps(question, first):
                cited = f"{first.path}:{first.start}-{first.end}" if first else "none"
                print(
                    f"  [{question.id} {answer.wording}] hybrid rank {rank}, missing={answer.sources_missing}, "
                    f"first citation {cited} (answer {question.path}:{question.lines[0]}-{question.lines[1]}): {text}"
                )
        elif not answer.sources_missing:
            print(f"  [{question.id}] answered although unanswerable: {text}")


# --- the relevance judge beside today's build ---------------------------------------------------
JUDGE_MIX_WEIGHTS = (0.0, 1.0, 5.0)  # judge score (MaxSim, 0-1) + weight * today's relevance, side by side


@dataclass
class JudgedAnswer:
    """One question in one wording: today's build and the judge on the same search."""

    question: Question
    wording: str
    base_rank: int | None
    judge_ranks: dict[float, int | None]  # mix weight -> rank
    base_missing: bool
    judge_missing: bool
    judge_best: float
    judge_threshold: float
    base_citations: list[Location]
    judge_citations: list[Location]


def _cited(outcome, hits) -> list[Location]:
    """The citations /ask returns for `hits` (its selection and narrowing)."""
    from django.conf import settings

    from groundtruth.search.ask import citations_select
    from groundtruth.search.snippets import snippets_narrow

    cited = citations_select(
        replace(outcome, hits=hits), count=settings.ASK_CITATION_COUNT, margin=settings.ASK_CITATION_MARGIN
    )
    chunks = [hit.chunk for hit in cited]
    snippets = snippets_narrow(chunks=chunks, query=outcome.lexical_query, max_lines=settings.ASK_SNIPPET_MAX_LINES)
    return [Location(chunk.path, s.start_line, s.end_line) for chunk, s in zip(chunks, snippets, strict=True)]


def judge_compare(evaluation: EvaluationSet, judge, *, depth: int) -> list[JudgedAnswer]:
    """Every question searched once (no judge); today's ranking, refusal and citations from it,
    and the judge's: its scores of the first `depth` results reorder them, its best score
    against its calibrated threshold decides the refusal."""
    from groundtruth.judge.scoring import passages_judge
    from groundtruth.search.abstention import abstention_assess
    from groundtruth.search.hybrid_search import chunk_search, search_scope_resolve

    repositories = search_scope_resolve(names=None)
    answers = []
    for question in evaluation.questions:
        for wording, text in question.texts.items():
            outcome = chunk_search(query=text, repositories=repositories, limit=TOP, judge=False)
            assessment = abstention_assess(outcome, question=text)
            head = outcome.hits[:depth]
            scores = passages_judge(judge, query=text, chunks=[hit.chunk for hit in head])
            ranks: dict[float, int | None] = {}
            orders = {}
            for weight in JUDGE_MIX_WEIGHTS:
                mixed = [scores[hit.chunk.pk] + weight * (hit.relevance or 0.0) for hit in head]
                ordered = sorted(range(len(head)), key=lambda i: (-mixed[i], i))
                orders[weight] = [replace(head[i], judge_score=scores[head[i].chunk.pk]) for i in ordered]
                orders[weight] += outcome.hits[depth:]
                if question.answerable:
                    ranks[weight] = hit_rank(
                        question, [Location(h.chunk.path, h.chunk.start_line, h.chunk.end_line) for h in orders[weight]]
                    )
            best = orders[0.0][0] if head else None
            best_score = scores[best.chunk.pk] if best else float("-inf")
            threshold = judge.threshold_for(best.chunk.repository.name) if best else 0.0
            answers.append(
                JudgedAnswer(
                    question=question,
                    wording=wording,
                    base_rank=(
                        hit_rank(
                            question,
                            [Location(h.chunk.path, h.chunk.start_line, h.chunk.end_line) for h in outcome.hits],
                        )
                        if question.answerable
                        else None
                    ),
                    judge_ranks=ranks,
                    base_missing=not assessment.supported,
                    judge_missing=best_score < threshold,
                    judge_best=best_score,
                    judge_threshold=threshold,
                    base_citations=_cited(outcome, outcome.hits) if assessment.supported else [],
                    judge_citations=_cited(outcome, orders[0.0]) if best_score >= threshold else [],
                )
            )
    return answers


def _share(values: list[bool]) -> float:
    return sum(values) / len(values) if values else float("nan")


def judge_report(answers: list[JudgedAnswer], judge_row) -> None:
    def group(name: str, keep) -> None:
        chosen = [answer for answer in answers if keep(answer)]
        para = [a for a in chosen if a.wording == "paraphrase" and a.question.answerable]
        verb = [a for a in chosen if a.wording == "verbatim"]
        none = [a for a in chosen if not a.question.answerable]
        if not para:
            return
        base = RankMetrics.of([a.base_rank for a in para])
        row = [
            f"{name:<24} {len(para):>3} {len(none):>3}",
            f"{base.recall_1:.3f}/{base.recall_5:.3f}/{base.mrr_10:.3f}",
        ]
        for weight in JUDGE_MIX_WEIGHTS:
            judged = RankMetrics.of([a.judge_ranks[weight] for a in para])
            row.append(f"{judged.recall_1:.3f}/{judged.recall_5:.3f}/{judged.mrr_10:.3f}")
        row.append(
            f"{_share([a.base_rank == 1 for a in verb]):.3f} {_share([a.judge_ranks[0.0] == 1 for a in verb]):.3f}"
        )

        def first_hit(citations_of) -> float:
            return _share([bool(citations_of(a)) and overlaps(a.question, citations_of(a)[0]) for a in para])

        def per_answer(citations_of) -> float:
            counts = [len(citations_of(a)) for a in para if citations_of(a)]
            return statistics.mean(counts) if counts else 0.0

        row.append(
            f"{first_hit(lambda a: a.base_citations):.3f} {first_hit(lambda a: a.judge_citations):.3f}"
            f" {per_answer(lambda a: a.base_citations):.2f} {per_answer(lambda a: a.judge_citations):.2f}"
        )
        row.append(
            f"{_share([a.base_missing for a in none]):.3f}/{_share([a.base_missing for a in para]):.3f}"
            f" {_share([a.judge_missing for a in none]):.3f}/{_share([a.judge_missing for a in para]):.3f}"
            f" {_share([a.judge_missing or a.base_missing for a in none]):.3f}"
            f"/{_share([a.judge_missing or a.base_missing for a in para]):.3f}"
        )
        print("  " + "  ".join(row))

    print(
        "\n/search and /ask, today's build (shipped, in-sample) beside the judge (fitted on the corpus, no question"
        " used: no rotation needed)"
    )
    print(
        "  paraphrased R@1/R@5/MRR@10: today | judge | judge+1*relevance | judge+5*relevance;"
        " FAQ wording R@1 today judge;\n  /ask first citation hits today judge, citations per answer today judge;"
        " sources_missing unanswerable/answerable: today | judge threshold | either refuses"
    )
    print(f"  {'group':<24} {'ans':>3} {'un':>3}")

    def own(answer: JudgedAnswer) -> bool:  # the set's questions; the written ones apart (`--written`)
        return not is_written(answer.question.collection)

    group("pooled", own)
    for kind in ("rst", "Markdown"):
        group(f"{kind} repositories", lambda a, k=kind: own(a) and repository_format(a.question.fold) == k)
    for fold in sorted({a.question.fold for a in answers}):
        group(fold, lambda a, f=fold: own(a) and a.question.fold == f)
    group("written, pooled", lambda a: not own(a))
    for kind in ("rst", "Markdown"):
        group(f"written, {kind}", lambda a, k=kind: not own(a) and repository_format(a.question.fold) == k)
    thresholds = judge_row.thresholds
    if thresholds:
        values = list(thresholds.values())
        print(
            f"\njudge #{judge_row.pk}: refusal thresholds by repository (pooled {judge_row.default_threshold:g}): "
            + ", ".join(f"{name} {value:g}" for name, value in thresholds.items())
            + f"; spread {max(values) - min(values):.3f}"
        )
    print(
        f"judge #{judge_row.pk}: {judge_row.query_count} queries, {judge_row.pair_count} pairs, fitted in"
        f" {judge_row.fit_seconds:.0f} s, peak RSS {judge_row.peak_rss_mb:.0f} MB, held-out accuracy"
        f" {judge_row.held_out_accuracy:.3f} (pairwise {judge_row.held_out_pairwise_accuracy:.3f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--eval-set",
        type=Path,
        help="the development set's directory (questions.jsonl, corpus/, manifest.json): the project's shared "
        "contract's eval-dev, which a clone does not hold; required except with --ferrite",
    )
    parser.add_argument(
        "--ferrite", action="store_true", help="only the project's own corpus (benchmarks/questions.yml)"
    )
    parser.add_argument(
        "--no-ferrite", action="store_true", help="the evaluation set alone, without the ferrite corpus beside it"
    )
    parser.add_argument(
        "--only", help="comma-separated repositories (owner/name) of the set to index and ask about, not all of them"
    )
    parser.add_argument(
        "--written",
        action="store_true",
        help="add the questions written to fit on (benchmarks/written_questions): each joins the sources-missing"
        " fits of the folds it is not held out with; measured and printed apart",
    )
    parser.add_argument(
        "--written-second-batch",
        action="store_true",
        help="with --written: its second batch too (benchmarks/written_questions/second-batch), a collection of"
        " its own",
    )
    parser.add_argument(
        "--written-third-batch",
        action="store_true",
        help="with --written-second-batch: the third batch too (benchmarks/written_questions/third-batch)",
    )
    parser.add_argument(
        "--written-reranking",
        action="store_true",
        help="with --written: the written questions join the re-ranking fits too (measured: docs/benchmarks.md)",
    )
    parser.add_argument("--database", default="gt_bench_retrieval")
    parser.add_argument("--workdir", type=Path, default=ROOT / "var" / "bench" / "retrieval")
    parser.add_argument("--no-cross-validation", action="store_true")
    parser.add_argument("--misses", action="store_true", help="list what the shipped configuration missed")
    parser.add_argument(
        "--judge",
        action="store_true",
        help="today's build beside the fitted relevance judge, per format and repository",
    )
    parser.add_argument("--ingest-only", action="store_true", help="index the set and stop (before fitting a judge)")
    parser.add_argument(
        "--refusal-calibration",
        action="store_true",
        help="measure per-corpus calibrations of sources_missing left-one-repository-out (refusal_calibration.py)",
    )
    parser.add_argument(
        "--refusal-evidence",
        action="store_true",
        help="measure candidate evidence for sources_missing left-one-repository-out and across formats "
        "(refusal_evidence.py)",
    )
    parser.add_argument(
        "--rerank-evidence",
        action="store_true",
        help="measure candidate evidence for the re-ranking left-one-repository-out (rerank_evidence.py)",
    )
    parser.add_argument(
        "--assessed-out",
        type=Path,
        help="with --refusal-evidence: write every question's features as JSON lines (for --transfer-check)",
    )
    parser.add_argument(
        "--answer-removed-out",
        type=Path,
        help="ask every answerable question of the development set and the first two written batches again with"
        " its answer removed from the index, write their features as --assessed-out does, and stop"
        " (refusal_evidence.answer_removed_assess; for refusal_thresholds.py --answer-removed)",
    )
    parser.add_argument(
        "--transfer-check",
        type=Path,
        help="with --refusal-evidence: a file --assessed-out wrote on another set; each variant is also fitted on"
        " this set and measured on that one",
    )
    parser.add_argument(
        "--features-out",
        type=Path,
        help="write every answer's evidence features of the shipped run as JSON lines, for studying the model",
    )
    args = parser.parse_args()
    if args.written_reranking and not args.written:
        parser.error("--written-reranking needs --written")
    if args.written_second_batch and not args.written:
        parser.error("--written-second-batch needs --written")
    if args.written_third_batch and not args.written_second_batch:
        parser.error("--written-third-batch needs --written-second-batch")
    # The registry lists the corpus repositories by their path, which must be absolute.
    args.workdir = args.workdir.resolve()

    ferrite = ferrite_load(ROOT / "benchmarks" / "questions.yml")
    if args.ferrite:
        evaluation, database, workdir = ferrite, f"{args.database}_ferrite", args.workdir / "ferrite"
    else:
        if args.eval_set is None:
            parser.error("--eval-set DIR is required (the development set: the shared contract's eval-dev directory)")
        if not (args.eval_set / "questions.jsonl").is_file():
            raise SystemExit(f"no evaluation set at {args.eval_set} (questions.jsonl); pass --eval-set DIR")
        only = set(args.only.split(",")) if args.only else None
        evaluation = eval_dev_load(args.eval_set, only=only)
        database, workdir = args.database, args.workdir / args.eval_set.name
        if args.written:
            evaluation = written_load(evaluation, batches=1 + args.written_second_batch + args.written_third_batch)
        if not args.no_ferrite:
            evaluation = evaluation.merge(ferrite)
            database, workdir = f"{database}_with_ferrite", args.workdir / f"{args.eval_set.name}-with-ferrite"
    print(f"evaluation set: {evaluation.name}")
    registry = repositories_prepare(evaluation, workdir)
    os.environ["SOURCE_REGISTRY_REPO"] = str(registry)
    os.environ["SOURCE_REGISTRY_REF"] = "main"
    os.environ["SOURCE_REGISTRY_PATH"] = "sources.yml"
    os.environ["GIT_CACHE_DIR"] = str(workdir / "git-cache")
    os.environ["GIT_LOCAL_ROOTS"] = str(workdir)
    os.environ["LLM_BASE_URL"] = ""
    if args.judge:
        os.environ["JUDGE_ENABLED"] = "true"  # measured whatever the environment ships
    benchmark_database_use(database)
    print("ingest through the registry and the real pipeline:")
    corpus_ingest()
    if args.ingest_only:
        return
    if args.answer_removed_out:
        from benchmarks.refusal_evidence import answer_removed_write

        answer_removed_write(evaluation, args.answer_removed_out)
        return
    if args.refusal_calibration:
        from benchmarks.refusal_calibration import refusal_calibration_measure

        refusal_calibration_measure(evaluation)
        return
    if args.rerank_evidence:
        from benchmarks.rerank_evidence import rerank_evidence_measure

        rerank_evidence_measure(evaluation)
        return
    if args.refusal_evidence:
        from benchmarks.refusal_evidence import refusal_evidence_measure

        refusal_evidence_measure(evaluation, assessed_out=args.assessed_out, transfer_from=args.transfer_check)
        return
    if args.judge:
        from django.conf import settings

        from groundtruth.judge.scoring import judge_in_use

        judge = judge_in_use()
        if judge is None:
            raise SystemExit("no relevance judge fitted on this index: run manage.py judge_fit against it first")
        started = time.monotonic()
        answers = judge_compare(evaluation, judge, depth=settings.SEARCH_JUDGE_DEPTH)
        print(
            f"\nevery question asked in {time.monotonic() - started:.0f} s (judge depth {settings.SEARCH_JUDGE_DEPTH})"
        )
        judge_report(answers, judge.row)
        return
    evaluate(
        evaluation,
        misses=args.misses,
        cross_validate=not args.no_cross_validation,
        features_out=args.features_out,
        written_reranking=args.written_reranking,
    )


if __name__ == "__main__":
    main()
