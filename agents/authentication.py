"""Bearer credentials: API keys (agent, user, service) and wallet sessions from SIWE.

`Authorization: Bearer <token>`. Keys read `ak_|uk_|sk_<lookup>_<secret>`, wallet sessions
`ws_<lookup>_<secret>`. The lookup part finds the row; the SHA-256 of the whole token is
compared in constant time. Keys are high-entropy random secrets, so a fast hash is enough
(a slow password hash would only slow every request).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass, field
from datetime import timedelta

from django.db.models import Q
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from agents.models import KEY_PREFIXES, ApiKey, WalletSession

WALLET_SESSION_PREFIX = "ws"
_KIND_BY_PREFIX = {prefix: kind for kind, prefix in KEY_PREFIXES.items()}
# last_used_at is written at most this often per key, to keep writes off the hot path.
LAST_USED_RESOLUTION = timedelta(seconds=60)
# Stands in for a stored hash when no row has the token's lookup; no token hashes to it.
_NO_MATCH_HASH = "0" * 64


@dataclass(frozen=True)
class Principal:
    """Who a bearer credential speaks for. Stands in for request.user on API requests."""

    kind: str  # "agent" | "user" | "service" | "wallet"
    credential_id: str
    agent_id: int | None = None
    wallet_address: str = ""
    scopes: frozenset[str] = field(default_factory=frozenset)
    is_authenticated: bool = True
    is_staff: bool = False
    pk: None = None


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token(prefix: str) -> tuple[str, str, str]:
    """Returns (token, lookup, hashed token) for a new random credential."""
    lookup = secrets.token_hex(6)
    token = f"{prefix}_{lookup}_{secrets.token_urlsafe(32)}"
    return token, lookup, hash_token(token)


class BearerCredentialAuthentication(BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Principal, object] | None:
        header = get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        if len(header) != 2:
            raise AuthenticationFailed("Malformed Authorization header; expected 'Bearer <token>'.")
        try:
            token = header[1].decode()
        except UnicodeDecodeError as exc:
            raise AuthenticationFailed("Malformed bearer token.") from exc
        prefix, _, rest = token.partition("_")
        lookup = rest.partition("_")[0]
        if prefix == WALLET_SESSION_PREFIX:
            return self._wallet_session(token, lookup)
        if prefix in _KIND_BY_PREFIX:
            return self._api_key(token, lookup, _KIND_BY_PREFIX[prefix])
        raise AuthenticationFailed("Invalid or revoked credentials.")

    def authenticate_header(self, request: Request) -> str:
        return self.keyword

    def _api_key(self, token: str, lookup: str, kind: str) -> tuple[Principal, ApiKey]:
        key = ApiKey.objects.filter(lookup=lookup, kind=kind).first()
        # Compared even when no row matched, so the answer takes as long either way.
        stored = key.hashed_key if key is not None else _NO_MATCH_HASH
        if not hmac.compare_digest(stored, hash_token(token)) or key is None or key.revoked_at:
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
            agent_id=key.agent_id,
            wallet_address=key.wallet_address,
            scopes=frozenset(key.scopes or ()),
        )
        return principal, key

    def _wallet_session(self, token: str, lookup: str) -> tuple[Principal, WalletSession]:
        session = WalletSession.objects.filter(lookup=lookup).first()
        stored = session.hashed_token if session is not None else _NO_MATCH_HASH
        if (
            not hmac.compare_digest(stored, hash_token(token))
            or session is None
            or session.revoked_at
            or session.expires_at <= timezone.now()
        ):
            raise AuthenticationFailed("Invalid, expired or revoked wallet session.")
        principal = Principal(kind="wallet", credential_id=f"session:{session.pk}", wallet_address=session.address)
        return principal, session


class BearerCredentialScheme(OpenApiAuthenticationExtension):
    target_class = "agents.authentication.BearerCredentialAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: object) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": (
                "An API key (`ak_…` agent, `uk_…` user, `sk_…` service) or a wallet session "
                "token (`ws_…`) from POST /api/auth/wallet."
            ),
        }
