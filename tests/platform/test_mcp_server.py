"""The MCP server end to end: the Procfile's `mcp` process (uvicorn serving agentplatform.mcp_app), the
official MCP Python client (the initialize handshake of 2025-11-25, and the stateless requests of
2026-07-28), real ingests of git repositories built here, real brand assets, the same service
keys, rate limits and problem details as the REST endpoints, and tool answers equal to theirs."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, ImageContent

from agentplatform.demo.brand_assets import png_bytes
from agents.models import ApiKey, ApiKeyKind
from agents.services import api_key_create
from brandassets.content_cache import asset_record_cache, blob_contents
from brandassets.models import BrandAsset
from brandassets.services import asset_registry_sync
from groundtruth.embeddings import _backend_for
from groundtruth.ingest.foreground import ingest_foreground
from groundtruth.models import AskedQuestion, IngestStatus, Repository
from tests import celeryworker
from tests.brandassets.conftest import GOOGLE_PLAY_BADGE, REGISTRY_TEMPLATE, brand_work_tree
from tests.embeddingserver import EmbeddingServer
from tests.gitrepos import GitWorkTree
from tests.groundtruth.conftest import HANDBOOK_GLOBS, HANDBOOK_INDEX, sources_yaml
from tests.groundtruth.factories import RepositoryFactory, bearer, service_key
from tests.liveserver import procfile_server

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PROBLEM = "application/problem+json"
# Per key, in the server and in this process alike; a day-long window cannot roll over mid-test.
RATE_LIMIT = 30
WEB_BASE_URL = "http://testserver"  # the host of the test client's REST requests
WALLET = "0x" + "ab" * 20
TOOLS = ["ask", "fetch_brand_asset", "find_brand_assets", "list_repositories", "read_source", "search_docs"]


@dataclass(frozen=True)
class McpSetup:
    url: str
    handbook: GitWorkTree
    registry: GitWorkTree
    git_cache: Path
    embedding_url: str
    embedding_model: str
    local_root: Path
    log: Path


@pytest.fixture(scope="module")
def mcp(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[McpSetup]:
    """One server for the module, over repositories that stay; each test ingests and syncs them
    into its own (transactional) database state."""
    root = tmp_path_factory.mktemp("mcp")
    handbook = GitWorkTree.create(root / "handbook")
    handbook.write("README.md", "# Acme\n\nThe Acme handbook.\n")
    handbook.write("docs/index.md", HANDBOOK_INDEX)
    handbook.commit("first")
    brand = brand_work_tree(root / "brand")
    registry = GitWorkTree.create(root / "registry")
    registry.write(
        "sources.yml",
        sources_yaml({"name": "acme/handbook", "url": str(handbook.path), "trust": "canonical", **HANDBOOK_GLOBS}),
    )
    registry.write("brand-assets.yml", REGISTRY_TEMPLATE.format(brand_url=brand.path))
    registry.commit("registry")
    with django_db_blocker.unblock(), EmbeddingServer(dimension=32, model="test-embed-32") as embeddings:
        environment = {
            "DATABASE_URL": celeryworker.test_database_url(),
            "SOURCE_REGISTRY_REPO": str(registry.path),
            "SOURCE_REGISTRY_REF": "main",
            "SOURCE_REGISTRY_PATH": "sources.yml",
            "BRAND_ASSETS_PATH": "brand-assets.yml",
            "GIT_CACHE_DIR": str(root / "git-cache"),
            "GIT_LOCAL_ROOTS": str(tmp_path_factory.getbasetemp()),
            "EMBEDDING_BACKEND": "openai",
            "EMBEDDING_URL": embeddings.base_url,
            "EMBEDDING_MODEL": embeddings.model,
            "RATE_LIMIT_AUTHENTICATED": f"{RATE_LIMIT}/d",
            "WEB_BASE_URL": WEB_BASE_URL,
            "GROUNDTRUTH_PREFIX": "",
            # The audit's writer thread inserts each record as soon as it is queued (see below).
            "QUESTION_AUDIT_FLUSH_SECONDS": "0",
        }
        with procfile_server(
            name="mcp", port_variable="MCP_PORT", environment=environment, log_path=root / "mcp.log"
        ) as base_url:
            yield McpSetup(
                url=f"{base_url}/mcp",
                handbook=handbook,
                registry=registry,
                git_cache=root / "git-cache",
                embedding_url=embeddings.base_url,
                embedding_model=embeddings.model,
                local_root=tmp_path_factory.getbasetemp(),
                log=root / "mcp.log",
            )


@pytest.fixture(autouse=True)
def _same_configuration_as_the_server(mcp: McpSetup, settings) -> Iterator[None]:
    settings.SOURCE_REGISTRY_REPO = str(mcp.registry.path)
    settings.SOURCE_REGISTRY_REF = "main"
    settings.SOURCE_REGISTRY_PATH = "sources.yml"
    settings.BRAND_ASSETS_PATH = "brand-assets.yml"
    settings.GIT_CACHE_DIR = mcp.git_cache
    settings.GIT_LOCAL_ROOTS = [mcp.local_root]
    settings.EMBEDDING_BACKEND = "openai"
    settings.EMBEDDING_URL = mcp.embedding_url
    settings.EMBEDDING_MODEL = mcp.embedding_model
    settings.EMBEDDING_API_KEY = ""
    settings.EMBEDDING_DIMENSION = None
    settings.RATE_LIMIT_AUTHENTICATED = f"{RATE_LIMIT}/d"
    settings.GROUNDTRUTH_PREFIX = ""
    _backend_for.cache_clear()
    blob_contents.clear()
    asset_record_cache.clear()
    yield
    _backend_for.cache_clear()


@pytest.fixture
def indexed() -> None:
    [run] = ingest_foreground(repository_name="acme/handbook", ref=None)
    assert run.status == IngestStatus.SUCCEEDED, run.error
    report = asset_registry_sync()
    assert report.status == "synced", report.lines()


@pytest.fixture
def reader() -> str:
    return service_key("read")


def mcp_http_client(token: str | None) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"} if token else {}, timeout=httpx2.Timeout(60.0)
    )


def with_handshake(url: str, token: str, work) -> Any:
    """`work(session)` in a session of the 2025-11-25 protocol (initialize, then requests)."""

    async def run() -> Any:
        async with (
            mcp_http_client(token) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            initialized = await session.initialize()
            return initialized, await work(session)

    return anyio.run(run)


def call_tool(url: str, token: str, name: str, arguments: dict[str, Any]) -> CallToolResult:
    """One tool call as a client of the current protocol (2026-07-28) makes it: one request."""

    async def run() -> CallToolResult:
        async with (
            mcp_http_client(token) as http,
            Client(streamable_http_client(url, http_client=http), mode="2026-07-28") as client,
        ):
            return await client.call_tool(name, arguments)

    return anyio.run(run)


def text_of(result: CallToolResult) -> str:
    [content] = result.content
    assert content.type == "text"
    return content.text


# --- Start-up, handshake, tools and their schemas ----------------------------------------------


def test_the_embedding_model_is_ready_before_the_server_listens(mcp):
    log = mcp.log.read_text()

    [ready] = [line for line in log.splitlines() if "MCP server: embedding backend ready: " in line]
    assert ready.endswith(f"OpenAI-compatible endpoint {mcp.embedding_url}/embeddings, model {mcp.embedding_model}")
    assert log.index(ready) < log.index("Uvicorn running on http://127.0.0.1:")


def test_initialize_then_list_tools_gives_every_tool_with_its_schema(mcp, reader):
    initialized, listed = with_handshake(mcp.url, reader, lambda session: session.list_tools())

    assert (initialized.protocol_version, initialized.server_info.name) == ("2025-11-25", "ground-truth")
    assert "read_source" in initialized.instructions
    tools = {tool.name: tool for tool in listed.tools}
    assert sorted(tools) == TOOLS
    search = tools["search_docs"]
    assert search.input_schema["required"] == ["query"]
    assert search.input_schema["properties"]["limit"] == {
        "default": 10,
        "description": "How many passages to return.",
        "maximum": 50,
        "minimum": 1,
        "title": "Limit",
        "type": "integer",
    }
    assert search.input_schema["properties"]["query"]["maxLength"] == 500
    assert search.description.startswith("Search the indexed documentation")
    assert tools["ask"].input_schema["required"] == ["question"]
    assert tools["fetch_brand_asset"].input_schema["required"] == ["product", "kind", "asset_index"]
    assert tools["list_repositories"].input_schema["properties"] == {}
    assert all(tool.annotations.read_only_hint for tool in listed.tools)


# --- Each tool answers as its REST endpoint -----------------------------------------------------


def test_search_docs_answers_what_get_search_answers(mcp, reader, indexed, api_client):
    result = call_tool(mcp.url, reader, "search_docs", {"query": "ACME_TOKEN environment", "repo": "acme/handbook"})

    rest = api_client.get("/search", {"q": "ACME_TOKEN environment", "repo": "acme/handbook"}, **bearer(reader))
    assert rest.status_code == 200
    assert result.is_error is False
    assert result.structured_content == rest.json()
    assert json.loads(text_of(result)) == rest.json()
    commit = mcp.handbook.head()
    assert rest.json()["results"][0]["citation"] == {
        "repo": "acme/handbook",
        "path": "docs/index.md",
        "commit": commit,
        "line": 14,
        "end_line": 16,
        "url": None,
        "source_url": f"{WEB_BASE_URL}/sources/acme/handbook/docs/index.md?commit={commit}&start=14&end=16",
    }


def ask_both(mcp: McpSetup, reader: str, api_client, question: str) -> tuple[CallToolResult, dict[str, Any]]:
    result = call_tool(mcp.url, reader, "ask", {"question": question, "repos": ["acme/handbook"]})
    rest = api_client.post(
        "/ask", {"question": question, "scope": {"repos": ["acme/handbook"]}}, format="json", **bearer(reader)
    )
    assert rest.status_code == 200
    return result, rest.json()


def test_ask_answers_what_post_ask_answers_with_its_citations(mcp, reader, indexed, api_client):
    result, rest = ask_both(mcp, reader, api_client, "Where do I set ACME_TOKEN?")

    assert result.is_error is False
    assert result.structured_content == rest
    assert (rest["sources_missing"], rest["mode"], rest["answer"]) == (False, "extractive", None)
    assert rest["citations"] == [
        {
            "n": 1,
            "snippet": "Set `ACME_TOKEN` in the environment.",
            "repo": "acme/handbook",
            "path": "docs/index.md",
            "commit": mcp.handbook.head(),
            "line": 16,
            "end_line": 16,
            "url": None,
            "source_url": f"{WEB_BASE_URL}/sources/acme/handbook/docs/index.md?commit={mcp.handbook.head()}"
            "&start=16&end=16",
        }
    ]


def test_ask_says_sources_missing_as_post_ask_does(mcp, reader, indexed, api_client):
    question = "How do I rotate the Kubernetes ingress certificates?"
    result, rest = ask_both(mcp, reader, api_client, question)

    assert result.structured_content == rest
    assert (rest["sources_missing"], rest["citations"], rest["answer"]) == (True, [], None)
    assert rest["message"].startswith(
        f"Sources missing: searched the indexed documentation of acme/handbook at {mcp.handbook.head()[:12]}"
    )


def test_read_source_returns_the_cited_lines_as_get_sources_does(mcp, reader, indexed, api_client):
    commit = mcp.handbook.head()
    arguments = {"repo": "acme/handbook", "path": "docs/index.md", "commit": commit[:12], "start": 14, "end": 16}
    result = call_tool(mcp.url, reader, "read_source", arguments)

    rest = api_client.get(
        "/sources/acme/handbook/docs/index.md", {"commit": commit[:12], "start": 14, "end": 16}, **bearer(reader)
    )
    assert result.is_error is False
    assert result.structured_content == rest.json()
    assert result.structured_content == {
        "repo": "acme/handbook",
        "path": "docs/index.md",
        "commit": commit,
        "start": 14,
        "end": 16,
        "line_count": 16,
        "lines": ["## Configure", "", "Set `ACME_TOKEN` in the environment."],
        "url": None,
    }
    assert result.structured_content["lines"] == HANDBOOK_INDEX.splitlines()[13:16]


def test_list_repositories_answers_what_get_repos_answers(mcp, reader, indexed, api_client):
    result = call_tool(mcp.url, reader, "list_repositories", {})

    rest = api_client.get("/repos", **bearer(reader))
    assert result.structured_content == rest.json()
    [repository] = result.structured_content["repositories"]
    assert (repository["name"], repository["state"], repository["last_commit"]) == (
        "acme/handbook",
        "ready",
        mcp.handbook.head(),
    )


def test_find_brand_assets_answers_what_get_assets_answers(mcp, reader, indexed, api_client):
    result = call_tool(mcp.url, reader, "find_brand_assets", {"product": "acme-app", "q": "google"})

    rest = api_client.get("/assets", {"product": "acme-app", "q": "google"}, **bearer(reader))
    assert result.structured_content == {"assets": rest.json()}
    [badge] = rest.json()
    assert (badge["kind"], badge["assetIndex"], badge["contentUrl"]) == (
        "store-badge",
        1,
        f"{WEB_BASE_URL}/assets/acme-app/store-badge/1/content",
    )


def test_fetch_brand_asset_gives_a_small_png_as_image_content(mcp, reader, indexed, api_client):
    result = call_tool(
        mcp.url, reader, "fetch_brand_asset", {"product": "acme-app", "kind": "store-badge", "asset_index": 1}
    )

    record, image = result.content
    assert result.is_error is False
    assert json.loads(record.text) == api_client.get("/assets/acme-app/store-badge", **bearer(reader)).json()[1]
    assert (image.type, image.mime_type) == ("image", "image/png")
    assert base64.b64decode(image.data) == png_bytes(18, 6, lambda x, y: (0, 0, 0, 255))


def test_fetch_brand_asset_links_an_svg_to_its_content_url(mcp, reader, indexed):
    result = call_tool(mcp.url, reader, "fetch_brand_asset", {"product": "acme-app", "kind": "logo", "asset_index": 0})

    record, link = result.content
    assert json.loads(record.text)["path"] == "logos/acme-light.svg"
    assert (link.type, str(link.uri), link.name, link.mime_type, link.description) == (
        "resource_link",
        f"{WEB_BASE_URL}/assets/acme-app/logo/0/content",
        "acme-app/logo/0",
        "image/svg+xml",
        "Primary logo for light backgrounds",
    )


# --- Bad arguments: tool errors the model can read, not crashes ---------------------------------


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        ("search_docs", {"query": "   "}, "q: must not be empty"),
        (
            "search_docs",
            {"query": "broker", "repo": "acme/nowhere"},
            "Unknown repository acme/nowhere; indexed repositories: acme/handbook.",
        ),
        (
            "ask",
            {"question": "Why?", "repos": ["acme/nowhere"]},
            "Unknown repository acme/nowhere; indexed repositories: acme/handbook.",
        ),
        (
            "fetch_brand_asset",
            {"product": "acme-app", "kind": "logo", "asset_index": 7},
            "acme-app/logo has no asset at index 7; its indexes run from 0 to 1.",
        ),
        (
            "read_source",
            {"repo": "acme/handbook", "path": "docs/index.md", "commit": "HEAD_COMMIT", "start": 15, "end": 17},
            "docs/index.md at HEAD_COMMIT_12 has 16 lines; lines 15..17 are past its end.",
        ),
        (
            "read_source",
            {"repo": "acme/handbook", "path": "../registry/sources.yml", "commit": "HEAD_COMMIT"},
            "No file '../registry/sources.yml' is indexed in acme/handbook.",
        ),
        (
            "read_source",
            {"repo": "acme/handbook", "path": "docs/index.md", "commit": "abcdef0"},
            "No ingest of acme/handbook has seen a commit 'abcdef0'.",
        ),
        (
            "find_brand_assets",
            {"product": "Acme App"},
            "product: must be 1-64 characters of lower-case letters, digits, '-' and '_'",
        ),
    ],
)
def test_arguments_the_service_refuses_are_tool_errors_with_its_message(mcp, reader, indexed, tool, arguments, message):
    commit = mcp.handbook.head()
    arguments = {name: commit if value == "HEAD_COMMIT" else value for name, value in arguments.items()}
    message = message.replace("HEAD_COMMIT_12", commit[:12])
    result = call_tool(mcp.url, reader, tool, arguments)

    assert result.is_error is True
    assert text_of(result) == f"Error executing tool {tool}: {message}"


# Each rule's wording is pinned in process (tests/platform/test_mcp_messages.py); here two of them
# show that the same text reaches a client over HTTP.
@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        ("search_docs", {"query": "broker", "limit": 0}, "limit: must be at least 1"),
        (
            "read_source",
            {"repo": "acme/handbook", "path": "docs/index.md", "commit": "main"},
            "commit: must match the pattern ^[0-9a-fA-F]{7,64}$",
        ),
    ],
)
def test_arguments_outside_the_schema_are_tool_errors_naming_the_argument_and_its_rule(
    mcp, reader, indexed, tool, arguments, message
):
    result = call_tool(mcp.url, reader, tool, arguments)

    assert result.is_error is True
    assert text_of(result) == f"Error executing tool {tool}: {message}"


# --- Refusals: the REST endpoints' keys, problems and rate limits --------------------------------

PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def mcp_post(mcp: McpSetup, headers: dict[str, str], body: dict[str, Any] = PING) -> httpx.Response:
    return httpx.post(mcp.url, json=body, headers={**MCP_HEADERS, **headers}, timeout=30)


def test_a_ping_with_a_read_key_is_answered_with_the_rate_limit_headers(mcp, reader):
    response = mcp_post(mcp, {"Authorization": f"Bearer {reader}"})

    assert response.status_code == 200
    assert response.json() == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert (response.headers["x-ratelimit-limit"], response.headers["x-ratelimit-remaining"]) == (
        str(RATE_LIMIT),
        str(RATE_LIMIT - 1),
    )


def test_without_a_key_is_401_problem_as_on_the_rest_endpoints(mcp, api_client):
    response = mcp_post(mcp, {})

    rest = api_client.get("/search", {"q": "broker"})
    assert response.status_code == rest.status_code == 401
    assert response.headers["content-type"] == PROBLEM
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json() == rest.json()
    assert response.json()["code"] == "not_authenticated"


@pytest.mark.parametrize(
    ("token", "status", "code"),
    [
        ("sk_000000000000_not-a-key-of-ours", 401, "authentication_failed"),
        ("INGEST_ONLY", 403, "forbidden"),
        ("USER", 403, "forbidden"),
    ],
)
def test_a_key_the_rest_endpoints_refuse_is_refused_with_the_same_problem(mcp, api_client, token, status, code):
    if token == "INGEST_ONLY":
        token = service_key("ingest")
    elif token == "USER":
        token = api_key_create(kind=ApiKeyKind.USER, name="a user key", wallet_address=WALLET, scopes=[])[1]
    response = mcp_post(mcp, {"Authorization": f"Bearer {token}"})

    rest = api_client.get("/search", {"q": "broker"}, **bearer(token))
    assert response.status_code == rest.status_code == status
    assert response.headers["content-type"] == PROBLEM
    assert response.json() == rest.json()
    assert response.json()["code"] == code


def test_a_host_outside_allowed_hosts_is_400_problem_before_the_key_is_read(mcp, reader):
    response = mcp_post(mcp, {"Authorization": f"Bearer {reader}", "Host": "rebound.example"})

    assert response.status_code == 400
    assert response.headers["content-type"] == PROBLEM
    assert response.json()["detail"] == "The Host header names a host this server does not serve."
    assert "x-ratelimit-limit" not in response.headers


def test_the_official_client_with_a_bad_key_gets_no_session(mcp):
    async def list_tools(session: ClientSession) -> Any:
        return await session.list_tools()

    with pytest.raises(ExceptionGroup) as refused:
        with_handshake(mcp.url, "sk_000000000000_not-a-key-of-ours", list_tools)
    assert refused.group_contains(MCPError, match="^Server returned an error response$", depth=2)


def test_mcp_requests_count_against_the_keys_rest_rate_limit_then_429_problem(mcp, reader, api_client):
    for _ in range(5):
        assert api_client.get("/repos", **bearer(reader)).status_code == 200
    answers = [mcp_post(mcp, {"Authorization": f"Bearer {reader}"}) for _ in range(RATE_LIMIT - 5)]

    assert [answer.status_code for answer in answers] == [200] * (RATE_LIMIT - 5)
    assert [int(answer.headers["x-ratelimit-remaining"]) for answer in answers] == list(range(RATE_LIMIT - 6, -1, -1))
    refused = mcp_post(mcp, {"Authorization": f"Bearer {reader}"})
    rest = api_client.get("/repos", **bearer(reader))
    assert refused.status_code == rest.status_code == 429
    assert refused.headers["content-type"] == PROBLEM
    assert refused.json()["code"] == rest.json()["code"] == "rate_limited"
    assert int(refused.headers["retry-after"]) >= 1


def test_the_readme_curl_requests_call_a_tool_without_a_session(mcp, reader, indexed):
    """docs/ground-truth.md, "MCP server": one POST calls a tool, as a client of 2025-11-25 (no handshake needed
    by this stateless server) or of 2026-07-28 (the version in the headers and in `_meta`)."""
    arguments = {"query": "ACME_TOKEN", "limit": 1}
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "search_docs", "arguments": arguments},
    }
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "curl", "version": "8"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    modern = {**call, "params": {**call["params"], "_meta": meta}}
    modern_headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "search_docs"}

    legacy_answer = mcp_post(mcp, {"Authorization": f"Bearer {reader}"}, call)
    modern_answer = mcp_post(mcp, {"Authorization": f"Bearer {reader}", **modern_headers}, modern)

    assert legacy_answer.status_code == modern_answer.status_code == 200
    for answer in (legacy_answer, modern_answer):
        result = answer.json()["result"]
        assert result["isError"] is False
        assert [hit["citation"]["line"] for hit in result["structuredContent"]["results"]] == [14]
        assert json.loads(result["content"][0]["text"]) == result["structuredContent"]


# --- No event streams: every request is answered with one document ------------------------------

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "probe", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_get_or_delete_with_a_read_key_is_405_problem_at_once_not_a_stream_that_never_ends(mcp, reader, method):
    """What GET /mcp did under the SDK in stateless mode: an event stream that never sent a byte
    and never closed. The 5 s read timeout is the proof that it no longer hangs."""
    headers = {"Authorization": f"Bearer {reader}", "Accept": "text/event-stream", "Cache-Control": "no-cache"}
    response = httpx.request(method, mcp.url, headers=headers, timeout=5)

    assert response.status_code == 405
    assert response.headers["content-type"] == PROBLEM
    assert response.headers["allow"] == "POST"
    assert response.json() == {
        "type": "urn:problem:method_not_allowed",
        "title": "Method Not Allowed",
        "status": 405,
        "code": "method_not_allowed",
        "detail": f'Method "{method}" not allowed: MCP requests are POSTs, each answered with one JSON document; '
        "this stateless server offers no event stream.",
    }
    assert "x-ratelimit-limit" not in response.headers  # refused before the key is counted


def test_subscriptions_listen_is_answered_method_not_found_as_json_not_held_open(mcp, reader):
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "subscriptions/listen",
        "params": {"notifications": {"toolsListChanged": True}, "_meta": MODERN_META},
    }
    headers = {
        **MCP_HEADERS,
        "Authorization": f"Bearer {reader}",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "subscriptions/listen",
    }
    response = httpx.post(mcp.url, json=body, headers=headers, timeout=5)

    # The 2026-07-28 transport sends a JSON-RPC "method not found" with HTTP 404.
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": -32601, "message": "Method not found", "data": "subscriptions/listen"},
    }


# --- Keys limited to repositories ----------------------------------------------------------------


def scoped_reader(**scope: list[str]) -> str:
    return api_key_create(kind=ApiKeyKind.SERVICE, name="scoped", scopes=["read"], **scope)[1]


@pytest.fixture
def teams(indexed) -> dict[str, str]:
    """Keys for acme/handbook (ingested), for acme/tools (the same GitHub owner's other
    repository, listed with owners docs-team) and for another team's repositories."""
    RepositoryFactory(name="acme/tools", owners=["docs-team"])
    RepositoryFactory(name="platform/runbooks", owners=["platform"])
    return {
        "owner": scoped_reader(scope_repositories=["acme/handbook"]),
        "teammate": scoped_reader(scope_owners=["docs-team"]),
        "outsider": scoped_reader(scope_owners=["platform"]),
    }


