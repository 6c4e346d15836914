"""The health of the whole platform, as GET /health reports it: the database, pgvector, Redis, the
Celery broker, the embedding model or endpoint, the language-model endpoint and the relevance
judge (in use, not in use, or failed to load: today's model then decides, and the status is
`degraded`).

Every check runs in a thread of its own and is given HEALTH_TIMEOUT_SECONDS: a peer that hangs
(a frozen Redis, a PostgreSQL that stopped answering) becomes an `error` check in time, never
a request gunicorn has to kill. Clients also carry socket timeouts, so such a thread ends soon
after; until it has, that check is not started again (one thread per check at most). A report
is reused for HEALTH_CACHE_SECONDS and computed by one request at a time, so a load balancer
polling every worker cannot pile up probes.

GET /health itself (HealthViewSet and `urlpatterns`, mounted with the ground-truth routes by
agentplatform/ground_truth_routes.py) is public (load balancers call it), reads no credentials (a
probe configured with a stale key still sees the health) and is not rate limited. It is the
wiring's, not an app's: it reports on every part of the platform.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from django.conf import settings
from django.core.cache import cache
from django.db import connection, connections
from django.urls import path
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status, viewsets
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from agentplatform.celery import app as celery_app
from groundtruth.embeddings import embedding_backend
from groundtruth.judge.scoring import judge_state


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
    # The redis-py client behind Django's RedisCache (socket timeouts set); not in the stubs.
    client = cache._cache.get_client()  # type: ignore[attr-defined]
    client.ping()
    return CheckResult("ok", "Redis answered PING")


def _check_broker() -> CheckResult:
    timeout = settings.HEALTH_TIMEOUT_SECONDS
    # kombu's ensure_connection(timeout=) bounds connecting, not redis-py's reads: the socket
    # timeouts do.
    socket_timeouts = {"socket_timeout": timeout, "socket_connect_timeout": timeout}
    with celery_app.connection_for_write(settings.CELERY_BROKER_URL, transport_options=socket_timeouts) as broker:
        broker.ensure_connection(max_retries=1, timeout=timeout)
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
        model = embedding_backend()
        path = getattr(model, "model_path", "")
        if not Path(path).is_dir():
            # Why, once a load was tried: an adapted encoder's stored files that failed their checks.
            failure = getattr(model, "failure", "")
            return CheckResult("error", f"model directory {path} is missing" + (f" ({failure})" if failure else ""))
        if getattr(model, "state", "loaded") != "loaded":
            # Being prepared (the first ONNX export) or failed: search is lexical until it loads.
            return CheckResult("error", f"model not ready: {model.describe()}")
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


def _check_judge() -> CheckResult:
    state = judge_state()
    return CheckResult(state.status, state.detail)


HEALTH_CHECKS = {
    "database": _check_database,
    "pgvector": _check_pgvector,
    "redis": _check_redis,
    "broker": _check_broker,
    "embeddings": _check_embeddings,
    "llm": _check_llm,
    "judge": _check_judge,
}


class _CheckThread(threading.Thread):
    """Runs one check; a database check closes its thread's connection when done."""

    def __init__(self, name: str) -> None:
        super().__init__(name=f"health-{name}", daemon=True)
        self.check_name = name
        self.started_at = time.monotonic()
        self.result: CheckResult | None = None

    def run(self) -> None:
        try:
            self.result = HEALTH_CHECKS[self.check_name]()
        except Exception as exc:  # a health check reports failures, it does not raise them
            # Connection errors may quote a URL; credentials in one never leave the server.
            message = re.sub(r"://[^/@\s]+@", "://***@", str(exc))[:200]
            self.result = CheckResult("error", f"{type(exc).__name__}: {message}")
        finally:
            connections.close_all()  # this thread's connections only


