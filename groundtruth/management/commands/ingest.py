"""`manage.py ingest [repo] [--ref REF] [--full]`: ingest in the foreground with a progress bar.

Re-reads the source registry first, like every ingest. Without `repo`, every enabled repository
is ingested, one after the other. A repository whose run is already queued or running elsewhere
(a worker) is reported and skipped. Exits with status 1 when a run failed.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agentplatform.plumbing.errors import ApplicationError
from groundtruth.ingest.foreground import ingest_foreground
from groundtruth.management.ingest_console import IngestProgressBars, raw_stream, run_report
from groundtruth.models import IngestTrigger
from groundtruth.signals import ingest_command_finished


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
        try:
            with IngestProgressBars(stream=raw_stream(self.stderr), enabled=not options["no_progress"]) as bars:
                runs = ingest_foreground(
                    repository_name=options["repo"],
                    ref=options["ref"],
                    trigger=IngestTrigger.COMMAND,
                    full=options["full"],
                    progress_factory=bars.for_repository,
                )
        except ApplicationError as exc:
            details = "\n".join(f"  {error['message']}" for error in exc.errors or [])
            raise CommandError(f"{exc.detail}\n{details}".rstrip()) from exc
        if not runs:
            self.stdout.write("No enabled repository in the registry.")
        failed = False
        for run in runs:
            line, run_failed = run_report(run, self.style)
            self.stdout.write(line)
            failed = failed or run_failed
        # Other files of the registry repository (brand-assets.yml) are synced now by their apps.
        reports: list[tuple[Any, Any]] = ingest_command_finished.send(sender=self.__class__)
        for _receiver, report in reports:  # each app's SyncReport-like answer: lines() and ok
            for line in report.lines():
                self.stdout.write(line if report.ok else self.style.WARNING(line))
        if failed:
            raise CommandError("At least one ingest run failed.")
