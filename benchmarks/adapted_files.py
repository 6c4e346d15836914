"""What distributing an adapted encoder's files through PostgreSQL costs
(groundtruth/adaptation/model_files.py): storing them with the fit's row, and restoring them on a
host that does not have them.

    .venv/bin/python benchmarks/adapted_files.py [--rounds 3]

On a database of its own (gt_bench_model_files), the packaged MiniLM stands in for an adapted
model (the same files and size as a fit's). Each round: the files stored with a new encoder row
in one transaction, as the fit does; then restored into an empty ENCODER_ADAPTATION_DIR ("a
second host"); then, with them in place, resolved again (the check every load does: sizes only).
Prints wall and CPU time per step, the bytes and rows stored, and this process's peak resident
memory after the stores and after the restores. The rows are deleted afterwards.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _timed(step, *args, **kwargs) -> tuple[Any, tuple[float, float]]:
    """(what step returned, (wall ms, CPU ms))."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = step(*args, **kwargs)
    return result, ((time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--database", default="gt_bench_model_files")
    args = parser.parse_args()

    from benchmarks.benchmark_database import benchmark_database_use

    benchmark_database_use(args.database)
    from django.conf import settings
    from django.db import connection, transaction

    from groundtruth.adaptation.model_files import encoder_files_store, encoder_model_files_ensure
    from groundtruth.embeddings import local_embedding_backend, packaged_model_path
    from groundtruth.inference.exported_model import model_weights_sha256
    from groundtruth.ingest.index_text import INDEX_VERSION
    from groundtruth.models import AdaptedEncoder, AdaptedEncoderFile

    figures: dict[str, list[tuple[float, float]]] = {"store": [], "restore": [], "resolve in place": []}
    stored_bytes = stored_rows = 0
    peaks: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as work:
        first_host, second_host = Path(work) / "first", Path(work) / "second"
        fitted = first_host / model_weights_sha256(packaged_model_path())[:16] / "minilm-adapted"
        shutil.copytree(packaged_model_path(), fitted)
        model_name = local_embedding_backend(model_path=str(fitted)).model_name

        def store() -> AdaptedEncoder:
            with transaction.atomic():
                encoder = AdaptedEncoder.objects.create(
                    index_version=INDEX_VERSION,
                    base_model="all-MiniLM-L6-v2",
                    model_name=model_name,
                    directory=str(fitted),
                    query_count=0,
                    held_out_accuracy_before=0.0,
                    held_out_accuracy=0.0,
                )
                encoder_files_store(encoder=encoder, model_dir=fitted)
            return encoder

        peaks["before"] = _peak_rss_mb()
        for _ in range(args.rounds):
            settings.ENCODER_ADAPTATION_DIR = str(first_host)
            encoder, cost = _timed(store)
            figures["store"].append(cost)
            peaks["store"] = _peak_rss_mb()
            with connection.cursor() as cursor:  # counted in SQL: reading the bytes would inflate the peak
                cursor.execute(
                    f"SELECT count(*), sum(octet_length(content)) FROM {AdaptedEncoderFile._meta.db_table}"
                    " WHERE encoder_id = %s",
                    [encoder.pk],
                )
                stored_rows, stored_bytes = cursor.fetchone()
            settings.ENCODER_ADAPTATION_DIR = str(second_host)
            shutil.rmtree(second_host, ignore_errors=True)
            figures["restore"].append(_timed(encoder_model_files_ensure, encoder)[1])
            peaks["restore"] = _peak_rss_mb()
            figures["resolve in place"].append(_timed(encoder_model_files_ensure, encoder)[1])
            encoder.delete()
    print(f"stored: {stored_bytes / 1e6:.1f} MB in {stored_rows} rows; {args.rounds} rounds")
    for step, values in figures.items():
        walls, cpus = [wall for wall, _ in values], [cpu for _, cpu in values]
        print(
            f"  {step:<18} wall median {statistics.median(walls):8.1f} ms (max {max(walls):.1f}),"
            f" CPU median {statistics.median(cpus):8.1f} ms"
        )
    print(
        f"peak RSS before the first store: {peaks['before']:.0f} MB, after the stores: {peaks['store']:.0f} MB,"
        f" after the restores too: {peaks['restore']:.0f} MB"
    )


if __name__ == "__main__":
    main()
