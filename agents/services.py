from __future__ import annotations

import secrets
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agentplatform.plumbing.authentication import new_token
from agentplatform.plumbing.cache_generations import CREDENTIALS, RESPONSES, generation_bump
from agentplatform.plumbing.errors import Conflict, InvalidInput, NotFound, Unauthenticated
from agentplatform.plumbing.wallet_addresses import wallet_address_normalize
from agents.models import (
    ALLOWED_STATUS_TRANSITIONS,
    KEY_PREFIXES,
    KIND_BY_PREFIX,
    WALLET_SESSION_PREFIX,
    Agent,
    AgentStatus,
    ApiKey,
    ApiKeyKind,
    ApiKeyScope,
    WalletNonce,
    WalletSession,
)
from agents.wallet_auth import wallet_sign_in_verify
from groundtruth.selectors import repository_scope_unknown_names

# Nonces are kept this long past their expiry (for the admin to see), then deleted when new
# ones are issued, so the table stays small without a scheduled job.
EXPIRED_NONCE_RETENTION = timedelta(hours=1)


def api_key_validate(
    *, kind: str, name: str, agent: Agent | None, wallet_address: str, scopes: list[str] | None
) -> list[str]:
    """Checks a key's kind against its binding; returns the scopes sorted and deduplicated.

    Raises InvalidInput naming the field at fault. Shared by `api_key_create` and the admin form.
    """
    if kind not in ApiKeyKind.values:
        raise InvalidInput.for_field("kind", f"must be one of {', '.join(ApiKeyKind.values)}")
    if not name.strip():
        raise InvalidInput.for_field("name", "must not be blank")
    if (kind == ApiKeyKind.AGENT) != (agent is not None):
        raise InvalidInput.for_field("agent", "an agent key needs an agent, and only an agent key has one")
    if (kind == ApiKeyKind.USER) != bool(wallet_address):
        raise InvalidInput.for_field("wallet_address", "a user key needs a wallet address, and only a user key has one")
    if wallet_address:
        try:
            wallet_address_normalize(wallet_address)
        except ValueError as exc:
            raise InvalidInput.for_field("wallet_address", str(exc)) from exc
    normalized = sorted(set(scopes or []))
    if unknown := set(normalized) - set(ApiKeyScope.values):
        raise InvalidInput.for_field("scopes", f"unknown scopes {sorted(unknown)}; allowed: read, ingest")
    if normalized and kind != ApiKeyKind.SERVICE:
        raise InvalidInput.for_field("scopes", "only service keys have scopes")
    if kind == ApiKeyKind.SERVICE and not normalized:
        raise InvalidInput.for_field("scopes", "a service key needs at least one scope: read, ingest")
    return normalized


def api_key_repository_scope_validate(
    *, kind: str, repositories: list[str] | None, owners: list[str] | None
) -> tuple[list[str], list[str]]:
    """Checks the repositories (owner/name) and registry owners a key is limited to; returns both
    sorted and deduplicated. Each must be known to the registry now: a misspelt name would
    otherwise make a key that silently reads nothing. Raises InvalidInput naming the field."""
    wanted_repositories = sorted({name.strip() for name in repositories or [] if name.strip()})
    wanted_owners = sorted({name.strip() for name in owners or [] if name.strip()})
    if (wanted_repositories or wanted_owners) and kind != ApiKeyKind.SERVICE:
        raise InvalidInput.for_field("scope_repositories", "only service keys are limited to repositories")
    unknown_repositories, unknown_owners = repository_scope_unknown_names(
        repositories=wanted_repositories, owners=wanted_owners
    )
    if unknown_repositories:
        raise InvalidInput.for_field(
            "scope_repositories", f"unknown repositories {unknown_repositories}: not listed in the source registry"
        )
    if unknown_owners:
        raise InvalidInput.for_field(
            "scope_owners", f"unknown owners {unknown_owners}: no repository of the source registry lists them"
        )
    return wanted_repositories, wanted_owners


def api_key_create(
    *,
    kind: str,
    name: str,
    agent: Agent | None = None,
    wallet_address: str = "",
    scopes: list[str] | None = None,
    scope_repositories: list[str] | None = None,
    scope_owners: list[str] | None = None,
) -> tuple[ApiKey, str]:
    """Creates a key and returns it with its secret, the only time the secret exists in clear.
    A service key given `scope_repositories` or `scope_owners` reads only those repositories."""
    scopes = api_key_validate(kind=kind, name=name, agent=agent, wallet_address=wallet_address, scopes=scopes)
    scope_repositories, scope_owners = api_key_repository_scope_validate(
        kind=kind, repositories=scope_repositories, owners=scope_owners
    )
    token, lookup, hashed = new_token(KEY_PREFIXES[kind])
    key = ApiKey.objects.create(
        kind=kind,
        name=name.strip(),
        agent=agent,
        wallet_address=wallet_address.lower(),
        scopes=scopes,
        scope_repositories=scope_repositories,
        scope_owners=scope_owners,
        lookup=lookup,
        hashed_key=hashed,
    )
    return key, token


