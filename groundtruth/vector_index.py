"""The HNSW indexes over chunk vectors, and the check that stored vectors fit the model.

`Chunk.embedding` (the passage) and `Chunk.heading_embedding` (the section title) are `vector`
columns without a fixed dimension (so the model can change without a schema migration).
pgvector can only index a fixed dimension, so each index is built on a cast, as a partial index
per embedding model:

    CREATE INDEX chunk_embedding_hnsw_<dimension>_<model hash> ON groundtruth_chunk
    USING hnsw ((embedding::vector(<dimension>)) vector_cosine_ops)
    WHERE embedding_model = '<model name>'

and `chunk_heading_hnsw_...` the same on `heading_embedding`. `vector_index_ensure()` creates
both (the ingest calls it before writing vectors, `reembed` after re-embedding). For the planner
to use them, a nearest-neighbour query must repeat the same cast and the same predicate, with
the model name as a literal or a client-side bound parameter (Django's default psycopg
binding), e.g.:

    SELECT id FROM groundtruth_chunk
    WHERE embedding_model = %(model)s [AND repository_id = ANY(%(repository_ids)s)]
    ORDER BY (embedding::vector(384)) <=> %(query)s::vector(384)
    LIMIT %(k)s

(`groundtruth.search.dense_search.dense_search_sql` does exactly this.) Vectors are unit
length for every backend, so cosine distance ranks like inner product.

`vector_store_check(backend)` raises EmbeddingMismatch when stored vectors come from another
model or have another dimension than the configured backend produces: the ingest refuses to mix
them, and the message names the fix (`python manage.py reembed`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from django.db import connection

from groundtruth.embeddings import EmbeddingBackend, EmbeddingError

REEMBED_COMMAND = "python manage.py reembed"


class EmbeddingMismatch(EmbeddingError):
    """Stored vectors were made by another model or have another dimension."""


@dataclass(frozen=True)
class StoredVectors:
    model_name: str
    dimension: int
    chunks: int


VECTOR_COLUMNS = {"embedding": "chunk_embedding_hnsw", "heading_embedding": "chunk_heading_hnsw"}


def vector_index_name(*, model_name: str, dimension: int, column: str = "embedding") -> str:
    digest = hashlib.sha256(model_name.encode()).hexdigest()[:10]
    return f"{VECTOR_COLUMNS[column]}_{dimension}_{digest}"


def vector_index_ensure(*, model_name: str, dimension: int) -> list[str]:
    """Creates the partial HNSW indexes of `model_name` (passage and heading vectors) where they
    do not exist; returns their names."""
    if not isinstance(dimension, int) or dimension <= 0:
        raise ValueError(f"embedding dimension must be a positive integer, got {dimension!r}")
    # DDL takes no bind parameters; a standard SQL string literal (quotes doubled) is safe here.
    literal = "'" + model_name.replace("'", "''") + "'"
    names = []
    with connection.cursor() as cursor:
        for column in VECTOR_COLUMNS:
            name = vector_index_name(model_name=model_name, dimension=dimension, column=column)
            names.append(name)
            # Look first: DDL is refused inside a transaction that has pending deferred-constraint
            # events, and taking the table lock of CREATE INDEX at every ingest would be pointless.
            cursor.execute("SELECT 1 FROM pg_indexes WHERE tablename = 'groundtruth_chunk' AND indexname = %s", [name])
            if cursor.fetchone():
                continue
            cursor.execute(
                f"CREATE INDEX IF NOT EXISTS {name} ON groundtruth_chunk "
                f"USING hnsw (({column}::vector({dimension})) vector_cosine_ops) "
                f"WHERE embedding_model = {literal}"
            )
    return names


def vector_index_names() -> list[str]:
    """The HNSW indexes over chunk vectors that exist, of every model, by name."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'groundtruth_chunk' "
            "AND (indexname LIKE 'chunk\\_embedding\\_hnsw\\_%%' OR indexname LIKE 'chunk\\_heading\\_hnsw\\_%%') "
            "ORDER BY indexname"
        )
        return [row[0] for row in cursor.fetchall()]


def vector_indexes_drop_other(*, keep: list[str]) -> list[str]:
    """Drops the HNSW indexes of other models (after a re-embed left them empty)."""
    names = [name for name in vector_index_names() if name not in keep]
    with connection.cursor() as cursor:
        for name in names:
            cursor.execute(f'DROP INDEX IF EXISTS "{name}"')
    return names


def stored_vectors() -> list[StoredVectors]:
    """Which models and dimensions the stored embeddings have, with their chunk counts."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT embedding_model, vector_dims(embedding), count(*) FROM groundtruth_chunk "
            "WHERE embedding IS NOT NULL GROUP BY 1, 2 ORDER BY 1, 2"
        )
        return [StoredVectors(model_name=row[0], dimension=row[1], chunks=row[2]) for row in cursor.fetchall()]


def vector_store_check(backend: EmbeddingBackend) -> None:
    """Raises EmbeddingMismatch when stored vectors do not fit the configured backend."""
    if not backend.enabled:
        return
    stored = stored_vectors()
    foreign = [item for item in stored if item.model_name != backend.model_name or item.dimension != backend.dimension]
    if foreign:
        described = ", ".join(
            f"{item.chunks} chunks by '{item.model_name}' (dimension {item.dimension})" for item in foreign
        )
        raise EmbeddingMismatch(
            f"Stored vectors do not match the configured embedding model '{backend.model_name}' "
            f"(dimension {backend.dimension}): {described}. Run `{REEMBED_COMMAND}` to re-embed every chunk "
            "with the configured model."
        )
