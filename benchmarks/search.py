"""Speed of /search with 100,000 chunks indexed.

    python benchmarks/search.py [--chunks 100000] [--rounds 2]

Uses a database of its own (gt_bench_search on the embedded server, or on the DATABASE_URL
server). The first run generates the chunks (texts recombined from the lines of the evaluation
corpus, each with an identifier of its own), embeds the first --embedded of them with the
configured model and gives the rest noisy copies of those vectors (see chunks_generate), fills
the lexical index and statistics and builds the HNSW index; later runs reuse them.

Measured in one run, over the same queries (the questions of benchmarks/questions.yml):
- the query embedding alone (the model, cache bypassed),
- the lexical leg's SQL alone and the dense leg's SQL alone,
- GET /search through the whole Django stack (authentication, rate limits, serialisation) with
  an empty embedding cache, then the same queries again (served by the embedding cache).
Printed: p50 and p95 of each, the p50 of /search next to embedding + lexical + dense (target:
within 25 ms), the embedding cache hits, and EXPLAIN ANALYZE of both legs (GIN / HNSW use).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.benchmark_database import ROOT, benchmark_database_use

REPOSITORY_NAME = "bench/generated-docs"
CHUNKS_PER_FILE = 10


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def corpus_lines() -> list[str]:
    lines: list[str] = []
    for path in sorted((ROOT / "benchmarks" / "corpus").rglob("*")):
        if path.is_file():
            lines.extend(line.strip() for line in path.read_text().splitlines() if len(line.strip()) > 30)
    return lines


def chunks_generate(count: int, *, embedded: int) -> None:
    """Creates `count` chunks in files of CHUNKS_PER_FILE, embedded and indexed.

    The first `embedded` chunks are embedded by the model (passage and title, as the ingest
    does). The others get noisy copies of one of those pairs of vectors (cosine about 0.85):
    embedding 100,000 texts on a shared 2-core machine takes hours, and the search cost does not
    depend on how a stored vector was made, only on there being 100,000 of them spread over the
    space like real ones.
    """
    import numpy as np
    from django.db import connection, transaction

    from groundtruth.embeddings import embedding_backend
    from groundtruth.ingest.index_text import INDEX_VERSION, heading_text, passage_text
    from groundtruth.models import Chunk, Repository, SourceFile
    from groundtruth.search.lexical_index import lexical_index_refresh, lexical_statistics_refresh
    from groundtruth.vector_index import VECTOR_COLUMNS, vector_index_ensure, vector_index_name

    backend = embedding_backend()
    random.seed(20261121)
    noise = np.random.default_rng(20261121)
    lines = corpus_lines()
    words = sorted({word for line in lines for word in re.findall(r"[a-z]{4,}", line.lower())})
    repository, _ = Repository.objects.get_or_create(
        name=REPOSITORY_NAME,
        defaults={
            "url": "https://git.example.com/bench/generated-docs.git",
            "trust": "reviewed",
            "last_commit": "b" * 40,
        },
    )
    existing = Chunk.objects.filter(repository=repository).count()
    if existing >= count:
        print(f"reusing {existing} generated chunks")
        return
    Chunk.objects.filter(repository=repository).delete()
    SourceFile.objects.filter(repository=repository).delete()
    with connection.cursor() as cursor:
        # Rows are inserted without the HNSW indexes and they are built once at the end.
        for column in VECTOR_COLUMNS:
            name = vector_index_name(model_name=backend.model_name, dimension=backend.dimension, column=column)
            cursor.execute(f"DROP INDEX IF EXISTS {name}")
    started = time.perf_counter()
    pool: list[tuple[np.ndarray, np.ndarray]] = []
    batch_files = 200
    for first_file in range(0, count // CHUNKS_PER_FILE, batch_files):
        files = [
            SourceFile(
                repository=repository,
                path=f"docs/area-{n // 100:03d}/page-{n:05d}.md",
                blob_sha=f"{n:040x}",
                commit="b" * 40,
            )
            for n in range(first_file, min(first_file + batch_files, count // CHUNKS_PER_FILE))
        ]
        SourceFile.objects.bulk_create(files)
        drafts = []
        for source_file in files:
            topic = random.choice(words).capitalize()
            for ordinal in range(CHUNKS_PER_FILE):
                body = random.sample(lines, random.randint(3, 7))
                identifier = f"{random.choice(words).upper()}_{random.choice(words).upper()}_{random.randint(1, 999)}"
                body.append(f"Set `{identifier}` to tune {random.choice(words)} {random.choice(words)}.")
                heading = [f"{topic} guide", f"{random.choice(words).capitalize()} {ordinal}"]
                drafts.append((source_file, ordinal, heading, "\n".join(body)))
        if len(pool) < embedded:
            fresh = drafts[: embedded - len(pool)]
            texts = [
                passage_text(repository_name=REPOSITORY_NAME, heading=heading, text=text)
                for _, _, heading, text in fresh
            ]
            titles = [heading_text(heading) or "" for _, _, heading, _ in fresh]
            embedded_vectors = backend.embed(texts + titles)
            pool.extend(
                (np.array(passage), np.array(title))
                for passage, title in zip(embedded_vectors[: len(texts)], embedded_vectors[len(texts) :], strict=True)
            )
            vectors = [*pool[-len(texts) :]]
        else:
            vectors = []
        while len(vectors) < len(drafts):
            base_passage, base_title = pool[random.randrange(len(pool))]
            passage = base_passage + noise.normal(0, 0.03, base_passage.shape)
            title = base_title + noise.normal(0, 0.03, base_title.shape)
            vectors.append((passage / np.linalg.norm(passage), title / np.linalg.norm(title)))
        with transaction.atomic():
            created = Chunk.objects.bulk_create(
                Chunk(
                    repository=repository,
                    source_file=source_file,
                    path=source_file.path,
                    commit="b" * 40,
                    start_line=1 + ordinal * 12,
                    end_line=(ordinal + 1) * 12 - 1,
                    heading=heading,
                    text=text,
                    content_hash=f"{source_file.pk}-{ordinal}",
                    trust="reviewed",
                    ordinal=ordinal,
                    embedding=[float(value) for value in passage],
                    heading_embedding=[float(value) for value in title],
                    embedding_model=backend.model_name,
                )
                for (source_file, ordinal, heading, text), (passage, title) in zip(drafts, vectors, strict=True)
            )
            lexical_index_refresh(chunk_ids=[chunk.pk for chunk in created])
        done = (first_file + len(files)) * CHUNKS_PER_FILE
        rate = done / (time.perf_counter() - started)
        print(f"\r  {done}/{count} chunks generated and indexed ({rate:.0f}/s)", end="", flush=True)
    print()
    lexical_statistics_refresh(repository_ids=[repository.pk])
    Repository.objects.filter(pk=repository.pk).update(index_version=INDEX_VERSION)
    index_started = time.perf_counter()
    # Built once over the full table: much faster than growing the graphs row by row.
    vector_index_ensure(model_name=backend.model_name, dimension=backend.dimension)
    print(f"HNSW indexes (passages, titles) built in {time.perf_counter() - index_started:.0f} s")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE groundtruth_chunk")
        cursor.execute("ANALYZE groundtruth_lexeme_statistic")
    print(f"generated {count} chunks ({embedded} embedded by the model) in {time.perf_counter() - started:.0f} s")


def explain(sql: str, params: Any, *, settings_sql: list[str]) -> str:
    from django.db import connection, transaction

    with transaction.atomic(), connection.cursor() as cursor:
        for statement in settings_sql:
            cursor.execute(statement)
        cursor.execute("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    # The query vector's 384 numbers would drown the plan.
    return re.sub(r"'\[[-0-9.e,]+\]'", "'[query vector]'", plan)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", default="gt_bench_search")
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2, help="timed passes over the queries per measurement")
    parser.add_argument("--embedded", type=int, default=3000, help="generated chunks embedded by the model")
    args = parser.parse_args()

    # Measure the endpoint, not the rate limiter's refusals; no language model is involved.
    os.environ["RATE_LIMIT_AUTHENTICATED"] = "100000000/m"
    os.environ.setdefault("CACHE_KEY_PREFIX", "bench-search")
    benchmark_database_use(args.database)

    from django.conf import settings
    from django.db import connection, transaction
    from django.test import Client

    from agents.models import ApiKeyKind
    from agents.services import api_key_create
    from groundtruth.embeddings import embedding_backend
    from groundtruth.models import Chunk
    from groundtruth.search import dense_search, lexical_search
    from groundtruth.search.dense_search import dense_candidates, dense_search_sql, vector_literal
    from groundtruth.search.hybrid_search import search_scope_resolve
    from groundtruth.search.lexical_search import lexical_candidates, lexical_query_build
    from groundtruth.search.query_embedding import query_embedding_cache

    chunks_generate(args.chunks, embedded=args.embedded)
    total = Chunk.objects.count()
    questions = yaml.safe_load((ROOT / "benchmarks" / "questions.yml").read_text())
    queries = [item["question"] for item in questions["answerable"] + questions["unanswerable"]]
    backend = embedding_backend()
    backend.embed(["warm-up"])
    repositories = search_scope_resolve(names=None)
    repository_ids = [repository.pk for repository in repositories]
    depth = max(settings.SEARCH_CANDIDATE_DEPTH, 10)

    _, secret = api_key_create(kind=ApiKeyKind.SERVICE, name="search benchmark", scopes=["read"])
    client = Client(HTTP_AUTHORIZATION=f"Bearer {secret}")
    cache = query_embedding_cache()
    uncached, cached = "/search, embedding not cached", "/search, embedding cached"
    timings: dict[str, list[float]] = {"embedding": [], "lexical SQL": [], "dense SQL": [], uncached: [], cached: []}

    def search(query: str, label: str) -> None:
        started = time.perf_counter()
        response = client.get("/search", {"q": query, "limit": "10"})
        timings[label].append(time.perf_counter() - started)
        if response.status_code != 200:
            raise SystemExit(f"/search answered {response.status_code}: {response.content[:300]!r}")

    # Every measurement of a query runs back to back with the others, so that a change of load
    # on the machine during the run affects them alike.
    for _ in range(args.rounds):
        cache.clear()
        for query in queries:
            started = time.perf_counter()
            vector = backend.embed([query])[0]
            timings["embedding"].append(time.perf_counter() - started)
            started = time.perf_counter()
            lexical_candidates(query=lexical_query_build(text=query), repository_ids=repository_ids, depth=depth)
            timings["lexical SQL"].append(time.perf_counter() - started)
            started = time.perf_counter()
            with transaction.atomic():
                dense_candidates(
                    embedding=vector, model_name=backend.model_name, repository_ids=repository_ids, depth=depth
                )
            timings["dense SQL"].append(time.perf_counter() - started)
            search(query, uncached)
            search(query, cached)
    hits, misses = cache.hits, cache.misses

    print(f"\n{total} chunks indexed; {len(queries)} queries x {args.rounds} rounds; limit 10, depth {depth}")
    print(f"{'measurement':<34}{'p50 ms':>10}{'p95 ms':>10}")
    for label, values in timings.items():
        print(f"{label:<34}{percentile(values, 0.5) * 1000:>10.1f}{percentile(values, 0.95) * 1000:>10.1f}")
    parts = sum(statistics.median(timings[label]) for label in ("embedding", "lexical SQL", "dense SQL"))
    endpoint = statistics.median(timings["/search, embedding not cached"])
    print(
        f"\n/search p50 {endpoint * 1000:.1f} ms vs embedding + lexical + dense p50 {parts * 1000:.1f} ms: "
        f"{(endpoint - parts) * 1000:+.1f} ms (target: within 25 ms)"
    )
    print(f"embedding cache in the last round: {hits} hits, {misses} misses (second pass of each query: all hits)")

    sample = "How do I configure the database connection pool size?"
    query = lexical_query_build(text=sample)
    chosen = lexical_search.candidate_lexemes(query, max_candidates=settings.SEARCH_LEXICAL_MAX_CANDIDATES)
    print(f"\nEXPLAIN lexical leg ({sample!r}; OR query of {chosen}):")
    print(
        explain(
            lexical_search.LEXICAL_SQL,
            lexical_search.lexical_parameters(query=query, lexemes=chosen, repository_ids=repository_ids, depth=depth),
            settings_sql=[],
        )
    )
    print(f"\nEXPLAIN dense leg ({sample!r}):")
    vector = backend.embed([sample])[0]
    print(
        explain(
            dense_search_sql(dimension=len(vector)),
            {
                "embedding": vector_literal(vector),
                "repository_ids": repository_ids,
                "model": backend.model_name,
                "depth": depth,
            },
            settings_sql=dense_search.dense_session_statements(),
        )
    )
    connection.close()


if __name__ == "__main__":
    main()
