from __future__ import annotations

from django.utils import timezone

from agentplatform.errors import InvalidInput
from agents.authentication import new_token
from agents.models import KEY_PREFIXES, Agent, ApiKey, ApiKeyKind, ApiKeyScope


def api_key_create(
    *,
    kind: str,
    name: str,
    agent: Agent | None = None,
    wallet_address: str = "",
    scopes: list[str] | None = None,
) -> tuple[ApiKey, str]:
    """Creates a key and returns it with its secret, the only time the secret exists in clear."""
    if kind not in ApiKeyKind.values:
        raise InvalidInput.for_field("kind", f"must be one of {', '.join(ApiKeyKind.values)}")
    if (kind == ApiKeyKind.AGENT) != (agent is not None):
        raise InvalidInput.for_field("agent", "an agent key needs an agent, and only an agent key has one")
    if (kind == ApiKeyKind.USER) != bool(wallet_address):
        raise InvalidInput.for_field("wallet_address", "a user key needs a wallet address, and only a user key has one")
    scopes = sorted(set(scopes or []))
    if unknown := set(scopes) - set(ApiKeyScope.values):
        raise InvalidInput.for_field("scopes", f"unknown scopes {sorted(unknown)}; allowed: read, ingest")
    if scopes and kind != ApiKeyKind.SERVICE:
        raise InvalidInput.for_field("scopes", "only service keys have scopes")
    token, lookup, hashed = new_token(KEY_PREFIXES[kind])
    key = ApiKey.objects.create(
        kind=kind,
        name=name,
        agent=agent,
        wallet_address=wallet_address.lower(),
        scopes=scopes,
        lookup=lookup,
        hashed_key=hashed,
    )
    return key, token


def api_key_revoke(*, key: ApiKey) -> bool:
    """Revokes the key; returns False if it was already revoked."""
    return bool(ApiKey.objects.filter(pk=key.pk, revoked_at__isnull=True).update(revoked_at=timezone.now()))
