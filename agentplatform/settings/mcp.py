"""The MCP server (agentplatform/mcp_app.py; Procfile `mcp`, its own uvicorn process)."""

from __future__ import annotations

import re

from django.core.exceptions import ImproperlyConfigured

from agentplatform.settings.env import env, env_positive_int

# The links its tools return (a citation's source_url, an asset's contentUrl) point at the web
# tier as clients reach it, which the MCP process cannot learn from its own requests.
WEB_BASE_URL = (
    env.str("WEB_BASE_URL", default="").strip().rstrip("/") or f"http://127.0.0.1:{env.str('WEB_PORT', default='8000')}"
)
if not re.match(r"https?://[^/?#@]+\Z", WEB_BASE_URL):
    raise ImproperlyConfigured(f"WEB_BASE_URL must be http(s)://host[:port] without a path, got {WEB_BASE_URL!r}")
# Each thread holds its own database connection.
MCP_THREADS = env_positive_int("MCP_THREADS", 8)
MCP_IMAGE_MAX_BYTES = env_positive_int("MCP_IMAGE_MAX_BYTES", 512 * 1024)
