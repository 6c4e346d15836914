"""Bearer credentials on a real request: wallet sessions from SIWE and the three API key kinds."""

from __future__ import annotations

import hashlib
import hmac
from datetime import timedelta
from decimal import Decimal

import pytest
from django.conf import settings
from django.utils import timezone

from agentplatform.plumbing.authentication import verified_credentials
from agents.models import ApiKey, ApiKeyKind, WalletSession
from agents.services import api_key_create, api_key_revoke
from tests.agents.factories import AgentFactory, bearer
from tests.auth.signing import OTHER_WALLET, WALLET, sign, siwe_message
from tests.coin.factories import WalletFactory

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.auth.urls_probe")]

PROBE = "/api/probe/whoami"


@pytest.fixture(autouse=True)
def _siwe_domain(settings):
    settings.SIWE_DOMAIN = "localhost:8000"


def signed_in_token(client, account=WALLET) -> str:
    nonce = client.get("/api/auth/nonce").json()["nonce"]
    message = siwe_message(nonce=nonce, address=account.address)
    response = client.post("/api/auth/wallet", {"message": message, "signature": sign(message, account)}, format="json")
    assert response.status_code == 200
    return response.json()["token"]


def unauthorized(detail: str) -> dict:
    return {
        "type": "urn:problem:authentication_failed",
        "title": "Unauthorized",
        "status": 401,
        "detail": detail,
        "code": "authentication_failed",
    }


SESSION_REFUSED = unauthorized("Invalid, expired or revoked wallet session.")
KEY_REFUSED = unauthorized("Invalid or revoked credentials.")


# --- wallet sessions ------------------------------------------------------------------------


def test_wallet_session_from_sign_in_authenticates_as_the_wallet(api_client):
    token = signed_in_token(api_client)
    session = WalletSession.objects.get()

    response = api_client.get(PROBE, **bearer(token))

    assert response.status_code == 200
    assert response.json() == {
        "kind": "wallet",
        "credential_id": f"session:{session.pk}",
        "agent_id": None,
        "wallet_address": WALLET.address.lower(),
        "scopes": [],
    }
    assert response["X-RateLimit-Limit"] == "500"


def test_wallet_session_reads_its_own_balance_and_not_another(api_client):
    WalletFactory(address=WALLET.address.lower(), balance=Decimal("42.5"))
    WalletFactory(address=OTHER_WALLET.address.lower(), balance=Decimal("9"))
    token = signed_in_token(api_client)
    url = f"/api/{settings.COIN_SEGMENT}/balance"

    own = api_client.get(url, {"user_id": WALLET.address}, **bearer(token))
    other = api_client.get(url, {"user_id": OTHER_WALLET.address}, **bearer(token))

    assert own.status_code == 200
    assert own.json() == {"balance": 42.5}
    assert other.status_code == 403
    assert other.json()["code"] == "wallet_not_yours"


def test_no_credentials_on_a_protected_view_is_401_with_a_bearer_challenge(api_client):
    response = api_client.get(PROBE)

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    assert response["Content-Type"] == "application/problem+json"
    assert response.json() == {
        "type": "urn:problem:not_authenticated",
        "title": "Unauthorized",
        "status": 401,
        "detail": "Authentication credentials were not provided.",
        "code": "not_authenticated",
    }


def test_expired_wallet_session_is_401(api_client):
    token = signed_in_token(api_client)
    WalletSession.objects.update(expires_at=timezone.now() - timedelta(seconds=1))

    response = api_client.get(PROBE, **bearer(token))

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    assert response.json() == SESSION_REFUSED


def test_revoked_wallet_session_is_401(api_client):
    from agents.services import wallet_session_revoke

    token = signed_in_token(api_client)
    assert wallet_session_revoke(session=WalletSession.objects.get()) is True

    response = api_client.get(PROBE, **bearer(token))

    assert response.status_code == 401
    assert response.json() == SESSION_REFUSED
    assert wallet_session_revoke(session=WalletSession.objects.get()) is False


def test_wallet_session_with_a_forged_secret_is_401(api_client):
    token = signed_in_token(api_client)
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")

    response = api_client.get(PROBE, **bearer(forged))

    assert response.status_code == 401
    assert response.json() == SESSION_REFUSED


@pytest.mark.parametrize(
    ("header", "detail"),
    [
        ("Bearer", "Malformed Authorization header; expected 'Bearer <token>'."),
        ("Bearer a b", "Malformed Authorization header; expected 'Bearer <token>'."),
        ("Bearer zz_123_abc", "Invalid or revoked credentials."),
        ("Bearer ak_nosuchlookup_secret", "Invalid or revoked credentials."),
    ],
)
def test_malformed_or_unknown_bearer_tokens_are_401(api_client, header, detail):
    response = api_client.get(PROBE, HTTP_AUTHORIZATION=header)

    assert response.status_code == 401
    assert response.json() == unauthorized(detail)


