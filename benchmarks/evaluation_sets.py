"""The evaluation sets the retrieval benchmarks ask (`retrieval.py`, `refusal_calibration.py`,
`refusal_evidence.py`, `cross_encoder.py`, `adapted_encoder.py`): a development set in the shared
contract's format (`eval_dev_load`) and the project's own ferrite corpus (`ferrite_load`), their
questions, and which documentation format each repository is written in. Apart from `retrieval.py`
so that the benchmarks built on its sets import them without importing it (it imports them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import yaml

from benchmarks.benchmark_database import ROOT

TOP = 10
WORDINGS = {"verbatim": "FAQ wording", "paraphrase": "paraphrased"}
ANSWERABLE_MISSING_TARGET = 0.05
FERRITE_REPOSITORY = "ferrite-labs/ferrite"


@dataclass(frozen=True)
class CorpusRepository:
    name: str
    directory: Path
    include: tuple[str, ...]


@dataclass(frozen=True)
class Question:
    id: str
    collection: str  # which question set it comes from (reported apart)
    fold: str  # the repository it is held out with
    texts: dict[str, str]  # wording -> question text
    answerable: bool
    path: str | None = None
    lines: tuple[int, int] | None = None


@dataclass
class EvaluationSet:
    name: str
    repositories: list[CorpusRepository]
    questions: list[Question]

    @property
    def folds(self) -> list[str]:
        return sorted({question.fold for question in self.questions})

    @property
    def collections(self) -> list[str]:
        return list(dict.fromkeys(question.collection for question in self.questions))

    def merge(self, other: EvaluationSet) -> EvaluationSet:
        return EvaluationSet(
            name=f"{self.name} + {other.name}",
            repositories=self.repositories + other.repositories,
            questions=self.questions + other.questions,
        )


# --- evaluation sets ---------------------------------------------------------------------------
def eval_dev_load(directory: Path, *, only: set[str] | None = None) -> EvaluationSet:
    """The set in `directory`; with `only`, those repositories, their questions and the
    unanswerable questions whose absent scope is the whole corpus or one of them."""
    collection = directory.name
    corpus = directory / "corpus"
    repositories = [
        CorpusRepository(name=folder.name.replace("__", "/", 1), directory=folder, include=("**/*.rst", "**/*.md"))
        for folder in sorted(corpus.iterdir())
        if folder.is_dir() and (only is None or folder.name.replace("__", "/", 1) in only)
    ]
    names = [repository.name for repository in repositories]
    _FORMATS_SEEN.update({repository.name: corpus_format(repository.directory) for repository in repositories})
    entries = [json.loads(line) for line in (directory / "questions.jsonl").read_text().splitlines() if line.strip()]
    questions = []
    unassigned = 0
    for entry in entries:
        if only is not None:
            scope = entry.get("absent_scope") or []
            scoped = [entry["repo"]] if entry["answerable"] else ([scope] if isinstance(scope, str) else scope)
            if scoped and not any(folder.replace("__", "/", 1) in only for folder in scoped):
                continue
        if entry["answerable"]:
            fold = entry["repo"]
            texts = {"verbatim": entry["question_verbatim"], "paraphrase": entry["question_paraphrase"]}
            questions.append(
                Question(
                    id=entry["id"],
                    collection=collection,
                    fold=fold,
                    texts=texts,
                    answerable=True,
                    path=entry["path"],
                    lines=(entry["start_line"], entry["end_line"]),
                )
            )
            continue
        text = entry["question_paraphrase"]
        # absent_scope: one corpus folder, a list of them, or null (the whole corpus).
        scope = entry.get("absent_scope") or []
        scope_names = [folder.replace("__", "/", 1) for folder in ([scope] if isinstance(scope, str) else scope)]
        within = [name for name in names if name in scope_names] or names
        named = [name for name in within if name.rsplit("/", 1)[-1].lower() in text.lower()]
        if len(within) == 1:
            fold = within[0]
        elif named:
            fold = named[0]
        else:
            fold = within[unassigned % len(within)]
            unassigned += 1
        questions.append(
            Question(id=entry["id"], collection=collection, fold=fold, texts={"paraphrase": text}, answerable=False)
        )
    return EvaluationSet(
        name=f"{directory.name} ({len(repositories)} repositories)", repositories=repositories, questions=questions
    )


WRITTEN_QUESTIONS = ROOT / "benchmarks" / "written_questions"
WRITTEN_COLLECTION = "written"
# The id suffix of an answerable question asked with its answer removed from the index
# (refusal_evidence.answer_removed_assess): an unanswerable question to fit on.
ANSWER_REMOVED = "#answer-removed"
# Each later batch is a collection of its own, so that every report prints it apart: no fit that
# ships had seen it when it was written. In the order they were written: (folder, collection).
WRITTEN_BATCHES = (
    (".", WRITTEN_COLLECTION),
    ("second-batch", "written-2"),
    ("third-batch", "written-3"),
)


def is_written(collection: str) -> bool:
    """Whether a question of `collection` was written to fit on (any batch), rather than one of
    the set's own."""
    return collection in {name for _, name in WRITTEN_BATCHES}


