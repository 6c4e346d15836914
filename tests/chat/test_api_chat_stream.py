"""GET /api/chat/stream against live stream processes (uvicorn, as the Procfile runs it) with a
plain HTTP client: posts made through the API reach every stream process through Redis; resume
by Last-Event-ID; hidden messages; heartbeats; the per-IP cap and the rate limit; Redis frozen."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from django.utils import timezone

from agentplatform.plumbing.redis_breaker import redis_breaker
from agents.models import AgentStatus
from chat.announcements import chat_message_announce, chat_redis_location
from chat.models import ChatMessage
from chat.services import chat_message_hide
from tests import celeryworker
from tests.agents.factories import AgentFactory, agent_key_for, bearer
from tests.chat.factories import ChatMessageFactory
from tests.liveserver import gunicorn_server
from tests.redisserver import redis_server
from tests.streamserver import SSEReader, stream_server

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PROBLEM = "application/problem+json"
# Short enough that a quiet stream shows its heartbeat and a missed notice is found quickly.
STREAM_ENVIRONMENT = {
    "CHAT_STREAM_HEARTBEAT_SECONDS": "0.5",
    "CHAT_STREAM_POLL_SECONDS": "0.5",
    "CHAT_STREAM_MAX_PER_IP": "3",
    "RATE_LIMIT_PUBLIC": "6/m",
    "EMBEDDING_BACKEND": "none",
}


@pytest.fixture(scope="module")
def stream_servers(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[tuple[str, str]]:
    """Two stream processes on the test database and the tests' Redis (same key prefix)."""
    with django_db_blocker.unblock():
        environment = {**STREAM_ENVIRONMENT, "DATABASE_URL": celeryworker.test_database_url()}
    logs = tmp_path_factory.mktemp("stream-logs")
    with (
        stream_server(environment=environment, log_path=logs / "a.log") as first,
        stream_server(environment=environment, log_path=logs / "b.log") as second,
    ):
        yield first, second


@pytest.fixture
def stream_url(stream_servers) -> str:
    return f"{stream_servers[0]}/api/chat/stream"


@pytest.fixture
def poster():
    agent = AgentFactory(instance_id="poster", name="Poster", status=AgentStatus.RUNNING)
    return agent, agent_key_for(agent)


def post(api_client, key: str, message: str) -> dict:
    response = api_client.post(
        "/api/chat", data=json.dumps({"message": message}), content_type="application/json", **bearer(key)
    )
    assert response.status_code == 201, response.content
    return response.json()


def as_event(message: dict) -> dict[str, str]:
    """The event a stream sends for a message the API returned: the feed's bytes as data."""
    return {"id": message["id"], "data": json.dumps(message, ensure_ascii=False, separators=(",", ":"))}


def client() -> httpx.Client:
    return httpx.Client(timeout=httpx.Timeout(10.0))


def test_stream_sends_posts_in_feed_shape_and_resumes_by_last_event_id_without_gaps_or_duplicates(
    api_client, poster, stream_url
):
    _, key = poster
    with client() as http, http.stream("GET", stream_url) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        assert response.headers["cache-control"] == "no-cache"
        assert response.headers["access-control-allow-origin"] == "*"
        events = SSEReader(response)
        first = [post(api_client, key, f"first {n}") for n in range(3)]
        received = [events.next_event() for _ in range(2)]
    assert received == [as_event(first[0]), as_event(first[1])]

    later = [post(api_client, key, f"later {n}") for n in range(2)]
    feed = api_client.get("/api/chat").json()

    with (
        client() as http,
        http.stream("GET", stream_url, headers={"Last-Event-ID": first[1]["id"]}) as response,
    ):
        events = SSEReader(response)
        resumed = [events.next_event() for _ in range(3)]
        post_after = post(api_client, key, "live again")
        live = events.next_event()

    assert resumed == [as_event(first[2]), as_event(later[0]), as_event(later[1])]
    assert live == as_event(post_after)
    # The bytes of each event are the feed's bytes of the same message.
    assert resumed[0]["data"] == json.dumps(feed[2], ensure_ascii=False, separators=(",", ":"))


def test_last_event_id_query_parameter_resumes_and_the_header_wins_over_it(api_client, poster, stream_url):
    _, key = poster
    messages = [post(api_client, key, f"m{n}") for n in range(3)]

    with client() as http:
        with http.stream("GET", stream_url, params={"last_event_id": messages[0]["id"]}) as response:
            events = SSEReader(response)
            from_query = [events.next_event() for _ in range(2)]
        with http.stream(
            "GET",
            stream_url,
            params={"last_event_id": messages[0]["id"]},
            headers={"Last-Event-ID": messages[1]["id"]},
        ) as response:
            from_header = SSEReader(response).next_event()

    assert from_query == [as_event(messages[1]), as_event(messages[2])]
    assert from_header == as_event(messages[2])


