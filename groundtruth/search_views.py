"""GET /search and POST /ask: a service key with scope `read`, or a signed-in staff session."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from agentplatform.plumbing.authentication import SERVICE_AUTHENTICATION_CLASSES, SERVICE_OPENAPI_SECURITY
from agentplatform.plumbing.errors import problem_responses
from agentplatform.plumbing.permissions import HasServiceReadScope
from agentplatform.plumbing.query_params import query_validated
from agentplatform.plumbing.ratelimits import RateLimitedViewMixin
from groundtruth.question_audit import asked_question_record_when_sent
from groundtruth.search.ask import question_answer
from groundtruth.search.hybrid_search import chunk_search, search_scope_resolve
from groundtruth.search_serializers import (
    SEARCH_LIMIT_MAX,
    AskRequestSerializer,
    AskResponseSerializer,
    SearchQuerySerializer,
    SearchResponseSerializer,
)
from groundtruth.selectors import repository_visible_queryset

AUTH_ERRORS = {
    401: "No credentials, or a bearer token that is malformed, unknown, expired or revoked.",
    403: "The credentials lack the `read` scope (a service key with scope read, or a staff session, is needed).",
}


class SearchViewSet(RateLimitedViewMixin, viewsets.ViewSet):
    """Hybrid (BM25 + vector) search over the indexed chunks."""

    authentication_classes = SERVICE_AUTHENTICATION_CLASSES
    permission_classes = [HasServiceReadScope]

    @extend_schema(
        operation_id="search",
        summary="Search the indexed documentation",
        description=(
            "Hybrid retrieval: a BM25 lexical leg (any query word may match; exact identifiers such as "
            "`CELERY_BROKER_URL` match whole; each chunk is indexed with its repository's name and heading "
            "trail) and a vector leg (HNSW over two vectors per chunk: the passage, and its section title, "
            "which lifts the passage when it matches the question better), fused by weighted reciprocal rank. "
            "The trust tier (canonical > reviewed > community > transcript) breaks near-ties only: a strongly "
            "matching community passage outranks a weakly matching canonical one. Only enabled repositories "
            "are searched. Each result cites the chunk's lines at the indexed commit; the citation's `source_url` "
            "returns exactly those lines from the git cache (GET /sources/{repo}/{path})."
        ),
        parameters=[SearchQuerySerializer],
        responses={
            200: SearchResponseSerializer,
            **problem_responses(
                {
                    400: f"`q` missing, empty or too long; `limit` not in 1..{SEARCH_LIMIT_MAX}; "
                    "`repo` names no enabled repository (the error names it and lists the known ones).",
                    **AUTH_ERRORS,
                }
            ),
        },
        auth=SERVICE_OPENAPI_SECURITY,
        tags=["ground truth"],
    )
    def list(self, request: Request) -> Response:
        data = query_validated(SearchQuerySerializer, request)
        repositories = search_scope_resolve(
            names=[data["repo"]] if "repo" in data else None,
            visible=repository_visible_queryset(viewer=request.user),
        )
        outcome = chunk_search(query=data["q"], repositories=repositories, limit=data["limit"])
        body = SearchResponseSerializer({"query": data["q"], "results": outcome.hits}, context={"request": request})
        response = Response(body.data)
        asked_question_record_when_sent(
            response,
            caller=request.user,
            via="search",
            question=data["q"],
            repository_names=[repository.name for repository in repositories],
            sources_missing=not outcome.hits,
        )
        return response


class AskViewSet(RateLimitedViewMixin, viewsets.ViewSet):
    """Questions answered from the indexed documentation, always with citations."""

    authentication_classes = SERVICE_AUTHENTICATION_CLASSES
    permission_classes = [HasServiceReadScope]

    @extend_schema(
        operation_id="ask",
        summary="Ask a question; get cited passages or a cited answer",
        description=(
            "Retrieves passages as /search does (limited to `scope.repos` when given). Whether they answer "
            "the question is decided by a calibrated model over evidence (similarity of the best passages and "
            "titles, the share of the question's rare words and names the documentation holds, agreement of "
            "the two legs; fitted on real documentation). When they do not, `sources_missing` is true, "
            "`answer` is null, `citations` is empty and `message` says what was searched. Otherwise only "
            "passages that earn their place are cited: the best one, then those about as relevant "
            "(ASK_CITATION_COUNT at most, often fewer); each snippet is the passage's answering lines (the "
            "text under a matching title, never the title alone) with their own line range, which "
            "`source_url` returns from the git cache. Without a "
            "language model (LLM_BASE_URL unset) the mode is `extractive` and `answer` is null. With a model "
            "the mode is `generative`: the answer is composed only from the cited passages, every `[n]` refers "
            "to a returned citation (others are removed), and a model error or timeout falls back to "
            "extractive with a `warning`."
        ),
        request=AskRequestSerializer,
        responses={
            200: AskResponseSerializer,
            **problem_responses(
                {
                    400: "`question` missing, empty or too long; an unknown field; `scope.repos` empty or "
                    "naming a repository that is not indexed (the error names it).",
                    **AUTH_ERRORS,
                    415: "The body is not JSON.",
                }
            ),
        },
        examples=[
            OpenApiExample(
                "Scoped question",
                value={"question": "How do I configure the connection pool?", "scope": {"repos": ["acme/handbook"]}},
                request_only=True,
            )
        ],
        auth=SERVICE_OPENAPI_SECURITY,
        tags=["ground truth"],
    )
    def create(self, request: Request) -> Response:
        body = AskRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        result = question_answer(
            question=data["question"],
            repository_names=data.get("scope", {}).get("repos"),
            visible=repository_visible_queryset(viewer=request.user),
        )
        response = Response(AskResponseSerializer(result, context={"request": request}).data)
        asked_question_record_when_sent(
            response,
            caller=request.user,
            via="ask",
            question=data["question"],
            repository_names=[searched["repo"] for searched in result.searched],
            sources_missing=result.sources_missing,
        )
        return response
