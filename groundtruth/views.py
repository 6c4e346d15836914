"""GET /repos, POST /ingest/repo, GET /ingest/runs, GET /ingest/runs/<id> (GET /health is the
wiring's: agentplatform/health.py).

They need a service key (`read`, or `ingest` for POST /ingest/repo and for reading runs) or a
signed-in staff session.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from drf_spectacular.utils import extend_schema
from rest_framework import status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from agentplatform.plumbing.authentication import SERVICE_AUTHENTICATION_CLASSES, SERVICE_OPENAPI_SECURITY
from agentplatform.plumbing.errors import problem_responses
from agentplatform.plumbing.permissions import HasServiceIngestScope, HasServiceReadScope
from agentplatform.plumbing.query_params import query_validated
from agentplatform.plumbing.ratelimits import RateLimitedViewMixin
from groundtruth import selectors, services
from groundtruth.ingest.runs import ingest_runs_stale_clear
from groundtruth.models import IngestTrigger
from groundtruth.serializers import (
    IngestAcceptedSerializer,
    IngestRequestSerializer,
    IngestRunListQuerySerializer,
    IngestRunSerializer,
    RepositoryListSerializer,
)


class RepositoryViewSet(RateLimitedViewMixin, viewsets.GenericViewSet):
    """The repositories of the source registry, with their ingest state."""

    authentication_classes = SERVICE_AUTHENTICATION_CLASSES
    permission_classes = [HasServiceReadScope]
    pagination_class = None

    @extend_schema(
        operation_id="repos_list",
        summary="The configured repositories",
        description=(
            "Every repository the source registry lists (or listed: those removed are `enabled: false`, "
            "state `disabled`), ordered by name, with owners, globs, trust tier, the commit its index reflects "
            "(`last_commit`) and when it was indexed (`last_ingested_at`), counts, and the latest ingest run with "
            "what triggered it (`trigger`: beat, push, api, admin, command). `registry` describes the last good "
            "load of sources.yml and the problem of the last invalid one, if any. Never contains credentials."
        ),
        responses={200: RepositoryListSerializer},
        auth=SERVICE_OPENAPI_SECURITY,
    )
    def list(self, request: Request) -> Response:
        registry = selectors.registry_current(viewer=request.user)
        repositories = selectors.repository_list(visible=selectors.repository_visible_queryset(viewer=request.user))
        return Response(RepositoryListSerializer({"registry": registry, "repositories": repositories}).data)


class IngestViewSet(RateLimitedViewMixin, viewsets.GenericViewSet):
    """Start ingest runs and follow them."""

    authentication_classes = SERVICE_AUTHENTICATION_CLASSES
    pagination_class = None

    def get_permissions(self) -> list[Any]:
        if self.action == "create":
            return [HasServiceIngestScope()]
        return [(HasServiceReadScope | HasServiceIngestScope)()]

    def get_serializer_class(self) -> type:
        return IngestRequestSerializer if self.action == "create" else IngestRunSerializer

    @extend_schema(
        operation_id="ingest_repo",
        summary="Ingest one repository, or every enabled one",
        description=(
            "Queues an ingest run of `repo` at `ref` (omitted `repo`: every enabled repository; omitted `ref`: "
            "the registry's ref), deciding from the source registry as a worker last synced it into the "
            "database: the request reads no git. The worker re-reads sources.yml before it ingests, so a "
            "repository removed or disabled since, or an invalid registry, fails the run with the reason (see "
            "GET /ingest/runs/{id}). A repository that already has a run queued or running gets that run back "
            "(`created: false`) instead of a second one. Returns 202 with the run ids; follow them at "
            "GET /ingest/runs/{id}. Needs a service key with scope `ingest`."
        ),
        request=IngestRequestSerializer,
        responses={
            202: IngestAcceptedSerializer,
            **problem_responses(
                {
                    404: "The repository is not listed in the source registry as last synced (the detail says "
                    "when a worker last re-read it).",
                    409: "The repository is disabled in the source registry.",
                }
            ),
        },
        auth=SERVICE_OPENAPI_SECURITY,
    )
    def create(self, request: Request) -> Response:
        payload = IngestRequestSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        trigger = IngestTrigger.ADMIN if getattr(request.user, "is_staff", False) else IngestTrigger.API
        requests = services.ingest_request(
            repository_name=payload.validated_data.get("repo"),
            ref=payload.validated_data.get("ref"),
            trigger=trigger,
            visible=selectors.repository_visible_queryset(viewer=request.user),
        )
        runs = []
        for item in requests:
            item.run.created = item.created  # type: ignore[attr-defined]  # read by IngestRunSerializer
            runs.append(item.run)
        body = IngestAcceptedSerializer({"run_ids": [run.pk for run in runs], "runs": runs}).data
        return Response(body, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        operation_id="ingest_run",
        summary="One ingest run: status, counts, timings, error",
        description=(
            "Status is queued, running, succeeded or failed. While running, `phase`, `files.processed` and "
            "`chunks.embedded` advance and `heartbeat_at` is refreshed; a run whose worker stopped sending "
            "heartbeats is marked failed (the previous index stays served). Needs a service key with scope "
            "`read` or `ingest`."
        ),
        responses={200: IngestRunSerializer, **problem_responses({404: "No ingest run with this id."})},
        auth=SERVICE_OPENAPI_SECURITY,
    )
    def retrieve(self, request: Request, run_id: int) -> Response:
        ingest_runs_stale_clear()
        run = selectors.ingest_run_get(
            run_id=run_id, visible=selectors.repository_visible_queryset(viewer=request.user)
        )
        return Response(IngestRunSerializer(run).data)

    @extend_schema(
        operation_id="ingest_runs_list",
        summary="Ingest runs, newest first",
        description=(
            "The newest `limit` runs (of `repo`, in `status`, when given), newest first, each as GET "
            "/ingest/runs/{id} shows it. For older runs pass the id of the oldest one received as `before`; a "
            'full page carries a `Link: <…>; rel="next"` header. Needs a service key with scope `read` or `ingest`.'
        ),
        parameters=[IngestRunListQuerySerializer],
        responses={
            200: IngestRunSerializer(many=True),
            **problem_responses(
                {400: "`repo`, `status`, `limit` or `before` is malformed, or `repo` names no repository."}
            ),
        },
        auth=SERVICE_OPENAPI_SECURITY,
    )
    def list(self, request: Request) -> Response:
        query = query_validated(IngestRunListQuerySerializer, request)
        ingest_runs_stale_clear()
        limit = query["limit"]
        runs = selectors.ingest_run_list(
            repository_name=query.get("repo"),
            status=query.get("status"),
            limit=limit,
            before=query.get("before"),
            visible=selectors.repository_visible_queryset(viewer=request.user),
        )
        headers = {}
        if len(runs) == limit:
            following = {key: query[key] for key in ("repo", "status") if key in query}
            next_query = urlencode({**following, "limit": limit, "before": runs[-1].pk})
            headers["Link"] = f'<{request.build_absolute_uri(f"{request.path}?{next_query}")}>; rel="next"'
        return Response(IngestRunSerializer(runs, many=True).data, headers=headers)
