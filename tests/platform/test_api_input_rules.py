"""One set of input rules on every endpoint: JSON bodies that do not parse (or nest absurdly deep)
are a 400 `invalid_json` problem, query integers are plain digits, a body may hold only its
declared keys, string fields take JSON strings only, and refs follow git's ref-name rules.
Every refusal is a problem and changes nothing."""

from __future__ import annotations

import json
import logging

import pytest

from agents.models import AgentStatus, WalletNonce, WalletSession
from chat.models import ChatMessage
from groundtruth.ingest.git_refs import REF_RULE
from groundtruth.models import IngestRun, Registry, Repository
from tests.agents.factories import AgentFactory, agent_key_for, bearer, service_key

pytestmark = pytest.mark.django_db

PROBLEM = "application/problem+json"
DEEP_BODY = '{"message":' + "[" * 1000 + "]" * 1000 + "}"
LIMIT_SPELLINGS = ["+5", " 5", "5 ", "1.0", "\u0663", "\uff15", "0x5", "5_0", "-0"]


def problem(status: int, code: str, title: str, detail: str, **extra) -> dict:
    return {"type": f"urn:problem:{code}", "title": title, "status": status, "detail": detail, "code": code, **extra}


def invalid(field: str, message: str) -> dict:
    return problem(
        400, "invalid", "Invalid input", f"{field}: {message}", errors=[{"field": field, "message": message}]
    )


def nothing_stored() -> dict[str, int]:
    return {
        "messages": ChatMessage.objects.count(),
        "sessions": WalletSession.objects.count(),
        "nonces": WalletNonce.objects.count(),
        "runs": IngestRun.objects.count(),
        "repositories": Repository.objects.count(),
        "registries": Registry.objects.count(),
    }


@pytest.fixture
def credentials() -> dict[str, dict[str, str]]:
    agent = AgentFactory(instance_id="poster", status=AgentStatus.RUNNING)
    return {
        "/api/auth/wallet": {},
        "/api/chat": bearer(agent_key_for(agent)),
        "/ask": bearer(service_key(["read"])),
        "/ingest/repo": bearer(service_key(["ingest"])),
    }


ENDPOINTS = ["/api/auth/wallet", "/api/chat", "/ask", "/ingest/repo"]
EMPTY = {"messages": 0, "sessions": 0, "nonces": 0, "runs": 0, "repositories": 0, "registries": 0}


@pytest.mark.parametrize("path", ENDPOINTS)
def test_a_body_nested_a_thousand_levels_is_400_invalid_json_logged_as_one_line(api_client, credentials, path, caplog):
    assert len(DEEP_BODY) < 2100
    with caplog.at_level(logging.INFO):
        response = api_client.post(path, DEEP_BODY, content_type="application/json", **credentials[path])

    assert response.status_code == 400
    assert response["Content-Type"] == PROBLEM
    assert response.json() == problem(
        400, "invalid_json", "Bad Request", "The body is not accepted: its JSON nests deeper than 32 levels."
    )
    assert [(record.name, record.levelname, record.getMessage(), record.exc_info) for record in caplog.records] == [
        ("django.request", "WARNING", f"Bad Request: {path}", None)
    ]
    assert nothing_stored() == EMPTY


@pytest.mark.parametrize("path", ENDPOINTS)
def test_malformed_json_is_400_invalid_json_on_every_endpoint(api_client, credentials, path):
    response = api_client.post(path, '{"message": ', content_type="application/json", **credentials[path])

    assert response.status_code == 400
    assert response["Content-Type"] == PROBLEM
    assert response.json() == problem(
        400, "invalid_json", "Bad Request", "The body is not valid JSON: Expecting value: line 1 column 13 (char 12)."
    )
    assert nothing_stored() == EMPTY


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b'{"question": NaN}', "The body is not valid JSON: NaN is not a JSON number."),
        (b'{"question": "\xff"}', "The body is not valid JSON: it is not utf-8 text."),
    ],
)
def test_json_outside_the_standard_is_400_invalid_json(api_client, credentials, body, detail):
    response = api_client.post("/ask", body, content_type="application/json", **credentials["/ask"])

    assert response.status_code == 400
    assert response.json() == problem(400, "invalid_json", "Bad Request", detail)


def test_json_nested_to_the_cap_is_parsed_and_one_level_more_is_not(api_client, credentials):
    def nested(depth: int) -> str:  # the body object is one level, the value the rest
        return '{"question":' + "[" * (depth - 1) + "]" * (depth - 1) + "}"

    at_cap = api_client.post("/ask", nested(32), content_type="application/json", **credentials["/ask"])
    over = api_client.post("/ask", nested(33), content_type="application/json", **credentials["/ask"])

    assert at_cap.json() == invalid("question", "Not a valid string.")
    assert over.json()["code"] == "invalid_json"


