"""GET /api/auth/nonce and POST /api/auth/wallet with real signatures from test keys."""

from __future__ import annotations

import hashlib
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from agents.models import WalletNonce, WalletSession
from tests.auth.signing import OTHER_WALLET, WALLET, in_minutes, sign, siwe_message

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _siwe_settings(settings):
    settings.SIWE_DOMAIN = "localhost:8000"
    settings.SIWE_NONCE_TTL_SECONDS = 600
    settings.WALLET_SESSION_TTL_SECONDS = 86400


def issue_nonce(client: APIClient) -> str:
    response = client.get("/api/auth/nonce")
    assert response.status_code == 200
    return response.json()["nonce"]


def sign_in(client: APIClient, message: str, signature: str):
    return client.post("/api/auth/wallet", {"message": message, "signature": signature}, format="json")


def problem(status: int, code: str, detail: str, title: str, errors: list | None = None) -> dict:
    body = {"type": f"urn:problem:{code}", "title": title, "status": status, "detail": detail, "code": code}
    if errors is not None:
        body["errors"] = errors
    return body


def nonce_is_unused(nonce: str) -> bool:
    return WalletNonce.objects.get(nonce=nonce).used_at is None


# --- nonce ----------------------------------------------------------------------------------


def test_nonce_is_stored_single_use_for_ten_minutes_and_describes_the_message(api_client):
    before = timezone.now()

    response = api_client.get("/api/auth/nonce")

    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    assert response["X-RateLimit-Limit"] == "100"
    body = response.json()
    stored = WalletNonce.objects.get()
    assert stored.used_at is None
    assert stored.created_at >= before
    assert stored.expires_at - stored.created_at == pytest.approx(timedelta(seconds=600), abs=timedelta(seconds=1))
    assert len(body["nonce"]) == 32 and body["nonce"].isalnum()
    assert body == {
        "nonce": stored.nonce,
        "issued_at": stored.created_at.isoformat().replace("+00:00", "Z"),
        "expires_at": stored.expires_at.isoformat().replace("+00:00", "Z"),
        "domain": "localhost:8000",
        "uri": "http://localhost:8000/",
        "version": "1",
        "chain_id": 1,
        "statement": "Sign in to the agent platform.",
    }


def test_each_nonce_request_gets_a_new_nonce(api_client):
    first, second = issue_nonce(api_client), issue_nonce(api_client)

    assert first != second
    assert WalletNonce.objects.count() == 2


def test_nonce_for_an_address_carries_the_exact_message_to_sign_and_it_signs_in(api_client):
    response = api_client.get("/api/auth/nonce", {"address": WALLET.address.lower(), "chain_id": 8453})

    assert response.status_code == 200
    body = response.json()
    lines = body["message"].split("\n")
    assert lines[:9] == [
        "localhost:8000 wants you to sign in with your Ethereum account:",
        WALLET.address,  # EIP-55 checksum form, as EIP-4361 requires
        "",
        "Sign in to the agent platform.",
        "",
        "URI: http://localhost:8000/",
        "Version: 1",
        "Chain ID: 8453",
        f"Nonce: {body['nonce']}",
    ]
    assert lines[9].startswith("Issued At: ")
    assert lines[10] == f"Expiration Time: {body['expires_at'][:19]}Z"
    assert body["chain_id"] == 8453

    signed_in = sign_in(api_client, body["message"], sign(body["message"]))

    assert signed_in.status_code == 200
    assert signed_in.json()["address"] == WALLET.address.lower()


@pytest.mark.parametrize("address", ["0x1234", "", "0X" + "A" * 40, "a" * 40])
def test_nonce_with_a_bad_address_is_400_and_issues_nothing(api_client, address):
    response = api_client.get("/api/auth/nonce", {"address": address})

    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    message = (
        "must be a 0x-prefixed 40-digit hex wallet address; mixed-case addresses must carry a valid EIP-55 checksum"
    )
    assert response.json() == problem(
        400, "invalid", f"address: {message}", "Invalid input", [{"field": "address", "message": message}]
    )
    assert WalletNonce.objects.count() == 0


def test_expired_nonces_are_cleaned_up_when_new_ones_are_issued(api_client):
    old = WalletNonce.objects.create(nonce="a" * 32, expires_at=timezone.now() - timedelta(hours=2))
    recent = WalletNonce.objects.create(nonce="b" * 32, expires_at=timezone.now() - timedelta(minutes=5))

    new = issue_nonce(api_client)

    assert set(WalletNonce.objects.values_list("nonce", flat=True)) == {recent.nonce, new}
    assert not WalletNonce.objects.filter(pk=old.pk).exists()


# --- sign in: success -----------------------------------------------------------------------


