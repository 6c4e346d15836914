"""`manage.py reindex [repo] [--all]`: rebuild indexes built by an older recipe, with a progress bar.

When what is stored for a chunk changes shape (chunking, the embedded or lexical text, the
vectors; `groundtruth.ingest.index_text.INDEX_VERSION` names the recipe), every repository must
be re-chunked, re-embedded and re-indexed. The next ingest of a repository does it by itself;
this command does it now for every repository (or the one named) whose index is older, at the
commit it already reflects, so nothing but the recipe changes. `--all` rebuilds current indexes
too.

Each repository is rebuilt by an ingest run (trigger "command") in one transaction: its old index
is served until the new one commits, and a failure leaves the old one in place. A repository
whose run is queued or running elsewhere is reported and skipped. Exits with status 1 when a
rebuild failed. After a change of embedding model, run `manage.py reembed` instead.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agentplatform.plumbing.errors import ApplicationError
from groundtruth.ingest.foreground import ingest_foreground
from groundtruth.ingest.index_text import INDEX_VERSION
from groundtruth.management.ingest_console import IngestProgressBars, raw_stream, run_report
from groundtruth.models import IngestTrigger, Repository


class Command(BaseCommand):
    help = "Rebuild the index of every repository indexed by an older recipe (or of all of them) at its commit."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("repo", nargs="?", help="owner/name; omitted: every enabled repository")
        parser.add_argument("--all", action="store_true", help="rebuild current indexes too")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar (logs, CI)")

    def handle(self, *args: Any, **options: Any) -> None:
        repositories = Repository.objects.filter(enabled=True).order_by("name")
        if options["repo"]:
            repositories = repositories.filter(name=options["repo"])
            if not repositories.exists():
                raise CommandError(f"No enabled repository named {options['repo']!r}.")
        if not options["all"]:
            repositories = repositories.exclude(index_version=INDEX_VERSION)
        selected = list(repositories)
        if not selected:
            self.stdout.write(f"Every index is current (index version {INDEX_VERSION}); nothing to rebuild.")
            return
        failed = False
        with IngestProgressBars(stream=raw_stream(self.stderr), enabled=not options["no_progress"]) as bars:
            for repository in selected:
                try:
                    runs = ingest_foreground(
                        repository_name=repository.name,
                        ref=repository.last_commit or None,
                        trigger=IngestTrigger.COMMAND,
                        full=True,
                        progress_factory=bars.for_repository,
                    )
                except ApplicationError as exc:
                    failed = True
                    self.stdout.write(self.style.ERROR(f"{repository.name}: {exc.detail}"))
                    continue
                for run in runs:
                    line, run_failed = run_report(run, self.style)
                    self.stdout.write(line)
                    failed = failed or run_failed
        if failed:
            raise CommandError("At least one repository could not be rebuilt; its previous index is still served.")
