"""`manage.py source_store [--collect]`: what the source store holds (groundtruth/source_store.py),
and, with --collect, delete now the blobs no indexed file of any repository cites (every
successful ingest does it too; this is for after deleting repositories). Exits with status 1
when an ingest is writing and the collection was skipped."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from groundtruth.source_store import source_blobs_collect, source_store_summary


class Command(BaseCommand):
    help = "Show what the source store holds; --collect deletes the blobs no indexed file cites."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--collect", action="store_true", help="delete the blobs nothing cites")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["collect"]:
            deleted = source_blobs_collect()
            if deleted is None:
                raise CommandError("An ingest is writing to the source store; it collects when it is done.")
            self.stdout.write(f"Collected {deleted} blobs no indexed file cites.")
        summary = source_store_summary()
        self.stdout.write(
            f"{summary.blobs} blobs, {summary.text_bytes} bytes of text; "
            f"{summary.files_without_text} indexed files without their text (stored by their next ingest)."
        )
