"""manage.py prepare_models: exports the local embedding model to ONNX when this host has no
usable export yet (the first run, new weights, a new exporter, a corrupt export) and runs it once,
printing each step. `make run` runs it before starting the processes, so none of them waits for
an export and the first /search is answered with the model."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from groundtruth.embeddings import EmbeddingError, LocalSentenceTransformer, embedding_backend


class Command(BaseCommand):
    help = "Exports (once per host) and loads the local embedding model, printing what it does."

    def handle(self, *args: Any, **options: Any) -> None:
        backend = embedding_backend()
        if not isinstance(backend, LocalSentenceTransformer):
            self.stdout.write(f"Embedding backend: {backend.describe()}; no local model to prepare.")
            return
        started = time.monotonic()
        self.stdout.write(f"Preparing the embedding model {backend.model_name} ({backend.runtime}) ...")
        if backend.runtime == "onnx":
            from groundtruth.inference.exported_model import ExportFailed, exported_model_ensure

            try:
                exported = exported_model_ensure(
                    model_dir=backend.model_path_resolved,
                    cache_dir=backend.export_cache_dir,
                    timeout=backend.export_timeout,
                    progress=self.stdout.write,
                )
            except ExportFailed as exc:
                raise CommandError(str(exc)) from exc
            self.stdout.write(f"ONNX export ready in {exported.directory}")
        try:
            backend.embed(["warm-up"])
        except EmbeddingError as exc:
            raise CommandError(f"the embedding model does not run: {exc}") from exc
        self.stdout.write(
            self.style.SUCCESS(f"Embedding model ready: {backend.describe()} in {time.monotonic() - started:.1f} s.")
        )
