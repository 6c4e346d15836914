"""The MCP server: Streamable HTTP at /mcp (under GROUNDTRUTH_PREFIX when set), an ASGI application
of its own process (Procfile `mcp`: uvicorn on MCP_PORT), so that the gunicorn web tier gives no
worker to it.

Built on the official MCP Python SDK (`mcp`, its MCPServer and Streamable HTTP session manager),
stateless and answering JSON (no session to keep between requests, so any number of processes
can serve it): clients of the 2026-07-28 protocol send self-contained requests, older clients
(2025-11-25 and before) the initialize handshake; the SDK serves both.

Only POST is served: every answer is one JSON document and no request holds a stream open. GET
(the Streamable HTTP transport's optional server-to-client event stream) is a 405, as the
specification allows a server that offers no such stream: a stateless server has no session to
address a server-initiated message to, so under the SDK that stream never carries a byte and never
ends (one key held 300 of them), and no client needs it (the SDK's client opens it only with a
session id, which this server never gives). For the same reason `subscriptions/listen` (the
2026-07-28 protocol's stream of list-changed notifications) is not offered: the tools never change
while the process runs. DELETE (ending a session) has no session to end: also 405.

Each request passes the access gate first (agentplatform/mcp_access.py: service key with scope
`read`, rate limits, problem details for refusals); the tools (groundtruth/mcp_tools.py,
brandassets/mcp_tools.py) run on worker threads, at most MCP_THREADS at once. The embedding
model is loaded once, at start-up, before the process accepts a request (as each gunicorn
worker loads it: agentplatform/gunicorn_config.py).

    .venv/bin/uvicorn agentplatform.mcp_app:application --port 8002
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import AsyncIterator
from typing import Any

import anyio.to_thread
import django

from agentplatform.plumbing.database_backend.deadlines import ProcessKind, process_kind_set

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentplatform.settings")
# A client waits on every tool call's queries: the short database deadlines (agentplatform/plumbing/database_backend/).
process_kind_set(ProcessKind.SERVING)
django.setup()

from django.conf import settings  # noqa: E402  (after django.setup())
from mcp.server.mcpserver import MCPServer  # noqa: E402
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError  # noqa: E402
from mcp.server.transport_security import TransportSecuritySettings  # noqa: E402
from mcp_types import ToolAnnotations  # noqa: E402
from starlette.types import Message, Receive, Scope, Send  # noqa: E402

from agentplatform.ground_truth_routes import ground_truth_mount  # noqa: E402
from agentplatform.mcp_access import mcp_access_decide  # noqa: E402
from agentplatform.plumbing.errors import problem_body  # noqa: E402
from agentplatform.plumbing.mcp_tool_calls import (  # noqa: E402  # noqa: E402
    ArgumentsInvalid,
    arguments_invalid_text,
    tool_caller_reset,
    tool_caller_set,
)
from brandassets.mcp_tools import BRAND_ASSET_TOOLS  # noqa: E402
from groundtruth.embeddings import embedding_backend, embedding_backend_prepare  # noqa: E402
from groundtruth.mcp_tools import GROUND_TRUTH_TOOLS  # noqa: E402

logger = logging.getLogger(__name__)

MCP_PATH = f"/{ground_truth_mount()}mcp"

INSTRUCTIONS = (
    "Ground truth: the indexed documentation and code of registered repositories, and the brand assets "
    "of their products. search_docs finds passages; ask answers a question only from them, with "
    "citations, and says sources_missing when they do not answer it; every citation names repo, path, "
    "commit and lines, which read_source returns exactly as the file has them at that commit. "
    "list_repositories says what is indexed; find_brand_assets and fetch_brand_asset give logos, icons "
    "and fonts."
)


class GroundTruthMCPServer(MCPServer):
    """The SDK's server, whose refusal of arguments outside a tool's schema reads as our other
    refusals do ("limit: must be at most 50"), not as pydantic's report with a link to its site."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc, UnexpectedToolError) or not isinstance(exc.__cause__, ArgumentsInvalid):
                raise
            raise ToolError(f"Error executing tool {name}: {arguments_invalid_text(exc.__cause__)}") from exc.__cause__


