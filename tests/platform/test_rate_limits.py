"""Rate limits: classes, keys, headers, 429, counting in Redis across processes, Redis down."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.cache import cache
from redis import Redis
from rest_framework.test import APIClient

from agentplatform.plumbing.rate_counters import counter_increment, window_end
from agentplatform.plumbing.ratelimits import count_request, parse_rate
from agents.models import ApiKeyKind
from agents.services import api_key_create
from tests.agents.factories import AgentFactory, bearer
from tests.conftest import closed_port, redis_cache_at
from tests.redisserver import SilentRedis, redis_server

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.platform.urls_testonly")]

BASE_DIR = Path(django_settings.BASE_DIR)


@pytest.fixture(autouse=True)
def _small_limits(settings):
    settings.RATE_LIMIT_PUBLIC = "3/m"
    settings.RATE_LIMIT_AUTHENTICATED = "4/m"
    settings.RATE_LIMIT_TRADING = "2/m"
    settings.TRUSTED_PROXY_COUNT = 0


def client_from(ip: str) -> APIClient:
    return APIClient(raise_request_exception=False, REMOTE_ADDR=ip)


def service_secret() -> str:
    return api_key_create(kind=ApiKeyKind.SERVICE, name="s", scopes=["read"])[1]


def limit_headers(response) -> tuple[str | None, str | None]:
    return response.get("X-RateLimit-Limit"), response.get("X-RateLimit-Remaining")


# --- public: per IP -------------------------------------------------------------------------


def test_public_limit_counts_down_then_answers_429_with_retry_after():
    client = client_from("198.51.100.1")
    before = int(time.time())

    answers = [client.get("/api/agents") for _ in range(4)]

    assert [r.status_code for r in answers] == [200, 200, 200, 429]
    assert [limit_headers(r) for r in answers] == [("3", "2"), ("3", "1"), ("3", "0"), ("3", "0")]
    resets = {int(r["X-RateLimit-Reset"]) for r in answers}
    assert len(resets) == 1
    reset = resets.pop()
    assert before < reset <= before + 61
    refused = answers[3]
    retry_after = int(refused["Retry-After"])
    assert 1 <= retry_after <= 60
    assert refused["Content-Type"] == "application/problem+json"
    assert refused.json() == {
        "type": "urn:problem:rate_limited",
        "title": "Too many requests",
        "status": 429,
        "detail": f"Rate limit of 3 requests per window exceeded; retry in {retry_after} s.",
        "code": "rate_limited",
    }


def test_each_client_ip_has_its_own_public_count():
    first, second = client_from("198.51.100.1"), client_from("198.51.100.2")
    for _ in range(3):
        first.get("/api/agents")

    assert first.get("/api/agents").status_code == 429
    response = second.get("/api/agents")
    assert response.status_code == 200
    assert response["X-RateLimit-Remaining"] == "2"


def test_all_public_endpoints_share_one_count_per_ip():
    client = client_from("198.51.100.3")
    AgentFactory(instance_id="alpha")

    client.get("/api/agents")
    client.get("/api/profile/alpha")
    client.get("/api/auth/nonce")

    assert client.get("/api/chat").status_code == 429


def test_errors_of_a_limited_endpoint_carry_the_headers_too():
    client = client_from("198.51.100.4")

    bad_query = client.get("/api/agents", {"status": "bogus"})
    unknown = client.get("/api/profile/no-such-agent")
    wrong_method = client.delete("/api/agents")

    assert [r.status_code for r in (bad_query, unknown, wrong_method)] == [400, 404, 405]
    assert [limit_headers(r) for r in (bad_query, unknown, wrong_method)] == [("3", "2"), ("3", "1"), ("3", "0")]


def test_forwarded_for_is_ignored_without_trusted_proxies():
    client = client_from("198.51.100.5")
    for n in range(3):
        client.get("/api/agents", HTTP_X_FORWARDED_FOR=f"203.0.113.{n}")

    response = client.get("/api/agents", HTTP_X_FORWARDED_FOR="203.0.113.99")

    assert response.status_code == 429


def test_forwarded_for_is_read_through_the_trusted_proxy_count(settings):
    settings.TRUSTED_PROXY_COUNT = 1
    proxy = client_from("10.0.0.1")
    for _ in range(3):
        proxy.get("/api/agents", HTTP_X_FORWARDED_FOR="spoofed-by-client, 203.0.113.7")

    same_client = proxy.get("/api/agents", HTTP_X_FORWARDED_FOR="1.2.3.4, 203.0.113.7")
    other_client = proxy.get("/api/agents", HTTP_X_FORWARDED_FOR="203.0.113.7, 203.0.113.8")

    assert same_client.status_code == 429  # the client-written left part is ignored
    assert other_client.status_code == 200
    assert other_client["X-RateLimit-Remaining"] == "2"


def test_a_forwarded_value_that_is_no_ip_falls_back_to_the_peer_address(settings):
    settings.TRUSTED_PROXY_COUNT = 1
    proxy = client_from("10.0.0.2")
    for n in range(3):
        proxy.get("/api/agents", HTTP_X_FORWARDED_FOR=f"not-an-ip-{n}")

    assert proxy.get("/api/agents", HTTP_X_FORWARDED_FOR="still-not-an-ip").status_code == 429


# --- authenticated: per credential ----------------------------------------------------------


def test_authenticated_limit_is_per_credential():
    first, second = service_secret(), service_secret()
    client = client_from("198.51.100.6")

    answers = [client.get("/api/agents", **bearer(first)) for _ in range(5)]
    other_key = client.get("/api/agents", **bearer(second))
    anonymous = client.get("/api/agents")

    assert [r.status_code for r in answers] == [200, 200, 200, 200, 429]
    assert [limit_headers(r) for r in answers[:4]] == [("4", "3"), ("4", "2"), ("4", "1"), ("4", "0")]
    assert (other_key.status_code, limit_headers(other_key)) == (200, ("4", "3"))
    assert (anonymous.status_code, limit_headers(anonymous)) == (200, ("3", "2"))


def test_refused_credentials_count_per_ip_and_past_the_limit_get_429_not_401():
    client = client_from("198.51.100.7")
    guesses = [client.get("/api/agents", **bearer(f"sk_00000000000{n}_guess")) for n in range(4)]

    assert [r.status_code for r in guesses] == [401, 401, 401, 429]
    assert [limit_headers(r) for r in guesses] == [("3", "2"), ("3", "1"), ("3", "0"), ("3", "0")]
    assert guesses[0]["WWW-Authenticate"] == "Bearer"


# --- trading: per key -----------------------------------------------------------------------


def test_trading_actions_have_their_own_smaller_limit_per_key():
    secret = service_secret()
    client = client_from("198.51.100.8")

    trades = [client.post("/api/test/trade", **bearer(secret)) for _ in range(3)]
    quote = client.get("/api/test/quote", **bearer(secret))
    other_key_trade = client.post("/api/test/trade", **bearer(service_secret()))

    assert [r.status_code for r in trades] == [200, 200, 429]
    assert [limit_headers(r) for r in trades] == [("2", "1"), ("2", "0"), ("2", "0")]
    assert trades[2].json()["detail"].startswith("Rate limit of 2 requests per window exceeded")
    assert (quote.status_code, limit_headers(quote)) == (200, ("4", "3"))
    assert (other_key_trade.status_code, limit_headers(other_key_trade)) == (200, ("2", "1"))


# --- counted in Redis, shared by every process -------------------------------------------------


def test_counts_live_in_redis_under_the_cache_prefix_without_the_address():
    client_from("198.51.100.9").get("/api/agents")
    client_from("198.51.100.9").get("/api/agents")

    redis = cache._cache.get_client()
    keys = [key.decode() for key in redis.scan_iter(match=f"{os.environ['CACHE_KEY_PREFIX']}:*:rl:*")]
    assert len(keys) == 1
    assert "198.51.100.9" not in keys[0]  # the counter is named by a SHA-256
    assert int(redis.get(keys[0])) == 2
    assert 0 < redis.ttl(keys[0]) <= 65  # the one-minute window and 5 s of slack


def test_another_process_shares_the_same_counter(settings):
    """A second Python process (as a second gunicorn worker would be) counts into the same window."""
    # A day-long window: the child process takes seconds to start, and a one-minute window could
    # roll over in between (each key's window starts at an offset of its own).
    settings.RATE_LIMIT_PUBLIC = "3/d"
    client = client_from("198.51.100.10")
    assert client.get("/api/agents")["X-RateLimit-Remaining"] == "2"
    script = (
        "import django, json; django.setup();"
        "from agentplatform.plumbing.ratelimits import count_request;"
        "u = count_request(rate_class='public', key='ip:198.51.100.10');"
        "print(json.dumps([u.limit, u.remaining]))"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "agentplatform.settings",
        "RATE_LIMIT_PUBLIC": "3/d",
        # The other process needs no database; keep it off the embedded server.
        "DATABASE_URL": "sqlite:///:memory:",
    }
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=120
    )

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == [3, 1]
    third = client.get("/api/agents")
    fourth = client.get("/api/agents")
    assert (third.status_code, third["X-RateLimit-Remaining"]) == (200, "0")
    assert fourth.status_code == 429


def test_a_request_is_counted_and_its_cache_generations_read_in_one_redis_call(settings):
    """The count and the cache generations a cached read checks: one script call per request
    (agentplatform/plumbing/rate_counters.py), counted on a Redis of the test's own."""
    AgentFactory(name="Alpha")
    with redis_server() as own:
        settings.CACHES = redis_cache_at(own.url)
        client = client_from("198.51.100.15")
        first = client.get("/api/agents")  # the window's first request creates the counter
        redis = Redis.from_url(own.url)
        redis.config_resetstat()

        hit = client.get("/api/agents")  # answered from the response cache, before DRF
        uncached = client.get("/api/agents", HTTP_CACHE_CONTROL="no-cache")  # through DRF, from the database

        calls = {
            name.removeprefix("cmdstat_"): stats["calls"]
            for name, stats in redis.info("commandstats").items()
            if name not in ("cmdstat_info", "cmdstat_config|resetstat")  # the test's own
        }
        counters = [key for key in redis.scan_iter(match="down:*:rl:*")]
        counted = int(redis.get(counters[0]))
        redis.close()

    assert [r.status_code for r in (first, hit, uncached)] == [200, 200, 200]
    assert [r["X-RateLimit-Remaining"] for r in (first, hit, uncached)] == ["2", "1", "0"]
    assert hit.content == uncached.content == first.content
    # One EVALSHA from the worker per request; Redis also counts the commands the script ran: the
    # counter's SET NX (the window has it: no effect) and INCR, and the two generations' GET.
    assert calls == {"evalsha": 2, "set": 2, "incr": 2, "get": 4}
    assert (len(counters), counted) == (1, 3)


