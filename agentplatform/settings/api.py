"""The HTTP APIs: DRF with the plumbing's authentication, renderer, parser, schema and problem
details; OpenAPI; where the ground-truth routes are mounted; the cache of the busiest reads."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from agentplatform.settings.env import env, env_non_negative

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["agentplatform.plumbing.authentication.BearerCredentialAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    # DRF's JSON renderer, which also sends bodies written by PostgreSQL (agentplatform/plumbing/renderers.py).
    "DEFAULT_RENDERER_CLASSES": ["agentplatform.plumbing.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["agentplatform.plumbing.json_bodies.JSONParser"],
    "DEFAULT_SCHEMA_CLASS": "agentplatform.plumbing.openapi.ProblemDetailsAutoSchema",
    "EXCEPTION_HANDLER": "agentplatform.plumbing.errors.problem_exception_handler",
    "UNAUTHENTICATED_USER": None,
    "URL_FORMAT_OVERRIDE": None,
}
# The paths rendered as problem details: the wiring knows which routes the apps mount, the
# plumbing (agentplatform/plumbing/errors.py) does not import them.
API_PATH_PREFIXES_FUNCTION = "agentplatform.ground_truth_routes.api_path_prefixes"
SPECTACULAR_SETTINGS = {
    "TITLE": "Agent platform and ground-truth API",
    "DESCRIPTION": (
        "Agents, the platform token and the chat feed under /api/, and the ground-truth "
        "search, ask, ingest and brand-asset endpoints. Errors are RFC 9457 problem details."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Several models have a `status` field; name the agent one so the components do not collide.
    "ENUM_NAME_OVERRIDES": {
        "AgentStatusEnum": "agents.models.AgentStatus",
        "IngestRunStatusEnum": "groundtruth.models.IngestStatus",
        "HealthStatusEnum": ["ok", "degraded", "unavailable"],
        "HealthCheckStatusEnum": ["ok", "error", "disabled"],
    },
}

COIN_SEGMENT = env.str("COIN_SEGMENT", default="wisent")
if not COIN_SEGMENT.isidentifier() and not COIN_SEGMENT.replace("-", "").isalnum():
    raise ImproperlyConfigured("COIN_SEGMENT must be a single URL path segment of letters, digits, - or _")
GROUNDTRUTH_PREFIX = env.str("GROUNDTRUTH_PREFIX", default="").strip("/")

# Writes through the app make a cached answer stale at once; this bounds only how long a write
# from outside the app goes unseen (agentplatform/plumbing/response_cache.py).
API_RESPONSE_CACHE_SECONDS = env_non_negative("API_RESPONSE_CACHE_SECONDS", 5)
