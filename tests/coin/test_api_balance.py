from datetime import timedelta
from decimal import Decimal

import pytest
from django.conf import settings

from coin.models import Wallet
from tests.agents.factories import (
    AgentFactory,
    agent_key_for,
    bearer,
    service_key,
    user_key_for,
    wallet_session_for,
)
from tests.coin.factories import WalletFactory

pytestmark = pytest.mark.django_db

# A published EIP-55 test vector.
CHECKSUMMED = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
ADDRESS = CHECKSUMMED.lower()
OTHER = "0x" + "1" * 40
URL = f"/api/{settings.COIN_SEGMENT}/balance"
ADDRESS_RULE = (
    "must be a 0x-prefixed 40-digit hex wallet address; mixed-case addresses must carry a valid EIP-55 checksum"
)


def _problem(status: int, code: str, title: str, detail: str, **extra) -> dict:
    return {"type": f"urn:problem:{code}", "title": title, "status": status, "detail": detail, "code": code, **extra}


def test_wallet_session_reads_its_balance(api_client):
    WalletFactory(address=ADDRESS, balance=Decimal("1234.5"))

    response = api_client.get(URL, {"user_id": ADDRESS}, **bearer(wallet_session_for(ADDRESS)))

    assert response.status_code == 200
    assert response.json() == {"balance": 1234.5}
    assert response["X-RateLimit-Limit"] == "500"


@pytest.mark.parametrize("written", [CHECKSUMMED, ADDRESS, "0x" + ADDRESS[2:].upper()])
def test_address_is_matched_case_insensitively(api_client, written):
    WalletFactory(address=ADDRESS, balance=Decimal("7"))

    response = api_client.get(URL, {"user_id": written}, **bearer(wallet_session_for(ADDRESS)))

    assert response.status_code == 200
    assert response.json() == {"balance": 7.0}


def test_user_key_bound_to_the_address_reads_it(api_client):
    WalletFactory(address=ADDRESS, balance=Decimal("0.00000001"))

    response = api_client.get(URL, {"user_id": CHECKSUMMED}, **bearer(user_key_for(CHECKSUMMED)))

    assert response.status_code == 200
    assert response.json() == {"balance": 1e-08}


def test_address_without_wallet_has_balance_zero(api_client):
    response = api_client.get(URL, {"user_id": ADDRESS}, **bearer(user_key_for(ADDRESS)))

    assert response.status_code == 200
    assert response.json() == {"balance": 0.0}
    assert not Wallet.objects.exists()


def test_anonymous_is_401(api_client):
    WalletFactory(address=ADDRESS)

    response = api_client.get(URL, {"user_id": ADDRESS})

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    assert response.json() == _problem(
        401, "not_authenticated", "Unauthorized", "Authentication credentials were not provided."
    )


def test_anonymous_with_malformed_address_is_still_401(api_client):
    assert api_client.get(URL, {"user_id": "nope"}).status_code == 401


def test_session_of_another_address_is_403(api_client):
    WalletFactory(address=ADDRESS, balance=Decimal("5"))

    response = api_client.get(URL, {"user_id": ADDRESS}, **bearer(wallet_session_for(OTHER)))

    assert response.status_code == 403
    assert response.json() == _problem(
        403, "wallet_not_yours", "Forbidden", "These credentials are bound to another wallet address."
    )


def test_user_key_of_another_address_is_403(api_client):
    response = api_client.get(URL, {"user_id": ADDRESS}, **bearer(user_key_for(OTHER)))

    assert response.status_code == 403
    assert response.json()["code"] == "wallet_not_yours"


@pytest.mark.parametrize("key", ["agent", "service"])
def test_agent_and_service_keys_are_403(api_client, key):
    token = agent_key_for(AgentFactory()) if key == "agent" else service_key(["read", "ingest"])

    response = api_client.get(URL, {"user_id": ADDRESS}, **bearer(token))

    assert response.status_code == 403
    assert response.json() == _problem(
        403, "forbidden", "Forbidden", "Only a wallet session or a user API key may read a wallet balance."
    )


def test_expired_wallet_session_is_401(api_client):
    token = wallet_session_for(ADDRESS, expires_in=timedelta(seconds=-1))

    response = api_client.get(URL, {"user_id": ADDRESS}, **bearer(token))

    assert response.status_code == 401
    assert response.json()["detail"] == "Invalid, expired or revoked wallet session."


def test_revoked_user_key_is_401(api_client):
    from agents.models import ApiKey
    from agents.services import api_key_revoke

    token = user_key_for(ADDRESS)
    api_key_revoke(key=ApiKey.objects.get(wallet_address=ADDRESS))

    response = api_client.get(URL, {"user_id": ADDRESS}, **bearer(token))

    assert response.status_code == 401
    assert response.json()["code"] == "authentication_failed"


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({}, f"required: {ADDRESS_RULE}"),
        ({"user_id": ""}, f"required: {ADDRESS_RULE}"),
        ({"user_id": "abc"}, ADDRESS_RULE),
        ({"user_id": "0x123"}, ADDRESS_RULE),
        ({"user_id": ADDRESS[2:]}, ADDRESS_RULE),
        ({"user_id": "0X" + ADDRESS[2:]}, ADDRESS_RULE),
        ({"user_id": ADDRESS + "0"}, ADDRESS_RULE),
        ({"user_id": "0x" + "g" * 40}, ADDRESS_RULE),
        # The checksummed address with one letter's case flipped.
        ({"user_id": CHECKSUMMED.replace("aA", "aa", 1)}, "the mixed-case address does not match its EIP-55 checksum"),
    ],
)
def test_malformed_user_id_is_400_naming_the_rule(api_client, query, message):
    response = api_client.get(URL, query, **bearer(wallet_session_for(ADDRESS)))

    assert response.status_code == 400
    assert response.json() == _problem(
        400, "invalid", "Invalid input", f"user_id: {message}", errors=[{"field": "user_id", "message": message}]
    )


def test_balance_runs_one_query_besides_authentication(api_client, django_assert_num_queries):
    token = wallet_session_for(ADDRESS)
    WalletFactory(address=ADDRESS)

    # One to find the wallet session, one for the balance.
    with django_assert_num_queries(2):
        assert api_client.get(URL, {"user_id": ADDRESS}, **bearer(token)).status_code == 200
