"""Speed of /search with 100,000 chunks indexed.

    python benchmarks/search.py [--chunks 100000] [--rounds 2] [--threads 1] [--questions N] [--refit]
                                [--compare-passage-tokens 64]

Uses a database of its own (gt_bench_search on the embedded server, or on the DATABASE_URL
server). The first run generates the chunks (texts recombined from the lines of the evaluation
corpus, each with an identifier of its own), embeds the first --embedded of them with the
configured model and gives the rest noisy copies of those vectors (see chunks_generate), fills
the lexical index and statistics and builds the HNSW index; later runs reuse them.

Measured in one run, over the same queries (the questions of benchmarks/questions.yml):
- the query embedding alone (the model, cache bypassed),
- the lexical leg's SQL alone and the dense leg's SQL alone,
- GET /search through the whole Django stack (authentication, rate limits, serialisation) with
  an empty embedding cache, then the same queries again (served by the embedding cache), with
  the relevance judge off;
- POST /ask through the whole stack (no language model: extractive) with the judge off, with the
  judge on (JUDGE_ENABLED, the judge fitted on this database: its passage cache and the
  embedding cache emptied before each question, so it reads all SEARCH_JUDGE_DEPTH passages),
  and with the judge on again for the same question (its passages cached), and GET /search with
  the judge on; the judge's own call (`passages_judge`) and of it the ONNX call are timed inside
  the judged /ask.
Printed: p50 and p95 of each, the p50 of /search next to embedding + lexical + dense (target:
within 25 ms), the p50 of /ask with the judge against 300 ms and the judge's share of it, this
process's CPU time of /ask and of the judge's ONNX call (the machine's load stretches wall time,
not CPU time), the embedding cache hits, the judge's call alone reading passages up to
--compare-passage-tokens tokens beside the fitted judge's length (time, and how far the scores
move), and EXPLAIN ANALYZE of both legs (GIN / HNSW use).

The judge is fitted once per database (`judge_fit` with its defaults, on the generated chunks:
each file's sections have a two-level heading, so every chunk is a mined section) and reused
while the chunk count and index version are the same. The generated text is recombined lines,
so the judge's scores mean nothing here: only its cost is measured, which depends on the number
and length of the passages it reads, not on what they say.
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
    from groundtruth.search.everyday_words import everyday_shares_refresh
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
        # Databases generated before the judge leg existed lack the count the judge's fit reads.
        Repository.objects.filter(pk=repository.pk).update(chunk_count=existing)
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
    everyday_shares_refresh(repository_ids=[repository.pk])
    # As an ingest leaves them: the judge's fit reads the chunk count.
    Repository.objects.filter(pk=repository.pk).update(index_version=INDEX_VERSION, chunk_count=count)
    index_started = time.perf_counter()
    # Built once over the full table: much faster than growing the graphs row by row.
    vector_index_ensure(model_name=backend.model_name, dimension=backend.dimension)
    print(f"HNSW indexes (passages, titles) built in {time.perf_counter() - index_started:.0f} s")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE groundtruth_chunk")
        cursor.execute("ANALYZE groundtruth_lexeme_statistic")
    print(f"generated {count} chunks ({embedded} embedded by the model) in {time.perf_counter() - started:.0f} s")


def judge_ready(*, refit: bool) -> Any:
    """The relevance judge fitted on this database's chunks: the newest one fitted on the current
    index version and chunk count, or (none, or `refit`) a new one (`judge_fit` with its defaults)."""
    from django.db.models import Sum

    from groundtruth.ingest.index_text import INDEX_VERSION
    from groundtruth.judge.fitting import JudgeFitOptions, judge_fit
    from groundtruth.models import RelevanceJudge, Repository

    chunk_count = Repository.objects.filter(enabled=True).aggregate(total=Sum("chunk_count"))["total"] or 0
    existing = (
        RelevanceJudge.objects.filter(index_version=INDEX_VERSION, chunk_count=chunk_count)
        .order_by("-fitted_at", "-id")
        .first()
    )
    if existing is not None and not refit:
        print(f"reusing relevance judge #{existing.pk}")
        return existing
    print("fitting a relevance judge on the generated chunks (judge_fit, default options)...")
    return judge_fit(options=JudgeFitOptions())


def passage_tokens_compare(
    active: Any, *, queries: list[str], repositories: list[Any], shorter: int, rounds: int
) -> None:
    """The judge's call alone (`passages_judge`, its passage cache empty) on the candidates /ask
    judges, reading passages up to the fitted judge's `passage_tokens` and up to `shorter`,
    back to back: wall and CPU time, and how far the shorter reading moves the scores (generated
    text: the agreement says how much the cut changes, not whether the judge is right)."""
    import dataclasses

    import numpy as np
    from django.conf import settings
    from django.test import override_settings

    from groundtruth.judge.scoring import ActiveJudge, passages_judge
    from groundtruth.search.hybrid_search import chunk_search

    fitted = active.model.passage_tokens
    variants = {
        fitted: active.model,
        shorter: dataclasses.replace(active.model, passage_tokens=shorter),
    }
    wall: dict[int, list[float]] = {tokens: [] for tokens in variants}
    cpu: dict[int, list[float]] = {tokens: [] for tokens in variants}
    same_first, differences = 0, list[float]()
    with override_settings(JUDGE_ENABLED=True):
        judged = [
            chunk_search(query=query, repositories=repositories, limit=settings.ASK_CITATION_COUNT, judge=active)
            for query in queries
        ]
    for _ in range(rounds):
        for query, outcome in zip(queries, judged, strict=True):
            chunks = [outcome.chunks[chunk_id] for chunk_id in outcome.judge_scores]
            scores = {}
            for tokens, model in variants.items():
                fresh = ActiveJudge(row=active.row, model=model)
                started, started_cpu = time.perf_counter(), time.process_time()
                scores[tokens] = passages_judge(fresh, query=query, chunks=chunks)
                wall[tokens].append(time.perf_counter() - started)
                cpu[tokens].append(time.process_time() - started_cpu)
            first = {
                tokens: max(found, key=lambda chunk_id: (found[chunk_id], -chunk_id))
                for tokens, found in scores.items()
            }
            same_first += first[fitted] == first[shorter]
            differences.extend(abs(scores[fitted][chunk_id] - scores[shorter][chunk_id]) for chunk_id in scores[fitted])
    print(f"\nThe judge's call alone on the {settings.SEARCH_JUDGE_DEPTH} passages /ask judges, passage cache empty:")
    print(f"{'passages read up to':<24}{'p50 ms':>10}{'p95 ms':>10}{'CPU p50 ms':>12}")
    for tokens in variants:
        print(
            f"{tokens:<24}{percentile(wall[tokens], 0.5) * 1000:>10.1f}{percentile(wall[tokens], 0.95) * 1000:>10.1f}"
            f"{percentile(cpu[tokens], 0.5) * 1000:>12.1f}"
        )
    asked = len(queries) * rounds
    print(
        f"{shorter} against {fitted} tokens: same best passage for {same_first / asked:.3f} of the questions;"
        f" score difference mean {np.mean(differences):.4f}, max {np.max(differences):.4f}"
    )


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
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="ONNX Runtime threads per inference (1: as a web worker runs the model, EMBEDDING_THREADS)",
    )
    parser.add_argument(
        "--compare-passage-tokens",
        type=int,
        default=64,
        help="also time the judge's call alone reading passages up to this many tokens (0: not)",
    )
    parser.add_argument("--questions", type=int, default=0, help="ask only the first N questions (0: all)")
    parser.add_argument("--refit", action="store_true", help="fit a new judge even if one fits this database")
    args = parser.parse_args()

    # This process runs the model as a management command would (EMBEDDING_WORKER_THREADS); the
    # endpoints it measures run in web workers, one thread each by default.
    os.environ["EMBEDDING_WORKER_THREADS"] = str(args.threads)
    # Measure the endpoint, not the rate limiter's refusals; no language model is involved.
    os.environ["RATE_LIMIT_AUTHENTICATED"] = "100000000/m"
    os.environ.setdefault("CACHE_KEY_PREFIX", "bench-search")
    benchmark_database_use(args.database)

    from django.conf import settings
    from django.db import connection, transaction
    from django.test import Client, override_settings

    from agents.models import ApiKeyKind
    from agents.services import api_key_create
    from groundtruth.embeddings import embedding_backend
    from groundtruth.judge.scoring import judge_in_use, judge_load_failure
    from groundtruth.models import Chunk
    from groundtruth.search import dense_search, hybrid_search, lexical_search
    from groundtruth.search.dense_search import dense_candidates, dense_search_sql, vector_literal
    from groundtruth.search.hybrid_search import search_scope_resolve
    from groundtruth.search.lexical_search import lexical_candidates, lexical_query_build
    from groundtruth.search.query_embedding import query_embedding_cache

    chunks_generate(args.chunks, embedded=args.embedded)
    total = Chunk.objects.count()
    questions = yaml.safe_load((ROOT / "benchmarks" / "questions.yml").read_text())
    queries = [item["question"] for item in questions["answerable"] + questions["unanswerable"]]
    queries = queries[: args.questions or None]
    backend = embedding_backend()
    backend.embed(["warm-up"])
    repositories = search_scope_resolve(names=None)
    repository_ids = [repository.pk for repository in repositories]
    depth = max(settings.SEARCH_CANDIDATE_DEPTH, 10)

    judge_row = judge_ready(refit=args.refit)
    with override_settings(JUDGE_ENABLED=True):
        active = judge_in_use()
    if active is None:
        raise SystemExit(f"the relevance judge #{judge_row.pk} did not load: {judge_load_failure()}")
    print(
        f"relevance judge #{judge_row.pk}: {judge_row.pair_count} pairs ({judge_row.query_count} mined queries),"
        f" fitted in {judge_row.fit_seconds:.1f} s, peak RSS {judge_row.peak_rss_mb:.0f} MB;"
        f" reads {settings.SEARCH_JUDGE_DEPTH} passages up to {active.model.passage_tokens} tokens"
    )

    _, secret = api_key_create(kind=ApiKeyKind.SERVICE, name="search benchmark", scopes=["read"])
    client = Client(HTTP_AUTHORIZATION=f"Bearer {secret}")
    cache = query_embedding_cache()
    uncached, cached = "/search, embedding not cached", "/search, embedding cached"
    ask_off, ask_on, ask_warm = "/ask, judge off", "/ask, judge on", "/ask, judge on, passages cached"
    judge_call, judge_onnx = "  of it the judge (passages_judge)", "  of that the ONNX call"
    search_on = "/search, judge on"
    labels = ["embedding", "lexical SQL", "dense SQL", uncached, cached, search_on]
    labels += [ask_off, ask_on, judge_call, judge_onnx, ask_warm]
    timings: dict[str, list[float]] = {label: [] for label in labels}

    # The judge's own call and its model call, timed where the judged /ask makes them (this
    # process's functions wrapped in place; nothing they return changes).
    judge_seconds: list[float] = []
    onnx_seconds: list[float] = []
    onnx_cpu_seconds: list[float] = []
    # This process's CPU seconds (PostgreSQL's work is not in them): what a request costs on an
    # idle core, whatever the machine's load did to its wall time.
    cpu: dict[str, list[float]] = {label: [] for label in (ask_off, ask_on, judge_onnx)}
    passages_judge_unwrapped = hybrid_search.passages_judge
    # Only the local model has token vectors (passages_judge refuses other backends).
    token_vectors_unwrapped = getattr(backend, "token_vectors")  # noqa: B009

    def passages_judge_timed(*args: Any, **kwargs: Any) -> dict[int, float]:
        started = time.perf_counter()
        try:
            return passages_judge_unwrapped(*args, **kwargs)
        finally:
            judge_seconds.append(time.perf_counter() - started)

    def token_vectors_timed(*args: Any, **kwargs: Any) -> list[Any]:
        started, started_cpu = time.perf_counter(), time.process_time()
        try:
            return token_vectors_unwrapped(*args, **kwargs)
        finally:
            onnx_seconds.append(time.perf_counter() - started)
            onnx_cpu_seconds.append(time.process_time() - started_cpu)

    hybrid_search.passages_judge = passages_judge_timed
    setattr(backend, "token_vectors", token_vectors_timed)  # noqa: B010
    search_hits = search_misses = 0

    def search(query: str, label: str) -> None:
        nonlocal search_hits, search_misses
        hits_before, misses_before = cache.hits, cache.misses
        started = time.perf_counter()
        response = client.get("/search", {"q": query, "limit": "10"})
        timings[label].append(time.perf_counter() - started)
        if response.status_code != 200:
            raise SystemExit(f"/search answered {response.status_code}: {response.content[:300]!r}")
        search_hits += cache.hits - hits_before
        search_misses += cache.misses - misses_before

    def ask(query: str, label: str) -> None:
        judge_seconds.clear()
        onnx_seconds.clear()
        onnx_cpu_seconds.clear()
        started, started_cpu = time.perf_counter(), time.process_time()
        response = client.post("/ask", {"question": query}, content_type="application/json")
        timings[label].append(time.perf_counter() - started)
        if label in cpu:
            cpu[label].append(time.process_time() - started_cpu)
        if response.status_code != 200:
            raise SystemExit(f"/ask answered {response.status_code}: {response.content[:300]!r}")
        judged = settings.JUDGE_ENABLED
        if judged != bool(judge_seconds):
            raise SystemExit(f"{label}: the judge ran {len(judge_seconds)} times")
        if label == ask_on:
            timings[judge_call].append(sum(judge_seconds))
            timings[judge_onnx].append(sum(onnx_seconds))
            cpu[judge_onnx].append(sum(onnx_cpu_seconds))

    # Every measurement of a query runs back to back with the others, so that a change of load
    # on the machine during the run affects them alike.
    for round_number in range(args.rounds):
        if round_number == args.rounds - 1:
            search_hits = search_misses = 0
        for query in queries:
            cache.clear()
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
            with override_settings(JUDGE_ENABLED=False):
                search(query, uncached)
                search(query, cached)
                cache.clear()
                ask(query, ask_off)
            with override_settings(JUDGE_ENABLED=True):
                # Cold: the question is embedded and every judged passage read by the model.
                cache.clear()
                active.passages_cache.clear()
                ask(query, ask_on)
                cache.clear()
                ask(query, ask_warm)
                cache.clear()
                active.passages_cache.clear()
                search(query, search_on)
    hybrid_search.passages_judge = passages_judge_unwrapped
    setattr(backend, "token_vectors", token_vectors_unwrapped)  # noqa: B010

    print(f"\n{total} chunks indexed; {len(queries)} queries x {args.rounds} rounds; limit 10, depth {depth}")
    print(f"{backend.describe()}, {args.threads} thread(s) per inference")
    print(f"{'measurement':<38}{'p50 ms':>10}{'p95 ms':>10}{'CPU p50 ms':>12}")
    for label, values in timings.items():
        cpu_p50 = f"{percentile(cpu[label], 0.5) * 1000:>12.1f}" if label in cpu else ""
        print(f"{label:<38}{percentile(values, 0.5) * 1000:>10.1f}{percentile(values, 0.95) * 1000:>10.1f}{cpu_p50}")
    parts = sum(statistics.median(timings[label]) for label in ("embedding", "lexical SQL", "dense SQL"))
    endpoint = statistics.median(timings[uncached])
    print(
        f"\n/search p50 {endpoint * 1000:.1f} ms vs embedding + lexical + dense p50 {parts * 1000:.1f} ms: "
        f"{(endpoint - parts) * 1000:+.1f} ms (target: within 25 ms)"
    )
    judged, unjudged = statistics.median(timings[ask_on]), statistics.median(timings[ask_off])
    share = statistics.median(
        judge / total_seconds for judge, total_seconds in zip(timings[judge_call], timings[ask_on], strict=True)
    )
    print(
        f"/ask p50 with the judge {judged * 1000:.1f} ms (target: 300 ms), without {unjudged * 1000:.1f} ms"
        f" ({(judged - unjudged) * 1000:+.1f} ms); the judge's call is {share:.0%} of a judged /ask (median share),"
        f" its ONNX call p50 {statistics.median(timings[judge_onnx]) * 1000:.1f} ms"
    )
    print(
        f"/ask CPU p50 of this process: {statistics.median(cpu[ask_on]) * 1000:.1f} ms with the judge,"
        f" {statistics.median(cpu[ask_off]) * 1000:.1f} ms without"
        f" (the ONNX call {statistics.median(cpu[judge_onnx]) * 1000:.1f} ms)"
    )
    print(
        f"embedding cache in the last round's /search calls: {search_hits} hits, {search_misses} misses"
        " (each query: the first /search and the judged one miss, the second hits)"
    )
    if args.compare_passage_tokens:
        passage_tokens_compare(
            active, queries=queries, repositories=repositories, shorter=args.compare_passage_tokens, rounds=args.rounds
        )

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
