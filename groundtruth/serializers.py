"""Wire shapes of /repos and /ingest (/health's are the wiring's: agentplatform/health.py).
Repository URLs are credential-free by registry validation; no token or key ever appears in these shapes."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agentplatform.plumbing.json_bodies import StrictBodySerializer, StrictRegexField
from agentplatform.plumbing.query_params import QueryIntegerField
from agentplatform.plumbing.serializer_fields import ServerPathsHiddenCharField
from groundtruth.ingest.git_refs import REF_PATTERN, REF_RULE
from groundtruth.ingest.index_text import INDEX_VERSION
from groundtruth.models import IngestRun, IngestStatus, IngestTrigger, Repository
from groundtruth.registry import REPOSITORY_NAME_PATTERN
from groundtruth.selectors import repository_state

RUN_LIST_LIMIT_DEFAULT = 20
RUN_LIST_LIMIT_MAX = 100
RUN_LIST_LIMIT_RULE = f"must be an integer from 1 to {RUN_LIST_LIMIT_MAX}"
RUN_BEFORE_RULE = "must be an ingest run id (a positive integer)"
BIGINT_MAX = 2**63 - 1

REPO_NAME_PATTERN = REPOSITORY_NAME_PATTERN  # as the source registry names repositories
REPO_RULE = "must be owner/name (letters, digits, '.', '_' or '-'; neither part '.' or '..')"


class LatestRunSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="latest_run_id")
    status = serializers.CharField(source="latest_run_status")
    finished_at = serializers.DateTimeField(source="latest_run_finished_at", allow_null=True)
    error = ServerPathsHiddenCharField(source="latest_run_error")
    trigger = serializers.ChoiceField(
        choices=IngestTrigger.choices,
        source="latest_run_trigger",
        help_text="what asked for the run: beat (schedule), push (webhook), api, admin, command or task",
    )


class RepositorySerializer(serializers.ModelSerializer):
    state = serializers.SerializerMethodField(
        help_text="new | queued | running | ready | failed (last run failed; previous index served) | disabled"
    )
    transcript = serializers.BooleanField(source="is_transcript")
    index_current = serializers.SerializerMethodField(
        help_text=(
            "false: the chunks were indexed by an older recipe; the next ingest (or `manage.py reindex`) rebuilds them"
        )
    )
    latest_run = serializers.SerializerMethodField()

    class Meta:
        model = Repository
        fields = [
            "name",
            "url",
            "ref",
            "owners",
            "trust",
            "include",
            "exclude",
            "enabled",
            "transcript",
            "state",
            "last_commit",
            "last_ingested_at",
            "file_count",
            "chunk_count",
            "index_version",
            "index_current",
            "latest_run",
        ]

    def get_state(self, repository: Repository) -> str:
        return repository_state(repository)

    def get_index_current(self, repository: Repository) -> bool:
        return repository.index_version == INDEX_VERSION

    @extend_schema_field(LatestRunSerializer(allow_null=True))
    def get_latest_run(self, repository: Repository) -> dict[str, Any] | None:
        if getattr(repository, "latest_run_id", None) is None:
            return None
        return LatestRunSerializer(repository).data


class RegistrySummarySerializer(serializers.Serializer):
    location = serializers.CharField()
    commit = serializers.CharField()
    loaded_at = serializers.DateTimeField(allow_null=True)
    last_error = ServerPathsHiddenCharField(help_text="problems of the last invalid load (the last good one is served)")
    last_error_at = serializers.DateTimeField(allow_null=True)


class RepositoryListSerializer(serializers.Serializer):
    registry = RegistrySummarySerializer(allow_null=True)
    repositories = RepositorySerializer(many=True)


class IngestRequestSerializer(StrictBodySerializer):
    repo = StrictRegexField(
        REPO_NAME_PATTERN,
        required=False,
        max_length=200,
        error_messages={"invalid": REPO_RULE},
        help_text="owner/name from the registry; omitted: every enabled repository",
    )
    ref = StrictRegexField(
        REF_PATTERN,
        required=False,
        error_messages={"blank": REF_RULE, "invalid": REF_RULE},
        help_text="branch, tag or commit SHA (git ref-name rules); omitted: the registry's ref",
    )


class IngestRunSerializer(serializers.ModelSerializer):
    repo = serializers.CharField(source="repository.name")
    error = ServerPathsHiddenCharField(
        read_only=True,
        help_text="why the run failed (or is waiting to retry); paths on the server are written relative to "
        "the setting naming their directory (`GIT_CACHE_DIR/…`, `VAR_DIR/…`)",
    )
    files = serializers.SerializerMethodField()
    chunks = serializers.SerializerMethodField()

    class Meta:
        model = IngestRun
        fields = [
            "id",
            "repo",
            "ref",
            "commit",
            "status",
            "trigger",
            "phase",
            "files",
            "chunks",
            "timings",
            "error",
            "attempts",
            "created_at",
            "started_at",
            "heartbeat_at",
            "finished_at",
        ]

    @extend_schema_field(
        {
            "type": "object",
            "properties": {
                key: {"type": "integer"} for key in ("total", "processed", "added", "updated", "removed", "unchanged")
            }
            | {
                "skipped": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"path": {"type": "string"}, "reason": {"type": "string"}},
                    },
                }
            },
        }
    )
    def get_files(self, run: IngestRun) -> dict[str, Any]:
        return {
            "total": run.files_total,
            "processed": run.files_processed,
            "added": run.files_added,
            "updated": run.files_updated,
            "removed": run.files_removed,
            "unchanged": run.files_unchanged,
            "skipped": [{"path": path, "reason": reason} for path, reason in run.files_skipped],
        }

    @extend_schema_field(
        {
            "type": "object",
            "properties": {
                key: {"type": "integer"} for key in ("added", "updated", "removed", "unchanged", "embedded")
            },
        }
    )
    def get_chunks(self, run: IngestRun) -> dict[str, int]:
        return {
            "added": run.chunks_added,
            "updated": run.chunks_updated,
            "removed": run.chunks_removed,
            "unchanged": run.chunks_unchanged,
            "embedded": run.chunks_embedded,
        }


class IngestAcceptedRunSerializer(IngestRunSerializer):
    created = serializers.BooleanField(help_text="false: the repository already had this run queued or running")

    class Meta(IngestRunSerializer.Meta):
        fields = [*IngestRunSerializer.Meta.fields, "created"]


class IngestAcceptedSerializer(serializers.Serializer):
    run_ids = serializers.ListField(child=serializers.IntegerField())
    runs = IngestAcceptedRunSerializer(many=True)


class IngestRunListQuerySerializer(serializers.Serializer):
    repo = StrictRegexField(
        REPO_NAME_PATTERN,
        required=False,
        max_length=200,
        error_messages={"blank": REPO_RULE, "invalid": REPO_RULE},
        help_text="Only runs of this repository (owner/name, as GET /repos lists it).",
    )
    status = serializers.ChoiceField(
        choices=IngestStatus.choices,
        required=False,
        error_messages={"invalid_choice": f"must be one of {', '.join(IngestStatus.values)}"},
        help_text="Only runs in this status.",
    )
    limit = QueryIntegerField(
        required=False,
        default=RUN_LIST_LIMIT_DEFAULT,
        min_value=1,
        max_value=RUN_LIST_LIMIT_MAX,
        error_messages=dict.fromkeys(("invalid", "min_value", "max_value", "max_string_length"), RUN_LIST_LIMIT_RULE),
        help_text=f"Newest runs to return; {RUN_LIST_LIMIT_RULE}.",
    )
    before = QueryIntegerField(
        required=False,
        min_value=1,
        max_value=BIGINT_MAX,  # beyond a bigint the database would refuse the comparison
        error_messages=dict.fromkeys(("invalid", "min_value", "max_value", "max_string_length"), RUN_BEFORE_RULE),
        help_text=f"Only runs older than this run id; {RUN_BEFORE_RULE}.",
    )


class PushIgnoredSerializer(serializers.Serializer):
    ignored = serializers.CharField(
        help_text="why the delivery queued nothing: another event, a deleted or unfollowed ref, an unknown repository"
    )


class PushAcceptedSerializer(IngestAcceptedSerializer):
    registry = RegistrySummarySerializer(
        allow_null=True,
        help_text=(
            "a push to the registry repository: sources.yml as a worker last synced it (`last_error` set: the "
            "last re-read found it invalid and the last good one stays served); the re-read of sources.yml and "
            "brand-assets.yml this push asks for is queued on a worker. Null for a push to another repository, "
            "or before any sync"
        ),
    )