def test_brackets_inside_strings_do_not_count_as_nesting(api_client, credentials):
    question = "[" * 100 + '{"\\"' + "}" * 3
    response = api_client.post(
        "/ask",
        json.dumps({"question": question, "scope": {"repos": []}}),
        content_type="application/json",
        **credentials["/ask"],
    )

    assert response.json() == invalid("scope.repos", "must name at least one repository, or be left out to search all")


# --- query integers: plain ASCII digits everywhere -------------------------------------------


@pytest.mark.parametrize("spelling", LIMIT_SPELLINGS)
def test_search_limit_must_be_plain_digits_like_every_api_limit(api_client, spelling):
    reader = bearer(service_key(["read"]))

    search = api_client.get("/search", {"q": "broker", "limit": spelling}, **reader)
    chat = api_client.get("/api/chat", {"limit": spelling})

    assert search.status_code == 400
    assert search.json() == invalid("limit", "must be an integer from 1 to 50")
    assert chat.json() == invalid("limit", "must be an integer from 1 to 200")


@pytest.mark.parametrize("spelling", ["+5", "1.0", "\u0663", "\uff15", ""])
def test_nonce_chain_id_must_be_plain_digits_and_issues_no_nonce(api_client, spelling):
    response = api_client.get("/api/auth/nonce", {"chain_id": spelling})

    assert response.status_code == 400
    assert response.json() == invalid("chain_id", "must be an EIP-155 chain id: an integer from 1 to 9007199254740991")
    assert WalletNonce.objects.count() == 0


def test_an_empty_asset_filter_is_refused_not_ignored(api_client):
    response = api_client.get("/assets", {"product": ""}, **bearer(service_key(["read"])))

    assert response.status_code == 400
    assert response.json() == invalid("product", "must be 1-64 characters of lower-case letters, digits, '-' and '_'")


# --- bodies: unknown keys refused, strings are strings -------------------------------------------


def test_ingest_with_an_unknown_field_is_400_and_reads_and_queues_nothing(api_client, credentials):
    response = api_client.post("/ingest/repo", {"extra": 1}, format="json", **credentials["/ingest/repo"])

    assert response.status_code == 400
    assert response.json() == invalid("extra", "unknown field; allowed: repo, ref")
    assert nothing_stored() == EMPTY


def test_chat_post_with_an_unknown_field_is_400_and_stores_nothing(api_client, credentials):
    response = api_client.post(
        "/api/chat", {"message": "gm", "channel": "x"}, format="json", **credentials["/api/chat"]
    )

    assert response.status_code == 400
    assert response.json() == invalid("channel", "unknown field; allowed: message, message_type")
    assert nothing_stored() == EMPTY


def test_wallet_sign_in_with_an_unknown_field_is_400_and_creates_no_session(api_client):
    body = {"message": "m", "signature": "0x" + "ab" * 65, "address": "0x" + "ab" * 20}
    response = api_client.post("/api/auth/wallet", body, format="json")

    assert response.status_code == 400
    assert response.json() == invalid("address", "unknown field; allowed: message, signature")
    assert nothing_stored() == EMPTY


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/ask", {"question": 0}, "question"),
        ("/ask", {"question": "pool?", "scope": {"repos": [7]}}, "scope.repos[0]"),
        ("/ingest/repo", {"repo": 42}, "repo"),
        ("/ingest/repo", {"ref": True}, "ref"),
        ("/api/auth/wallet", {"message": 1, "signature": "0x" + "ab" * 65}, "message"),
    ],
)
def test_a_number_where_a_string_is_due_is_400_and_changes_nothing(api_client, credentials, path, body, field):
    response = api_client.post(path, body, format="json", **credentials[path])

    assert response.status_code == 400
    assert response.json()["errors"] == [{"field": field, "message": "Not a valid string."}]
    assert nothing_stored() == EMPTY


# --- refs: git's ref-name rules at the door ---------------------------------------------------------


@pytest.mark.parametrize(
    "ref",
    ["main;id", "main id", "-x", "a..b", "a//b", "/main", "main/", "main.", ".hidden", "a/.b", "x.lock", "a@{1}", "@",
     "v1^", "a:b", "a~1", "a*", "a?", "a[b", "a\\b", "é", "x" * 201, ""],
)  # fmt: skip
def test_ingest_with_a_ref_outside_gits_rules_is_400_and_queues_nothing(api_client, credentials, ref):
    response = api_client.post(
        "/ingest/repo", {"repo": "acme/handbook", "ref": ref}, format="json", **credentials["/ingest/repo"]
    )

    assert response.status_code == 400
    assert response.json() == invalid("ref", REF_RULE)
    assert nothing_stored() == EMPTY
