"""Reads of the ground-truth ingest: repositories with their state, runs, health checks."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.db.models import OuterRef, QuerySet, Subquery

from agentplatform.errors import NotFound
from groundtruth.models import IngestRun, IngestStatus, Registry, Repository
from groundtruth.registry import registry_location


class RepositoryState:
    """What /repos and the admin show as a repository's state."""

    DISABLED = "disabled"  # not (or no longer) enabled in the registry
    QUEUED = "queued"
    RUNNING = "running"
    FAILED = "failed"  # the last run failed; the previous index (if any) is still served
    READY = "ready"  # indexed, last run succeeded
    NEW = "new"  # listed, never indexed


def repository_state(repository: Repository) -> str:
    """Needs the annotations of `repository_list()` (latest_run_status)."""
    if not repository.enabled:
        return RepositoryState.DISABLED
    latest = getattr(repository, "latest_run_status", None)
    if latest in (IngestStatus.QUEUED, IngestStatus.RUNNING, IngestStatus.FAILED):
        return str(latest)
    return RepositoryState.READY if repository.last_commit else RepositoryState.NEW


def repository_list() -> QuerySet[Repository]:
    """Every repository the registry listed, ordered by name, with its latest run annotated
    (one query whatever the number of repositories)."""
    latest = IngestRun.objects.filter(repository=OuterRef("pk")).order_by("-created_at", "-id")
    return Repository.objects.annotate(
        latest_run_id=Subquery(latest.values("id")[:1]),
        latest_run_status=Subquery(latest.values("status")[:1]),
        latest_run_finished_at=Subquery(latest.values("finished_at")[:1]),
        latest_run_error=Subquery(latest.values("error")[:1]),
    ).order_by("name")


def registry_current() -> Registry | None:
    return Registry.objects.filter(location=registry_location()).first()


def ingest_run_get(*, run_id: int) -> IngestRun:
    run = IngestRun.objects.select_related("repository").filter(pk=run_id).first()
    if run is None:
        raise NotFound(f"No ingest run with id {run_id}.")
    return run


# --- health ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class CheckResult:
    status: str  # ok | error | disabled
    detail: str

    def as_dict(self) -> dict[str, str]:
        return {"status": self.status, "detail": self.detail}


CRITICAL_CHECKS = ("database", "pgvector")


def _check_database() -> CheckResult:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return CheckResult("ok", "PostgreSQL answered")


def _check_pgvector() -> CheckResult:
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        row = cursor.fetchone()
    if row is None:
        return CheckResult("error", "the vector extension is not installed in the database")
    return CheckResult("ok", f"pgvector {row[0]}")


def _check_redis() -> CheckResult:
    client = cache._cache.get_client()  # the redis-py client behind Django's RedisCache
    client.ping()
    return CheckResult("ok", "Redis answered PING")


def _check_broker() -> CheckResult:
    from agentplatform.celery import app

    with app.connection_for_write() as broker:
        broker.ensure_connection(max_retries=1, timeout=settings.HEALTH_TIMEOUT_SECONDS)
    return CheckResult("ok", f"broker reachable (queue {settings.CELERY_TASK_DEFAULT_QUEUE})")


def _reachable(url: str) -> bool:
    """Any HTTP answer (even 401/404) proves the endpoint is up; only no answer fails."""
    try:
        httpx.get(url, timeout=settings.HEALTH_TIMEOUT_SECONDS)
    except httpx.HTTPError:
        return False
    return True


def _public_url(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}{parts.path}"


def _check_embeddings() -> CheckResult:
    backend = settings.EMBEDDING_BACKEND
    if backend == "none":
        return CheckResult("disabled", "EMBEDDING_BACKEND=none: search is lexical only")
    if backend == "local":
        from groundtruth.embeddings import embedding_backend

        model = embedding_backend()
        path = getattr(model, "model_path", "")
        if not Path(path).is_dir():
            return CheckResult("error", f"model directory {path} is missing")
        return CheckResult("ok", model.describe())
    base = settings.EMBEDDING_URL.rstrip("/").removesuffix("/embeddings")
    if not _reachable(f"{base}/models"):
        return CheckResult("error", f"embedding endpoint {_public_url(base)} unreachable")
    return CheckResult("ok", f"embedding endpoint {_public_url(base)} reachable, model {settings.EMBEDDING_MODEL}")


def _check_llm() -> CheckResult:
    if not settings.LLM_BASE_URL:
        return CheckResult("disabled", "no LLM_BASE_URL: /ask answers extractively")
    base = settings.LLM_BASE_URL.rstrip("/")
    if not _reachable(f"{base}/models"):
        return CheckResult("error", f"language-model endpoint {_public_url(base)} unreachable")
    return CheckResult("ok", f"language-model endpoint {_public_url(base)} reachable, model {settings.LLM_MODEL}")


HEALTH_CHECKS = {
    "database": _check_database,
    "pgvector": _check_pgvector,
    "redis": _check_redis,
    "broker": _check_broker,
    "embeddings": _check_embeddings,
    "llm": _check_llm,
}


def health_report() -> tuple[dict[str, object], bool]:
    """({status, checks}, serving). `serving` is False when the database or pgvector fails:
    nothing can be searched then (503). Any other failing check makes the status `degraded`
    (200): search still answers, lexically or without generation."""
    checks: dict[str, dict[str, object]] = {}
    for name, check in HEALTH_CHECKS.items():
        started = time.monotonic()
        try:
            result = check()
        except Exception as exc:  # a health check reports failures, it does not raise them
            # Connection errors may quote a URL; credentials in one never leave the server.
            message = re.sub(r"://[^/@\s]+@", "://***@", str(exc))[:200]
            result = CheckResult("error", f"{type(exc).__name__}: {message}")
        checks[name] = {**result.as_dict(), "ms": round((time.monotonic() - started) * 1000)}
    serving = all(checks[name]["status"] == "ok" for name in CRITICAL_CHECKS)
    degraded = any(check["status"] == "error" for check in checks.values())
    status = "unavailable" if not serving else "degraded" if degraded else "ok"
    return {"status": status, "checks": checks}, serving
