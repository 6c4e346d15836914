"""A smaller copy of an evaluation set: small corpora from the same questions (issue 23, item 3).

    python benchmarks/shrunk_set.py --eval-set ../shared/eval-dev --out var/eval-dev-shrunk [--keep 0.1] [--seed 23]
    python benchmarks/retrieval.py --eval-set var/eval-dev-shrunk --no-ferrite --database gt_bench_shrunk ...

Refusal evidence that counts words (is every word of the question somewhere in the documentation?
how rare is it?) shifts with the size of a corpus: a repository of 80 passages lacks everyday words
a user writes that one of 600 passages has. Documentation nobody tuned for is often that small,
and the refusal model fitted on the development set refused three times as many answerable
questions on such repositories (docs/benchmarks.md, "A transfer check on three other
repositories"). This measures the effect without another set: each repository keeps every file
that holds an answer and a seeded share of its other documentation files (at least one), and
the questions stay as they are. An answerable question stays answerable (its file is kept) and
an unanswerable one stays unanswerable (a subset of a corpus lacks what the corpus lacks).

The copy keeps the set's layout (`corpus/<owner>__<name>/`, `questions.jsonl`), so every
benchmark that reads a set reads it; it is written under var/ and is not part of the repository.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.benchmark_database import ROOT

DOCUMENTATION_SUFFIXES = (".rst", ".md")


def shrunk_files(files: list[str], *, answer_files: set[str], keep: float, seed: int) -> list[str]:
    """`files` (paths relative to a corpus folder) reduced to the answer files, the files that are
    not documentation (licences) and a seeded `keep` share of the other documentation files."""
    documentation = sorted(path for path in files if path.endswith(DOCUMENTATION_SUFFIXES))
    others = [path for path in documentation if path not in answer_files]
    kept = random.Random(seed).sample(others, max(1, round(keep * len(others)))) if others else []
    return sorted(set(files) - set(documentation) | (answer_files & set(documentation)) | set(kept))


def shrunk_set_write(source: Path, target: Path, *, keep: float, seed: int) -> None:
    entries = [json.loads(line) for line in (source / "questions.jsonl").read_text().splitlines() if line.strip()]
    answer_files: dict[str, set[str]] = {}
    for entry in entries:
        if entry["answerable"]:
            answer_files.setdefault(entry["repo"].replace("/", "__", 1), set()).add(entry["path"])
    if target.exists():
        shutil.rmtree(target)
    (target / "corpus").mkdir(parents=True)
    shutil.copyfile(source / "questions.jsonl", target / "questions.jsonl")
    for folder in sorted((source / "corpus").iterdir()):
        if not folder.is_dir():
            continue
        files = sorted(str(path.relative_to(folder)) for path in folder.rglob("*") if path.is_file())
        kept = shrunk_files(files, answer_files=answer_files.get(folder.name, set()), keep=keep, seed=seed)
        for relative in kept:
            destination = target / "corpus" / folder.name / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(folder / relative, destination)
        size = sum((folder / relative).stat().st_size for relative in kept)
        print(f"  {folder.name}: {len(kept)} of {len(files)} files kept, {size:,} bytes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--eval-set", type=Path, required=True, help="the set to copy (corpus/, questions.jsonl)")
    parser.add_argument("--out", type=Path, default=ROOT / "var" / "eval-dev-shrunk")
    parser.add_argument("--keep", type=float, default=0.1, help="share of the other documentation files kept")
    parser.add_argument("--seed", type=int, default=23)
    arguments = parser.parse_args()
    if not 0 < arguments.keep <= 1:
        parser.error("--keep is a share in (0, 1]")
    shrunk_set_write(arguments.eval_set, arguments.out, keep=arguments.keep, seed=arguments.seed)


if __name__ == "__main__":
    main()