def test_hidden_messages_are_neither_replayed_nor_streamed(api_client, poster, stream_url):
    agent, key = poster
    before = ChatMessageFactory(agent=agent, message="before")
    hidden = ChatMessageFactory(agent=agent, message="hidden at once")
    chat_message_hide(message_ids=[hidden.pk], by=None)
    shown = post(api_client, key, "shown")

    with client() as http, http.stream("GET", stream_url, headers={"Last-Event-ID": str(before.pk)}) as response:
        events = SSEReader(response)
        replayed = events.next_event()
        # Live: a message stored hidden and announced, then a visible one; only the visible one comes.
        live_hidden = ChatMessage.objects.create(agent=agent, message="hidden live", hidden_at=timezone.now())
        chat_message_announce(message_id=live_hidden.pk)
        visible = post(api_client, key, "visible live")
        live = events.next_event()

    assert replayed == as_event(shown)
    assert live == as_event(visible)


def test_two_stream_processes_both_receive_a_post_made_through_the_api(api_client, poster, stream_servers):
    _, key = poster
    first_url, second_url = (f"{base}/api/chat/stream" for base in stream_servers)
    with (
        client() as http,
        http.stream("GET", first_url) as first,
        http.stream("GET", second_url) as second,
    ):
        first_events, second_events = SSEReader(first), SSEReader(second)
        message = post(api_client, key, "to everyone")

        assert first_events.next_event() == as_event(message)
        assert second_events.next_event() == as_event(message)


def test_a_quiet_stream_sends_heartbeat_comments(stream_url):
    with client() as http, http.stream("GET", stream_url) as response:
        events = SSEReader(response)
        frames = [events.next_frame() for _ in range(2)]

    assert frames == [{"comment": "ping"}, {"comment": "ping"}]


def test_streams_beyond_the_per_ip_cap_are_429_problem_across_processes_until_one_closes(stream_servers):
    first_url, second_url = (f"{base}/api/chat/stream" for base in stream_servers)
    with client() as http:
        with (
            http.stream("GET", first_url) as one,
            http.stream("GET", second_url) as two,
            http.stream("GET", first_url) as three,
        ):
            opened = (one, two, three)
            # A refusal's body says which limit refused it (the rate or the per-IP stream cap).
            refusals = [stream.read() for stream in opened if stream.status_code != 200]
            assert [stream.status_code for stream in opened] == [200, 200, 200], refusals
            refused = http.get(second_url)

            assert refused.status_code == 429
            assert refused.headers["content-type"] == PROBLEM
            assert refused.json() == {
                "type": "urn:problem:too_many_streams",
                "title": "Too many requests",
                "status": 429,
                "detail": "This client already has 3 chat streams open; close one first.",
                "code": "too_many_streams",
            }
        # The closed streams' slots are freed as their processes see them go.
        deadline = time.monotonic() + 10
        while True:
            with http.stream("GET", second_url) as again:
                if again.status_code == 200 or time.monotonic() > deadline:
                    break
            time.sleep(0.1)
        assert again.status_code == 200


def test_a_connection_counts_once_against_the_public_rate_limit_and_past_it_is_429(api_client, poster, stream_url):
    _, key = poster
    with client() as http:
        with http.stream("GET", stream_url) as response:
            events = SSEReader(response)
            post(api_client, key, "one")
            post(api_client, key, "two")
            events.next_event(), events.next_event(), events.next_frame()
            assert (response.headers["x-ratelimit-limit"], response.headers["x-ratelimit-remaining"]) == ("6", "5")
        remaining = []
        for _ in range(5):
            with http.stream("GET", stream_url) as response:
                remaining.append(response.headers["x-ratelimit-remaining"])
        refused = http.get(stream_url)

    assert remaining == ["4", "3", "2", "1", "0"]
    assert refused.status_code == 429
    assert refused.headers["content-type"] == PROBLEM
    assert refused.json()["code"] == "rate_limited"
    assert int(refused.headers["retry-after"]) >= 1
    assert refused.headers["x-ratelimit-remaining"] == "0"


@pytest.mark.parametrize(
    ("headers", "params", "field"),
    [
        ({"Last-Event-ID": "abc"}, {}, "Last-Event-ID"),
        ({"Last-Event-ID": "-1"}, {}, "Last-Event-ID"),
        ({}, {"last_event_id": ""}, "last_event_id"),
        ({}, {"last_event_id": str(2**63)}, "last_event_id"),
        ({"Last-Event-ID": "5"}, {"last_event_id": "x"}, "last_event_id"),  # the header wins, but both must be ids
    ],
)
def test_a_malformed_last_event_id_is_400_problem(stream_url, headers, params, field):
    with client() as http:
        response = http.get(stream_url, headers=headers, params=params)

    assert response.status_code == 400
    assert response.headers["content-type"] == PROBLEM
    rule = "must be a message id (digits; 0 replays every visible message)"
    assert response.json()["errors"] == [{"field": field, "message": rule}]


