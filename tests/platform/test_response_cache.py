"""The response cache of the public reads: hits run no SQL and send the same bytes, every write
through the app shows on the next request, and nothing is served past its generation or TTL."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.conf import settings as django_settings
from django.core.cache import cache

from agentplatform.plumbing.cache_generations import RESPONSES, generation_key
from agents.models import Agent, AgentStatus
from agents.services import agent_status_change
from chat.services import chat_message_hide
from tests.agents.factories import AgentFactory, agent_key_for, bearer
from tests.chat.factories import ChatMessageFactory
from tests.coin.factories import PricePointFactory

pytestmark = pytest.mark.django_db

HISTORY = f"/api/{django_settings.COIN_SEGMENT}/history"


def names(response) -> list[str]:
    return [agent["name"] for agent in response.json()]


def bump_from_another_process() -> None:
    """What a write in another worker or a management command does to this worker's entries."""
    cache._cache.get_client().incr(generation_key(RESPONSES))


def test_a_repeated_read_runs_no_sql_and_sends_the_same_bytes(api_client, django_assert_num_queries):
    AgentFactory(name="Alpha")
    AgentFactory(name="Beta")
    first = api_client.get("/api/agents")

    with django_assert_num_queries(0):
        second = api_client.get("/api/agents")

    assert first.status_code == second.status_code == 200
    assert second.content == first.content
    assert names(second) == ["Alpha", "Beta"]
    assert second["Content-Type"] == first["Content-Type"] == "application/json"
    # Counted on every request all the same.
    assert (first["X-RateLimit-Remaining"], second["X-RateLimit-Remaining"]) == ("99", "98")


@pytest.mark.parametrize("path", ["/api/agents", "/api/chat?limit=50", f"{HISTORY}?period=7d"])
def test_each_cached_read_is_byte_identical_to_an_uncached_one(api_client, settings, path):
    agent = AgentFactory(name="Alpha")
    ChatMessageFactory.create_batch(3, agent=agent)
    PricePointFactory.create_batch(5)
    cached = [api_client.get(path) for _ in range(2)]
    settings.API_RESPONSE_CACHE_SECONDS = 0

    uncached = api_client.get(path)

    assert cached[0].content == cached[1].content == uncached.content
    assert {r["Content-Type"] for r in [*cached, uncached]} == {"application/json"}


def test_agents_created_edited_or_moved_through_the_app_show_at_once(api_client):
    alpha = AgentFactory(name="Alpha")
    assert names(api_client.get("/api/agents")) == ["Alpha"]

    AgentFactory(name="Beta")
    after_create = names(api_client.get("/api/agents"))
    alpha.name = "Aleph"
    alpha.save()  # as the admin's change form does
    after_edit = names(api_client.get("/api/agents"))
    agent_status_change(agent=alpha, new_status=AgentStatus.PAUSED)  # a conditional UPDATE, no signal
    after_status = [a["status"] for a in api_client.get("/api/agents").json()]

    assert after_create == ["Alpha", "Beta"]
    assert after_edit == ["Aleph", "Beta"]
    assert after_status == ["paused", "running"]


def test_a_chat_post_and_a_moderator_hiding_it_show_at_once(api_client):
    agent = AgentFactory(instance_id="poster")
    ChatMessageFactory(agent=agent, message="older")
    assert [m["message"] for m in api_client.get("/api/chat").json()] == ["older"]

    posted = api_client.post("/api/chat", {"message": "fresh"}, format="json", **bearer(agent_key_for(agent)))
    after_post = [m["message"] for m in api_client.get("/api/chat").json()]
    chat_message_hide(message_ids=[posted.json()["id"]], by=None)
    after_hide = [m["message"] for m in api_client.get("/api/chat").json()]

    assert posted.status_code == 201
    assert after_post == ["fresh", "older"]
    assert after_hide == ["older"]


def test_a_new_price_point_moves_the_history_at_once(api_client):
    PricePointFactory(timestamp=datetime(2026, 5, 1, tzinfo=UTC), price=Decimal("2"))
    assert api_client.get(HISTORY).json()["current"]["price"] == 2.0

    PricePointFactory(timestamp=datetime(2026, 5, 1, 1, tzinfo=UTC), price=Decimal("3"))

    assert api_client.get(HISTORY).json()["current"]["price"] == 3.0


def test_a_write_in_another_process_shows_once_it_bumps_the_generation(api_client):
    alpha = AgentFactory(name="Alpha")
    api_client.get("/api/agents")
    Agent.objects.filter(pk=alpha.pk).update(name="Renamed")  # no signal, as from another process

    before_bump = names(api_client.get("/api/agents"))
    bump_from_another_process()
    after_bump = names(api_client.get("/api/agents"))

    assert before_bump == ["Alpha"]
    assert after_bump == ["Renamed"]


