"""Each web worker remembers the bearer tokens it verified; every change to a key or session is
seen on the next request, in this process through the signal or service and from any other
process through the credentials generation in Redis."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone

from agentplatform.plumbing.cache_generations import CREDENTIALS, generation_key
from agents.models import ApiKey, ApiKeyKind, WalletSession
from agents.services import api_key_create, api_key_revoke, wallet_session_revoke
from tests.agents.factories import bearer, wallet_session_for
from tests.auth.test_bearer_credentials import KEY_REFUSED, PROBE, SESSION_REFUSED

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.auth.urls_probe")]

ADDRESS = "0x" + "ab" * 20


def read_key() -> tuple[ApiKey, str]:
    return api_key_create(kind=ApiKeyKind.SERVICE, name="reader", scopes=["read"])


def test_a_verified_key_is_not_looked_up_again(api_client, django_assert_num_queries):
    key, secret = read_key()
    first = api_client.get(PROBE, **bearer(secret))  # looks the key up (and writes last_used_at)

    with django_assert_num_queries(0):
        second = api_client.get(PROBE, **bearer(secret))

    assert first.status_code == second.status_code == 200
    assert (
        second.json()
        == first.json()
        == {
            "kind": "service",
            "credential_id": f"key:{key.pk}",
            "agent_id": None,
            "wallet_address": "",
            "scopes": ["read"],
        }
    )


def test_revoking_a_remembered_key_refuses_it_on_the_next_request(api_client):
    key, secret = read_key()
    assert api_client.get(PROBE, **bearer(secret)).status_code == 200

    api_key_revoke(key=key)
    response = api_client.get(PROBE, **bearer(secret))

    assert response.status_code == 401
    assert response.json() == KEY_REFUSED


def test_editing_or_deleting_a_key_as_the_admin_does_takes_effect_at_once(api_client):
    key, secret = read_key()
    api_client.get(PROBE, **bearer(secret))

    key.scopes = ["ingest"]
    key.save()
    edited = api_client.get(PROBE, **bearer(secret))
    key.delete()
    deleted = api_client.get(PROBE, **bearer(secret))

    assert edited.json()["scopes"] == ["ingest"]
    assert deleted.status_code == 401


def test_a_revocation_in_another_process_is_seen_through_the_generation(api_client):
    key, secret = read_key()
    api_client.get(PROBE, **bearer(secret))
    # Another process revokes: its row update is invisible here until its bump reaches Redis.
    ApiKey.objects.filter(pk=key.pk).update(revoked_at=timezone.now())
    before_bump = api_client.get(PROBE, **bearer(secret))

    cache._cache.get_client().incr(generation_key(CREDENTIALS))
    after_bump = api_client.get(PROBE, **bearer(secret))

    assert before_bump.status_code == 200
    assert (after_bump.status_code, after_bump.json()) == (401, KEY_REFUSED)


def test_a_new_key_does_not_make_workers_forget_the_others(api_client, django_assert_num_queries):
    _key, secret = read_key()
    api_client.get(PROBE, **bearer(secret))

    read_key()

    with django_assert_num_queries(0):
        assert api_client.get(PROBE, **bearer(secret)).status_code == 200


def test_revoking_a_remembered_wallet_session_refuses_it_on_the_next_request(api_client):
    token = wallet_session_for(ADDRESS)
    assert api_client.get(PROBE, **bearer(token)).status_code == 200

    assert wallet_session_revoke(session=WalletSession.objects.get()) is True
    response = api_client.get(PROBE, **bearer(token))

    assert (response.status_code, response.json()) == (401, SESSION_REFUSED)


def test_a_wallet_session_is_not_remembered_past_its_expiry(api_client):
    token = wallet_session_for(ADDRESS, expires_in=timedelta(seconds=1))
    assert api_client.get(PROBE, **bearer(token)).status_code == 200

    time.sleep(1.1)
    response = api_client.get(PROBE, **bearer(token))

    assert (response.status_code, response.json()) == (401, SESSION_REFUSED)


def test_a_view_without_the_rate_limit_check_always_asks_the_database(api_client):
    key, secret = read_key()
    api_client.get(PROBE, **bearer(secret))  # remembered by this process
    ApiKey.objects.filter(pk=key.pk).update(revoked_at=timezone.now())  # no bump

    response = api_client.get("/api/probe/whoami-unlimited", **bearer(secret))

    assert (response.status_code, response.json()) == (401, KEY_REFUSED)


def test_with_the_cache_off_every_request_looks_the_key_up(api_client, settings, django_assert_num_queries):
    settings.CREDENTIAL_CACHE_SECONDS = 0
    _key, secret = read_key()
    api_client.get(PROBE, **bearer(secret))

    with django_assert_num_queries(1):
        assert api_client.get(PROBE, **bearer(secret)).status_code == 200


def test_with_redis_down_every_token_is_verified_in_the_database(api_client, request):
    key, secret = read_key()
    api_client.get(PROBE, **bearer(secret))
    ApiKey.objects.filter(pk=key.pk).update(revoked_at=timezone.now())  # its bump never arrives
    request.getfixturevalue("redis_unreachable")
    _other, good_secret = read_key()

    refused = api_client.get(PROBE, **bearer(secret))
    accepted = api_client.get(PROBE, **bearer(good_secret))

    assert (refused.status_code, refused.json()) == (401, KEY_REFUSED)
    assert accepted.status_code == 200
