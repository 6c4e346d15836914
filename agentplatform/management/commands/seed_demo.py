"""`manage.py seed_demo [--once]`: demo data for a fresh installation, and demo credentials."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agentplatform.demo.brand_assets import demo_brand_assets_create
from agentplatform.demo.platform import demo_platform_seed
from agentplatform.demo.sources import demo_sources_create
from groundtruth.models import IngestTrigger
from groundtruth.services import ingest_request, registry_reload

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
        "backlog, and demo credentials (printed once and written to VAR_DIR/demo-credentials.json); and, while "
        "SOURCE_REGISTRY_REPO is unset, demo git repositories with a registry (sources.yml, brand-assets.yml) "
        "under VAR_DIR/demo-sources, queueing their first ingest."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="Do nothing if the demo data is already there.")

    def handle(self, *args: Any, once: bool, **options: Any) -> None:
        self._ground_truth_demo()
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

    def _ground_truth_demo(self) -> None:
        """Demo repositories and registry, when SOURCE_REGISTRY_REPO points at their default place.

        Idempotent: existing repositories are left as they are. A first ingest of every repo
        (and the brand-asset sync) is queued for the Celery worker; the registry is re-read then.
        """
        demo_root = Path(settings.VAR_DIR) / "demo-sources"
        if Path(settings.SOURCE_REGISTRY_REPO).resolve() != (demo_root / "registry").resolve():
            return
        if (demo_root / "registry" / ".git").exists():
            return
        registry = demo_sources_create(root=demo_root)
        demo_brand_assets_create(root=demo_root, registry_repo=registry)
        registry_reload()
        runs = ingest_request(repository_name=None, ref=None, trigger=IngestTrigger.COMMAND)
        self.stdout.write(
            self.style.SUCCESS(
                f"Demo sources: registry at {registry}; queued ingest runs "
                f"{', '.join(str(request.run.pk) for request in runs)} for the worker."
            )
        )