def test_a_write_that_bumps_nothing_shows_once_the_entry_expires(api_client, settings):
    settings.API_RESPONSE_CACHE_SECONDS = 1
    alpha = AgentFactory(name="Alpha")
    api_client.get("/api/agents")
    Agent.objects.filter(pk=alpha.pk).update(name="Renamed")  # raw UPDATE: no signal, no bump

    assert names(api_client.get("/api/agents")) == ["Alpha"]
    time.sleep(1.1)
    assert names(api_client.get("/api/agents")) == ["Renamed"]


def test_cache_control_no_cache_reads_the_database_and_refreshes_the_entry(api_client, django_assert_num_queries):
    alpha = AgentFactory(name="Alpha")
    api_client.get("/api/agents")
    Agent.objects.filter(pk=alpha.pk).update(name="Renamed")

    with django_assert_num_queries(1):
        fresh = api_client.get("/api/agents", HTTP_CACHE_CONTROL="no-cache")
    with django_assert_num_queries(0):
        next_plain = api_client.get("/api/agents")

    assert names(fresh) == ["Renamed"]
    assert names(next_plain) == ["Renamed"]


def test_with_the_cache_off_every_read_runs_its_query(api_client, settings, django_assert_num_queries):
    settings.API_RESPONSE_CACHE_SECONDS = 0
    AgentFactory(name="Alpha")
    api_client.get("/api/agents")

    with django_assert_num_queries(1):
        assert names(api_client.get("/api/agents")) == ["Alpha"]


def test_each_query_string_and_accept_header_has_its_own_entry(api_client):
    AgentFactory(name="Alpha", status=AgentStatus.RUNNING)
    AgentFactory(name="Beta", status=AgentStatus.PAUSED)

    everyone = names(api_client.get("/api/agents"))
    paused = names(api_client.get("/api/agents", {"status": "paused"}))
    indented = api_client.get("/api/agents", {"status": "paused"}, HTTP_ACCEPT="application/json; indent=2")
    compact = api_client.get("/api/agents", {"status": "paused"})

    assert everyone == ["Alpha", "Beta"]
    assert paused == ["Beta"]
    assert indented.content.startswith(b'[\n  {\n    "instance_id"')
    assert compact.content.startswith(b'[{"instance_id"')


def test_the_feed_link_header_names_the_host_each_client_asked(api_client, settings):
    settings.ALLOWED_HOSTS = ["one.example", "two.example"]
    agent = AgentFactory()
    ChatMessageFactory.create_batch(2, agent=agent)

    one = [api_client.get("/api/chat?limit=1", HTTP_HOST="one.example") for _ in range(2)]
    two = api_client.get("/api/chat?limit=1", HTTP_HOST="two.example")

    before = one[0].json()[0]["id"]
    assert [r["Link"] for r in one] == [f'<http://one.example/api/chat?limit=1&before={before}>; rel="next"'] * 2
    assert two["Link"] == f'<http://two.example/api/chat?limit=1&before={before}>; rel="next"'


def test_invalid_queries_are_refused_every_time(api_client):
    answers = [api_client.get("/api/agents", {"status": "asleep"}) for _ in range(2)]

    assert [r.status_code for r in answers] == [400, 400]
    assert answers[0].json() == answers[1].json()
    assert answers[1]["Content-Type"] == "application/problem+json"


def test_with_redis_down_reads_come_from_the_database(api_client, request):
    alpha = AgentFactory(name="Alpha")
    api_client.get("/api/agents")
    Agent.objects.filter(pk=alpha.pk).update(name="Renamed")  # the entry above is now stale
    request.getfixturevalue("redis_unreachable")

    response = api_client.get("/api/agents")

    assert response.status_code == 200
    assert names(response) == ["Renamed"]
    assert "X-RateLimit-Limit" not in response


def test_an_anonymous_hit_answered_before_drf_has_the_headers_of_a_miss_and_is_counted(api_client):
    agent = AgentFactory(name="Alpha")
    ChatMessageFactory.create_batch(2, agent=agent)
    miss = api_client.get("/api/chat", {"limit": "2"})

    hit = api_client.get("/api/chat", {"limit": "2"})
    with_cookie = api_client.get("/api/chat", {"limit": "2"}, HTTP_COOKIE="theme=dark")  # through DRF
    with_key = api_client.get("/api/chat", {"limit": "2"}, **bearer(agent_key_for(agent)))

    varying = {"X-RateLimit-Remaining"}
    for response in (hit, with_cookie):
        assert response.content == miss.content
        assert {k: v for k, v in response.items() if k not in varying} == {
            k: v for k, v in miss.items() if k not in varying
        }
    assert [r["X-RateLimit-Remaining"] for r in (miss, hit, with_cookie)] == ["99", "98", "97"]
    assert (with_key.content, with_key["X-RateLimit-Limit"]) == (miss.content, "500")  # its own class
