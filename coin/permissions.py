"""Who may read a wallet's balance: the wallet itself (a SIWE session) or a user key bound to it."""

from __future__ import annotations

from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView

from agentplatform.plumbing.authentication import USER, WALLET, Principal
from agentplatform.plumbing.errors import Forbidden

WALLET_CREDENTIAL_KINDS = frozenset({WALLET, USER})


class IsWalletCredential(BasePermission):
    """A wallet session or a user key. Anonymous callers get 401 (DRF: not authenticated)."""

    message = "Only a wallet session or a user API key may read a wallet balance."

    def has_permission(self, request: Request, view: APIView) -> bool:
        return getattr(request.user, "kind", None) in WALLET_CREDENTIAL_KINDS


def wallet_read_ensure_allowed(*, principal: Principal, address: str) -> None:
    """Raises Forbidden unless the credential is bound to `address` (both lower case)."""
    if principal.wallet_address.lower() != address:
        raise Forbidden("These credentials are bound to another wallet address.", code="wallet_not_yours")
