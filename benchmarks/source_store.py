"""What the source store (groundtruth/source_store.py) costs in PostgreSQL per MB of documentation.

    python benchmarks/source_store.py [--corpus benchmarks/corpus] [--database gt_bench_source_store]

Stores the text of every UTF-8 text file under --corpus (Markdown, reStructuredText, YAML, text)
through `source_blobs_store`, keyed by git blob SHA as the ingest keys them, in a database of its
own (truncated first), and prints: files, distinct blobs, MB of text, MB the table takes on disk
(heap, TOAST and primary key: `pg_total_relation_size`), and that per MB of text. PostgreSQL
compresses (pglz) and moves out of line (TOAST) every text over about 2 KB; smaller files are
stored as they are, with the row and page overhead.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.benchmark_database import benchmark_database_use

SUFFIXES = {".md", ".markdown", ".rst", ".txt", ".yml", ".yaml"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=Path(__file__).resolve().parent / "corpus")
    parser.add_argument("--database", default="gt_bench_source_store")
    args = parser.parse_args()
    benchmark_database_use(args.database)

    from django.db import connection

    from groundtruth.source_store import BlobText, source_blobs_store

    blobs: list[BlobText] = []
    for path in sorted(args.corpus.rglob("*")):
        if not path.is_file() or path.suffix.lower() not in SUFFIXES:
            continue
        data = path.read_bytes()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        sha = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        blobs.append(BlobText(sha=sha, text=text, size=len(data)))
    with connection.cursor() as cursor:  # TRUNCATE, not DELETE: the pages of an earlier run go too
        cursor.execute("TRUNCATE groundtruth_source_blob")
    stored = source_blobs_store(blobs=blobs)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE groundtruth_source_blob")
        cursor.execute(
            "SELECT coalesce(sum(size), 0), pg_total_relation_size('groundtruth_source_blob') "
            "FROM groundtruth_source_blob"
        )
        text_bytes, on_disk = cursor.fetchone()
    megabyte = 1024 * 1024
    print(f"corpus: {args.corpus}")
    print(f"files {len(blobs)}, distinct blobs stored {stored}")
    print(f"text {text_bytes / megabyte:.2f} MB, on disk {on_disk / megabyte:.2f} MB")
    print(f"source store MB per indexed MB: {on_disk / max(int(text_bytes), 1):.3f}")


if __name__ == "__main__":
    main()
