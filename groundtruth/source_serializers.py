"""Input validation and response shape of GET /sources/<repo>/<path> (docs/spec/ground-truth-api.md)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from agentplatform.plumbing.json_bodies import StrictRegexField
from agentplatform.plumbing.query_params import QueryIntegerField
from groundtruth.source_lines import COMMIT_RULE, LINE_NUMBER_RULE, SourceLines, source_range_check


class SourceLinesQuerySerializer(serializers.Serializer):
    commit = StrictRegexField(
        # Upper-case hex is taken too (read as lower case).
        r"^[0-9a-fA-F]{7,64}\Z",
        max_length=64,
        error_messages={"required": "is required: the SHA of an indexed commit", "invalid": COMMIT_RULE},
        help_text=(
            "The commit: its full SHA (as citations give it) or an unambiguous prefix of at least 7 hex digits, "
            "among the commits an ingest of the repository has seen."
        ),
    )
    start = QueryIntegerField(
        required=False,
        default=1,
        min_value=1,
        error_messages={
            "invalid": f"start {LINE_NUMBER_RULE}",
            "min_value": f"start {LINE_NUMBER_RULE}",
            "max_string_length": f"start {LINE_NUMBER_RULE}",
        },
        help_text="First line, 1-based (default 1).",
    )
    end = QueryIntegerField(
        required=False,
        min_value=1,
        error_messages={
            "invalid": f"end {LINE_NUMBER_RULE}",
            "min_value": f"end {LINE_NUMBER_RULE}",
            "max_string_length": f"end {LINE_NUMBER_RULE}",
        },
        help_text=(
            "Last line, inclusive: at least `start`, at most SOURCE_LINES_MAX lines from it. Left out: to the "
            "file's end or SOURCE_LINES_MAX lines, whichever comes first."
        ),
    )

    def validate_commit(self, value: str) -> str:
        return value.lower()

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        source_range_check(start=attrs["start"], end=attrs.get("end"))
        return attrs


# GET /sources' JSON body, from a SourceLines (groundtruth/source_lines.py). (A comment: drf-spectacular
# would print a docstring as the schema's description.)
class SourceLinesSerializer(serializers.Serializer):
    repo = serializers.CharField(help_text="Repository name (owner/name).")
    path = serializers.CharField(help_text="File path in the repository.")
    commit = serializers.CharField(help_text="Full SHA of the commit read.")
    start = serializers.IntegerField(help_text="First line returned, 1-based.")
    end = serializers.IntegerField(help_text="Last line returned, inclusive.")
    line_count = serializers.IntegerField(help_text="Lines in the whole file at that commit.")
    lines = serializers.ListField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False),
        help_text="Lines start..end as git stores them, without line breaks (the CR of a CRLF line is dropped).",
    )
    url = serializers.CharField(
        allow_null=True,
        help_text="The blob's web page at that commit with a line anchor (http(s) repositories); null for local ones.",
    )


def source_lines_text(source: SourceLines) -> str:
    """The lines as text: each ends with a line break, as in the file."""
    return "".join(f"{line}\n" for line in source.lines)