def test_signed_message_returns_a_session_bound_to_the_lower_cased_address(api_client):
    nonce = issue_nonce(api_client)
    message = siwe_message(nonce=nonce, expiration_time=in_minutes(10))
    before = timezone.now()

    response = sign_in(api_client, message, sign(message))

    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    session = WalletSession.objects.get()
    assert body == {
        "token": body["token"],
        "token_type": "Bearer",
        "address": WALLET.address.lower(),
        "expires_at": session.expires_at.isoformat().replace("+00:00", "Z"),
    }
    assert body["token"].startswith(f"ws_{session.lookup}_")
    assert session.address == WALLET.address.lower()
    assert session.hashed_token == hashlib.sha256(body["token"].encode()).hexdigest()
    assert body["token"] not in {session.hashed_token, session.lookup}
    assert session.expires_at - session.created_at == pytest.approx(timedelta(hours=24), abs=timedelta(seconds=2))
    assert session.created_at >= before
    assert WalletNonce.objects.get(nonce=nonce).used_at is not None


def test_signature_without_0x_prefix_is_accepted(api_client):
    message = siwe_message(nonce=issue_nonce(api_client))

    response = sign_in(api_client, message, sign(message).removeprefix("0x"))

    assert response.status_code == 200


def test_a_failed_attempt_leaves_the_nonce_usable(api_client):
    nonce = issue_nonce(api_client)
    message = siwe_message(nonce=nonce)

    refused = sign_in(api_client, message, sign(message, OTHER_WALLET))
    accepted = sign_in(api_client, message, sign(message))

    assert refused.status_code == 401
    assert accepted.status_code == 200
    assert WalletSession.objects.count() == 1


# --- sign in: refused, nothing changes -------------------------------------------------------


def test_replayed_nonce_is_401_and_creates_no_second_session(api_client):
    message = siwe_message(nonce=issue_nonce(api_client))
    signature = sign(message)
    assert sign_in(api_client, message, signature).status_code == 200

    replay = sign_in(api_client, message, signature)

    assert replay.status_code == 401
    assert replay["WWW-Authenticate"] == "Bearer"
    assert replay.json() == problem(
        401,
        "siwe_nonce_invalid",
        "The nonce is unknown, already used or expired; get a new one from GET /api/auth/nonce.",
        "Authentication required",
    )
    assert WalletSession.objects.count() == 1


def test_expired_message_is_401_and_leaves_the_nonce_unused(api_client):
    nonce = issue_nonce(api_client)
    expired_at = in_minutes(-1)
    message = siwe_message(nonce=nonce, issued_at=in_minutes(-5), expiration_time=expired_at)

    response = sign_in(api_client, message, sign(message))

    assert response.status_code == 401
    assert response.json() == problem(
        401,
        "siwe_expired",
        f"The message expired at {expired_at.strftime('%Y-%m-%dT%H:%M:%SZ')}.",
        "Authentication required",
    )
    assert WalletSession.objects.count() == 0
    assert nonce_is_unused(nonce)


def test_message_not_yet_valid_is_401_and_leaves_the_nonce_unused(api_client):
    nonce = issue_nonce(api_client)
    starts = in_minutes(5)
    message = siwe_message(nonce=nonce, not_before=starts)

    response = sign_in(api_client, message, sign(message))

    assert response.status_code == 401
    assert response.json() == problem(
        401,
        "siwe_not_yet_valid",
        f"The message is not valid before {starts.strftime('%Y-%m-%dT%H:%M:%SZ')}.",
        "Authentication required",
    )
    assert WalletSession.objects.count() == 0
    assert nonce_is_unused(nonce)


def test_message_for_another_domain_is_401_and_leaves_the_nonce_unused(api_client):
    nonce = issue_nonce(api_client)
    message = siwe_message(nonce=nonce, domain="evil.example")

    response = sign_in(api_client, message, sign(message))

    assert response.status_code == 401
    assert response.json() == problem(
        401,
        "siwe_domain_mismatch",
        "The message is for domain 'evil.example'; this service signs in 'localhost:8000'.",
        "Authentication required",
    )
    assert WalletSession.objects.count() == 0
    assert nonce_is_unused(nonce)


def test_signature_by_another_address_is_401_and_leaves_the_nonce_unused(api_client):
    nonce = issue_nonce(api_client)
    message = siwe_message(nonce=nonce, address=WALLET.address)

    response = sign_in(api_client, message, sign(message, OTHER_WALLET))

    assert response.status_code == 401
    assert response.json() == problem(
        401, "siwe_bad_signature", "The signature was not made by the message's address.", "Authentication required"
    )
    assert WalletSession.objects.count() == 0
    assert nonce_is_unused(nonce)


def test_signature_over_a_different_text_is_401(api_client):
    nonce = issue_nonce(api_client)
    message = siwe_message(nonce=nonce)
    signed_text = message.replace("Chain ID: 1", "Chain ID: 5")

    response = sign_in(api_client, message, sign(signed_text))

    assert response.status_code == 401
    assert response.json()["code"] == "siwe_bad_signature"
    assert nonce_is_unused(nonce)


def test_signature_that_recovers_no_address_is_401(api_client):
    message = siwe_message(nonce=issue_nonce(api_client))

    response = sign_in(api_client, message, "0x" + "00" * 65)

    assert response.status_code == 401
    assert response.json()["code"] == "siwe_bad_signature"