def api_key_revoke(*, key: ApiKey) -> bool:
    """Revokes the key; returns False if it was already revoked."""
    revoked = bool(ApiKey.objects.filter(pk=key.pk, revoked_at__isnull=True).update(revoked_at=timezone.now()))
    generation_bump(CREDENTIALS)  # web workers stop trusting the key they verified before
    return revoked


def api_key_revoke_by_prefix(*, prefix: str) -> tuple[ApiKey, bool]:
    """Revokes the key named by its display prefix (`ak_1a2b3c4d5e6f`), its bare lookup, or the
    whole key; returns the key and whether this call revoked it. Raises NotFound."""
    parts = prefix.strip().split("_")
    if len(parts) >= 2 and parts[0] in KIND_BY_PREFIX:
        keys = ApiKey.objects.filter(kind=KIND_BY_PREFIX[parts[0]], lookup=parts[1])
    else:
        keys = ApiKey.objects.filter(lookup=parts[0])
    key = keys.first()
    if key is None:
        raise NotFound(f"No API key with prefix or lookup {prefix.strip()[:20]!r}.")
    revoked = api_key_revoke(key=key)
    key.refresh_from_db(fields=["revoked_at"])
    return key, revoked


def wallet_nonce_issue() -> WalletNonce:
    """Stores and returns a new single-use nonce valid for SIWE_NONCE_TTL_SECONDS."""
    now = timezone.now()
    WalletNonce.objects.filter(expires_at__lt=now - EXPIRED_NONCE_RETENTION).delete()
    # 128 random bits, hex: EIP-4361 nonces are alphanumeric, at least 8 characters.
    return WalletNonce.objects.create(
        nonce=secrets.token_hex(16),
        expires_at=now + timedelta(seconds=settings.SIWE_NONCE_TTL_SECONDS),
    )


def wallet_session_create(*, message: str, signature: str) -> tuple[WalletSession, str]:
    """Checks a signed SIWE message (`agents.wallet_auth.wallet_sign_in_verify`) and returns a
    new wallet session with its bearer token.

    The token is returned here only; the session row keeps its SHA-256. The nonce is consumed by
    a conditional UPDATE in the same transaction that creates the session, so of two concurrent
    requests with the same signed message exactly one gets a session; a refused attempt leaves
    the nonce usable.
    """
    now = timezone.now()
    parsed = wallet_sign_in_verify(message=message, signature=signature, now=now)
    with transaction.atomic():
        consumed = WalletNonce.objects.filter(nonce=parsed.nonce, used_at__isnull=True, expires_at__gt=now).update(
            used_at=now
        )
        if consumed != 1:
            raise Unauthenticated(
                "The nonce is unknown, already used or expired; get a new one from GET /api/auth/nonce.",
                code="siwe_nonce_invalid",
            )
        token, lookup, hashed = new_token(WALLET_SESSION_PREFIX)
        session = WalletSession.objects.create(
            address=parsed.address.lower(),
            lookup=lookup,
            hashed_token=hashed,
            expires_at=now + timedelta(seconds=settings.WALLET_SESSION_TTL_SECONDS),
        )
    return session, token


def wallet_session_revoke(*, session: WalletSession) -> bool:
    """Ends a wallet session; returns False if it was already revoked."""
    revoked = bool(
        WalletSession.objects.filter(pk=session.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
    )
    generation_bump(CREDENTIALS)  # web workers stop trusting the session they verified before
    return revoked


def agent_status_change(*, agent: Agent, new_status: str) -> Agent:
    """Moves `agent` from the status the caller saw (`agent.status`) to `new_status`.

    Only the transitions in ALLOWED_STATUS_TRANSITIONS are allowed. The update is conditional on
    the status still being the one the caller saw, so two staff members acting at once cannot
    chain a transition the rules forbid (paused -> running by one, running -> ... by the other
    from a stale page). Raises Conflict, changing nothing, in either case.
    """
    if new_status not in AgentStatus.values:
        raise InvalidInput.for_field("status", f"must be one of {', '.join(AgentStatus.values)}")
    current = agent.status
    allowed = ALLOWED_STATUS_TRANSITIONS[current]
    if new_status not in allowed:
        allowed_text = ", ".join(sorted(allowed)) or "none (final state)"
        raise Conflict(
            f"An agent cannot go from {current} to {new_status}; allowed from {current}: {allowed_text}.",
            code="status_transition_not_allowed",
        )
    updated = Agent.objects.filter(pk=agent.pk, status=current).update(status=new_status, updated_at=timezone.now())
    if not updated:
        raise Conflict(
            f"The status of {agent.instance_id} changed since it was read (no longer {current}); reload and retry.",
            code="status_changed_concurrently",
        )
    generation_bump(RESPONSES)  # the agent list shows the status
    agent.status = new_status
    return agent