def test_the_web_process_answers_307_to_the_stream_process_with_the_query_kept(api_client, settings):
    settings.STREAM_PORT = 8123
    response = api_client.get("/api/chat/stream?last_event_id=5", HTTP_HOST="localhost:8000")

    assert response.status_code == 307
    assert response["Location"] == "http://localhost:8123/api/chat/stream?last_event_id=5"
    assert response["X-RateLimit-Remaining"] == "99"

    settings.CHAT_STREAM_URL = "https://stream.example.com/api/chat/stream"
    assert api_client.get("/api/chat/stream").headers["Location"] == "https://stream.example.com/api/chat/stream"


# What a browser's EventSource sends with every request.
BROWSER_EVENT_SOURCE_HEADERS = {"HTTP_ACCEPT": "text/event-stream", "HTTP_CACHE_CONTROL": "no-cache"}


def test_the_web_process_answers_a_browser_event_source_with_307_not_406(api_client, settings):
    settings.STREAM_PORT = 8123
    response = api_client.get(
        "/api/chat/stream?last_event_id=5", HTTP_HOST="localhost:8000", **BROWSER_EVENT_SOURCE_HEADERS
    )

    assert response.status_code == 307
    assert response["Location"] == "http://localhost:8123/api/chat/stream?last_event_id=5"
    assert response["Access-Control-Allow-Origin"] == "*"
    assert response["X-RateLimit-Remaining"] == "99"


def test_gunicorn_as_the_procfile_runs_it_redirects_a_browser_event_source_to_the_stream_process(tmp_path: Path):
    environment = {"DATABASE_URL": celeryworker.test_database_url(), "EMBEDDING_BACKEND": "none", "STREAM_PORT": "8123"}
    with gunicorn_server(environment=environment, log_path=tmp_path / "web.log") as base_url:
        response = httpx.get(
            f"{base_url}/api/chat/stream?last_event_id=5",
            headers={"Accept": "text/event-stream", "Cache-Control": "no-cache"},
            timeout=20,
        )

    assert response.status_code == 307
    assert response.headers["location"] == "http://127.0.0.1:8123/api/chat/stream?last_event_id=5"
    assert response.headers["access-control-allow-origin"] == "*"


def test_the_web_process_refuses_a_browser_event_source_with_a_bad_last_event_id_as_400_problem(api_client):
    response = api_client.get("/api/chat/stream", HTTP_LAST_EVENT_ID="12x", **BROWSER_EVENT_SOURCE_HEADERS)

    assert response.status_code == 400
    assert response["Content-Type"] == PROBLEM
    assert response.json()["errors"] == [
        {"field": "Last-Event-ID", "message": "must be a message id (digits; 0 replays every visible message)"}
    ]
    assert "Location" not in response


def test_the_web_process_refuses_a_malformed_last_event_id_with_400_problem_instead_of_redirecting(api_client):
    response = api_client.get("/api/chat/stream?last_event_id=", HTTP_LAST_EVENT_ID="12x")

    assert response.status_code == 400
    assert response["Content-Type"] == PROBLEM
    assert response.json()["errors"] == [
        {"field": "Last-Event-ID", "message": "must be a message id (digits; 0 replays every visible message)"}
    ]
    assert "Location" not in response


def test_with_redis_frozen_streams_keep_their_heartbeats_and_get_posts_from_the_database(
    poster, tmp_path: Path, api_client
):
    _, key = poster
    with redis_server() as redis:
        environment = {**STREAM_ENVIRONMENT, "DATABASE_URL": celeryworker.test_database_url(), "REDIS_URL": redis.url}
        with stream_server(environment=environment, log_path=tmp_path / "stream.log") as base_url:
            url = f"{base_url}/api/chat/stream"
            with client() as http, http.stream("GET", url) as response:
                events = SSEReader(response)
                with redis.frozen():
                    # This process announces on the tests' Redis, which the stream process does not
                    # read: the message reaches it through the database alone.
                    message = post(api_client, key, "while frozen")
                    assert events.next_event() == as_event(message)
                    assert events.next_frame() == {"comment": "ping"}
                    # A new stream is served too: no rate-limit count and no slot in Redis.
                    with http.stream("GET", url) as during:
                        assert during.status_code == 200
                        assert "x-ratelimit-remaining" not in during.headers
        log = (tmp_path / "stream.log").read_text()
    assert "Redis unavailable" in log


def test_a_post_is_stored_and_answered_201_when_redis_is_unreachable_for_its_announcement(
    api_client, poster, redis_unreachable
):
    _, key = poster

    message = post(api_client, key, "nobody hears")

    assert ChatMessage.objects.filter(pk=int(message["id"]), message="nobody hears").count() == 1
    # Redis is left alone for a while: the next posts do not wait on it either.
    assert redis_breaker.is_open(chat_redis_location())