def test_list_repositories_gives_only_the_keys_repositories_as_get_repos_does(mcp, teams, api_client):
    for who, expected in [
        ("owner", ["acme/handbook"]),
        ("teammate", ["acme/tools"]),
        ("outsider", ["platform/runbooks"]),
    ]:
        result = call_tool(mcp.url, teams[who], "list_repositories", {})
        rest = api_client.get("/repos", **bearer(teams[who]))
        assert result.structured_content == rest.json()
        assert [repository["name"] for repository in rest.json()["repositories"]] == expected, who


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("search_docs", {"query": "ACME_TOKEN", "repo": "acme/handbook"}),
        ("ask", {"question": "Where do I set ACME_TOKEN?", "repos": ["acme/handbook"]}),
        ("read_source", {"repo": "acme/handbook", "path": "docs/index.md", "commit": "HEAD_COMMIT"}),
    ],
)
def test_an_out_of_scope_repository_is_the_same_tool_error_as_an_unknown_one(mcp, teams, tool, arguments):
    arguments = {name: mcp.handbook.head() if value == "HEAD_COMMIT" else value for name, value in arguments.items()}
    seen = call_tool(mcp.url, teams["owner"], tool, arguments)
    teammate = call_tool(mcp.url, teams["teammate"], tool, arguments)
    outsider = call_tool(mcp.url, teams["outsider"], tool, arguments)
    Repository.objects.filter(name="acme/handbook").delete()
    teammate_unknown = call_tool(mcp.url, teams["teammate"], tool, arguments)
    outsider_unknown = call_tool(mcp.url, teams["outsider"], tool, arguments)

    assert seen.is_error is False
    assert (teammate.is_error, outsider.is_error) == (True, True)
    assert text_of(teammate) == text_of(teammate_unknown)
    assert text_of(outsider) == text_of(outsider_unknown)
    assert "platform/runbooks" not in text_of(teammate)
    assert "acme/tools" not in text_of(outsider)


