"""Bearer credentials: the token format, the DRF authentication class and who a token speaks for.

`Authorization: Bearer <token>`; a token reads `<prefix>_<lookup>_<secret>`. The lookup part finds
the row; the SHA-256 of the whole token is compared in constant time. Tokens are high-entropy
random secrets, so a fast hash is enough (a slow password hash would only slow every request).

Which rows a token is checked against is the identity app's business (API keys and wallet
sessions live in `agents`): settings.CREDENTIAL_VERIFIER names its function, which takes the
token's prefix, lookup and hash and returns a `VerifiedCredential` or raises AuthenticationFailed.
The project's plumbing thus never imports an app; apps import it.

Each web worker remembers the tokens it verified (by hash, never the token) for
CREDENTIAL_CACHE_SECONDS, under the credentials generation current when it asked the database.
Only views with RateLimitedViewMixin use that memory: the mixin's Redis round trip reads the
current generation, and a remembered answer from an older one is verified again at once. Every
change to a key or session (revocation, edit, deletion) bumps the generation, so revocation is
immediate; while Redis is unreachable every token is verified against the database.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from django.conf import settings
from django.utils.module_loading import import_string
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import BaseAuthentication, SessionAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from agentplatform.plumbing.bounded_cache import BoundedCache
from agentplatform.plumbing.cache_generations import CREDENTIALS, generation_get

# What `Principal.kind` says: the three kinds of API key and a wallet session.
AGENT = "agent"
USER = "user"
SERVICE = "service"
WALLET = "wallet"
# Stands in for a stored hash when no row has the token's lookup; no token hashes to it.
_NO_MATCH_HASH = "0" * 64


@dataclass(frozen=True)
class RepositoryScope:
    """The repositories a service key is limited to: those named, and those of the registry
    owners named. A principal without one (None) reads every repository."""

    repositories: frozenset[str] = field(default_factory=frozenset)
    owners: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class Principal:
    """Who a bearer credential speaks for. Stands in for request.user on API requests."""

    kind: str  # AGENT | USER | SERVICE | WALLET
    credential_id: str
    # The token's public part (`sk_<lookup>`), never the secret: what logs and the question audit name.
    key_prefix: str = ""
    agent_id: int | None = None
    wallet_address: str = ""
    scopes: frozenset[str] = field(default_factory=frozenset)
    # Part of the principal, so that it is remembered, and forgotten, with the rest of it.
    repository_scope: RepositoryScope | None = None
    is_authenticated: bool = True
    is_staff: bool = False
    pk: None = None
    # The credentials generation under which this was verified, when it is remembered (see above).
    verified_generation: str | None = None


def request_principal(request: Any) -> Principal:
    """request.user of a view whose permission class admitted only bearer credentials (the
    stubs type request.user as a Django user)."""
    principal = request.user
    assert isinstance(principal, Principal), "the view's permission class admits bearer credentials only"
    return principal


@dataclass(frozen=True)
class VerifiedCredential:
    """What a credential verifier found: the principal, the row (request.auth) and, for a
    credential that ends sooner than a worker would remember it, when it expires."""

    principal: Principal
    row: Any
    expires_at: datetime | None = None


class CredentialVerifier(Protocol):
    def __call__(self, *, prefix: str, lookup: str, token_hash: str) -> VerifiedCredential: ...


# Token hash -> the Principal this process verified it as.
verified_credentials: BoundedCache[str, Principal] = BoundedCache(max_entries=10_000)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token(prefix: str) -> tuple[str, str, str]:
    """Returns (token, lookup, hashed token) for a new random credential."""
    lookup = secrets.token_hex(6)
    token = f"{prefix}_{lookup}_{secrets.token_urlsafe(32)}"
    return token, lookup, hash_token(token)


def token_hash_matches(stored_hash: str | None, token_hash: str) -> bool:
    """Whether a row's stored hash is the token's; compared even when no row was found
    (`stored_hash` None), so that the answer takes as long either way."""
    matches = hmac.compare_digest(stored_hash if stored_hash is not None else _NO_MATCH_HASH, token_hash)
    return matches and stored_hash is not None


@functools.cache
def _verifier(path: str) -> CredentialVerifier:
    return import_string(path)


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
        verify = _verifier(settings.CREDENTIAL_VERIFIER)
        return self._remembered_or(
            request, token_hash, lambda: verify(prefix=prefix, lookup=lookup, token_hash=token_hash)
        )

    def _remembered_or(
        self, request: Request, token_hash: str, verify: Callable[[], VerifiedCredential]
    ) -> tuple[Principal, object]:
        """The remembered principal for this token if the view checks it (see the module
        docstring), else `verify()` against the database, remembered when the generation is known."""
        ttl = settings.CREDENTIAL_CACHE_SECONDS
        if not ttl or not getattr(request, "credential_cache_allowed", False):
            verified = verify()
            return verified.principal, verified.row
        # Set by the mixin when it re-runs authentication: the generation it just read.
        known = getattr(request, "credentials_generation", None)
        remembered = verified_credentials.get(token_hash)
        if remembered is not None and known in (None, remembered.verified_generation):
            return remembered, None
        # Read before the database, so a change committed after the read moves it past this value.
        generation = known if known is not None else generation_get(CREDENTIALS)
        verified = verify()
        if generation is None:
            return verified.principal, verified.row
        principal = dataclasses.replace(verified.principal, verified_generation=generation)
        if verified.expires_at is not None:
            ttl = min(ttl, verified.expires_at.timestamp() - time.time())
        verified_credentials.put(token_hash, principal, ttl_seconds=ttl)
        return principal, verified.row

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


# The endpoints of services and staff: a bearer token (a service key), or the session of a staff
# user signed in to the admin. A bearer header is tried first.
SERVICE_AUTHENTICATION_CLASSES = (BearerCredentialAuthentication, SessionAuthentication)
# The same two as an OpenAPI operation's `security` (drf-spectacular names session auth cookieAuth).
# Security requirement objects: drf-spectacular takes them for `auth` though its hint says names.
SERVICE_OPENAPI_SECURITY: Any = [{"bearerAuth": []}, {"cookieAuth": []}]


class BearerCredentialScheme(OpenApiAuthenticationExtension):
    target_class = "agentplatform.plumbing.authentication.BearerCredentialAuthentication"
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
