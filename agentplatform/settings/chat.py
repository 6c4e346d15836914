"""The chat stream, GET /api/chat/stream (chat/stream.py), served by its own process."""

from __future__ import annotations

import re

from django.core.exceptions import ImproperlyConfigured

from agentplatform.settings.env import env, env_non_negative, env_positive_int

# A port of its own (Procfile `stream`: uvicorn, ASGI) so that open streams never hold a gunicorn
# worker; gunicorn answers the path with a 307 to CHAT_STREAM_URL.
STREAM_PORT = env_positive_int("STREAM_PORT", 8001)
CHAT_STREAM_URL = env.str("CHAT_STREAM_URL", default="").strip()
if CHAT_STREAM_URL and not re.match(r"https?://[^/?#]+/[^?#]*\Z", CHAT_STREAM_URL):
    raise ImproperlyConfigured(
        f"CHAT_STREAM_URL must be an http(s) URL with a path and no query, got {CHAT_STREAM_URL!r}"
    )
CHAT_STREAM_HEARTBEAT_SECONDS = env_non_negative("CHAT_STREAM_HEARTBEAT_SECONDS", 15.0)
# Counted in Redis, so the limit holds across every stream process.
CHAT_STREAM_MAX_PER_IP = env_positive_int("CHAT_STREAM_MAX_PER_IP", 10)
# The database is read this often for messages whose Redis notice a stream process did not get
# (Redis down or frozen, a publish that failed): Redis is a shortcut, not the record.
CHAT_STREAM_POLL_SECONDS = env_non_negative("CHAT_STREAM_POLL_SECONDS", 2.0)
for _name, _seconds in (
    ("CHAT_STREAM_HEARTBEAT_SECONDS", CHAT_STREAM_HEARTBEAT_SECONDS),
    ("CHAT_STREAM_POLL_SECONDS", CHAT_STREAM_POLL_SECONDS),
):
    if not _seconds > 0:
        raise ImproperlyConfigured(f"{_name} must be a positive number of seconds, got {_seconds}")
