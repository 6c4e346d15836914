"""Bearer credentials: API keys (agent, user, service) and wallet sessions from SIWE.

`Authorization: Bearer <token>`. Keys read `ak_|uk_|sk_<lookup>_<secret>`, wallet sessions
`ws_<lookup>_<secret>`. The lookup part finds the row; the SHA-256 of the whole token is
compared in constant time. Keys are high-entropy random secrets, so a fast hash is enough
(a slow password hash would only slow every request).

Each web worker remembers the tokens it verified (by hash, never the token) for
CREDENTIAL_CACHE_SECONDS, under the credentials generation current when it asked the database.
Only views with RateLimitedViewMixin use that memory: the mixin's Redis round trip reads the
current generation, and a remembered answer from an older one is verified again at once. Every
change to a key or session (revocation, edit, deletion) bumps the generation, so revocation is
immediate; while Redis is unreachable every token is verified against the database.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from agentplatform.cache_generations import CREDENTIALS, generation_get
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
    # The credentials generation under which this was verified, when it is remembered (see above).
    verified_generation: str | None = None


class VerifiedCredentialCache:
    """Token hash -> (expiry on the wall clock, Principal) of tokens this process verified."""

    max_entries = 10_000

    def __init__(self) -> None:
        self._entries: dict[str, tuple[float, Principal]] = {}
        self._lock = threading.Lock()

    def get(self, token_hash: str) -> Principal | None:
        entry = self._entries.get(token_hash)
        if entry is None or entry[0] <= time.time():
            return None
        return entry[1]

    def put(self, token_hash: str, principal: Principal, *, expires_at: float) -> None:
        with self._lock:
            if len(self._entries) >= self.max_entries:
                self._entries.clear()
            self._entries[token_hash] = (expires_at, principal)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


verified_credentials = VerifiedCredentialCache()


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
        token_hash = hash_token(token)
        if prefix == WALLET_SESSION_PREFIX:
            return self._remembered_or(request, token_hash, lambda: self._wallet_session(token_hash, lookup))
        if prefix in _KIND_BY_PREFIX:
            kind = _KIND_BY_PREFIX[prefix]
            return self._remembered_or(request, token_hash, lambda: self._api_key(token_hash, lookup, kind))
        raise AuthenticationFailed("Invalid or revoked credentials.")

    def _remembered_or(
        self, request: Request, token_hash: str, verify: Callable[[], tuple[Principal, ApiKey | WalletSession]]
    ) -> tuple[Principal, ApiKey | WalletSession | None]:
        """The remembered principal for this token if the view checks it (see the module
        docstring), else `verify()` against the database, remembered when the generation is known."""
        ttl = settings.CREDENTIAL_CACHE_SECONDS
        if not ttl or not getattr(request, "credential_cache_allowed", False):
            return verify()
        # Set by the mixin when it re-runs authentication: the generation it just read.
        known = getattr(request, "credentials_generation", None)
        remembered = verified_credentials.get(token_hash)
        if remembered is not None and known in (None, remembered.verified_generation):
            return remembered, None
        # Read before the database, so a change committed after the read moves it past this value.
        generation = known if known is not None else generation_get(CREDENTIALS)
        principal, row = verify()
        if generation is None:
            return principal, row
        principal = dataclasses.replace(principal, verified_generation=generation)
        expires_at = time.time() + ttl
        if isinstance(row, WalletSession):
            expires_at = min(expires_at, row.expires_at.timestamp())
        verified_credentials.put(token_hash, principal, expires_at=expires_at)
        return principal, row

    def authenticate_header(self, request: Request) -> str:
        return self.keyword

    def _api_key(self, token_hash: str, lookup: str, kind: str) -> tuple[Principal, ApiKey]:
        key = ApiKey.objects.filter(lookup=lookup, kind=kind).first()
        # Compared even when no row matched, so the answer takes as long either way.
        stored = key.hashed_key if key is not None else _NO_MATCH_HASH
        if not hmac.compare_digest(stored, token_hash) or key is None or key.revoked_at:
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

    def _wallet_session(self, token_hash: str, lookup: str) -> tuple[Principal, WalletSession]:
        session = WalletSession.objects.filter(lookup=lookup).first()
        stored = session.hashed_token if session is not None else _NO_MATCH_HASH
        if (
            not hmac.compare_digest(stored, token_hash)
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
