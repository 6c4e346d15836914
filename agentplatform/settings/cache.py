"""Redis: Django's cache, and the rate-limit counters with the cache generations (also the
Celery broker's default, settings/celery.py)."""

from __future__ import annotations

from agentplatform.settings.env import env

REDIS_URL = env.str("REDIS_URL", default="redis://127.0.0.1:6379/0")
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": env.str("CACHE_KEY_PREFIX", default="ap"),
        "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
    },
    # The rate-limit counters and the cache generations, on the same Redis: django-redis keeps
    # one client per process (agentplatform/plumbing/rate_counters.py runs its script on it), where
    # Django's RedisCache builds a client per call (three times the CPU per counted request,
    # measured).
    "counters": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": env.str("CACHE_KEY_PREFIX", default="ap"),
        "OPTIONS": {
            "SOCKET_CONNECT_TIMEOUT": 0.5,
            "SOCKET_TIMEOUT": 0.5,
            # Each process (and thread: Django's caches are per thread) keeps one connection to
            # itself instead of taking one from the pool per call: a third less CPU per call.
            "REDIS_CLIENT_KWARGS": {"single_connection_client": True},
        },
    },
}
