"""Retrieval quality of /search and the sources-missing decision of /ask.

    python benchmarks/retrieval.py              # ingest the corpus, print the figures
    python benchmarks/retrieval.py --calibrate  # also search the support weight and threshold
    python benchmarks/retrieval.py --misses     # also list the questions each method missed

The corpus (benchmarks/corpus/ferrite: documentation of a fictional webhook service, written
for this purpose) is committed into a local git repository under var/bench/retrieval, listed in
a local registry repository, and ingested by the real ingest pipeline into a database of its
own (gt_bench_retrieval; nothing else is touched). benchmarks/questions.yml holds answerable
questions (each with the path and line range of its answer, and the evidence text that those
lines must contain, checked first) and questions the corpus cannot answer.

A retrieved chunk answers a question when it has the question's path and its line range
overlaps the answer's. Printed: recall@1, recall@5 and MRR (over the first 10 results) for the
lexical leg alone, the dense leg alone and the hybrid, and the share of questions on which
/ask's `sources_missing` is right, for each kind of question.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


from benchmarks.benchmark_database import ROOT, benchmark_database_use

REPOSITORY_NAME = "ferrite-labs/ferrite"
TOP = 10


@dataclass(frozen=True)
class Question:
    text: str
    path: str | None = None
    lines: tuple[int, int] | None = None
    evidence: tuple[str, ...] = ()


def questions_load(path: Path) -> tuple[Path, list[Question], list[Question]]:
    data = yaml.safe_load(path.read_text())
    corpus = ROOT / data["corpus"]
    answerable = [
        Question(text=item["question"], path=item["path"], lines=tuple(item["lines"]), evidence=tuple(item["evidence"]))
        for item in data["answerable"]
    ]
    unanswerable = [Question(text=item["question"]) for item in data["unanswerable"]]
    return corpus, answerable, unanswerable


def evidence_check(corpus: Path, questions: list[Question]) -> list[str]:
    """Problems where the cited lines do not contain a question's evidence text."""
    problems = []
    for question in questions:
        file = corpus / question.path
        if not file.is_file():
            problems.append(f"{question.path}: missing (for {question.text!r})")
            continue
        lines = file.read_text().splitlines()[question.lines[0] - 1 : question.lines[1]]
        cited = " ".join(" ".join(lines).split())
        for evidence in question.evidence:
            if " ".join(evidence.split()) not in cited:
                problems.append(f"{question.path}:{question.lines[0]}-{question.lines[1]} lacks {evidence!r}")
    return problems


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _commit_tree(directory: Path, files: dict[str, bytes]) -> None:
    """Makes `directory` a git repository whose main branch holds exactly `files`."""
    if not (directory / ".git").exists():
        directory.mkdir(parents=True, exist_ok=True)
        _git(directory, "init", "-q", "-b", "main")
        _git(directory, "config", "user.email", "bench@example.invalid")
        _git(directory, "config", "user.name", "benchmark")
    for existing in directory.iterdir():
        if existing.name != ".git":
            shutil.rmtree(existing) if existing.is_dir() else existing.unlink()
    for relative, content in files.items():
        target = directory / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    _git(directory, "add", "-A")
    if _git(directory, "status", "--porcelain"):
        _git(directory, "commit", "-q", "-m", "benchmark corpus")


def repositories_prepare(corpus: Path, workdir: Path) -> Path:
    """The corpus and registry git repositories; returns the registry repository's path."""
    corpus_files = {str(path.relative_to(corpus)): path.read_bytes() for path in corpus.rglob("*") if path.is_file()}
    corpus_repository = workdir / "ferrite"
    _commit_tree(corpus_repository, corpus_files)
    sources = {
        "defaults": {"ref": "main", "trust": "reviewed"},
        "repos": [
            {
                "name": REPOSITORY_NAME,
                "url": str(corpus_repository),
                "trust": "canonical",
                "owners": ["docs"],
                "include": ["README.md", "docs/**/*.md", "docs/**/*.rst", "config/*.yml"],
            }
        ],
    }
    registry = workdir / "registry"
    _commit_tree(registry, {"sources.yml": yaml.safe_dump(sources, sort_keys=False).encode()})
    return registry


