from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from brandassets.services import asset_registry_sync


class Command(BaseCommand):
    help = (
        "Reads brand-assets.yml (BRAND_ASSETS_PATH) from the registry repository at SOURCE_REGISTRY_REF, "
        "validates it, resolves every listed asset at its ref and prints the report. Exits with status 1 "
        "when the registry is invalid or unreadable (the last good registry stays in use)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        report = asset_registry_sync()
        lines = report.lines()
        if not report.ok:
            for line in lines[1:]:
                self.stderr.write(line)
            raise CommandError(lines[0])
        style = self.style.SUCCESS if not report.missing else self.style.WARNING
        self.stdout.write(style(lines[0]))
        for line in lines[1:]:
            self.stdout.write(line)