def test_unknown_nonce_is_401(api_client):
    message = siwe_message(nonce="f" * 32)

    response = sign_in(api_client, message, sign(message))

    assert response.status_code == 401
    assert response.json()["code"] == "siwe_nonce_invalid"
    assert WalletSession.objects.count() == 0


def test_expired_nonce_is_401_and_stays_unused(api_client):
    nonce = issue_nonce(api_client)
    WalletNonce.objects.filter(nonce=nonce).update(expires_at=timezone.now() - timedelta(seconds=1))
    message = siwe_message(nonce=nonce)

    response = sign_in(api_client, message, sign(message))

    assert response.status_code == 401
    assert response.json()["code"] == "siwe_nonce_invalid"
    assert WalletSession.objects.count() == 0
    assert nonce_is_unused(nonce)


def test_malformed_message_is_400_and_leaves_the_nonce_unused(api_client):
    nonce = issue_nonce(api_client)
    message = f"Please let me in. Nonce: {nonce}"

    response = sign_in(api_client, message, sign(message))

    assert response.status_code == 400
    reason = "it does not follow the EIP-4361 format"
    assert response.json() == problem(
        400,
        "siwe_malformed",
        f"message: not an EIP-4361 (Sign-In with Ethereum) message: {reason}.",
        "Invalid input",
        [{"field": "message", "message": f"not an EIP-4361 message: {reason}"}],
    )
    assert WalletSession.objects.count() == 0
    assert nonce_is_unused(nonce)


def test_message_with_a_non_checksum_address_is_400(api_client):
    message = siwe_message(nonce=issue_nonce(api_client), address=WALLET.address.lower())

    response = sign_in(api_client, message, sign(message))

    assert response.status_code == 400
    assert response.json()["code"] == "siwe_malformed"
    assert response.json()["errors"] == [
        {
            "field": "message",
            "message": "not an EIP-4361 message: address: Value error, Message `address` must be in EIP-55 format",
        }
    ]


def test_missing_fields_are_400_with_one_error_per_field(api_client):
    response = api_client.post("/api/auth/wallet", {}, format="json")

    assert response.status_code == 400
    assert response.json() == problem(
        400,
        "invalid",
        "message: This field is required.; signature: This field is required.",
        "Invalid input",
        [
            {"field": "message", "message": "This field is required."},
            {"field": "signature", "message": "This field is required."},
        ],
    )


def test_signature_that_is_not_65_hex_bytes_is_400(api_client):
    message = siwe_message(nonce=issue_nonce(api_client))

    response = sign_in(api_client, message, "0xnot-a-signature")

    assert response.status_code == 400
    text = "must be a 65-byte hex signature (0x followed by 130 hex digits)"
    assert response.json() == problem(
        400, "invalid", f"signature: {text}", "Invalid input", [{"field": "signature", "message": text}]
    )


def test_overlong_message_is_400_before_parsing(api_client):
    response = sign_in(api_client, "x" * 2049, "0x" + "11" * 65)

    assert response.status_code == 400
    assert response.json()["errors"] == [
        {"field": "message", "message": "Ensure this field has no more than 2048 characters."}
    ]


def test_non_json_body_is_415_problem(api_client):
    response = api_client.post("/api/auth/wallet", "message=x&signature=y", content_type="text/plain")

    assert response.status_code == 415
    assert response["Content-Type"] == "application/problem+json"
    assert response.json() == problem(
        415, "unsupported_media_type", 'Unsupported media type "text/plain" in request.', "Unsupported Media Type"
    )
    assert WalletSession.objects.count() == 0


def test_invalid_json_is_400_problem(api_client):
    response = api_client.post("/api/auth/wallet", "{not json", content_type="application/json")

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_json"
    assert response["Content-Type"] == "application/problem+json"


def test_get_on_the_sign_in_endpoint_is_405_problem(api_client):
    response = api_client.get("/api/auth/wallet")

    assert response.status_code == 405
    assert response["Allow"] == "POST, OPTIONS"
    assert response["X-RateLimit-Limit"] == "100"
    assert response.json() == problem(405, "method_not_allowed", 'Method "GET" not allowed.', "Method Not Allowed")


# --- concurrency ----------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_ten_concurrent_replays_of_one_signed_message_get_exactly_one_session():
    nonce = issue_nonce(APIClient())
    message = siwe_message(nonce=nonce)
    signature = sign(message)
    attempts = 10
    barrier = threading.Barrier(attempts)
    answers: list[tuple[int, str | None]] = []

    def attempt() -> None:
        client = APIClient(raise_request_exception=False)
        barrier.wait()
        try:
            response = sign_in(client, message, signature)
            answers.append((response.status_code, response.json().get("code")))
        finally:
            connection.close()  # each thread has its own connection

    threads = [threading.Thread(target=attempt) for _ in range(attempts)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(answers, key=lambda answer: answer[0]) == [(200, None)] + [(401, "siwe_nonce_invalid")] * 9
    assert WalletSession.objects.count() == 1
    assert not nonce_is_unused(nonce)
