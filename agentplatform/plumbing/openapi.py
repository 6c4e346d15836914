"""The schema class that documents the cross-cutting behaviour of every API operation.

Views document their own answers and errors (`extend_schema(responses=...)`, with
`errors.problem_responses`). What every operation of a kind shares is added here, so no view can
forget it: a 429 problem with Retry-After and the X-RateLimit-* headers on rate-limited views, a
401 problem on views that read bearer credentials (a wrong key is refused even on a public
endpoint), 403 where credentials are required, and 400/413/415 on operations that take a JSON body.

Public operations (anonymous callers allowed) have `security: []`, protected ones
`[{bearerAuth: []}]`, so Swagger UI shows a lock on exactly the operations that need a key.

Two rules keep the schema equal to what the views do: an answer is an array only when the view
says so (`Serializer(many=True)`), not because its action is named `list` (GET /health, /repos
and /search answer one object); and a request body serializer that refuses unknown keys
(`json_bodies.StrictBodySerializer`) is documented with `additionalProperties: false`.
"""

from __future__ import annotations

from typing import Any, Literal

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import is_list_serializer
from drf_spectacular.utils import OpenApiResponse
from rest_framework import permissions

from agentplatform.plumbing.errors import PROBLEM_CONTENT_TYPE, ProblemDetailsSerializer, is_api_path
from agentplatform.plumbing.json_bodies import StrictBodySerializer
from agentplatform.plumbing.ratelimits import RateLimitedViewMixin

RATE_LIMIT_HEADERS: dict[str, dict[str, Any]] = {
    "X-RateLimit-Limit": {
        "schema": {"type": "integer"},
        "description": "Requests allowed in the current window for this client's class.",
    },
    "X-RateLimit-Remaining": {
        "schema": {"type": "integer"},
        "description": "Requests left in the current window.",
    },
    "X-RateLimit-Reset": {
        "schema": {"type": "integer"},
        "description": "Unix epoch second at which the current window ends.",
    },
}
RETRY_AFTER_HEADER = {"Retry-After": {"schema": {"type": "integer"}, "description": "Seconds until the window resets."}}
WWW_AUTHENTICATE_HEADER = {
    "WWW-Authenticate": {"schema": {"type": "string"}, "description": "The challenge: `Bearer`."}
}
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


class ProblemDetailsAutoSchema(AutoSchema):
    def get_operation(self, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        operation = super().get_operation(*args, **kwargs)
        if operation is None:
            return None
        # Explicit: no credentials needed, whatever a top-level `security` may say one day.
        operation.setdefault("security", [])
        # drf-spectacular defines a scheme (cookieAuth for the staff session) in `components` from
        # its own get_auth, which a view's `extend_schema(auth=...)` replaces: run it for that.
        AutoSchema.get_auth(self)
        return operation

    def get_auth(self) -> list[dict[str, Any]]:
        """A public operation documents no security requirement (`security: []`), though it reads a
        bearer token when one is sent (a wrong one is a 401, documented with the responses).
        drf-spectacular's `[{bearerAuth: []}, {}]` says "a key or nothing", which Swagger UI draws
        as a closed lock before any key is given (the empty requirement is always met), so public
        operations looked locked and protected ones open."""
        return [] if self._allows_anonymous() else super().get_auth()

    def _is_list_view(self, serializer: Any = None) -> bool:
        if serializer is None:
            serializer = self.get_response_serializers()
        if isinstance(serializer, dict) and serializer:
            serializer = {str(code): value for code, value in serializer.items()}
            serializer = serializer[min(serializer)]
        return is_list_serializer(serializer)

    def _map_basic_serializer(self, serializer: Any, direction: str) -> dict[str, Any]:
        schema = super()._map_basic_serializer(serializer, direction)
        if direction == "request" and isinstance(serializer, StrictBodySerializer):
            schema["additionalProperties"] = False
        return schema

    def _get_response_bodies(self, direction: Literal["request", "response"] = "response") -> dict[str, Any]:
        responses = super()._get_response_bodies(direction)
        if direction != "response" or not is_api_path(self.path):
            return responses
        for code, description in self._implied_problems().items():
            if str(code) not in responses:
                responses[str(code)] = self._get_response_for_code(
                    OpenApiResponse(response=ProblemDetailsSerializer, description=description),
                    str(code),
                    [PROBLEM_CONTENT_TYPE],
                )
        if "401" in responses:
            responses["401"].setdefault("headers", {}).update(WWW_AUTHENTICATE_HEADER)
        if isinstance(self.view, RateLimitedViewMixin):
            for status, response in responses.items():
                response.setdefault("headers", {}).update(RATE_LIMIT_HEADERS)
                if status == "429":
                    response["headers"].update(RETRY_AFTER_HEADER)
        return responses

    def _implied_problems(self) -> dict[int, str]:
        problems: dict[int, str] = {}
        if self.view.get_authenticators():
            problems[401] = "The bearer credentials sent are invalid, expired or revoked, or required and missing."
        if not self._allows_anonymous():
            problems[403] = "The credentials are valid but do not allow this operation."
        if self.method in BODY_METHODS and self.get_request_serializer() is not None:
            problems[400] = (
                "The body is not valid JSON, repeats a key within one object (`invalid_json`), or a field is "
                "invalid (see `errors`)."
            )
            problems[413] = "The body is larger than MAX_REQUEST_BODY_BYTES."
            problems[415] = "The body is not `application/json`."
        if isinstance(self.view, RateLimitedViewMixin):
            problems[429] = "Rate limit exceeded; retry after `Retry-After` seconds."
        return problems

    def _allows_anonymous(self) -> bool:
        perms = [type(permission) for permission in self.view.get_permissions()]
        return (
            not perms
            or permissions.AllowAny in perms
            or (permissions.IsAuthenticatedOrReadOnly in perms and self.method in permissions.SAFE_METHODS)
        )
