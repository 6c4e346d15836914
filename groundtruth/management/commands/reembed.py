"""`manage.py reembed [repo]`: re-embed stored chunks with the configured embedding model.

Needed after EMBEDDING_BACKEND or EMBEDDING_MODEL changes (the vector dimension may change too):
until then ingests stop with an error naming this command. Only chunks whose vectors are missing
or come from another model or dimension are embedded. Afterwards the HNSW index of the model
exists and the indexes of other models are dropped (when every repository was re-embedded).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from groundtruth.embeddings import EmbeddingError, embedding_backend
from groundtruth.models import Repository
from groundtruth.services import repository_reembed
from groundtruth.vector_index import vector_index_ensure, vector_indexes_drop_other


class Command(BaseCommand):
    help = "Re-embed stored chunks with the configured embedding model and rebuild its vector index."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("repo", nargs="?", help="owner/name; omitted: every repository")
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        backend = embedding_backend()
        if not backend.enabled:
            raise CommandError("EMBEDDING_BACKEND=none: there is no model to re-embed with.")
        repositories = Repository.objects.order_by("name")
        if options["repo"]:
            repositories = repositories.filter(name=options["repo"])
            if not repositories.exists():
                raise CommandError(f"No repository named {options['repo']!r}.")
        try:
            dimension = backend.dimension
            indexes = vector_index_ensure(model_name=backend.model_name, dimension=dimension)
            total = 0
            for repository in repositories:
                bar = None
                if not options["no_progress"]:
                    bar = tqdm(desc=repository.name, unit="chunk", file=self.stderr._out)

                def progress(done: int, count: int, bar: tqdm | None = bar) -> None:
                    if bar is not None:
                        bar.total = count
                        bar.n = done
                        bar.refresh()

                count = repository_reembed(repository=repository, progress=progress)
                if bar is not None:
                    bar.close()
                total += count
                self.stdout.write(f"{repository.name}: {count} chunks re-embedded")
        except EmbeddingError as exc:
            raise CommandError(str(exc)) from exc
        if not options["repo"]:
            dropped = vector_indexes_drop_other(keep=indexes)
            if dropped:
                self.stdout.write(f"Dropped vector indexes of other models: {', '.join(dropped)}")
        self.stdout.write(
            self.style.SUCCESS(f"{total} chunks re-embedded with {backend.model_name} (dimension {dimension}).")
        )