def corpus_ingest() -> None:
    from groundtruth.ingest.pipeline import ingest_run_execute
    from groundtruth.models import IngestTrigger, Repository
    from groundtruth.registry import registry_load
    from groundtruth.services import ingest_run_claim, ingest_run_request

    registry_load()
    repository = Repository.objects.get(name=REPOSITORY_NAME)
    request = ingest_run_request(repository=repository, ref=None, trigger=IngestTrigger.COMMAND)
    run = ingest_run_claim(run_id=request.run.pk)
    if run is None:
        raise SystemExit(f"ingest run {request.run.pk} is already running elsewhere")
    run = ingest_run_execute(run=run)
    print(
        f"ingested {REPOSITORY_NAME} at {run.commit[:12]}: {run.chunks_added} chunks added, "
        f"{run.chunks_unchanged} unchanged, {run.chunks_removed} removed"
    )


@dataclass
class Scores:
    ranks: list[int | None]

    def recall_at(self, k: int) -> float:
        return sum(1 for rank in self.ranks if rank is not None and rank <= k) / len(self.ranks)

    @property
    def mrr(self) -> float:
        return sum(1 / rank for rank in self.ranks if rank is not None) / len(self.ranks)


def _rank(question: Question, located: list[tuple[str, int, int]]) -> int | None:
    for position, (path, start, end) in enumerate(located, start=1):
        if path == question.path and start <= question.lines[1] and end >= question.lines[0]:
            return position
    return None


def _locate(chunk_ids: list[int]) -> list[tuple[str, int, int]]:
    from groundtruth.models import Chunk

    rows = {
        row[0]: row[1:]
        for row in Chunk.objects.filter(pk__in=chunk_ids).values_list("pk", "path", "start_line", "end_line")
    }
    return [rows[chunk_id] for chunk_id in chunk_ids if chunk_id in rows]


def evaluate(answerable: list[Question], unanswerable: list[Question], *, calibrate: bool, misses: bool) -> None:
    from django.conf import settings
    from django.db import transaction

    from groundtruth.search.ask import question_answer
    from groundtruth.search.dense_search import dense_candidates
    from groundtruth.search.hybrid_search import chunk_search, search_scope_resolve
    from groundtruth.search.lexical_search import lexical_candidates, lexical_query_build
    from groundtruth.search.query_embedding import query_embed

    repositories = search_scope_resolve(names=None)
    repository_ids = [repository.pk for repository in repositories]
    ranks: dict[str, list[int | None]] = {"lexical": [], "dense": [], "hybrid": []}
    supports: list[tuple[bool, dict]] = []  # (answerable, support signals)
    missed: dict[str, list[str]] = {"lexical": [], "dense": [], "hybrid": []}
    decisions: list[tuple[bool, bool]] = []  # (answerable, supported)

    for answerable_kind, questions in ((True, answerable), (False, unanswerable)):
        for question in questions:
            answer = question_answer(question=question.text, repository_names=None)
            supports.append((answerable_kind, answer.support))
            decisions.append((answerable_kind, not answer.sources_missing))
            if not answerable_kind:
                continue
            outcome = chunk_search(query=question.text, repositories=repositories, limit=TOP)
            lexical = lexical_candidates(
                query=lexical_query_build(text=question.text), repository_ids=repository_ids, depth=TOP
            )
            embedding = query_embed(text=question.text)
            with transaction.atomic():
                dense = dense_candidates(
                    embedding=embedding.vector,
                    model_name=embedding.model_name,
                    repository_ids=repository_ids,
                    depth=TOP,
                )
            for method, chunk_ids in (
                ("lexical", [hit.chunk_id for hit in lexical]),
                ("dense", [hit.chunk_id for hit in dense]),
                ("hybrid", [hit.chunk.pk for hit in outcome.hits]),
            ):
                rank = _rank(question, _locate(chunk_ids))
                ranks[method].append(rank)
                if rank is None or rank > 5:
                    missed[method].append(f"{question.text}  [{question.path}:{question.lines[0]}] rank={rank}")

    print(f"\n{len(answerable)} answerable questions, {len(unanswerable)} unanswerable; chunks ranked by each method:")
    print(f"{'method':<10}{'recall@1':>10}{'recall@5':>10}{'MRR@10':>10}")
    for method, method_ranks in ranks.items():
        scores = Scores(method_ranks)
        print(f"{method:<10}{scores.recall_at(1):>10.3f}{scores.recall_at(5):>10.3f}{scores.mrr:>10.3f}")

    right_answerable = sum(1 for kind, supported in decisions if kind and supported)
    right_unanswerable = sum(1 for kind, supported in decisions if not kind and not supported)
    print(
        f"\nsources_missing of /ask (ASK_SUPPORT_WEIGHTS={settings.ASK_SUPPORT_WEIGHTS}, "
        f"ASK_SUPPORT_THRESHOLD={settings.ASK_SUPPORT_THRESHOLD}):"
    )
    print(f"  right on answerable   {right_answerable}/{len(answerable)} = {right_answerable / len(answerable):.3f}")
    print(
        f"  right on unanswerable {right_unanswerable}/{len(unanswerable)} = "
        f"{right_unanswerable / len(unanswerable):.3f}"
    )
    total = len(answerable) + len(unanswerable)
    right = right_answerable + right_unanswerable
    print(f"  right overall         {right}/{total} = {right / total:.3f}")

    if misses:
        for method, lines in missed.items():
            print(f"\n{method}: answer not in the top 5 for {len(lines)} questions")
            for line in lines:
                print("  ", line)
        print("\nsupport signals of each question (A answerable, U unanswerable):")
        for (kind, support), question in zip(supports, [*answerable, *unanswerable], strict=True):
            signals = " ".join(f"{name}={value:.3f}" for name, value in support.items() if value is not None)
            print(f"  {'A' if kind else 'U'} {signals}  {question.text}")
    if calibrate:
        calibration_print(supports)


