"""Ground-truth ingest (groundtruth/ingest/): the source registry, git access, what is read and
how it is chunked, the runs' liveness and schedule, push webhooks."""

from __future__ import annotations

from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from agentplatform.settings.core import VAR_DIR
from agentplatform.settings.env import env, env_hosts, env_non_negative, env_positive_int

SOURCE_REGISTRY_REPO = env.str("SOURCE_REGISTRY_REPO", default="") or str(VAR_DIR / "demo-sources" / "registry")
SOURCE_REGISTRY_REF = env.str("SOURCE_REGISTRY_REF", default="main")
SOURCE_REGISTRY_PATH = env.str("SOURCE_REGISTRY_PATH", default="sources.yml")
GIT_CACHE_DIR = Path(env.str("GIT_CACHE_DIR", default=str(VAR_DIR / "git-cache")))
# Token for private https repositories; sent as an HTTP header, never logged or returned.
GIT_HTTP_TOKEN = env.str("GIT_HTTP_TOKEN", default="")
# User name sent with the token (HTTP Basic); GitHub expects x-access-token.
GIT_HTTP_USERNAME = env.str("GIT_HTTP_USERNAME", default="x-access-token")
# Hosts that receive the token (comma separated); required with a token, no other host gets it.
GIT_HTTP_TOKEN_HOSTS = env_hosts("GIT_HTTP_TOKEN_HOSTS")
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
GIT_ALLOW_PRIVATE_HOSTS = env_hosts("GIT_ALLOW_PRIVATE_HOSTS", networks=True)
GIT_TIMEOUT_SECONDS = env_positive_int("GIT_TIMEOUT_SECONDS", 300)
GIT_BLOB_URL_TEMPLATE = env.str("GIT_BLOB_URL_TEMPLATE", default="{base}/blob/{commit}/{path}")
SOURCE_LINES_MAX = env_positive_int("SOURCE_LINES_MAX", 500)

INGEST_MAX_FILE_BYTES = env_positive_int("INGEST_MAX_FILE_BYTES", 1024 * 1024)
CHUNK_MAX_CHARS = env_positive_int("CHUNK_MAX_CHARS", 1500)
CONFIG_WHOLE_FILE_MAX_CHARS = env_positive_int("CONFIG_WHOLE_FILE_MAX_CHARS", 3000)
# Files read, chunked and embedded per step; bounds worker memory whatever the repo size.
INGEST_FILE_BATCH_SIZE = env_positive_int("INGEST_FILE_BATCH_SIZE", 200)
INGEST_HEARTBEAT_SECONDS = env_positive_int("INGEST_HEARTBEAT_SECONDS", 10)
# A running run without a heartbeat for this long is marked failed (its worker died).
INGEST_STALE_SECONDS = env_positive_int("INGEST_STALE_SECONDS", 120)
INGEST_QUEUED_TIMEOUT_SECONDS = env_positive_int("INGEST_QUEUED_TIMEOUT_SECONDS", 3600)
INGEST_RETRY_MAX = env_non_negative("INGEST_RETRY_MAX", 3)
INGEST_RETRY_BACKOFF_SECONDS = env_positive_int("INGEST_RETRY_BACKOFF_SECONDS", 30)
INGEST_SCHEDULE = env.str("INGEST_SCHEDULE", default="17 * * * *")
if INGEST_SCHEDULE != "off" and len(INGEST_SCHEDULE.split()) != 5:
    raise ImproperlyConfigured("INGEST_SCHEDULE must be a 5-field crontab such as '17 * * * *', or 'off'")
# Push webhooks (POST /hooks/git): the secret shared with the git hosts (unset: the endpoint
# answers 404 and queues nothing), never logged or returned; the largest payload read (413 beyond).
INGEST_WEBHOOK_SECRET = env.str("INGEST_WEBHOOK_SECRET", default="")
INGEST_WEBHOOK_MAX_BYTES = env_positive_int("INGEST_WEBHOOK_MAX_BYTES", 1024 * 1024)