COUNTING_PROCESS = """
import json, os, sys, time
import django
django.setup()
from agentplatform.plumbing.ratelimits import count_request
go_file, key, hits = sys.argv[1], sys.argv[2], int(sys.argv[3])
print("ready", flush=True)
while not os.path.exists(go_file):
    time.sleep(0.01)
usages = [count_request(rate_class="public", key=key) for _ in range(hits)]
print(json.dumps([[usage.remaining, usage.exceeded] for usage in usages]), flush=True)
"""


def test_two_processes_counting_at_once_allow_exactly_the_limit_between_them(tmp_path):
    """Two processes (as two gunicorn workers would be) hammer one counter at the same moment."""
    go_file = tmp_path / "go"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "agentplatform.settings",
        "RATE_LIMIT_PUBLIC": "25/d",  # a day-long window: no rollover while the processes start
        "DATABASE_URL": "sqlite:///:memory:",
    }
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", COUNTING_PROCESS, str(go_file), "ip:198.51.100.14", "20"],
            cwd=BASE_DIR,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        for worker in workers:
            assert worker.stdout.readline() == "ready\n", worker.stderr.read()
        go_file.touch()
        outputs = [worker.communicate(timeout=60) for worker in workers]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()

    assert [worker.returncode for worker in workers] == [0, 0], [stderr for _, stderr in outputs]
    usages = [usage for stdout, _ in outputs for usage in json.loads(stdout)]
    allowed = sorted(remaining for remaining, exceeded in usages if not exceeded)
    # 40 hits against 25: every count from 1 to 25 was handed out once, across both processes.
    assert allowed == list(range(25))
    assert sum(1 for _, exceeded in usages if exceeded) == 15
    assert all(len(json.loads(stdout)) == 20 for stdout, _ in outputs)


