"""The dense leg: nearest chunks by cosine distance through the HNSW indexes.

Each chunk has two vectors: its passage (repository label, heading trail and text) and its own
section title (`groundtruth/ingest/index_text.py`). The leg takes the `depth` nearest passages
and the `depth` nearest titles, each through its own index, and returns for every chunk found
either way both similarities to the question; `fusion.dense_ranking` combines them.

The embedding column has no fixed dimension, so the HNSW index is built on a cast to the
model's dimension (`(embedding::vector(384)) vector_cosine_ops`, see the ingest migrations); the
query must use the very same expression for the planner to pick the index.

Filtering by repository (or by model) after an approximate index scan can starve the result:
an ef_search-sized candidate list may hold few rows of the wanted repository. pgvector 0.8's
iterative index scans keep walking the graph until `depth` rows pass the filter (or
hnsw.max_scan_tuples is reached). `relaxed_order` lets rows come back slightly out of order, so
the outer query sorts the materialised result again, as pgvector's documentation recommends.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db import connection, transaction


@dataclass(frozen=True)
class DenseHit:
    chunk_id: int
    similarity: float  # of the passage vector: cosine similarity, 1 - cosine distance
    heading_similarity: float | None  # of the heading vector; None for a chunk without a title


def vector_literal(values: list[float]) -> str:
    """pgvector's text form, cast in SQL (no adapter registration needed on Django's connection)."""
    return "[" + ",".join(f"{value:.7g}" for value in values) + "]"


def dense_search_sql(*, dimension: int) -> str:
    """The dense leg's query; the casts match the HNSW index expressions."""
    if not isinstance(dimension, int) or dimension <= 0:
        raise ValueError(f"embedding dimension must be a positive integer, got {dimension!r}")
    query = f"%(embedding)s::vector({dimension})"
    return f"""
        WITH passage AS MATERIALIZED (
            SELECT chunk.id
            FROM groundtruth_chunk AS chunk
            WHERE chunk.repository_id = ANY(%(repository_ids)s) AND chunk.embedding_model = %(model)s
            ORDER BY (chunk.embedding::vector({dimension})) <=> {query}
            LIMIT %(depth)s
        ), heading AS MATERIALIZED (
            SELECT chunk.id
            FROM groundtruth_chunk AS chunk
            WHERE chunk.repository_id = ANY(%(repository_ids)s) AND chunk.embedding_model = %(model)s
            ORDER BY (chunk.heading_embedding::vector({dimension})) <=> {query}
            LIMIT %(depth)s
        )
        SELECT chunk.id,
               (chunk.embedding::vector({dimension})) <=> {query},
               (chunk.heading_embedding::vector({dimension})) <=> {query}
        FROM groundtruth_chunk AS chunk
        WHERE chunk.id IN (SELECT id FROM passage UNION SELECT id FROM heading)
        ORDER BY 2, chunk.id
    """


def dense_session_statements() -> list[str]:
    """Transaction-local HNSW settings (set_config(..., true) is SET LOCAL: they end with the
    surrounding transaction and never leak into a pooled connection). One round trip.

    enable_seqscan off: below some tens of thousands of chunks the planner estimates a sequential
    scan (the distance to every row, an exact top-N) cheaper than the HNSW index, and is wrong:
    EXPLAIN ANALYZE of this query on benchmarks/search_throughput.py's 3,000 chunks gave a median
    61 ms by two sequential scans against 9 ms by the two indexes (docs/inference.md).
    enable_sort off: without it the planner replaced the sequential scan by another exact one, the
    repository_id btree (or a bitmap scan) feeding a sort of every chunk's distance: a median 43 ms
    against 3 ms by the HNSW indexes on those 3,000 chunks (docs/inference.md). The HNSW scans are
    the only plan of the two CTEs without a disabled node, so PostgreSQL (18) always takes them;
    the outer ORDER BY still sorts (nothing else can). Every other query loses by them: the
    lexical leg's BM25 query ran 86 ms p50 under them against 14 ms without (100,000 chunks,
    benchmarks/search.py's database), so `dense_candidates` holds them for its own query only."""
    return [
        "SELECT "
        "set_config('enable_seqscan', 'off', true), "
        "set_config('enable_sort', 'off', true), "
        f"set_config('hnsw.ef_search', '{int(settings.SEARCH_HNSW_EF_SEARCH)}', true), "
        "set_config('hnsw.iterative_scan', 'relaxed_order', true), "
        f"set_config('hnsw.max_scan_tuples', '{int(settings.SEARCH_HNSW_MAX_SCAN_TUPLES)}', true)"
    ]


def dense_candidates(
    *, embedding: list[float], model_name: str, repository_ids: list[int], depth: int
) -> list[DenseHit]:
    """The chunks among the `depth` nearest passages or the `depth` nearest titles to
    `embedding` (of chunks embedded by `model_name`), nearest passage first.

    Must run inside a transaction (the HNSW settings are transaction-local). They are set in a
    savepoint rolled back once the rows are read: rolling a savepoint back undoes the settings
    made in it, so the rest of the caller's transaction (the other leg, the chunk fetch) plans
    as PostgreSQL would. Two round trips more than setting them for the whole transaction.
    """
    if not repository_ids:
        return []
    savepoint = transaction.savepoint()
    try:
        with connection.cursor() as cursor:
            for statement in dense_session_statements():
                cursor.execute(statement)
            cursor.execute(
                dense_search_sql(dimension=len(embedding)),
                {
                    "embedding": vector_literal(embedding),
                    "repository_ids": repository_ids,
                    "model": model_name,
                    "depth": depth,
                },
            )
            rows = cursor.fetchall()
    finally:
        transaction.savepoint_rollback(savepoint)
    return [
        DenseHit(
            chunk_id=chunk_id,
            similarity=1.0 - float(distance),
            heading_similarity=None if heading_distance is None else 1.0 - float(heading_distance),
        )
        for chunk_id, distance, heading_distance in rows
    ]
