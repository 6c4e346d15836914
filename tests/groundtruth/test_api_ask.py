"""POST /ask: extractive, generative (against a real OpenAI-compatible server on 127.0.0.1),
marker checking, model failures, missing sources, scope and bad input."""

from __future__ import annotations

import pytest

from groundtruth.search.abstention_model import abstention_model_parse
from tests.groundtruth.factories import RepositoryFactory, bearer, service_key
from tests.groundtruth.fits import abstention_fit_use
from tests.groundtruth.search_fixtures import COMMIT, COMMUNITY, HANDBOOK, Section, chat_server_run, chunks_index

pytestmark = pytest.mark.django_db

RETRY_QUESTION = "How long does the first retry of a failed webhook delivery wait?"


@pytest.fixture
def indexed():
    handbook = RepositoryFactory(name="acme/handbook", url="https://github.com/acme/handbook.git", trust="canonical")
    community = RepositoryFactory(name="acme/community", url="/srv/git/community", trust="community")
    return {"handbook": chunks_index(handbook, HANDBOOK), "community": chunks_index(community, COMMUNITY)}


@pytest.fixture
def reader():
    return bearer(service_key("read"))


@pytest.fixture(autouse=True)
def hand_made_abstention(settings, tmp_path):
    """A sources-missing model these tests can reason about: the question's words must be in the
    documentation (known) and in a cited passage (coverage). The shipped, fitted model is pinned
    by test_the_shipped_model_answers_a_documented_question_and_refuses_an_absent_one."""
    abstention_fit_use(
        settings, tmp_path, model=abstention_model_parse({"intercept": -4, "known": 4, "coverage": 4}), threshold=0.5
    )


@pytest.fixture
def chat_server(settings):
    for server in chat_server_run():
        settings.LLM_BASE_URL = server.url
        settings.LLM_MODEL = "test-model"
        settings.LLM_API_KEY = "sk-test-secret"
        settings.LLM_TIMEOUT_SECONDS = 2.0
        yield server


def _ask(api_client, reader, body):
    return api_client.post("/ask", body, format="json", **reader)


def test_extractive_answer_cites_narrowed_snippets(api_client, indexed, reader, settings):
    settings.LLM_BASE_URL = ""
    settings.ASK_SNIPPET_MAX_LINES = 2
    settings.ASK_CITATION_MARGIN = 1.0  # every passage earns a citation

    response = _ask(api_client, reader, {"question": RETRY_QUESTION, "scope": {"repos": ["acme/handbook"]}})

    assert response.status_code == 200
    body = response.json()
    assert (body["question"], body["mode"], body["answer"], body["sources_missing"]) == (
        RETRY_QUESTION,
        "extractive",
        None,
        False,
    )
    assert body["searched"] == [{"repo": "acme/handbook", "commit": COMMIT}]
    assert "message" not in body and "warning" not in body
    assert [citation["n"] for citation in body["citations"]] == [1, 2, 3, 4, 5]
    assert body["citations"][0] == {
        "n": 1,
        "snippet": (
            "A failed webhook delivery is retried with exponential backoff.\n"
            "The first retry waits 10 seconds and the longest wait is 6 hours."
        ),
        "repo": "acme/handbook",
        "path": "docs/retries.md",
        "commit": COMMIT,
        "line": 2,
        "end_line": 3,
        "url": f"https://github.com/acme/handbook/blob/{COMMIT}/docs/retries.md#L2-L3",
        "source_url": f"http://testserver/sources/acme/handbook/docs/retries.md?commit={COMMIT}&start=2&end=3",
    }
    assert {citation["repo"] for citation in body["citations"]} == {"acme/handbook"}


def test_only_passages_about_as_relevant_as_the_best_are_cited(api_client, indexed, reader, settings):
    settings.LLM_BASE_URL = ""

    body = _ask(api_client, reader, {"question": RETRY_QUESTION, "scope": {"repos": ["acme/handbook"]}}).json()

    # The other handbook sections (broker, locks, pool, TLS) are far weaker matches: filler.
    assert [(citation["n"], citation["path"]) for citation in body["citations"]] == [(1, "docs/retries.md")]


