"""The health report, GET /health (agentplatform/health.py)."""

from __future__ import annotations

from agentplatform.settings.env import env_non_negative

HEALTH_TIMEOUT_SECONDS = env_non_negative("HEALTH_TIMEOUT_SECONDS", 2.0)
# A /health report is reused this long: probes of a polling load balancer never pile up.
HEALTH_CACHE_SECONDS = env_non_negative("HEALTH_CACHE_SECONDS", 1.0)
