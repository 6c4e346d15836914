"""The agent platform's bearer credentials checked against their rows: API keys (`ak_`, `uk_`,
`sk_`) and wallet sessions (`ws_`).

`bearer_token_verify` is the CREDENTIAL_VERIFIER that agentplatform/plumbing/authentication.py calls
with a token's prefix, lookup and SHA-256; the token format, the header, the constant-time
comparison and the per-worker memory of verified tokens are that module's.
"""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Q
from django.utils import timezone
from rest_framework.exceptions import AuthenticationFailed

from agentplatform.plumbing.authentication import (
    WALLET,
    Principal,
    RepositoryScope,
    VerifiedCredential,
    token_hash_matches,
)
from agents.models import KIND_BY_PREFIX, WALLET_SESSION_PREFIX, ApiKey, WalletSession

# last_used_at is written at most this often per key, to keep writes off the hot path.
LAST_USED_RESOLUTION = timedelta(seconds=60)


def bearer_token_verify(*, prefix: str, lookup: str, token_hash: str) -> VerifiedCredential:
    """The principal of a valid, unrevoked (and unexpired) key or session; raises AuthenticationFailed."""
    if prefix == WALLET_SESSION_PREFIX:
        return _wallet_session_verify(lookup=lookup, token_hash=token_hash)
    if prefix in KIND_BY_PREFIX:
        return _api_key_verify(kind=KIND_BY_PREFIX[prefix], lookup=lookup, token_hash=token_hash)
    raise AuthenticationFailed("Invalid or revoked credentials.")


def _api_key_verify(*, kind: str, lookup: str, token_hash: str) -> VerifiedCredential:
    key = ApiKey.objects.filter(lookup=lookup, kind=kind).first()
    matches = token_hash_matches(key.hashed_key if key is not None else None, token_hash)
    if key is None or not matches or key.revoked_at:
        raise AuthenticationFailed("Invalid or revoked credentials.")
    now = timezone.now()
    if key.last_used_at is None or now - key.last_used_at > LAST_USED_RESOLUTION:
        # Conditional, so that concurrent requests with one key write it once.
        ApiKey.objects.filter(pk=key.pk).filter(
            Q(last_used_at__isnull=True) | Q(last_used_at__lte=now - LAST_USED_RESOLUTION)
        ).update(last_used_at=now)
        key.last_used_at = now
    principal = Principal(
        kind=key.kind,
        credential_id=f"key:{key.pk}",
        key_prefix=key.display_prefix,
        agent_id=key.agent_id,
        wallet_address=key.wallet_address,
        scopes=frozenset(key.scopes or ()),
        repository_scope=(
            RepositoryScope(repositories=frozenset(key.scope_repositories), owners=frozenset(key.scope_owners))
            if key.scope_repositories or key.scope_owners
            else None
        ),
    )
    return VerifiedCredential(principal=principal, row=key)


def _wallet_session_verify(*, lookup: str, token_hash: str) -> VerifiedCredential:
    session = WalletSession.objects.filter(lookup=lookup).first()
    matches = token_hash_matches(session.hashed_token if session is not None else None, token_hash)
    if session is None or not matches or session.revoked_at or session.expires_at <= timezone.now():
        raise AuthenticationFailed("Invalid, expired or revoked wallet session.")
    principal = Principal(
        kind=WALLET,
        credential_id=f"session:{session.pk}",
        key_prefix=f"{WALLET_SESSION_PREFIX}_{session.lookup}",
        wallet_address=session.address,
    )
    return VerifiedCredential(principal=principal, row=session, expires_at=session.expires_at)
