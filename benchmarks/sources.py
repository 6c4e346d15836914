"""Speed of reading exact source lines (GET /sources/<repo>/<path>, `read_source_lines`): 20-line
ranges of a 1 MB file, from the source store (PostgreSQL, what the service reads since the store)
beside the git cache (what it read before), in one run.

    python benchmarks/sources.py [--rounds 300] [--lines 20] [--file-bytes 1000000]

Builds a git repository in a scratch directory with one Markdown file of about --file-bytes
bytes (sections of 80-character lines), registers it, ingests it (no embeddings: the ingest only
has to record the commit and its chunks) into a database of its own (gt_bench_sources), then
reads --rounds ranges of --lines lines at random positions, measured back to back:
- `git cat-file blob <commit>:<path>` alone (one process reading the whole file),
- the lines read as the service read them before the source store: `read_file_at` from the git
  cache (symlinks followed), decoded and split,
- the same lines from the source store: one SELECT of the blob's text, split,
- `read_source_lines(...)` (the registry row, the commit check, the store, splitting),
- GET /sources/... through the whole Django stack (authentication, rate limits, JSON),
- the same with `Accept: text/plain`.
Printed: p50 and p95 of each, in milliseconds, the store's p50 over the git read's, and the
store's size on disk for the file.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.benchmark_database import benchmark_database_use
from benchmarks.benchmark_git import git

REPOSITORY_NAME = "bench/big-file"
FILE_PATH = "docs/big.md"
LINE_WIDTH = 80
SECTION_LINES = 40


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def big_markdown(size: int, rng: random.Random) -> str:
    """About `size` bytes of Markdown: a heading every SECTION_LINES lines of LINE_WIDTH-1 characters."""
    words = "commit range line cache index chunk file source verify exact cited path blob tree".split()
    lines: list[str] = []
    total = 0
    while total < size:
        if len(lines) % SECTION_LINES == 0:
            line = f"## Section {len(lines) // SECTION_LINES}"
        else:
            line = ""
            while len(line) < LINE_WIDTH - 12:
                line += rng.choice(words) + " "
            line = line.strip().ljust(LINE_WIDTH - 1, ".")
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines) + "\n"


def repositories_create(scratch: Path, size: int) -> tuple[Path, Path]:
    source = scratch / "big-file"
    source.mkdir()
    git(source, "init", "--quiet", "--initial-branch", "main")
    (source / "docs").mkdir()
    (source / FILE_PATH).write_text(big_markdown(size, random.Random(20261122)))
    git(source, "add", "--all")
    git(source, "commit", "--quiet", "-m", "one big file")
    registry = scratch / "registry"
    registry.mkdir()
    git(registry, "init", "--quiet", "--initial-branch", "main")
    (registry / "sources.yml").write_text(
        f'repos:\n  - name: {REPOSITORY_NAME}\n    url: {source}\n    include: ["docs/**/*.md"]\n'
    )
    git(registry, "add", "--all")
    git(registry, "commit", "--quiet", "-m", "registry")
    return source, registry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", default="gt_bench_sources")
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--lines", type=int, default=20)
    parser.add_argument("--file-bytes", type=int, default=1_000_000)
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="bench-sources-"))
    try:
        source, registry = repositories_create(scratch, args.file_bytes)
        # Read by the settings when Django starts (benchmark_database_use).
        os.environ.update(
            {
                "SOURCE_REGISTRY_REPO": str(registry),
                "GIT_CACHE_DIR": str(scratch / "git-cache"),
                "GIT_LOCAL_ROOTS": str(scratch),
                "EMBEDDING_BACKEND": "none",
                "INGEST_MAX_FILE_BYTES": str(max(args.file_bytes * 2, 1024 * 1024)),
                # Measure the endpoint, not the rate limiter's refusals.
                "RATE_LIMIT_AUTHENTICATED": "100000000/m",
                "CACHE_KEY_PREFIX": "bench-sources",
                "LOG_LEVEL": "WARNING",
            }
        )
        benchmark_database_use(args.database)
        measure(args, source)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def measure(args: argparse.Namespace, source: Path) -> None:
    from django.conf import settings
    from django.db import connection
    from django.test import Client

    from agents.models import ApiKeyKind
    from agents.services import api_key_create
    from groundtruth.ingest.chunking import file_line_count, file_lines_range
    from groundtruth.ingest.foreground import ingest_foreground
    from groundtruth.ingest.git_access import GitRepository
    from groundtruth.ingest.selection import text_decoded
    from groundtruth.models import IngestStatus, SourceFile
    from groundtruth.source_lines import read_source_lines
    from groundtruth.source_store import source_blob_text

    [run] = ingest_foreground(repository_name=REPOSITORY_NAME, ref=None)
    if run.status != IngestStatus.SUCCEEDED:
        raise SystemExit(f"ingest failed: {run.error}")
    commit = run.commit
    cache = GitRepository(str(source)).path
    size = (source / FILE_PATH).stat().st_size
    line_count = (source / FILE_PATH).read_text().count("\n")
    _, secret = api_key_create(kind=ApiKeyKind.SERVICE, name="sources benchmark", scopes=["read"])
    client = Client(HTTP_AUTHORIZATION=f"Bearer {secret}")
    url = f"/sources/{REPOSITORY_NAME}/{FILE_PATH}"
    rng = random.Random(7)
    labels = (
        "git cat-file alone",
        "git cache lines (before)",
        "source store lines (after)",
        "read_source_lines()",
        "GET /sources (JSON)",
        "GET /sources (text/plain)",
    )
    blob_sha = SourceFile.objects.get(path=FILE_PATH).blob_sha
    repository = GitRepository(str(source))
    timings: dict[str, list[float]] = {label: [] for label in labels}

    def get(params: dict[str, Any], **headers: Any) -> None:
        response = client.get(url, params, **headers)
        if response.status_code != 200:
            raise SystemExit(f"/sources answered {response.status_code}: {response.content[:300]!r}")

    def cat_file(start: int, end: int) -> None:
        subprocess.run(
            ["git", "--git-dir", str(cache), "cat-file", "blob", f"{commit}:{FILE_PATH}"],
            check=True,
            capture_output=True,
        )

    def git_lines(start: int, end: int) -> None:
        data = repository.read_file_at(commit, FILE_PATH, max_bytes=settings.INGEST_MAX_FILE_BYTES)
        text = text_decoded(data)
        assert text is not None
        file_line_count(text)
        file_lines_range(text, start=start, end=end)

    def store_lines(start: int, end: int) -> None:
        text = source_blob_text(sha=blob_sha)
        assert text is not None
        file_line_count(text)
        file_lines_range(text, start=start, end=end)

    def function(start: int, end: int) -> None:
        read_source_lines(repository_name=REPOSITORY_NAME, path=FILE_PATH, commit=commit, start=start, end=end)

    def endpoint_json(start: int, end: int) -> None:
        get({"commit": commit, "start": start, "end": end})

    def endpoint_text(start: int, end: int) -> None:
        get({"commit": commit, "start": start, "end": end}, HTTP_ACCEPT="text/plain")

    steps = dict(zip(labels, (cat_file, git_lines, store_lines, function, endpoint_json, endpoint_text), strict=True))
    # Each range is read by every step back to back, so that a change of load on the shared
    # machine during the run affects them alike; the first 5 rounds warm up and are not kept.
    for round_number in range(args.rounds + 5):
        start = rng.randint(1, line_count - args.lines + 1)
        for label, step in steps.items():
            started = time.perf_counter()
            step(start, start + args.lines - 1)
            if round_number >= 5:
                timings[label].append(time.perf_counter() - started)

    print(f"\n{FILE_PATH}: {size} bytes, {line_count} lines; {args.rounds} ranges of {args.lines} lines")
    print(f"{'measurement':<30}{'p50 ms':>10}{'p95 ms':>10}{'mean ms':>10}")
    for label, values in timings.items():
        print(
            f"{label:<30}{percentile(values, 0.5) * 1000:>10.2f}{percentile(values, 0.95) * 1000:>10.2f}"
            f"{statistics.fmean(values) * 1000:>10.2f}"
        )
    store, git_cache = timings["source store lines (after)"], timings["git cache lines (before)"]
    ratio = percentile(store, 0.5) / percentile(git_cache, 0.5)
    print(f"source store p50 / git cache p50: {ratio:.2f}")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_total_relation_size('groundtruth_source_blob')")
        stored = cursor.fetchone()[0]
    print(f"source store on disk: {stored} bytes for a {size}-byte file ({stored / size:.3f} bytes per byte)")


if __name__ == "__main__":
    main()
