"""Rate limits (agentplatform/plumbing/ratelimits.py), counted by django-ratelimit in Redis."""

from __future__ import annotations

from agentplatform.settings.env import env_rate

RATE_LIMIT_PUBLIC = env_rate("RATE_LIMIT_PUBLIC", "100/m")
RATE_LIMIT_AUTHENTICATED = env_rate("RATE_LIMIT_AUTHENTICATED", "500/m")
RATE_LIMIT_TRADING = env_rate("RATE_LIMIT_TRADING", "60/m")
RATE_LIMIT_ADMIN_LOGIN = env_rate("RATE_LIMIT_ADMIN_LOGIN", "10/5m")
# django-redis's client counts in one atomic call (settings/cache.py).
RATELIMIT_USE_CACHE = "counters"
# A count that cannot be read serves the request: Redis down must not take the API down with it.
RATELIMIT_FAIL_OPEN = True
