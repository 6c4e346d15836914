"""Ingest benchmark: first ingest vs raw embedding speed, no-change and 1%-changed re-ingests,
peak memory of the worker.

    python benchmarks/ingest.py                 # 2,000 Markdown files, about 20,000 chunks
    python benchmarks/ingest.py --files 200     # a quick run

What it does, in one run:
1. generates a local git repository of N Markdown files (10 sections each, about 700
   characters per section: about 10 chunks per file) and a registry listing it;
2. creates a scratch database `bench_ingest` on the embedded PostgreSQL (or on
   --database-url's server) and migrates it; nothing else is touched;
3. first ingest, in a child process like a Celery worker would run it: chunks/s and the
   child's peak RSS;
4. raw embedding throughput of what the ingest embedded (an evenly spread sample of
   BENCH_RAW_SAMPLE=3000 chunks, 0 = all: each chunk's passage text and, once each, their
   section titles; a chunk has two vectors), in another child process with the same backend and
   batch size, in chunks per second: the speed ceiling of an ingest;
5. re-ingest with nothing changed: time and chunks embedded (target: 0, under 5% of 3);
6. re-ingest after 1% of the files changed one section each: chunks embedded (target: only
   those sections) and time;
7. peak RSS of a first ingest of a corpus a quarter the size, to show memory does not grow
   with the corpus;
8. what the first ingest left in the database per MB of indexed files: the source store
   (groundtruth_source_blob, TOAST and index included) beside the chunk table (text, vectors
   and their indexes);
9. the relevance judge's refit after the first ingest, as a Celery worker runs it
   (`judge_fit_task`, queued by `ingest_repo` when `judge_refit_due()`), in a child process of
   its own: its time, mined queries and pairs, the peak RSS the RelevanceJudge row records, and
   the ingest's chunks/s with the refit's time added. Every child runs with JUDGE_ENABLED=true
   (the ingest itself never reads the judge; each child reports whether a refit is due after it).
Prints a table and writes the figures as JSON (--json).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.benchmark_git import git  # noqa: E402

WORDS = (
    "agent wallet token ledger deploy release migration index chunk citation registry commit branch "
    "worker queue broker schedule heartbeat retry backoff vector embedding search answer question "
    "source document section heading config service limit window request response error problem "
    "cache redis postgres schema field value balance revenue cost runway price history chat message "
    "status running paused stopped trading signal market order fee slippage oracle node network"
).split()


def paragraph(rng: random.Random, words: int) -> str:
    text = " ".join(rng.choice(WORDS) for _ in range(words))
    return text[0].upper() + text[1:] + "."


def markdown_file(rng: random.Random, number: int, sections: int = 10) -> str:
    parts = [f"# Document {number}\n"]
    for section in range(sections):
        parts.append(f"## Section {number}.{section}\n")
        parts.append(paragraph(rng, 55) + "\n")
        parts.append(paragraph(rng, 45) + "\n")
    return "\n".join(parts)


def corpus_create(path: Path, files: int, seed: int) -> None:
    rng = random.Random(seed)
    path.mkdir(parents=True)
    git(path, "init", "--quiet", "--initial-branch", "main")
    for number in range(files):
        target = path / "docs" / f"area{number % 20:02d}" / f"doc{number:05d}.md"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(markdown_file(rng, number))
    git(path, "add", "--all")
    git(path, "commit", "--quiet", "-m", "corpus")


def corpus_change(path: Path, fraction: float, seed: int) -> int:
    """Rewrites one section of `fraction` of the files; returns how many files changed."""
    rng = random.Random(seed)
    files = sorted((path / "docs").rglob("*.md"))
    chosen = rng.sample(files, max(1, int(len(files) * fraction)))
    for target in chosen:
        lines = target.read_text().split("\n")
        # The first paragraph of section 3 gets new words: one chunk changes.
        index = lines.index(next(line for line in lines if line.startswith("## Section") and line.endswith(".3"))) + 2
        lines[index] = paragraph(rng, 55)
        target.write_text("\n".join(lines))
    git(path, "add", "--all")
    git(path, "commit", "--quiet", "-m", "change 1%")
    return len(chosen)


def registry_create(path: Path, repos: dict[str, Path]) -> None:
    path.mkdir(parents=True)
    git(path, "init", "--quiet", "--initial-branch", "main")
    lines = ["repos:"]
    for name, repo in repos.items():
        lines += [f"  - name: {name}", f"    url: {repo}", '    include: ["docs/**/*.md"]']
    (path / "sources.yml").write_text("\n".join(lines) + "\n")
    git(path, "add", "--all")
    git(path, "commit", "--quiet", "-m", "registry")


# --- child processes -------------------------------------------------------------------------
def child_setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentplatform.settings")
    import django

    django.setup()


def child_ingest(repo: str) -> dict[str, object]:
    child_setup()
    from groundtruth.embeddings import embedding_backend
    from groundtruth.ingest.foreground import ingest_foreground

    backend = embedding_backend()
    if backend.enabled:
        backend.embed(["warm up"])  # a worker has its model loaded after its first task
    started = time.perf_counter()
    [run] = ingest_foreground(repository_name=repo, ref=None)
    elapsed = time.perf_counter() - started
    if run.status != "succeeded":
        raise SystemExit(f"ingest failed: {run.error}")
    from groundtruth.judge.fitting import judge_refit_due

    return {
        "judge_refit_due": judge_refit_due(),
        "seconds": elapsed,
        "run_timings": run.timings,
        "chunks_added": run.chunks_added,
        "chunks_updated": run.chunks_updated,
        "chunks_unchanged": run.chunks_unchanged,
        "chunks_embedded": run.chunks_embedded,
        "files_updated": run.files_updated,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        **database_sizes(),
    }


def database_sizes() -> dict[str, float]:
    """MB on disk (with indexes and TOAST) of the source store and of the chunks, and MB of the
    indexed files' bytes (every repository of the scratch database)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT (SELECT coalesce(sum(size), 0) FROM groundtruth_sourcefile),
                   pg_total_relation_size('groundtruth_source_blob'),
                   pg_total_relation_size('groundtruth_chunk')
            """
        )
        indexed, store, chunks = cursor.fetchone()
    megabyte = 1024 * 1024
    return {"indexed_mb": indexed / megabyte, "source_store_mb": store / megabyte, "chunk_table_mb": chunks / megabyte}


def child_judge_fit() -> dict[str, object]:
    """The judge's refit as the worker runs it after an ingest (`judge_fit_task`), the model
    loaded first as a worker has it. Returns its row's figures and the child's own."""
    child_setup()
    from groundtruth.embeddings import embedding_backend
    from groundtruth.judge.fitting import judge_refit_due
    from groundtruth.models import RelevanceJudge
    from groundtruth.tasks import judge_fit_task

    embedding_backend().embed(["warm up"])
    due = judge_refit_due()
    started = time.perf_counter()
    judge_id = judge_fit_task()
    elapsed = time.perf_counter() - started
    if judge_id is None:
        raise SystemExit(f"no judge fitted (refit due: {due}); the worker's log says why")
    row = RelevanceJudge.objects.get(pk=judge_id)
    return {
        "due": due,
        "seconds": elapsed,
        "fit_seconds": row.fit_seconds,
        "peak_rss_mb": row.peak_rss_mb,
        "pairs": row.pair_count,
        "queries": row.query_count,
        "held_out_queries": row.held_out_query_count,
        "chunks": row.chunk_count,
    }


def child_raw_embed(repo: str) -> dict[str, object]:
    """Raw embedding of exactly what the ingest embeds for an evenly spread sample of its chunks:
    each chunk's passage text and, once each, their section titles (index_text.py). Returns the
    sample's chunk count, how many texts that was, and the seconds."""
    child_setup()
    from django.conf import settings

    from groundtruth.embeddings import embedding_backend
    from groundtruth.ingest.index_text import heading_text, passage_text
    from groundtruth.models import Chunk

    rows = list(
        Chunk.objects.filter(repository__name=repo).order_by("id").values_list("repository__name", "heading", "text")
    )
    total = len(rows)
    # An evenly spread sample (every k-th chunk) gives the rate without embedding everything twice.
    sample = int(os.environ.get("BENCH_RAW_SAMPLE", "3000"))
    if sample and total > sample:
        rows = rows[:: total // sample][:sample]
    passages = list(dict.fromkeys(passage_text(repository_name=n, heading=h, text=t) for n, h, t in rows))
    titles = sorted({title for _, heading, _ in rows if (title := heading_text(heading))})
    texts = passages + titles
    backend = embedding_backend()
    if not backend.enabled:  # EMBEDDING_BACKEND=none: what the ingest costs without the model
        return {"chunks": 0, "texts": 0, "titles": 0, "seconds": 0.0}
    backend.embed(texts[:8])  # load the model outside the measurement, as a worker has it loaded
    started = time.perf_counter()
    step = settings.INGEST_FILE_BATCH_SIZE * 10
    for start in range(0, len(texts), step):
        backend.embed(texts[start : start + step])
    elapsed = time.perf_counter() - started
    return {"chunks": len(rows), "texts": len(texts), "titles": len(titles), "seconds": elapsed}


def run_child(kind: str, repo: str, env: dict[str, str]) -> dict[str, Any]:
    completed = subprocess.run(
        [sys.executable, __file__, "--child", kind, "--repo", repo or "-"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode != 0:
        raise SystemExit(f"child {kind} failed:\n{completed.stdout}\n{completed.stderr}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def database_prepare(database_url: str | None, name: str) -> str:
    """Creates (fresh) database `name` with pgvector and returns its URL."""
    import psycopg

    if database_url:
        from urllib.parse import urlsplit, urlunsplit

        parts = urlsplit(database_url)
        admin_url = urlunsplit(parts._replace(path="/postgres"))
        url = urlunsplit(parts._replace(path=f"/{name}"))
        conninfo = admin_url
    else:
        from urllib.parse import quote

        from agentplatform.plumbing.embedded_postgres import embedded_database_settings

        db = embedded_database_settings(ROOT / "var" / "pgdata")
        conninfo = f"host={db['HOST']} user={db['USER']} dbname=postgres"
        url = f"postgres://{db['USER']}@{quote(str(db['HOST']), safe='')}/{name}"
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')
    return url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL"))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument("--child")
    parser.add_argument("--repo")
    args = parser.parse_args()

    if args.child:
        children = {"ingest": child_ingest, "raw": child_raw_embed, "judge": lambda _repo: child_judge_fit()}
        print(json.dumps(children[args.child](args.repo)))
        return

    scratch = Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    try:
        print(f"Generating {args.files} Markdown files (+ {args.files // 4} for the memory comparison)...")
        big, small = scratch / "corpus", scratch / "corpus-small"
        corpus_create(big, args.files, args.seed)
        corpus_create(small, max(args.files // 4, 1), args.seed + 1)
        registry = scratch / "registry"
        registry_create(registry, {"bench/corpus": big, "bench/corpus-small": small})
        url = database_prepare(args.database_url, "bench_ingest")
        env = {
            **os.environ,
            "DATABASE_URL": url,
            "SOURCE_REGISTRY_REPO": str(registry),
            "GIT_CACHE_DIR": str(scratch / "git-cache"),
            "GIT_LOCAL_ROOTS": str(scratch),
            "LOG_LEVEL": "WARNING",
            # A refit follows an ingest only with the judge on; the ingest itself never reads it.
            "JUDGE_ENABLED": "true",
            "JUDGE_DIR": str(scratch / "judges"),
            "CACHE_KEY_PREFIX": "bench-ingest",
        }
        subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), "migrate", "--noinput", "-v", "0"], env=env, check=True
        )

        print("First ingest...")
        first = run_child("ingest", "bench/corpus", env)
        print("The relevance judge's refit after it (judge_fit_task)...")
        judge = run_child("judge", "", env)
        print("Raw embedding of the same texts...")
        raw = run_child("raw", "bench/corpus", env)
        print("Re-ingest, nothing changed...")
        unchanged = run_child("ingest", "bench/corpus", env)
        changed_files = corpus_change(big, 0.01, args.seed)
        print(f"Re-ingest, {changed_files} files changed...")
        changed = run_child("ingest", "bench/corpus", env)
        print("First ingest of the quarter-size corpus (memory)...")
        small_first = run_child("ingest", "bench/corpus-small", env)

        ingest_rate = first["chunks_added"] / first["seconds"]
        raw_rate = raw["chunks"] / raw["seconds"] if raw["seconds"] else 0.0
        figures = {
            "files": args.files,
            "chunks": first["chunks_added"],
            "first_ingest_seconds": round(first["seconds"], 1),
            "first_ingest_chunks_per_second": round(ingest_rate, 1),
            "raw_embedding_sample_chunks": raw["chunks"],
            "raw_embedding_texts_passages_and_titles": raw["texts"],
            "raw_embedding_seconds": round(raw["seconds"], 1),
            "raw_embedding_chunks_per_second": round(raw_rate, 1),
            "ingest_vs_raw_embedding": round(ingest_rate / raw_rate, 3) if raw_rate else None,
            "first_ingest_phase_seconds": first["run_timings"],
            "judge_refit_due_after_first_ingest": first["judge_refit_due"] and judge["due"],
            "judge_fit_seconds": round(judge["seconds"], 1),
            "judge_fit_seconds_recorded": judge["fit_seconds"],
            "judge_fit_mined_queries_and_held_out": f"{judge['queries']} + {judge['held_out_queries']}",
            "judge_fit_pairs": judge["pairs"],
            "judge_fit_peak_rss_mb": round(judge["peak_rss_mb"]),
            "first_ingest_chunks_per_second_with_refit": round(
                first["chunks_added"] / (first["seconds"] + judge["seconds"]), 1
            ),
            "noop_reingest_seconds": round(unchanged["seconds"], 2),
            "noop_reingest_chunks_embedded": unchanged["chunks_embedded"],
            "noop_reingest_judge_refit_due": unchanged["judge_refit_due"],
            "noop_vs_first": round(unchanged["seconds"] / first["seconds"], 4),
            "changed_files": changed_files,
            "changed_reingest_seconds": round(changed["seconds"], 2),
            "changed_reingest_files_updated": changed["files_updated"],
            "changed_reingest_chunks_embedded": changed["chunks_embedded"],
            "changed_reingest_judge_refit_due": changed["judge_refit_due"],
            "indexed_files_mb": round(first["indexed_mb"], 2),
            "source_store_mb": round(first["source_store_mb"], 2),
            "source_store_mb_per_indexed_mb": round(first["source_store_mb"] / first["indexed_mb"], 3),
            "chunk_table_mb_per_indexed_mb": round(first["chunk_table_mb"] / first["indexed_mb"], 3),
            "worker_peak_rss_mb": round(first["peak_rss_mb"]),
            "worker_peak_rss_mb_quarter_corpus": round(small_first["peak_rss_mb"]),
            "quarter_corpus_chunks": small_first["chunks_added"],
        }
        width = max(len(key) for key in figures)
        for key, value in figures.items():
            print(f"{key:<{width}}  {value}")
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2) + "\n")
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