def calibration_print(supports: list[tuple[bool, dict]]) -> None:
    """Every weighting of the three support signals on a 0.1 grid; for each, every threshold
    between two consecutive scores. Kept: the highest accuracy on the weaker kind of question
    (so the small unanswerable set is not drowned by the answerable one), then the highest
    overall accuracy, then the widest gap between the threshold and the nearest question."""
    from groundtruth.search.source_support import support_score

    best: tuple[float, float, float, dict[str, float], float] | None = None
    grid = [step / 10 for step in range(11)]
    for similarity_weight, coverage_weight in itertools.product(grid, grid):
        known_weight = round(1 - similarity_weight - coverage_weight, 10)
        if known_weight < 0:
            continue
        weights = {"similarity": similarity_weight, "coverage": coverage_weight, "known": known_weight}
        scored = sorted(
            (
                support_score(
                    similarity=support["similarity"],
                    coverage=support["coverage"],
                    known=support["known"],
                    weights=weights,
                ),
                kind,
            )
            for kind, support in supports
        )
        values = [score for score, _ in scored]
        for low, high in itertools.pairwise(values):
            if high - low < 1e-9:
                continue
            threshold = (low + high) / 2
            answerable = [score >= threshold for score, kind in scored if kind]
            unanswerable = [score < threshold for score, kind in scored if not kind]
            weaker = min(sum(answerable) / len(answerable), sum(unanswerable) / len(unanswerable))
            overall = (sum(answerable) + sum(unanswerable)) / len(scored)
            key = (weaker, overall, (high - low) / 2, weights, threshold)
            if best is None or key[:3] > best[:3]:
                best = key
    assert best is not None
    weaker, overall, margin, weights, threshold = best
    formatted = ",".join(f"{name}={weight:g}" for name, weight in weights.items())
    print(
        f"\ncalibration: ASK_SUPPORT_WEIGHTS={formatted} ASK_SUPPORT_THRESHOLD={threshold:.3f} "
        f"(right on {weaker:.3f} of the weaker kind, {overall:.3f} overall; nearest question {margin:.3f} away)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", default="gt_bench_retrieval")
    parser.add_argument("--questions", type=Path, default=ROOT / "benchmarks" / "questions.yml")
    parser.add_argument("--workdir", type=Path, default=ROOT / "var" / "bench" / "retrieval")
    parser.add_argument("--calibrate", action="store_true", help="search the support weight and threshold")
    parser.add_argument("--misses", action="store_true", help="list missed questions and support values")
    args = parser.parse_args()

    corpus, answerable, unanswerable = questions_load(args.questions)
    if problems := evidence_check(corpus, answerable):
        raise SystemExit("questions.yml does not match the corpus:\n" + "\n".join(problems))
    files = sum(1 for path in corpus.rglob("*") if path.is_file())
    print(f"corpus {corpus.relative_to(ROOT)}: {files} files; evidence of {len(answerable)} answers checked")

    registry = repositories_prepare(corpus, args.workdir)
    os.environ["SOURCE_REGISTRY_REPO"] = str(registry)
    os.environ["SOURCE_REGISTRY_REF"] = "main"
    os.environ["SOURCE_REGISTRY_PATH"] = "sources.yml"
    os.environ["GIT_CACHE_DIR"] = str(args.workdir / "git-cache")
    os.environ.setdefault("LLM_BASE_URL", "")
    benchmark_database_use(args.database)
    corpus_ingest()
    evaluate(answerable, unanswerable, calibrate=args.calibrate, misses=args.misses)


if __name__ == "__main__":
    main()
