"""POST /hooks/git: push webhooks of GitHub, GitLab, Gitea and Forgejo.

No service key: the delivery's signature with INGEST_WEBHOOK_SECRET is its credential (checked in
groundtruth/ingest/push_events.py), and without the secret the endpoint does not exist (404).
Counted against the public rate-limit class, per client IP. The body is read here, up to
INGEST_WEBHOOK_MAX_BYTES (the view's `body_limit_setting`, which agentplatform/plumbing/body_limits.py
applies before the view runs): pushes are larger than the API's other bodies.
"""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status, viewsets
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from agentplatform.plumbing.errors import BodyTooLarge, NotFound, problem_responses
from agentplatform.plumbing.ratelimits import RateLimitedViewMixin
from groundtruth.ingest.push import push_hook_handle
from groundtruth.ingest.push_events import push_hook_read
from groundtruth.serializers import PushAcceptedSerializer, PushIgnoredSerializer

# The header chat's POST answers a replayed request with (Idempotency-Key): the same meaning.
REPLAYED_HEADER = "Idempotent-Replayed"


def _header(name: str, description: str) -> OpenApiParameter:
    return OpenApiParameter(name, OpenApiTypes.STR, OpenApiParameter.HEADER, required=False, description=description)


class GitPushHookViewSet(RateLimitedViewMixin, viewsets.ViewSet):
    """Push webhooks of git hosts."""

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    body_limit_setting = "INGEST_WEBHOOK_MAX_BYTES"

    @extend_schema(
        operation_id="hooks_git",
        summary="A git host's push webhook",
        description=(
            "Point a push webhook of GitHub, GitLab, Gitea or Forgejo here, with the secret INGEST_WEBHOOK_SECRET "
            "(GitHub, Gitea and Forgejo sign the body with it: `X-Hub-Signature-256`, `X-Gitea-Signature`, "
            "`X-Forgejo-Signature`; GitLab sends it as `X-Gitlab-Token`). A push to the ref a registered "
            "repository follows queues its ingest as POST /ingest/repo does (202 with the run; a repository "
            "with a run queued or running gets that run back, `created: false`; trigger `push`), deciding from "
            "the registry as last synced (the worker re-reads sources.yml before it ingests). A push to the "
            "registry repository's ref queues a re-read of sources.yml and brand-assets.yml on a worker "
            "(`registry` is the registry as last synced, before that re-read). Reads no git. "
            "Repositories are matched by URL (host and path of the clone, web or SSH URLs of the payload), not "
            "by name. Any other delivery (a ping, another event, another ref, a deleted ref, a repository the "
            "registry does not list) is 200 with `ignored` saying why. A delivery id (`X-GitHub-Delivery`, "
            "`X-Gitlab-Event-UUID`, `X-Gitea-Delivery`) is handled once: sent again it gets the same runs back, "
            f"as they are now, with `{REPLAYED_HEADER}: true`, and queues nothing. No service key; rate limited "
            "per client IP as a public request. Without INGEST_WEBHOOK_SECRET the endpoint answers 404."
        ),
        request={"application/json": OpenApiTypes.OBJECT, "application/x-www-form-urlencoded": OpenApiTypes.OBJECT},
        parameters=[
            _header("X-GitHub-Event", "GitHub: `push` (a `ping` is answered as ignored)"),
            _header("X-Hub-Signature-256", "GitHub: `sha256=` and the HMAC-SHA256 of the body, hex"),
            _header("X-GitHub-Delivery", "GitHub: the delivery id"),
            _header("X-Gitlab-Event", "GitLab: `Push Hook` or `Tag Push Hook`"),
            _header("X-Gitlab-Token", "GitLab: the secret"),
            _header("X-Gitlab-Event-UUID", "GitLab: the delivery id"),
            _header("X-Gitea-Event", "Gitea (X-Forgejo-Event for Forgejo): `push`"),
            _header("X-Gitea-Signature", "Gitea (X-Forgejo-Signature for Forgejo): the HMAC-SHA256 of the body, hex"),
            _header("X-Gitea-Delivery", "Gitea (X-Forgejo-Delivery for Forgejo): the delivery id"),
        ],
        responses={
            200: OpenApiResponse(PushIgnoredSerializer, description="Nothing to do; `ignored` says why."),
            202: OpenApiResponse(PushAcceptedSerializer, description="Runs queued and/or the registry re-read."),
            **problem_responses(
                {
                    400: "A signed push whose payload is not JSON or names no ref or repository URL.",
                    401: "No signature header, or it does not match INGEST_WEBHOOK_SECRET (`invalid_signature`).",
                    404: "INGEST_WEBHOOK_SECRET is not set (`webhooks_off`).",
                    409: "The first delivery of this id is still being handled (`delivery_in_progress`).",
                    413: "The payload is larger than INGEST_WEBHOOK_MAX_BYTES.",
                    429: "Rate limit exceeded.",
                }
            ),
        },
        examples=[
            OpenApiExample(
                "Ignored",
                value={"ignored": "refs/heads/dev is not a followed ref of acme/handbook (followed: refs/heads/main)"},
                response_only=True,
                status_codes=["200"],
            )
        ],
        auth=[],
    )
    def create(self, request: Request) -> Response:
        secret = settings.INGEST_WEBHOOK_SECRET
        if not secret:
            raise NotFound("Push webhooks are off: INGEST_WEBHOOK_SECRET is not set.", code="webhooks_off")
        limit = settings.INGEST_WEBHOOK_MAX_BYTES
        stream = request.stream
        body = stream.read(limit + 1) if stream is not None else b""
        if len(body) > limit:
            raise BodyTooLarge(f"The push payload is larger than the limit of {limit} bytes.")
        hook = push_hook_read(
            headers=request.headers, body=body, content_type=request.content_type or "", secret=secret
        )
        outcome = push_hook_handle(hook=hook)
        headers = {REPLAYED_HEADER: "true"} if outcome.replayed else {}
        if outcome.ignored:
            return Response(PushIgnoredSerializer(outcome).data, headers=headers)
        runs = []
        for item in outcome.runs:
            item.run.created = item.created  # type: ignore[attr-defined]  # read by IngestAcceptedRunSerializer
            runs.append(item.run)
        body_out = PushAcceptedSerializer(
            {"run_ids": [run.pk for run in runs], "runs": runs, "registry": outcome.registry}
        ).data
        return Response(body_out, status=status.HTTP_202_ACCEPTED, headers=headers)
