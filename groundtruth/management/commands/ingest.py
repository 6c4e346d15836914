"""`manage.py ingest [repo] [--ref REF] [--full]`: ingest in the foreground with a progress bar.

Re-reads the source registry first, like every ingest. Without `repo`, every enabled repository
is ingested, one after the other. A repository whose run is already queued or running elsewhere
(a worker) is reported and skipped. Exits with status 1 when a run failed.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from agentplatform.errors import ApplicationError
from brandassets.services import asset_registry_sync
from groundtruth.models import IngestStatus, IngestTrigger, Repository
from groundtruth.services import ProgressCallback, ingest_foreground


class Command(BaseCommand):
    help = "Ingest one repository of the source registry (or every enabled one) in the foreground."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("repo", nargs="?", help="owner/name as listed in sources.yml; omitted: every enabled repo")
        parser.add_argument("--ref", help="branch, tag or commit SHA; default: the registry's ref")
        parser.add_argument(
            "--full", action="store_true", help="re-chunk every file even if unchanged (after changing chunk sizes)"
        )
        parser.add_argument("--no-progress", action="store_true", help="no progress bar (logs, CI)")

    def handle(self, *args: Any, **options: Any) -> None:
        bars: list[tqdm] = []

        def progress_for(repository: Repository) -> ProgressCallback | None:
            if options["no_progress"]:
                return None
            bar = tqdm(desc=repository.name, unit="file", file=self.stderr._out, leave=True)
            bars.append(bar)

            def update(phase: str, done: int, total: int) -> None:
                bar.total = total
                bar.set_postfix_str(phase)
                bar.n = done
                bar.refresh()

            return update

        try:
            runs = ingest_foreground(
                repository_name=options["repo"],
                ref=options["ref"],
                trigger=IngestTrigger.COMMAND,
                full=options["full"],
                progress_factory=progress_for,
            )
        except ApplicationError as exc:
            details = "\n".join(f"  {error['message']}" for error in exc.errors or [])
            raise CommandError(f"{exc.detail}\n{details}".rstrip()) from exc
        finally:
            for bar in bars:
                bar.close()
        if not runs:
            self.stdout.write("No enabled repository in the registry.")
        failed = False
        for run in runs:
            name = run.repository.name
            if run.status == IngestStatus.SUCCEEDED:
                self.stdout.write(
                    self.style.SUCCESS(
                        f"{name} @ {run.commit[:12]}: run {run.pk} succeeded: files +{run.files_added} "
                        f"~{run.files_updated} -{run.files_removed} ={run.files_unchanged}; chunks "
                        f"+{run.chunks_added} ~{run.chunks_updated} -{run.chunks_removed} ={run.chunks_unchanged}, "
                        f"{run.chunks_embedded} embedded in {run.timings.get('total', 0):.1f} s"
                    )
                )
            elif run.status == IngestStatus.FAILED:
                failed = True
                self.stdout.write(self.style.ERROR(f"{name}: run {run.pk} failed: {run.error}"))
            else:
                message = f"{name}: run {run.pk} is already {run.status} elsewhere; skipped"
                self.stdout.write(self.style.WARNING(message))
        # brand-assets.yml lives in the same registry repository: every ingest syncs it too.
        assets = asset_registry_sync()
        for line in assets.lines():
            self.stdout.write(line if assets.ok else self.style.WARNING(line))
        if failed:
            raise CommandError("At least one ingest run failed.")