def mcp_server_build() -> MCPServer:
    # No `subscriptions/listen` stream: nothing this server offers changes while it runs (module docstring).
    server: MCPServer = GroundTruthMCPServer(name="ground-truth", instructions=INSTRUCTIONS, subscriptions=False)
    # Every tool reads; none changes anything, here or elsewhere.
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    for tool in (*GROUND_TRUTH_TOOLS, *BRAND_ASSET_TOOLS):
        server.add_tool(tool, annotations=read_only)
    return server


def _problem(status: int, code: str, detail: str) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    body = json.dumps(problem_body(status=status, code=code, detail=detail)).encode()
    return status, [(b"content-type", b"application/problem+json")], body


async def _send_response(send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    headers = [(name, value) for name, value in headers if name != b"content-length"]
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class McpApplication:
    """The ASGI application: /mcp through the access gate to the SDK's transport; anything else a
    404 problem; lifespan loads the embedding model and runs the transport's task group."""

    def __init__(self, server: MCPServer) -> None:
        self.server = server
        # Builds the SDK's session manager (its own Starlette app is not used: the path and the
        # gate in front of it are this class's).
        server.streamable_http_app(
            streamable_http_path=MCP_PATH,
            stateless_http=True,
            json_response=True,
            max_request_body_size=settings.DATA_UPLOAD_MAX_MEMORY_SIZE,
            # Host names are checked by the gate against ALLOWED_HOSTS, as on the web tier; every
            # request needs a service key, so a page in a browser cannot use it through DNS rebinding.
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["path"] != MCP_PATH:
            await _send_response(send, *_problem(404, "not_found", f"No endpoint at this path; MCP is at {MCP_PATH}."))
            return
        if scope["method"] != "POST":
            status, headers, body = _problem(
                405,
                "method_not_allowed",
                f'Method "{scope["method"]}" not allowed: MCP requests are POSTs, each answered with one JSON '
                "document; this stateless server offers no event stream.",
            )
            await _send_response(send, status, [*headers, (b"allow", b"POST")], body)
            return
        try:
            decision = await anyio.to_thread.run_sync(mcp_access_decide, dict(scope))
        except Exception:
            logger.exception("MCP access check failed on %s %s", scope["method"], scope["path"])
            await _send_response(send, *_problem(500, "server_error", "An unexpected error occurred."))
            return
        if not decision.admitted:
            await _send_response(send, decision.status, decision.headers, decision.body)
            return

        async def send_with_rate_limit(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *decision.headers]}
            await send(message)

        # The tools read the caller's repository scope from the context the transport's tasks copy.
        caller_token = tool_caller_set(decision.caller)
        try:
            await self.server.session_manager.handle_request(scope, receive, send_with_rate_limit)
        finally:
            tool_caller_reset(caller_token)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        await receive()  # lifespan.startup
        async with contextlib.AsyncExitStack() as running:
            try:
                await running.enter_async_context(self._running())
            except Exception as exc:
                logger.exception("The MCP server could not start")
                await send({"type": "lifespan.startup.failed", "message": str(exc)})
                return
            await send({"type": "lifespan.startup.complete"})
            await receive()  # lifespan.shutdown
        await send({"type": "lifespan.shutdown.complete"})

    @contextlib.asynccontextmanager
    async def _running(self) -> AsyncIterator[None]:
        anyio.to_thread.current_default_thread_limiter().total_tokens = settings.MCP_THREADS
        await anyio.to_thread.run_sync(_embedding_model_load)
        async with self.server.session_manager.run():
            yield


def _embedding_model_load() -> None:
    """Search falls back to lexical while the model is not ready; /health reports its state."""

    def ready(described: str) -> None:
        logger.info("MCP server: embedding backend ready: %s", described)

    preparing = embedding_backend_prepare(on_ready=ready)
    if preparing is None:
        ready(embedding_backend().describe())
    else:
        preparing.join(timeout=10.0)
        if preparing.is_alive():
            logger.info("MCP server: embedding backend not ready yet: %s", embedding_backend().describe())


application: Any = McpApplication(mcp_server_build())
