"""What the MCP server says and logs, in process: arguments outside a tool's schema are refused in
plain words naming the argument and its rule; a stateless request's end is not logged."""

from __future__ import annotations

import logging

import anyio
import pytest
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.streamable_http import StreamableHTTPServerTransport

from agentplatform.mcp_app import application


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        ("search_docs", {"query": "broker", "limit": 0}, "limit: must be at least 1"),
        ("search_docs", {"query": "broker", "limit": 51}, "limit: must be at most 50"),
        ("search_docs", {"query": "broker", "limit": "ten"}, "limit: must be an integer"),
        ("search_docs", {"query": "x" * 501}, "query: may be at most 500 characters"),
        ("search_docs", {}, "query: is required"),
        ("ask", {"question": "Why?", "repos": []}, "repos: must hold at least 1 item(s)"),
        (
            "read_source",
            {"repo": "acme/handbook", "path": "docs/index.md", "commit": "main"},
            "commit: must match the pattern ^[0-9a-fA-F]{7,64}$",
        ),
        (
            "read_source",
            {"repo": "acme/handbook", "path": "docs/index.md", "commit": "abcdef0", "start": 0},
            "start: must be at least 1",
        ),
        (
            "fetch_brand_asset",
            {"product": "acme-app", "kind": "logo", "asset_index": -1},
            "asset_index: must be at least 0",
        ),
        ("search_docs", {"limit": 0}, "query: is required; limit: must be at least 1"),
    ],
)
def test_arguments_outside_the_schema_are_refused_naming_the_argument_and_its_rule(tool, arguments, message):
    with pytest.raises(ToolError) as refusal:
        anyio.run(application.server.call_tool, tool, arguments)

    assert str(refusal.value) == f"Error executing tool {tool}: {message}"


def test_a_stateless_requests_transport_ends_without_a_log_line_and_sdk_warnings_still_show(caplog):
    caplog.set_level(logging.DEBUG, logger="root")
    transport = StreamableHTTPServerTransport(mcp_session_id=None)

    anyio.run(transport.terminate)
    logging.getLogger("mcp.server.streamable_http").warning("a real problem")

    records = [record for record in caplog.records if record.name.startswith("mcp.")]
    assert [(record.name, record.levelname, record.getMessage()) for record in records] == [
        ("mcp.server.streamable_http", "WARNING", "a real problem")
    ]