def test_generative_answer_keeps_only_markers_of_returned_citations(api_client, indexed, reader, chat_server, settings):
    settings.ASK_CITATION_COUNT = 3
    settings.ASK_CITATION_MARGIN = 1.0
    chat_server.behaviour.reply = "The first retry waits 10 seconds [1][3]. Made-up claim [7]. Both [2, 9]."

    response = _ask(api_client, reader, {"question": RETRY_QUESTION})

    body = response.json()
    assert response.status_code == 200
    assert (body["mode"], body["sources_missing"]) == ("generative", False)
    assert body["answer"] == "The first retry waits 10 seconds [1][3]. Made-up claim. Both [2]."
    assert [citation["n"] for citation in body["citations"]] == [1, 2, 3]
    assert body["citations"][0]["path"] == "docs/retries.md"
    (request,) = chat_server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["authorization"] == "Bearer sk-test-secret"
    assert request["body"]["model"] == "test-model"
    assert request["body"]["temperature"] == 0
    prompt = request["body"]["messages"][1]["content"]
    assert "[1] (acme/handbook:docs/retries.md lines 1-4; Delivery > Retries)" in prompt
    assert prompt.endswith(f"Question: {RETRY_QUESTION}")
    assert "sk-test-secret" not in response.content.decode()


@pytest.mark.parametrize(
    ("behaviour", "warning"),
    [
        ({"status": 500}, "The language model failed (the language model endpoint answered HTTP 500); "),
        ({"delay_seconds": 1.0}, "The language model failed (the language model did not answer within 0.3 s); "),
        (
            {"raw_body": b"not json"},
            "The language model failed (the language model endpoint sent a malformed answer); ",
        ),
    ],
)
def test_model_failure_falls_back_to_extractive_with_a_warning(
    api_client, indexed, reader, chat_server, settings, behaviour, warning
):
    settings.LLM_TIMEOUT_SECONDS = 0.3
    for name, value in behaviour.items():
        setattr(chat_server.behaviour, name, value)

    response = _ask(api_client, reader, {"question": RETRY_QUESTION})

    body = response.json()
    assert response.status_code == 200
    assert (body["mode"], body["answer"], body["sources_missing"]) == ("extractive", None, False)
    assert body["warning"] == warning + "extractive snippets are returned instead."
    assert body["citations"][0]["path"] == "docs/retries.md"
    assert len(chat_server.requests) == 1


@pytest.mark.parametrize("model", [False, True])
def test_unsupported_question_reports_missing_sources_without_an_answer(
    api_client, indexed, reader, settings, request, model
):
    if model:
        server = request.getfixturevalue("chat_server")
    else:
        settings.LLM_BASE_URL = ""

    response = _ask(api_client, reader, {"question": "How do I bake sourdough bread at home?"})

    assert response.status_code == 200
    assert response.json() == {
        "question": "How do I bake sourdough bread at home?",
        "mode": "generative" if model else "extractive",
        "answer": None,
        "sources_missing": True,
        "citations": [],
        "searched": [{"repo": "acme/community", "commit": COMMIT}, {"repo": "acme/handbook", "commit": COMMIT}],
        "message": (
            f"Sources missing: searched the indexed documentation of acme/community at {COMMIT[:12]}, "
            f"acme/handbook at {COMMIT[:12]} for 'How do I bake sourdough bread at home?' and found no passage "
            "that answers it. No answer is given rather than one the sources do not support."
        ),
    }
    if model:
        assert server.requests == []  # nothing to compose from: the model is not asked


def test_model_that_finds_no_answer_in_the_passages_means_sources_missing(api_client, indexed, reader, chat_server):
    chat_server.behaviour.reply = "NOT_IN_SOURCES"

    body = _ask(api_client, reader, {"question": RETRY_QUESTION}).json()

    assert (body["mode"], body["answer"], body["sources_missing"], body["citations"]) == (
        "generative",
        None,
        True,
        [],
    )
    assert body["message"].startswith("Sources missing: searched the indexed documentation of acme/community")


def test_scope_limits_the_citations_to_the_named_repositories(api_client, indexed, reader, settings):
    settings.LLM_BASE_URL = ""

    body = _ask(
        api_client, reader, {"question": "Where do I set CELERY_BROKER_URL?", "scope": {"repos": ["acme/community"]}}
    ).json()

    assert [(citation["repo"], citation["path"], citation["url"]) for citation in body["citations"]] == [
        ("acme/community", "faq/broker.md", None)
    ]
    assert body["searched"] == [{"repo": "acme/community", "commit": COMMIT}]


