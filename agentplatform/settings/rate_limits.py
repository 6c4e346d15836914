"""Rate limits (agentplatform/plumbing/ratelimits.py), counted in Redis: the API's by our own counter
(agentplatform/plumbing/rate_counters.py), admin sign-in attempts by django-ratelimit's `get_usage`."""

from __future__ import annotations

from agentplatform.settings.env import env_rate

RATE_LIMIT_PUBLIC = env_rate("RATE_LIMIT_PUBLIC", "100/m")
RATE_LIMIT_AUTHENTICATED = env_rate("RATE_LIMIT_AUTHENTICATED", "500/m")
RATE_LIMIT_TRADING = env_rate("RATE_LIMIT_TRADING", "60/m")
RATE_LIMIT_ADMIN_LOGIN = env_rate("RATE_LIMIT_ADMIN_LOGIN", "10/5m")
# The cache whose Redis holds the rate-limit counters and the cache generations (settings/cache.py).
RATELIMIT_USE_CACHE = "counters"
# django-ratelimit: where the cache gives no count, the attempt is not limited (its default would
# refuse it), as every limit here fails open. A Redis error is raised by the cache and handled the
# same way by ratelimits.py, which logs it.
RATELIMIT_FAIL_OPEN = True