def test_search_docs_without_repo_searches_only_the_keys_repositories(mcp, teams):
    owner = call_tool(mcp.url, teams["owner"], "search_docs", {"query": "ACME_TOKEN environment"})
    teammate = call_tool(mcp.url, teams["teammate"], "search_docs", {"query": "ACME_TOKEN environment"})

    assert {hit["citation"]["repo"] for hit in owner.structured_content["results"]} == {"acme/handbook"}
    assert teammate.structured_content == {"query": "ACME_TOKEN environment", "results": []}


def test_search_docs_and_ask_calls_are_recorded_in_the_audit_of_questions(mcp, reader, indexed):
    call_tool(mcp.url, reader, "search_docs", {"query": "ACME_TOKEN environment"})
    call_tool(mcp.url, reader, "ask", {"question": "How do I rotate the Kubernetes ingress certificates?"})
    call_tool(mcp.url, reader, "list_repositories", {})
    # The server's writer thread inserts them after the calls returned (the same path as /search).
    deadline = time.monotonic() + 30
    while AskedQuestion.objects.count() < 2 and time.monotonic() < deadline:
        time.sleep(0.05)

    prefix = ApiKey.objects.get().display_prefix
    assert list(
        AskedQuestion.objects.order_by("id").values_list(
            "key_prefix", "via", "question", "repositories", "sources_missing"
        )
    ) == [
        (prefix, "mcp:search_docs", "ACME_TOKEN environment", ["acme/handbook"], False),
        (prefix, "mcp:ask", "How do I rotate the Kubernetes ingress certificates?", ["acme/handbook"], True),
    ]