def test_a_bad_token_on_a_public_endpoint_is_401_not_ignored(api_client):
    response = api_client.get("/api/agents", **bearer("ak_nosuchlookup_secret"))

    assert response.status_code == 401
    assert response.json() == KEY_REFUSED
    assert response["X-RateLimit-Limit"] == "100"  # counted per IP: the credential was refused


# --- API keys -------------------------------------------------------------------------------


def test_each_key_kind_authenticates_as_its_binding(api_client):
    agent = AgentFactory()
    agent_key, agent_secret = api_key_create(kind=ApiKeyKind.AGENT, name="a", agent=agent)
    user_key, user_secret = api_key_create(kind=ApiKeyKind.USER, name="u", wallet_address=WALLET.address)
    service_key, service_secret = api_key_create(kind=ApiKeyKind.SERVICE, name="s", scopes=["ingest", "read"])

    as_agent = api_client.get(PROBE, **bearer(agent_secret)).json()
    as_user = api_client.get(PROBE, **bearer(user_secret)).json()
    as_service = api_client.get(PROBE, **bearer(service_secret)).json()

    assert as_agent == {
        "kind": "agent",
        "credential_id": f"key:{agent_key.pk}",
        "agent_id": agent.pk,
        "wallet_address": "",
        "scopes": [],
    }
    assert as_user == {
        "kind": "user",
        "credential_id": f"key:{user_key.pk}",
        "agent_id": None,
        "wallet_address": WALLET.address.lower(),
        "scopes": [],
    }
    assert as_service == {
        "kind": "service",
        "credential_id": f"key:{service_key.pk}",
        "agent_id": None,
        "wallet_address": "",
        "scopes": ["ingest", "read"],
    }


def test_revoked_key_is_401_and_its_row_is_unchanged(api_client):
    key, secret = api_key_create(kind=ApiKeyKind.SERVICE, name="s", scopes=["read"])
    assert api_client.get(PROBE, **bearer(secret)).status_code == 200
    api_key_revoke(key=key)
    before = ApiKey.objects.values().get(pk=key.pk)

    response = api_client.get(PROBE, **bearer(secret))

    assert response.status_code == 401
    assert response.json() == KEY_REFUSED
    assert ApiKey.objects.values().get(pk=key.pk) == before


def test_key_of_another_kind_prefix_is_401(api_client):
    _, secret = api_key_create(kind=ApiKeyKind.SERVICE, name="s", scopes=["read"])

    response = api_client.get(PROBE, **bearer("ak_" + secret.removeprefix("sk_")))

    assert response.status_code == 401
    assert response.json() == KEY_REFUSED


def test_key_secret_is_compared_in_constant_time(api_client, monkeypatch):
    key, secret = api_key_create(kind=ApiKeyKind.SERVICE, name="s", scopes=["read"])
    real_compare = hmac.compare_digest
    comparisons: list[tuple[str, str]] = []

    def recording_compare(a, b):
        comparisons.append((a, b))
        return real_compare(a, b)

    monkeypatch.setattr(hmac, "compare_digest", recording_compare)
    wrong = secret[:-1] + ("x" if secret[-1] != "x" else "y")

    accepted = api_client.get(PROBE, **bearer(secret))
    refused = api_client.get(PROBE, **bearer(wrong))
    unknown = api_client.get(PROBE, **bearer("sk_000000000000_" + "a" * 43))

    assert (accepted.status_code, refused.status_code, unknown.status_code) == (200, 401, 401)
    assert comparisons == [
        (key.hashed_key, hashlib.sha256(secret.encode()).hexdigest()),
        (key.hashed_key, hashlib.sha256(wrong.encode()).hexdigest()),
        ("0" * 64, hashlib.sha256(("sk_000000000000_" + "a" * 43).encode()).hexdigest()),
    ]


def test_last_used_at_is_set_on_use_and_refreshed_at_most_once_a_minute(api_client):
    key, secret = api_key_create(kind=ApiKeyKind.SERVICE, name="s", scopes=["read"])
    assert key.last_used_at is None

    api_client.get(PROBE, **bearer(secret))
    first = ApiKey.objects.get(pk=key.pk).last_used_at
    api_client.get(PROBE, **bearer(secret))
    second = ApiKey.objects.get(pk=key.pk).last_used_at
    stale = timezone.now() - timedelta(minutes=5)
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=stale)
    verified_credentials.clear()  # as when the worker's remembered verification expires
    api_client.get(PROBE, **bearer(secret))
    third = ApiKey.objects.get(pk=key.pk).last_used_at

    assert first is not None
    assert second == first
    assert third > stale + timedelta(minutes=4)


def test_refused_key_does_not_touch_last_used_at(api_client):
    key, secret = api_key_create(kind=ApiKeyKind.SERVICE, name="s", scopes=["read"])

    api_client.get(PROBE, **bearer(secret[:-1] + ("x" if secret[-1] != "x" else "y")))

    assert ApiKey.objects.get(pk=key.pk).last_used_at is None