def test_scope_with_an_unknown_repository_is_400_naming_it(api_client, indexed, reader, chat_server):
    response = _ask(api_client, reader, {"question": RETRY_QUESTION, "scope": {"repos": ["acme/handbook", "acme/x"]}})

    assert response.status_code == 400
    assert response.json()["detail"] == (
        "Unknown repository acme/x; indexed repositories: acme/community, acme/handbook."
    )
    assert chat_server.requests == []


@pytest.mark.parametrize(
    ("body", "errors"),
    [
        ({}, [{"field": "question", "message": "is required"}]),
        ({"question": "  "}, [{"field": "question", "message": "must not be empty"}]),
        ({"question": "x" * 2001}, [{"field": "question", "message": "may be at most 2000 characters"}]),
        (
            {"question": "pool size?", "scopes": {"repos": []}},
            [{"field": "scopes", "message": "unknown field; allowed: question, scope"}],
        ),
        (
            {"question": "pool size?", "scope": {"repos": []}},
            [
                {
                    "field": "scope.repos",
                    "message": "must name at least one repository, or be left out to search all",
                }
            ],
        ),
        (
            {"question": "pool size?", "scope": {"repo": "acme/handbook"}},
            [{"field": "scope.repo", "message": "unknown field; allowed: repos"}],
        ),
    ],
)
def test_ask_with_bad_input_is_400(api_client, indexed, reader, body, errors):
    response = _ask(api_client, reader, body)

    assert response.status_code == 400
    assert response.json()["errors"] == errors


def test_ask_with_a_non_json_body_is_415(api_client, indexed, reader):
    response = api_client.post("/ask", "question=pool", content_type="application/x-www-form-urlencoded", **reader)

    assert response.status_code == 415


def test_ask_without_read_scope_is_403(api_client, indexed):
    response = _ask(api_client, bearer(service_key("ingest")), {"question": RETRY_QUESTION})

    assert response.status_code == 403


@pytest.mark.usefixtures("indexed")
def test_the_shipped_model_answers_a_documented_question_and_refuses_an_absent_one(api_client, reader, settings):
    settings.LLM_BASE_URL = ""
    settings.ASK_ABSTENTION_FIT_FILE = ""  # the shipped groundtruth/search/fitted/abstention.json

    answered = _ask(api_client, reader, {"question": RETRY_QUESTION}).json()
    refused = _ask(api_client, reader, {"question": "How do I bake sourdough bread at home?"}).json()

    assert (answered["sources_missing"], answered["citations"][0]["path"]) == (False, "docs/retries.md")
    assert (refused["sources_missing"], refused["citations"]) == (True, [])


def test_an_exact_community_answer_is_cited_first_with_its_answer_lines(api_client, reader, settings):
    settings.LLM_BASE_URL = ""
    platform = RepositoryFactory(name="acme/platform", trust="canonical")
    community = RepositoryFactory(name="acme/community", trust="community")
    chunks_index(
        platform,
        [
            Section(
                path="docs/agents.rst",
                heading=("Agents",),
                text="Agents\n======\n\nAn agent has a status: pending, running, paused, stopped or error.",
                start_line=1,
            ),
            Section(
                path="docs/index.rst",
                heading=("Acme platform API docs",),
                text="The platform exposes agents, the token price history and a chat feed.",
                start_line=5,
            ),
        ],
    )
    chunks_index(
        community,
        [
            Section(
                path="docs/faq.md",
                heading=("FAQ", "Why is my agent paused?"),
                text=(
                    "## Why is my agent paused?\n"
                    "\n"
                    "Agents are paused by staff when their balance cannot cover one hour of costs."
                ),
                start_line=3,
            )
        ],
    )

    body = _ask(api_client, reader, {"question": "Why is my agent paused?"}).json()

    assert body["sources_missing"] is False
    first = body["citations"][0]
    # The answer under the FAQ title, not the title line alone, and before the canonical generic passage.
    assert (first["repo"], first["path"], first["line"], first["end_line"]) == ("acme/community", "docs/faq.md", 5, 5)
    assert first["snippet"] == "Agents are paused by staff when their balance cannot cover one hour of costs."
