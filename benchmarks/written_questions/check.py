"""Checks the written questions against the development set they ask about:

    python benchmarks/written_questions/check.py ../shared/eval-dev benchmarks/written_questions/*.jsonl

Each file is named after the set's corpus folder it asks about. Each answerable entry: its file
exists, its lines lie in it, start and end on text and span at most 41 lines. Each unanswerable
entry: none of its `absent_patterns` (case-insensitive) occurs in any file of the folder. Ids and
questions are unique within a file. Prints every error and the counts; exits 1 on any error.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

LINES_MAX = 41


def entry_errors(entry: dict, folder: Path, texts: dict[Path, str]) -> list[str]:
    for key in ("id", "repo", "question", "answerable"):
        if key not in entry:
            return [f"missing {key}"]
    if entry["repo"] != folder.name.replace("__", "/", 1):
        return [f"repo should be {folder.name.replace('__', '/', 1)}"]
    if entry["answerable"] is True:
        path = folder / str(entry.get("path"))
        if path not in texts:
            return [f"no file {entry.get('path')}"]
        lines = texts[path].split("\n")
        start, end = entry.get("start_line"), entry.get("end_line")
        if not (isinstance(start, int) and isinstance(end, int) and 1 <= start <= end <= len(lines)):
            return [f"line range {start}-{end} outside the file's {len(lines)} lines"]
        errors = []
        if not lines[start - 1].strip() or not lines[end - 1].strip():
            errors.append("the range starts or ends on a blank line")
        if end - start + 1 > LINES_MAX:
            errors.append(f"the range spans more than {LINES_MAX} lines")
        return errors
    if entry["answerable"] is False:
        patterns = entry.get("absent_patterns")
        if not patterns or not isinstance(patterns, list):
            return ["absent_patterns missing"]
        return [
            f"pattern {pattern!r} occurs in {path.relative_to(folder)}"
            for pattern in patterns
            for path in [next((p for p, text in texts.items() if re.search(pattern, text, re.I)), None)]
            if path is not None
        ]
    return ["answerable must be true or false"]


def file_check(path: Path, corpus: Path) -> bool:
    folder = corpus / path.stem
    texts = {file: file.read_text(errors="replace") for file in folder.rglob("*") if file.is_file()}
    seen_ids: set[str] = set()
    seen_questions: set[str] = set()
    counts = {True: 0, False: 0}
    clean = True
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        entry = json.loads(line)
        errors = entry_errors(entry, folder, texts)
        question = str(entry.get("question", "")).strip().lower()
        if entry.get("id") in seen_ids or question in seen_questions:
            errors.append("duplicate id or question")
        seen_ids.add(entry.get("id"))
        seen_questions.add(question)
        counts[entry.get("answerable") is True] += 1
        for error in errors:
            print(f"{path}:{number}: {error}")
        clean = clean and not errors
    print(f"{path}: {counts[True]} answerable, {counts[False]} unanswerable")
    return clean


def main() -> None:
    corpus = Path(sys.argv[1]) / "corpus"
    results = [file_check(Path(name), corpus) for name in sys.argv[2:]]
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