def test_concurrent_requests_are_each_counted_once():
    results: list[int | None] = []

    def hit() -> None:
        usage = count_request(rate_class="public", key="ip:198.51.100.11")
        results.append(usage.remaining if usage else None)

    threads = [threading.Thread(target=hit) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # 8 hits against a limit of 3: remaining 2, 1, 0 once each, then 0 five more times.
    assert sorted(results) == [0, 0, 0, 0, 0, 0, 1, 2]


# --- Redis down: fail open ----------------------------------------------------------------------


def test_redis_down_reads_still_answer_without_limit_headers_and_a_warning_is_logged(settings, caplog):
    AgentFactory(instance_id="alpha", name="Alpha")
    settings.CACHES = redis_cache_at(f"redis://127.0.0.1:{closed_port()}/0")
    client = client_from("198.51.100.12")

    with caplog.at_level(logging.WARNING, logger="agentplatform.plumbing.ratelimits"):
        answers = [client.get("/api/agents") for _ in range(5)]  # more than the limit of 3

    assert [r.status_code for r in answers] == [200] * 5
    assert all(r["Content-Type"] == "application/json" for r in answers)
    assert [a["instance_id"] for a in answers[4].json()] == ["alpha"]
    assert all("X-RateLimit-Limit" not in r for r in answers)
    warnings = [r for r in caplog.records if r.name == "agentplatform.plumbing.ratelimits"]
    assert len(warnings) == 1  # then quiet for the retry interval, not once per request
    assert warnings[0].getMessage().startswith("Rate-limit counters unavailable (ConnectionError")


def test_redis_down_errors_under_api_are_still_problem_json(settings):
    settings.CACHES = redis_cache_at(f"redis://127.0.0.1:{closed_port()}/0")
    client = client_from("198.51.100.13")

    missing = client.get("/api/profile/nobody")
    no_route = client.get("/api/nothing-here", HTTP_ACCEPT="text/html")

    assert (missing.status_code, missing["Content-Type"]) == (404, "application/problem+json")
    assert (no_route.status_code, no_route["Content-Type"]) == (404, "application/problem+json")


def test_hung_redis_is_tried_once_then_left_alone_for_the_retry_interval(settings):
    silent = SilentRedis()
    try:
        settings.CACHES = redis_cache_at(silent.url)
        client = client_from("198.51.100.14")

        answers = [client.get("/api/agents") for _ in range(4)]

        assert [r.status_code for r in answers] == [200] * 4
        assert all("X-RateLimit-Limit" not in r for r in answers)
        assert len(silent.accepted) == 1  # one stalled attempt, not one per request
    finally:
        silent.close()


# --- the counter: its window and count (agentplatform/plumbing/rate_counters.py) ----------------------------


@pytest.mark.parametrize("caller", ["ip:198.51.100.1", "ip:198.51.100.2", "key:17"])
def test_a_window_ends_at_the_callers_own_offset_and_holds_for_one_period(caller):
    period, start = 60, 1_800_000_000  # a multiple of 60
    offset = zlib.crc32(caller.encode()) % period

    ends = {now: window_end(caller, period, now) for now in range(start, start + 2 * period)}

    # Each second belongs to the window ending at the next second (itself included) at the offset.
    assert ends == {now: now + (start + offset - now) % period for now in ends}


def test_one_second_windows_end_every_second():
    assert [window_end("ip:198.51.100.3", 1, now) for now in (5, 6, 7)] == [5, 6, 7]


def test_counting_returns_the_exact_count_and_the_end_of_its_window():
    counted = [
        counter_increment(group="probe", caller="ip:198.51.100.4", limit=2, period=86400, read_generations=False)
        for _ in range(3)
    ]

    assert [(c.usage.remaining, c.usage.exceeded) for c in counted] == [(1, False), (0, False), (0, True)]
    assert {c.usage.reset_epoch for c in counted} == {counted[0].usage.reset_epoch}
    assert all(c.generations is None for c in counted)


def test_generations_are_read_beside_the_count_when_asked():
    counted = counter_increment(group="probe", caller="ip:198.51.100.5", limit=5, period=60, read_generations=True)

    assert counted.usage.remaining == 4
    assert counted.generations is not None
    assert counted.generations.credentials.isdigit() and counted.generations.responses.isdigit()


def test_each_group_counts_apart():
    first = counter_increment(group="one", caller="ip:198.51.100.6", limit=5, period=60, read_generations=False)
    other = counter_increment(group="two", caller="ip:198.51.100.6", limit=5, period=60, read_generations=False)

    assert (first.usage.remaining, other.usage.remaining) == (4, 4)


# --- counted before DRF's own refusals (negotiation, permissions) ------------------------------


def test_a_request_without_credentials_to_a_key_only_endpoint_is_counted_and_past_the_limit_is_429():
    client = client_from("198.51.100.7")

    answers = [client.get("/api/test/quote") for _ in range(4)]

    assert [r.status_code for r in answers] == [401, 401, 401, 429]
    assert [limit_headers(r) for r in answers] == [("3", "2"), ("3", "1"), ("3", "0"), ("3", "0")]
    assert answers[0].json()["code"] == "not_authenticated"
    assert answers[3].json()["code"] == "rate_limited"
    assert answers[3]["Retry-After"].isdigit()


def test_an_unacceptable_accept_header_is_counted_and_answered_with_the_headers():
    AgentFactory(instance_id="alpha")
    client = client_from("198.51.100.8")

    refused = client.get("/api/profile/alpha", HTTP_ACCEPT="text/csv")
    accepted = client.get("/api/profile/alpha")

    assert (refused.status_code, refused.json()["code"]) == (406, "not_acceptable")
    assert [limit_headers(r) for r in (refused, accepted)] == [("3", "2"), ("3", "1")]


def test_a_refused_bearer_token_on_a_key_only_endpoint_counts_once_per_request_against_the_ip():
    client = client_from("198.51.100.9")

    guesses = [client.get("/api/test/quote", **bearer(f"sk_00000000000{n}_guess")) for n in range(2)]
    anonymous = client.get("/api/agents")

    assert [r.status_code for r in guesses] == [401, 401]
    assert [r.json()["code"] for r in guesses] == ["authentication_failed"] * 2
    assert limit_headers(anonymous) == ("3", "0")  # the two guesses and this, one count each


# --- configuration ------------------------------------------------------------------------------


@pytest.mark.parametrize(("rate", "parsed"), [("100/m", (100, 60)), ("5/10s", (5, 10)), ("1/d", (1, 86400))])
def test_rates_are_parsed(rate, parsed):
    assert parse_rate(rate) == parsed


def test_a_bad_rate_setting_stops_start_up_naming_the_variable():
    env = {**os.environ, "RATE_LIMIT_PUBLIC": "lots", "DATABASE_URL": "sqlite:///:memory:"}
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import django, os; os.environ['DJANGO_SETTINGS_MODULE']='agentplatform.settings'; django.setup()",
        ],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 1
    message = "RATE_LIMIT_PUBLIC must look like 100/m (count/[n]s|m|h|d), got 'lots'"
    assert f"ImproperlyConfigured: {message}" in result.stderr
