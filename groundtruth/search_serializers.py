"""Input validation and response shapes of GET /search and POST /ask (docs/spec/ground-truth-api.md)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from agentplatform.plumbing.json_bodies import StrictBodySerializer, StrictCharField, StrictRegexField
from agentplatform.plumbing.query_params import QueryIntegerField
from agentplatform.plumbing.serializer_fields import OmittedWhenEmptyCharField, RoundedFloatField
from groundtruth.models import TrustTier
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


class SourceLinesUrlField(serializers.CharField):
    """A citation's `source_url`: GET /sources/... for exactly its lines, absolute on the host and
    scheme of the serializer's `request` (context)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(source="*", **kwargs)

    def to_representation(self, citation: dict[str, Any]) -> str:  # type: ignore[override]  # the whole citation
        return source_lines_url(
            request=self.context["request"],
            repo=citation["repo"],
            path=citation["path"],
            commit=citation["commit"],
            start=citation["line"],
            end=citation["end_line"],
        )


# The response serializers below say what they read in comments, not docstrings: drf-spectacular
# prints a serializer's docstring as its schema's description.


# A citation (groundtruth/search/citations.py's dict) with its `source_url`; needs the request in
# the context.
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
    source_url = SourceLinesUrlField(
        help_text=(
            "GET /sources/{repo}/{path} for exactly these lines at this commit, on this service: the lines "
            "as the git cache holds them, to check what is cited."
        )
    )


# A SearchHit (groundtruth/search/hybrid_search.py).
class SearchResultSerializer(serializers.Serializer):
    chunk_id = serializers.IntegerField(source="chunk.pk")
    text = serializers.CharField(source="chunk.text")
    score = RoundedFloatField(
        places=6,
        help_text="Fused score (weighted reciprocal ranks times the trust weight): how the candidates were picked.",
    )
    relevance = RoundedFloatField(
        places=6,
        allow_null=True,
        help_text=(
            "The evidence score that orders the first SEARCH_RERANK_DEPTH (40) results: dense similarity, a "
            "section title that asks the question, BM25 share and word coverage, weighted, times the trust "
            "weight. Results whose own section title the query repeats word for word come first, whatever their "
            "relevance. null for a result beyond them (they follow in fused order) and without a dense leg."
        ),
    )
    heading = serializers.ListField(
        child=serializers.CharField(), source="chunk.heading", help_text="Heading trail, outermost first."
    )
    trust = serializers.ChoiceField(choices=TrustTier.choices, source="chunk.trust")
    citation = CitationSerializer()


# GET /search's body, from {"query": ..., "results": [SearchHit, ...]}; needs the request in the
# context (each citation's source_url).
class SearchResponseSerializer(serializers.Serializer):
    query = serializers.CharField()
    results = SearchResultSerializer(many=True)


class CitedSnippetSerializer(serializers.Serializer):
    n = serializers.IntegerField(help_text="The number that [n] markers in the answer refer to.")
    snippet = serializers.CharField(help_text="The cited lines (line..end_line) of the passage.")


# A citation of /ask: its number and snippet first, then the citation (DRF puts the bases' fields
# in the bases' order).
class AskCitationSerializer(CitedSnippetSerializer, CitationSerializer):
    pass


class SearchedRepositorySerializer(serializers.Serializer):
    repo = serializers.CharField()
    commit = serializers.CharField(help_text="Indexed commit; empty if never ingested.")


# POST /ask's body, from an AskResult (groundtruth/search/ask.py); needs the request in the context
# (each citation's source_url).
class AskResponseSerializer(serializers.Serializer):
    question = serializers.CharField()
    mode = serializers.ChoiceField(choices=["extractive", "generative"])
    answer = serializers.CharField(
        allow_null=True, help_text="null in extractive mode and when sources are missing; [n] markers cite `citations`."
    )
    sources_missing = serializers.BooleanField()
    citations = AskCitationSerializer(many=True)
    searched = SearchedRepositorySerializer(many=True, help_text="The repositories searched, at their indexed commit.")
    message = OmittedWhenEmptyCharField(help_text="Present when sources are missing: what was searched.")
    warning = OmittedWhenEmptyCharField(
        help_text="Present when the language model failed and extractive snippets were returned."
    )