def test_brand_asset_tools_see_only_the_assets_of_the_keys_repositories(mcp, indexed, api_client):
    RepositoryFactory(name="acme/brand", owners=["brand-team"])
    RepositoryFactory(name="platform/runbooks", owners=["platform"])
    keys = {
        "owner": scoped_reader(scope_owners=["brand-team"]),
        "teammate": scoped_reader(scope_repositories=["acme/handbook"]),
        "outsider": scoped_reader(scope_owners=["platform"]),
    }
    badge = {"product": "acme-app", "kind": "store-badge", "asset_index": 1}

    found = {who: call_tool(mcp.url, key, "find_brand_assets", {}).structured_content for who, key in keys.items()}
    fetched = {who: call_tool(mcp.url, key, "fetch_brand_asset", badge) for who, key in keys.items()}
    owner_rest = api_client.get("/assets", **bearer(keys["owner"])).json()
    BrandAsset.objects.filter(product="acme-app").delete()
    absent = {who: call_tool(mcp.url, keys[who], "fetch_brand_asset", badge) for who in ("teammate", "outsider")}

    assert found["owner"] == {"assets": owner_rest} and len(owner_rest) == 8
    assert found["teammate"] == found["outsider"] == {"assets": []}
    assert fetched["owner"].is_error is False
    image = fetched["owner"].content[1]
    assert isinstance(image, ImageContent)
    assert base64.b64decode(image.data) == GOOGLE_PLAY_BADGE
    for who in ("teammate", "outsider"):
        assert fetched[who].is_error is True
        assert text_of(fetched[who]) == text_of(absent[who])
        assert "acme/brand" not in text_of(fetched[who])
