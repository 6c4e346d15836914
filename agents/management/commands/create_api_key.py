"""manage.py create_api_key: creates an API key and prints its secret, once."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agentplatform.plumbing.errors import InvalidInput
from agents.models import Agent, ApiKey, ApiKeyKind, ApiKeyScope
from agents.services import api_key_create


class Command(BaseCommand):
    help = (
        "Create an API key. The secret is printed once on stdout (alone, so `KEY=$(manage.py create_api_key ...)` "
        "captures it) and never stored: only its hash is kept. What was created is said on stderr."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--kind", required=True, choices=ApiKeyKind.values, help="agent, user or service")
        parser.add_argument("--name", required=True, help="What the key is for, shown in the admin.")
        parser.add_argument("--agent", metavar="INSTANCE_ID", help="Agent keys: the agent's instance_id.")
        parser.add_argument("--wallet", metavar="ADDRESS", default="", help="User keys: the 0x wallet address.")
        parser.add_argument(
            "--scope",
            dest="scopes",
            action="append",
            choices=ApiKeyScope.values,
            default=[],
            help="Service keys: a scope (repeat for several).",
        )
        parser.add_argument(
            "--repo",
            dest="repositories",
            action="append",
            default=[],
            metavar="OWNER/NAME",
            help="Service keys: read only this repository (repeat for several; with --owner, either).",
        )
        parser.add_argument(
            "--owner",
            dest="owners",
            action="append",
            default=[],
            help="Service keys: read only the repositories whose registry `owners` list this one (repeatable).",
        )

    def handle(
        self,
        *args: Any,
        kind: str,
        name: str,
        agent: str | None,
        wallet: str,
        scopes: list[str],
        repositories: list[str],
        owners: list[str],
        **options: Any,
    ) -> None:
        bound_agent = None
        if agent:
            bound_agent = Agent.objects.filter(instance_id=agent).first()
            if bound_agent is None:
                raise CommandError(f"No agent with instance_id {agent!r}.")
        try:
            key, secret = api_key_create(
                kind=kind,
                name=name,
                agent=bound_agent,
                wallet_address=wallet,
                scopes=scopes,
                scope_repositories=repositories,
                scope_owners=owners,
            )
        except InvalidInput as exc:
            raise CommandError(exc.detail) from exc
        binding = {
            str(ApiKeyKind.AGENT): f"agent {agent}",
            str(ApiKeyKind.USER): f"wallet {key.wallet_address}",
            str(ApiKeyKind.SERVICE): f"scopes {', '.join(key.scopes)}; {_repositories_text(key)}",
        }[kind]
        self.stderr.write(
            f"Created {kind} key {key.display_prefix} ({key.name!r}, {binding}). "
            "The secret below is shown only now; store it safely."
        )
        self.stdout.write(secret)


def _repositories_text(key: ApiKey) -> str:
    if not key.scope_repositories and not key.scope_owners:
        return "every repository"
    limited = [*key.scope_repositories, *(f"owner {owner}" for owner in key.scope_owners)]
    return f"only {', '.join(limited)}"