class HealthProbe:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._report: tuple[dict[str, object], bool] | None = None
        self._reported_at = 0.0
        self._running: dict[str, _CheckThread] = {}

    def clear(self) -> None:
        with self._lock:
            self._report = None

    def checks_finish(self, timeout: float) -> None:
        """Waits (at most `timeout` seconds in all) for checks still running after their deadline,
        e.g. one waiting on a frozen Redis until its socket timeout: until they end, the next
        report says "the previous check of it has not finished"."""
        deadline = time.monotonic() + timeout
        for thread in list(self._running.values()):
            thread.join(max(0.0, deadline - time.monotonic()))

    def report(self) -> tuple[dict[str, object], bool]:
        timeout = settings.HEALTH_TIMEOUT_SECONDS
        # A second request waits for the one computing the report (at most about `timeout`).
        if not self._lock.acquire(timeout=timeout + 1):
            return self._report or _report_of({name: CheckResult("error", "busy") for name in HEALTH_CHECKS}, {})
        try:
            if self._report is not None and time.monotonic() - self._reported_at < settings.HEALTH_CACHE_SECONDS:
                return self._report
            self._report = self._run(timeout)
            self._reported_at = time.monotonic()
            return self._report
        finally:
            self._lock.release()

    def _run(self, timeout: float) -> tuple[dict[str, object], bool]:
        started = time.monotonic()
        threads: dict[str, _CheckThread] = {}
        results: dict[str, CheckResult] = {}
        for name in HEALTH_CHECKS:
            previous = self._running.get(name)
            if previous is not None and previous.is_alive():
                results[name] = CheckResult("error", "no answer: the previous check of it has not finished")
                continue
            threads[name] = self._running[name] = _CheckThread(name)
            threads[name].start()
        deadline = started + timeout
        for name, thread in threads.items():
            thread.join(max(0.0, deadline - time.monotonic()))
            results[name] = thread.result or CheckResult("error", f"no answer within {timeout:g} s")
        elapsed = {name: thread.started_at for name, thread in threads.items()}
        return _report_of(results, {name: time.monotonic() - at for name, at in elapsed.items()})


def _report_of(results: dict[str, CheckResult], seconds: dict[str, float]) -> tuple[dict[str, object], bool]:
    checks = {name: {**results[name].as_dict(), "ms": round(seconds.get(name, 0.0) * 1000)} for name in HEALTH_CHECKS}
    serving = all(checks[name]["status"] == "ok" for name in CRITICAL_CHECKS)
    degraded = any(check["status"] == "error" for check in checks.values())
    status = "unavailable" if not serving else "degraded" if degraded else "ok"
    return {"status": status, "checks": checks}, serving


health_probe = HealthProbe()


def health_report() -> tuple[dict[str, object], bool]:
    """({status, checks}, serving). `serving` is False when the database or pgvector fails:
    nothing can be searched then (503). Any other failing check makes the status `degraded`
    (200): search still answers, lexically or without generation."""
    return health_probe.report()


class HealthCheckSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["ok", "error", "disabled"])
    detail = serializers.CharField()
    ms = serializers.IntegerField(help_text="how long the check took")


# One member per check HEALTH_CHECKS runs, in its order: the checks are listed once, there.
HealthChecksSerializer = type(
    "HealthChecksSerializer", (serializers.Serializer,), {name: HealthCheckSerializer() for name in HEALTH_CHECKS}
)


class HealthSerializer(serializers.Serializer):
    status = serializers.ChoiceField(
        choices=["ok", "degraded", "unavailable"],
        help_text="unavailable (503): database or pgvector down; degraded (200): another check failed",
    )
    checks = HealthChecksSerializer()


class HealthViewSet(viewsets.ViewSet):
    """Liveness and dependencies of the ground-truth service."""

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]

    @extend_schema(
        operation_id="health",
        summary="Health of the service and its dependencies",
        description=(
            "Checks the database, pgvector, Redis, the Celery broker, the embedding backend and the "
            "language-model endpoint. 200 with status `ok` or `degraded` (a non-critical check failed: "
            "search still answers); 503 with status `unavailable` when the database or pgvector fails. "
            "Each check is `ok`, `error` or `disabled` (not configured). Public; reads no credentials: an "
            "`Authorization` header, even a malformed, unknown or revoked one, is ignored."
        ),
        responses={
            200: HealthSerializer,
            503: OpenApiResponse(HealthSerializer, description="The database or pgvector is unavailable."),
        },
        auth=[],
    )
    def list(self, request: Request) -> Response:
        report, serving = health_report()
        return Response(
            HealthSerializer(report).data, status=status.HTTP_200_OK if serving else status.HTTP_503_SERVICE_UNAVAILABLE
        )


urlpatterns = [path("health", HealthViewSet.as_view({"get": "list"}), name="health")]
