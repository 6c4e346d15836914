"""manage.py revoke_api_key: revokes an API key by its prefix (`ak_1a2b3c4d5e6f`) or lookup."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agentplatform.plumbing.errors import NotFound
from agents.services import api_key_revoke_by_prefix


class Command(BaseCommand):
    help = "Revoke an API key, named by the prefix shown in the admin (e.g. ak_1a2b3c4d5e6f), its lookup or the key."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("prefix", help="The key's prefix (kind_lookup), its 12-character lookup, or the whole key.")

    def handle(self, *args: Any, prefix: str, **options: Any) -> None:
        try:
            key, revoked = api_key_revoke_by_prefix(prefix=prefix)
        except NotFound as exc:
            raise CommandError(exc.detail) from exc
        if revoked:
            self.stdout.write(f"Revoked {key.kind} key {key.display_prefix} ({key.name!r}).")
        else:
            self.stdout.write(f"{key.kind.capitalize()} key {key.display_prefix} ({key.name!r}) was already revoked.")
