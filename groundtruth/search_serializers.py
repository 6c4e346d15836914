"""Input validation and response shapes of GET /search and POST /ask (docs/spec/ground-truth-api.md)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from rest_framework import serializers

from agentplatform.plumbing.json_bodies import StrictBodySerializer, StrictCharField, StrictRegexField
from agentplatform.plumbing.query_params import QueryIntegerField
from groundtruth.models import TrustTier
from groundtruth.search.citations import citation_for
from groundtruth.serializers import REPO_NAME_PATTERN
from groundtruth.source_lines import source_lines_url

SEARCH_LIMIT_DEFAULT = 10
SEARCH_LIMIT_MAX = 50
QUERY_MAX_CHARS = 500  # fits the web server's request line percent-encoded (gunicorn_config.py)
QUESTION_MAX_CHARS = 2000
# Messages name no field: the problem's `errors` carry it, and its detail reads "<field>: <message>"
# (agentplatform/plumbing/errors.py), as for every other endpoint.
SEARCH_LIMIT_RULE = f"must be an integer from 1 to {SEARCH_LIMIT_MAX}"


class SearchQuerySerializer(serializers.Serializer):
    q = StrictCharField(
        max_length=QUERY_MAX_CHARS,
        trim_whitespace=True,
        error_messages={
            "required": "is required: the text to search for",
            "blank": "must not be empty",
            "max_length": f"may be at most {QUERY_MAX_CHARS} characters",
        },
        help_text=f"Text to search for, 1 to {QUERY_MAX_CHARS} characters (not only spaces).",
    )
    repo = StrictRegexField(
        REPO_NAME_PATTERN,
        required=False,
        max_length=200,
        error_messages={
            "blank": "must name a repository (owner/name) when given",
            "invalid": "must name a repository (owner/name) when given",
        },
        help_text="Only this repository (owner/name, as GET /repos lists it).",
    )
    limit = QueryIntegerField(
        required=False,
        default=SEARCH_LIMIT_DEFAULT,
        min_value=1,
        max_value=SEARCH_LIMIT_MAX,
        error_messages={
            "invalid": SEARCH_LIMIT_RULE,
            "min_value": SEARCH_LIMIT_RULE,
            "max_value": SEARCH_LIMIT_RULE,
            "max_string_length": SEARCH_LIMIT_RULE,
        },
        help_text=f"Number of results, 1 to {SEARCH_LIMIT_MAX}.",
    )


class AskScopeSerializer(StrictBodySerializer):
    repos = serializers.ListField(
        child=StrictCharField(max_length=200),
        required=False,
        allow_empty=False,
        min_length=1,  # the same rule as allow_empty, for the schema (minItems)
        max_length=100,
        error_messages={"empty": "must name at least one repository, or be left out to search all"},
    )


class AskRequestSerializer(StrictBodySerializer):
    question = StrictCharField(
        max_length=QUESTION_MAX_CHARS,
        trim_whitespace=True,
        error_messages={
            "required": "is required",
            "blank": "must not be empty",
            "max_length": f"may be at most {QUESTION_MAX_CHARS} characters",
        },
    )
    scope = AskScopeSerializer(required=False)


class CitationSerializer(serializers.Serializer):
    repo = serializers.CharField(help_text="Repository name (owner/name).")
    path = serializers.CharField(help_text="File path in the repository.")
    commit = serializers.CharField(help_text="Full SHA of the indexed commit.")
    line = serializers.IntegerField(help_text="First cited line, 1-based.")
    end_line = serializers.IntegerField(help_text="Last cited line, inclusive.")
    url = serializers.CharField(
        allow_null=True,
        help_text=(
            "Blob URL at that commit with a line anchor (#L<line>-L<end_line>) for http(s) repositories; "
            "null for local and file:// repositories, which have no web page."
        ),
    )
    source_url = serializers.CharField(
        help_text=(
            "GET /sources/{repo}/{path} for exactly these lines at this commit, on this service: the lines "
            "as the git cache holds them, to check what is cited."
        )
    )


class SearchResultSerializer(serializers.Serializer):
    chunk_id = serializers.IntegerField()
    text = serializers.CharField()
    score = serializers.FloatField(
        help_text="Fused score (weighted reciprocal ranks times the trust weight): how the candidates were picked."
    )
    relevance = serializers.FloatField(
        allow_null=True,
        help_text=(
            "The evidence score that orders the first SEARCH_RERANK_DEPTH (20) results: dense similarity, a "
            "section title that asks the question, BM25 share and word coverage, weighted, times the trust "
            "weight. null for a result beyond them (they follow in fused order) and without a dense leg."
        ),
    )
    heading = serializers.ListField(child=serializers.CharField(), help_text="Heading trail, outermost first.")
    trust = serializers.ChoiceField(choices=TrustTier.choices)
    citation = CitationSerializer()


class SearchResponseSerializer(serializers.Serializer):
    query = serializers.CharField()
    results = SearchResultSerializer(many=True)


class AskCitationSerializer(CitationSerializer):
    n = serializers.IntegerField(help_text="The number that [n] markers in the answer refer to.")
    snippet = serializers.CharField(help_text="The cited lines (line..end_line) of the passage.")


class SearchedRepositorySerializer(serializers.Serializer):
    repo = serializers.CharField()
    commit = serializers.CharField(help_text="Indexed commit; empty if never ingested.")


class AskResponseSerializer(serializers.Serializer):
    question = serializers.CharField()
    mode = serializers.ChoiceField(choices=["extractive", "generative"])
    answer = serializers.CharField(
        allow_null=True, help_text="null in extractive mode and when sources are missing; [n] markers cite `citations`."
    )
    sources_missing = serializers.BooleanField()
    citations = AskCitationSerializer(many=True)
    searched = SearchedRepositorySerializer(many=True, help_text="The repositories searched, at their indexed commit.")
    message = serializers.CharField(required=False, help_text="Present when sources are missing: what was searched.")
    warning = serializers.CharField(
        required=False, help_text="Present when the language model failed and extractive snippets were returned."
    )


def search_result_data(hit: Any, *, request: HttpRequest | None = None) -> dict[str, Any]:
    """A /search result; with `request`, its citation carries `source_url` on the request's host."""
    chunk = hit.chunk
    citation = citation_for(chunk, start_line=chunk.start_line, end_line=chunk.end_line)
    return {
        "chunk_id": chunk.pk,
        "text": chunk.text,
        "score": round(hit.score, 6),
        "relevance": None if hit.relevance is None else round(hit.relevance, 6),
        "heading": list(chunk.heading or []),
        "trust": chunk.trust,
        "citation": citation_with_source_url(citation, request=request),
    }


def ask_result_data(result: Any, *, request: HttpRequest | None = None) -> dict[str, Any]:
    """An /ask answer; with `request`, each citation carries `source_url` on the request's host."""
    data: dict[str, Any] = {
        "question": result.question,
        "mode": result.mode,
        "answer": result.answer,
        "sources_missing": result.sources_missing,
        "citations": [citation_with_source_url(citation, request=request) for citation in result.citations],
        "searched": result.searched,
    }
    if result.message:
        data["message"] = result.message
    if result.warning:
        data["warning"] = result.warning
    return data


def citation_with_source_url(citation: dict[str, Any], *, request: HttpRequest | None) -> dict[str, Any]:
    """`citation` with `source_url`, the absolute URL of its exact lines (GET /sources/...), when a
    request says which host and scheme the client reached; as it is without one."""
    if request is None:
        return citation
    return {
        **citation,
        "source_url": source_lines_url(
            request=request,
            repo=citation["repo"],
            path=citation["path"],
            commit=citation["commit"],
            start=citation["line"],
            end=citation["end_line"],
        ),
    }
