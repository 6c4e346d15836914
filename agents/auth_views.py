"""GET /api/auth/nonce and POST /api/auth/wallet: Sign-In with Ethereum (EIP-4361)."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from agentplatform.plumbing.errors import problem_responses
from agentplatform.plumbing.query_params import query_validated
from agentplatform.plumbing.ratelimits import RateLimitedViewMixin
from agents.auth_serializers import (
    NonceQuerySerializer,
    NonceSerializer,
    WalletSessionSerializer,
    WalletSignInSerializer,
)
from agents.services import wallet_nonce_issue, wallet_session_create
from agents.wallet_auth import SIGN_IN_STATEMENT, wallet_sign_in_message

# Nonces and tokens must never be served from a cache.
NO_STORE = {"Cache-Control": "no-store"}
BAD_CREDENTIALS = "A bearer token was sent but is malformed, unknown, expired or revoked (these endpoints need none)."


class WalletAuthViewSet(RateLimitedViewMixin, viewsets.ViewSet):
    """Public: a wallet proves control of its address and gets a bearer session for it."""

    @extend_schema(
        operation_id="auth_nonce",
        summary="Get a Sign-In with Ethereum nonce",
        description=(
            "Issues a single-use nonce valid for SIWE_NONCE_TTL_SECONDS (default 10 minutes) and what a "
            "client needs to build the EIP-4361 message: the domain the message must name, a URI, version "
            "and chain id. With `address`, `message` is the complete message to sign (EIP-191 personal_sign). "
            "Public."
        ),
        parameters=[NonceQuerySerializer],
        responses={
            200: NonceSerializer,
            **problem_responses({400: "`address` is not an address or `chain_id` not a positive integer."}),
        },
        tags=["auth"],
    )
    def nonce(self, request: Request) -> Response:
        query = query_validated(NonceQuerySerializer, request)
        nonce = wallet_nonce_issue()
        uri = f"{request.scheme}://{settings.SIWE_DOMAIN}/"
        body = {
            "nonce": nonce.nonce,
            "issued_at": nonce.created_at,
            "expires_at": nonce.expires_at,
            "domain": settings.SIWE_DOMAIN,
            "uri": uri,
            "version": "1",
            "chain_id": query["chain_id"],
            "statement": SIGN_IN_STATEMENT,
        }
        if address := query.get("address"):
            body["message"] = wallet_sign_in_message(nonce=nonce, address=address, uri=uri, chain_id=query["chain_id"])
        return Response(NonceSerializer(body).data, headers=NO_STORE)

    @extend_schema(
        operation_id="auth_wallet",
        summary="Sign in with a signed EIP-4361 message",
        description=(
            "Checks the message's domain (SIWE_DOMAIN), its nonce (issued here, unused, unexpired), its "
            "Expiration Time / Not Before, and that the signature recovers the message's address; then "
            "consumes the nonce and returns a bearer session token for that address, valid "
            "WALLET_SESSION_TTL_SECONDS (default 24 hours). A failed attempt changes nothing (the nonce "
            "stays usable until it expires). Problem codes: 400 `invalid` (fields) or `siwe_malformed`; "
            "401 `siwe_bad_signature`, `siwe_domain_mismatch`, `siwe_expired`, `siwe_not_yet_valid`, "
            "`siwe_nonce_invalid` (unknown, used or expired nonce). Public."
        ),
        request=WalletSignInSerializer,
        responses={
            200: WalletSessionSerializer,
            **problem_responses(
                {
                    400: "Missing fields, a signature that is not 65 hex bytes, or not an EIP-4361 message.",
                    401: "Bad signature, wrong domain, expired or not-yet-valid message, or an unknown, used or "
                    "expired nonce. " + BAD_CREDENTIALS,
                }
            ),
        },
        examples=[
            OpenApiExample(
                "Signed message",
                request_only=True,
                value={
                    "message": "localhost:8000 wants you to sign in with your Ethereum account:\n0x…\n\n"
                    "Sign in to the agent platform.\n\nURI: http://localhost:8000/\nVersion: 1\nChain ID: 1\n"
                    "Nonce: 3f9c…\nIssued At: 2026-01-01T00:00:00Z\nExpiration Time: 2026-01-01T00:10:00Z",
                    "signature": "0x…130 hex digits…",
                },
            )
        ],
        tags=["auth"],
    )
    def sign_in(self, request: Request) -> Response:
        payload = WalletSignInSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        session, token = wallet_session_create(
            message=payload.validated_data["message"], signature=payload.validated_data["signature"]
        )
        body = {"token": token, "token_type": "Bearer", "address": session.address, "expires_at": session.expires_at}
        return Response(WalletSessionSerializer(body).data, headers=NO_STORE)