def written_load(evaluation: EvaluationSet, directory: Path = WRITTEN_QUESTIONS, *, batches: int = 1) -> EvaluationSet:
    """`evaluation` with the questions written to fit on (`benchmarks/written_questions`, see its
    README) about the repositories it holds, each held out with its repository: the first `batches`
    batches of WRITTEN_BATCHES."""
    names = {repository.name for repository in evaluation.repositories}
    if not 1 <= batches <= len(WRITTEN_BATCHES):
        raise ValueError(f"there are {len(WRITTEN_BATCHES)} batches of written questions, not {batches}")
    questions = []
    for folder, collection in WRITTEN_BATCHES[:batches]:
        for path in sorted((directory / folder).glob("*.jsonl")):
            for line in path.read_text().splitlines():
                if not line.strip():
                    continue
                entry = json.loads(line)
                if entry["repo"] not in names:
                    continue
                questions.append(
                    Question(
                        id=entry["id"],
                        collection=collection,
                        fold=entry["repo"],
                        texts={"paraphrase": entry["question"]},
                        answerable=entry["answerable"],
                        path=entry.get("path"),
                        lines=(entry["start_line"], entry["end_line"]) if entry["answerable"] else None,
                    )
                )
    return EvaluationSet(
        name=f"{evaluation.name} + {len(questions)} written questions to fit on",
        repositories=evaluation.repositories,
        questions=evaluation.questions + questions,
    )


def ferrite_load(path: Path) -> EvaluationSet:
    data = yaml.safe_load(path.read_text())
    corpus = ROOT / data["corpus"]
    questions = [
        Question(
            id=f"ferrite-{number:03d}",
            collection="ferrite",
            fold=FERRITE_REPOSITORY,
            texts={"paraphrase": item["question"]},
            answerable=True,
            path=item["path"],
            lines=tuple(item["lines"]),
        )
        for number, item in enumerate(data["answerable"], start=1)
    ]
    questions += [
        Question(
            id=f"ferrite-none-{number:03d}",
            collection="ferrite",
            fold=FERRITE_REPOSITORY,
            texts={"paraphrase": item["question"]},
            answerable=False,
        )
        for number, item in enumerate(data["unanswerable"], start=1)
    ]
    repository = CorpusRepository(
        name=FERRITE_REPOSITORY,
        directory=corpus,
        include=("README.md", "docs/**/*.md", "docs/**/*.rst", "config/*.yml"),
    )
    return EvaluationSet(name="ferrite (the project's own corpus)", repositories=[repository], questions=questions)


MARKDOWN_REPOSITORIES = {
    "romkatv/powerlevel10k",
    "Homebrew/brew",
    "vitejs/vite",
    "jestjs/jest",
    "rclone/rclone",
    "wez/wezterm",
}


# Formats read from the files of the sets loaded (`eval_dev_load`): another set's repositories are
# grouped by what they hold, not by the development set's list.
_FORMATS_SEEN: dict[str, str] = {}


def corpus_format(directory: Path) -> str:
    """ "Markdown" when a corpus holds more Markdown files than reStructuredText ones."""
    markdown = sum(1 for _ in directory.rglob("*.md"))
    return "Markdown" if markdown > sum(1 for _ in directory.rglob("*.rst")) else "rst"


def repository_format_record(name: str, format_name: str) -> None:
    """Records the format of a repository whose set is not loaded here (a features file written
    on another set: `refusal_evidence.assessed_read`)."""
    _FORMATS_SEEN[name] = format_name


def repository_format(name: str) -> str:
    if name in _FORMATS_SEEN:
        return _FORMATS_SEEN[name]
    return "Markdown" if name in MARKDOWN_REPOSITORIES else "rst"
