"""GET /sources/<repo>/<path>: the exact lines of an indexed file at a commit (the target of every
citation's `source_url`). A service key with scope `read`, or a signed-in staff session."""

from __future__ import annotations

from django.utils.cache import patch_vary_headers
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from agentplatform.plumbing.authentication import SERVICE_AUTHENTICATION_CLASSES, SERVICE_OPENAPI_SECURITY
from agentplatform.plumbing.errors import problem_responses
from agentplatform.plumbing.permissions import HasServiceReadScope
from agentplatform.plumbing.query_params import query_validated
from agentplatform.plumbing.ratelimits import RateLimitedViewMixin
from agentplatform.plumbing.renderers import JSONRenderer, PlainTextRenderer
from groundtruth.search_views import AUTH_ERRORS
from groundtruth.selectors import repository_visible_queryset
from groundtruth.source_lines import read_source_lines
from groundtruth.source_serializers import (
    SourceLinesQuerySerializer,
    SourceLinesSerializer,
    source_lines_text,
)


class SourceLinesViewSet(RateLimitedViewMixin, viewsets.ViewSet):
    """Lines of a file at a commit, read from the source store (PostgreSQL, not git)."""

    authentication_classes = SERVICE_AUTHENTICATION_CLASSES
    permission_classes = [HasServiceReadScope]
    renderer_classes = [JSONRenderer, PlainTextRenderer]

    @extend_schema(
        operation_id="source_lines",
        summary="Exact lines of an indexed file at a commit",
        description=(
            "Reads `path` at `commit` from the service's source store (the whole file as the ingest read it, "
            "kept in the database; not from the index's chunks) and returns lines "
            "`start..end` (1-based, inclusive), numbered as citations number them. `Accept: text/plain` gets "
            "the lines alone, each ending with a line break. Every citation of /search and /ask links here "
            "(`source_url`) for exactly its lines: what it cites can be checked byte for byte. Only "
            "repositories the registry enables, paths their include/exclude globs select (symlinks followed "
            "inside the commit, as the ingest follows them) and commits an ingest of the repository has "
            "seen are served."
        ),
        parameters=[
            OpenApiParameter("owner", OpenApiTypes.STR, OpenApiParameter.PATH, description="Repository owner."),
            OpenApiParameter("name", OpenApiTypes.STR, OpenApiParameter.PATH, description="Repository name."),
            OpenApiParameter(
                "path", OpenApiTypes.STR, OpenApiParameter.PATH, description="File path in the repository (with /)."
            ),
            SourceLinesQuerySerializer,
        ],
        responses={
            (200, "application/json"): SourceLinesSerializer,
            (200, "text/plain"): OpenApiResponse(OpenApiTypes.STR, description="Lines start..end, one per line."),
            **problem_responses(
                {
                    400: "`commit` missing or not 7 to 64 hex digits; `start` or `end` not an integer of 1 or "
                    "more (`invalid`); `end` before `start`, or more than SOURCE_LINES_MAX lines (`invalid_range`); "
                    "a commit prefix that several commits seen by an ingest share (`ambiguous_commit`).",
                    **AUTH_ERRORS,
                    404: "The repository is not in the registry (or disabled); the path leaves the repository, "
                    "is not selected by its globs or names no file at the commit; no ingest has seen the commit.",
                    416: "The range is past the file's end; `line_count` gives the file's lines.",
                    422: "The file is binary (`not_text`) or larger than INGEST_MAX_FILE_BYTES (`file_too_large`).",
                    503: "The source store does not hold the file at that commit (`source_unavailable`): it keeps "
                    "each indexed file at the commit its citations name and at the last ingested commit.",
                }
            ),
        },
        auth=SERVICE_OPENAPI_SECURITY,
        tags=["ground truth"],
    )
    def retrieve(self, request: Request, owner: str, name: str, path: str) -> Response:
        data = query_validated(SourceLinesQuerySerializer, request)
        source = read_source_lines(
            repository_name=f"{owner}/{name}",
            path=path,
            commit=data["commit"],
            start=data["start"],
            end=data.get("end"),
            visible=repository_visible_queryset(viewer=request.user),
        )
        if isinstance(request.accepted_renderer, PlainTextRenderer):
            response = Response(source_lines_text(source))
        else:
            response = Response(SourceLinesSerializer(source).data)
        # One URL, two representations: a shared cache must key them by Accept.
        patch_vary_headers(response, ["Accept"])
        return response
