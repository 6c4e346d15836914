"""Admin sign-in attempts are limited per client IP and per user name (RATE_LIMIT_ADMIN_LOGIN),
counted in Redis by django-ratelimit's `get_usage`; past the limit a 429 page, and the password is
not tried."""

from __future__ import annotations

import logging
import os
import re

import pytest
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.core.cache import cache
from django.core.checks import run_checks
from django.test import Client

from tests.conftest import redis_cache_at
from tests.redisserver import SilentRedis

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery staple"
LOGIN = "/admin/login/?next=/admin/"


@pytest.fixture(autouse=True)
def _three_attempts(settings):
    settings.RATE_LIMIT_ADMIN_LOGIN = "3/h"
    settings.TRUSTED_PROXY_COUNT = 0


@pytest.fixture
def staff():
    return get_user_model().objects.create_superuser("operator", "operator@example.invalid", PASSWORD)


def client_from(ip: str) -> Client:
    return Client(REMOTE_ADDR=ip)


def sign_in(client: Client, username: str, password: str):
    return client.post(LOGIN, {"username": username, "password": password, "next": "/admin/"})


def refused_page_message(response) -> str:
    html = response.content.decode()
    start = html.index('<p class="errornote">') + len('<p class="errornote">')
    return html[start : html.index("</p>", start)]


def assert_signed_out(client: Client, staff) -> None:
    staff.refresh_from_db()
    assert staff.last_login is None
    assert Session.objects.count() == 0
    assert client.get("/admin/").status_code == 302  # to the sign-in page


def test_the_attempt_after_the_limit_from_one_address_is_429_and_the_password_is_not_tried(staff):
    client = client_from("198.51.100.20")
    failures = [sign_in(client, "operator", f"wrong-{n}") for n in range(3)]
    assert [response.status_code for response in failures] == [200, 200, 200]
    assert all("Please enter the correct username and password" in r.content.decode() for r in failures)

    refused = sign_in(client, "operator", PASSWORD)

    assert refused.status_code == 429
    retry_after = int(refused["Retry-After"])
    assert 1 <= retry_after <= 3600
    assert refused_page_message(refused) == (
        f"Too many sign-in attempts for this address. Try again in {retry_after} second"
        f"{'s' if retry_after != 1 else ''}."
    )
    assert refused["Content-Type"] == "text/html; charset=utf-8"
    assert_signed_out(client, staff)
    # The sign-in page itself is still shown; only attempts count.
    assert client.get(LOGIN).status_code == 200


def test_one_user_name_is_limited_across_addresses(staff):
    for n in range(3):
        assert sign_in(client_from(f"198.51.100.{30 + n}"), "Operator ", "wrong").status_code == 200

    client = client_from("198.51.100.40")
    refused = sign_in(client, "operator", PASSWORD)

    assert refused.status_code == 429
    assert refused_page_message(refused).startswith("Too many sign-in attempts for this user name. Try again in ")
    assert_signed_out(client, staff)
    # Another account from that address is not held back by it.
    get_user_model().objects.create_superuser("auditor", "auditor@example.invalid", PASSWORD)
    assert sign_in(client, "auditor", PASSWORD).status_code == 302


def test_a_correct_password_within_the_limit_signs_in(staff):
    client = client_from("198.51.100.50")
    assert sign_in(client, "operator", "wrong").status_code == 200
    assert sign_in(client, "operator", "still wrong").status_code == 200

    response = sign_in(client, "operator", PASSWORD)

    assert (response.status_code, response["Location"]) == (302, "/admin/")
    staff.refresh_from_db()
    assert staff.last_login is not None
    assert client.get("/admin/").status_code == 200


def test_an_address_already_refused_does_not_use_up_the_user_names_attempts(staff):
    attacker = client_from("198.51.100.60")
    for _ in range(3):
        sign_in(attacker, "someone-else", "guess")
    assert [sign_in(attacker, "operator", "guess").status_code for _ in range(5)] == [429] * 5

    owner = client_from("198.51.100.61")
    assert sign_in(owner, "operator", PASSWORD).status_code == 302


def test_forwarded_for_does_not_reset_the_count_without_trusted_proxies(staff):
    client = client_from("198.51.100.70")
    for n in range(3):
        client.post(LOGIN, {"username": f"user{n}", "password": "x"}, HTTP_X_FORWARDED_FOR=f"203.0.113.{n}")

    refused = client.post(LOGIN, {"username": "operator", "password": PASSWORD}, HTTP_X_FORWARDED_FOR="203.0.113.9")

    assert refused.status_code == 429


def test_redis_down_sign_in_still_works_and_a_warning_is_logged(staff, redis_unreachable, caplog):
    caplog.set_level(logging.WARNING, logger="agentplatform.plumbing.ratelimits")
    client = client_from("198.51.100.80")

    response = sign_in(client, "operator", PASSWORD)

    assert (response.status_code, response["Location"]) == (302, "/admin/")
    assert "Rate-limit counters unavailable" in caplog.text


def test_redis_hung_sign_in_still_works_and_redis_is_tried_once_for_the_retry_interval(staff, settings, caplog):
    caplog.set_level(logging.WARNING, logger="agentplatform.plumbing.ratelimits")
    silent = SilentRedis()
    try:
        settings.CACHES = redis_cache_at(silent.url)
        client = client_from("198.51.100.81")

        # One more than the limit of 3, then the right password: nothing is counted.
        failures = [sign_in(client, "operator", f"wrong-{n}").status_code for n in range(4)]
        response = sign_in(client, "operator", PASSWORD)

        assert failures == [200] * 4
        assert (response.status_code, response["Location"]) == (302, "/admin/")
        assert len(silent.accepted) == 1  # one stalled attempt (the socket timeout), not one per sign-in
        warnings = [r.getMessage() for r in caplog.records if r.name == "agentplatform.plumbing.ratelimits"]
        assert len(warnings) == 1
        assert warnings[0].startswith("Rate-limit counters unavailable (TimeoutError")
    finally:
        silent.close()


def test_counters_are_named_by_a_sha256_without_the_address_or_the_user_name(staff):
    sign_in(client_from("198.51.100.90"), "Operator", "wrong")
    sign_in(client_from("198.51.100.91"), "operator ", "wrong")

    redis = cache._cache.get_client()  # the redis-py client behind Django's RedisCache
    prefix = os.environ["CACHE_KEY_PREFIX"]
    keys = sorted(key.decode() for key in redis.scan_iter(match=f"{prefix}:*"))
    # One counter per address and one for the user name, whatever its case and spaces.
    assert len(keys) == 3
    assert all(re.fullmatch(rf"{prefix}:1:rl:[0-9a-f]{{64}}", key) for key in keys)
    assert sorted(int(redis.get(key)) for key in keys) == [1, 1, 2]
    assert all(0 < redis.ttl(key) <= 3600 + 5 for key in keys)  # the hour-long window and 5 s of slack


def test_the_rate_limit_cache_is_checked_at_start_up_to_be_shared_and_atomic(settings):
    assert [message.id for message in run_checks(tags=["caches"])] == []

    settings.CACHES = {**settings.CACHES, "counters": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

    assert [message.id for message in run_checks(tags=["caches"])] == ["django_ratelimit.E003", "django_ratelimit.W001"]
