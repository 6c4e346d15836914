"""`manage.py seed_demo [--once]`: demo data for a fresh installation, and demo credentials."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents.demo import demo_platform_seed

CREDENTIALS_FILE = "demo-credentials.json"


def credentials_write(path: Path, credentials: dict[str, Any]) -> None:
    """Writes the secrets readable by the owner only (0600), also when the file already existed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(descriptor, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        json.dump(credentials, handle, indent=2)
        handle.write("\n")


class Command(BaseCommand):
    help = (
        "Loads demo data: a dozen agents in different states, 90 days of hourly prices, wallets, a chat "
        "backlog, and demo credentials (printed once and written to VAR_DIR/demo-credentials.json)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="Do nothing if the demo data is already there.")

    def handle(self, *args: Any, once: bool, **options: Any) -> None:
        platform = demo_platform_seed()
        if platform is None:
            if once:
                self.stdout.write("Demo data already present; nothing to do.")
                return
            raise CommandError("Demo data is already present (use --once to make this a no-op).")
        path = Path(settings.VAR_DIR) / CREDENTIALS_FILE
        credentials_write(path, platform.credentials())
        self.stdout.write(
            self.style.SUCCESS(
                f"Demo data: {platform.agent_count} agents, {platform.price_point_count} price points, "
                f"{platform.wallet_count} wallets, {platform.chat_message_count} chat messages."
            )
        )
        # Shown once; the database keeps only hashes.
        self.stdout.write(
            f"Demo credentials (shown once, also in {path}):\n"
            f"  AGENT_KEY={platform.agent_key}    (agent {platform.agent_instance_id}, may post to /api/chat)\n"
            f"  USER_KEY={platform.user_key}    (wallet {platform.user_wallet_address})\n"
            f"  SERVICE_KEY={platform.service_key}    (scopes read, ingest)"
        )
