"""One error hierarchy and its rendering as RFC 9457 problem details.

Every error under an API path leaves the server as `application/problem+json`:
`{type, title, status, detail, code}` plus `errors: [{field, message}]` for validation, also
for 404, 405, 413, 415 and 500 raised outside DRF views.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.utils.module_loading import import_string
from rest_framework import exceptions as drf_exceptions
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import set_rollback

from agentplatform.plumbing.body_limits import body_limit_exceeded
from agentplatform.plumbing.chunked_bodies import is_chunked

logger = logging.getLogger(__name__)

PROBLEM_CONTENT_TYPE = "application/problem+json"
# RFC 9110: a 401 response carries a challenge naming the scheme the client should use.
BEARER_CHALLENGE = "Bearer"


class ApplicationError(Exception):
    """Base of the errors our services raise; each maps to one problem-details response."""

    status: int = 400
    code: str = "bad_request"
    title: str = "Bad request"

    def __init__(
        self,
        detail: str,
        *,
        code: str | None = None,
        errors: list[dict[str, str]] | None = None,
        headers: dict[str, str] | None = None,
        extensions: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        if code:
            self.code = code
        self.errors = errors
        self.headers = headers or {}
        # RFC 9457 extension members: facts a client acts on, beside `detail` (a file's line count).
        self.extensions = extensions or {}


class InvalidInput(ApplicationError):
    status, code, title = 400, "invalid", "Invalid input"

    @classmethod
    def for_field(cls, field: str, message: str) -> InvalidInput:
        return cls(f"{field}: {message}", errors=[{"field": field, "message": message}])


class Unauthenticated(ApplicationError):
    status, code, title = 401, "not_authenticated", "Authentication required"


class Forbidden(ApplicationError):
    status, code, title = 403, "forbidden", "Forbidden"


class NotFound(ApplicationError):
    status, code, title = 404, "not_found", "Not Found"  # the HTTP reason phrase, as on every other 404


class Conflict(ApplicationError):
    status, code, title = 409, "conflict", "Conflict"


class BodyTooLarge(ApplicationError):
    status, code, title = 413, "body_too_large", "Request Entity Too Large"


class RateLimited(ApplicationError):
    status, code, title = 429, "rate_limited", "Too many requests"


class ServiceUnavailable(ApplicationError):
    status, code, title = 503, "unavailable", "Service unavailable"


# What a database that is down, restarting or unreachable raises (psycopg's connection errors,
# and a connection lost mid-query). Answered as a 503 the client may retry, not a 500.
DATABASE_UNAVAILABLE_ERRORS = (OperationalError, InterfaceError)
DATABASE_RETRY_AFTER_SECONDS = 5


class DatabaseOutage:
    """Logs one line when this process first meets a database error and one when a request
    succeeds again, instead of a traceback per request while the database is down."""

    def __init__(self) -> None:
        self._down = False
        self._lock = threading.Lock()

    def report(self, exc: Exception) -> None:
        with self._lock:
            if self._down:
                return
            self._down = True
        logger.error("Database unavailable (%s: %s); answering 503 until it is back", type(exc).__name__, exc)

    def request_succeeded(self) -> None:
        if not self._down:
            return
        with self._lock:
            if not self._down:
                return
            self._down = False
        logger.warning("Database available again")


database_outage = DatabaseOutage()


def database_unavailable_problem(exc: Exception) -> dict[str, Any]:
    database_outage.report(exc)
    return {
        "status": 503,
        "code": "database_unavailable",
        "detail": "The database is unavailable; retry shortly.",
        "headers": {"Retry-After": str(DATABASE_RETRY_AFTER_SECONDS)},
    }


def problem_body(
    *,
    status: int,
    code: str,
    detail: str,
    title: str | None = None,
    errors: list[dict[str, str]] | None = None,
    extensions: dict[str, Any] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        **(extensions or {}),
        "type": f"urn:problem:{code}",
        "title": title or HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "code": code,
    }
    if errors:
        body["errors"] = errors
    return body


def problem_response(
    *,
    status: int,
    code: str,
    detail: str,
    title: str | None = None,
    errors: list[dict[str, str]] | None = None,
    headers: dict[str, str] | None = None,
) -> JsonResponse:
    response = JsonResponse(
        problem_body(status=status, code=code, detail=detail, title=title, errors=errors),
        status=status,
        content_type=PROBLEM_CONTENT_TYPE,
    )
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def _flatten_validation(detail: Any, prefix: str = "") -> Iterable[dict[str, str]]:
    if isinstance(detail, dict):
        for key, value in detail.items():
            if isinstance(key, int):  # a ListField's errors, by item index
                yield from _flatten_validation(value, f"{prefix}[{key}]")
                continue
            field = key if key != "non_field_errors" else ""
            yield from _flatten_validation(value, f"{prefix}.{field}" if prefix and field else prefix or field)
    elif isinstance(detail, list):
        for index, value in enumerate(detail):
            if isinstance(value, dict | list):
                yield from _flatten_validation(value, f"{prefix}[{index}]")
            else:
                yield {"field": prefix, "message": str(value)}
    else:
        yield {"field": prefix, "message": str(detail)}


def validation_messages(detail: Any) -> list[str]:
    """A DRF ValidationError's detail as `field: message` lines, as the 400 problem's `detail` joins them."""
    return [f"{e['field']}: {e['message']}" if e["field"] else e["message"] for e in _flatten_validation(detail)]


_DRF_CODES: dict[type[drf_exceptions.APIException], str] = {
    drf_exceptions.ParseError: "invalid_json",
    drf_exceptions.AuthenticationFailed: "authentication_failed",
    drf_exceptions.NotAuthenticated: "not_authenticated",
    drf_exceptions.PermissionDenied: "forbidden",
    drf_exceptions.NotFound: "not_found",
    drf_exceptions.MethodNotAllowed: "method_not_allowed",
    drf_exceptions.NotAcceptable: "not_acceptable",
    drf_exceptions.UnsupportedMediaType: "unsupported_media_type",
    drf_exceptions.Throttled: "rate_limited",
}


def problem_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF EXCEPTION_HANDLER: every known error becomes problem details; unknown ones stay
    500s and are rendered by ProblemDetailsMiddleware after Django logs them."""
    headers: dict[str, str] = {}
    if isinstance(exc, ApplicationError):
        body = problem_body(
            status=exc.status,
            code=exc.code,
            detail=exc.detail,
            title=exc.title,
            errors=exc.errors,
            extensions=exc.extensions,
        )
        headers = dict(exc.headers)
    elif isinstance(exc, Http404):
        body = problem_body(status=404, code="not_found", detail=str(exc) or "Not found.")
    elif isinstance(exc, DjangoPermissionDenied):
        body = problem_body(status=403, code="forbidden", detail=str(exc) or "Permission denied.")
    elif isinstance(exc, RequestDataTooBig):
        body = _too_large_body()
    elif isinstance(exc, DATABASE_UNAVAILABLE_ERRORS):
        problem = database_unavailable_problem(exc)
        headers = problem.pop("headers")
        body = problem_body(**problem)
    elif isinstance(exc, drf_exceptions.ValidationError):
        errors = list(_flatten_validation(exc.detail))
        detail = "; ".join(validation_messages(exc.detail))
        body = problem_body(status=400, code="invalid", detail=detail, title="Invalid input", errors=errors)
    elif isinstance(exc, drf_exceptions.APIException):
        code = _DRF_CODES.get(type(exc), exc.default_code if isinstance(exc.default_code, str) else "error")
        body = problem_body(status=exc.status_code, code=code, detail=str(exc.detail))
        # Only some DRF exceptions carry these (AuthenticationFailed via the view, Throttled).
        if auth_header := getattr(exc, "auth_header", None):
            headers["WWW-Authenticate"] = auth_header
        if wait := getattr(exc, "wait", None):
            headers["Retry-After"] = str(int(wait))
    else:
        return None
    if body["status"] == 401:
        headers.setdefault("WWW-Authenticate", BEARER_CHALLENGE)
    set_rollback()
    response = Response(body, status=body["status"], headers=headers, content_type=PROBLEM_CONTENT_TYPE)
    if body["code"] == "database_unavailable":
        response._has_been_logged = True  # type: ignore[attr-defined]  # the outage is logged once, not by django.request per request
    return response


def _too_large_problem(limit: int | None = None) -> dict[str, Any]:
    limit = limit or settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return {
        "status": 413,
        "code": "body_too_large",
        "detail": f"The request body is larger than the limit of {limit} bytes.",
    }


def _too_large_body() -> dict[str, Any]:
    return problem_body(**_too_large_problem())


def api_path_prefixes() -> tuple[str, ...]:
    """The paths whose errors are problem details: /api/ and the ground-truth routes. Which routes
    those are is the wiring's to know (it mounts the apps' URL confs), so a setting names the
    function that lists them and this module imports no app."""
    return import_string(settings.API_PATH_PREFIXES_FUNCTION)()


def is_api_path(path: str) -> bool:
    return path.startswith(api_path_prefixes())


class ProblemFieldErrorSerializer(serializers.Serializer):
    field = serializers.CharField(help_text="The input field at fault (dotted when nested); empty for the whole body.")
    message = serializers.CharField()


class ProblemDetailsSerializer(serializers.Serializer):
    """The OpenAPI shape of every error body (RFC 9457 problem details)."""

    type = serializers.CharField(help_text="A URN naming the problem, `urn:problem:<code>`.")
    title = serializers.CharField()
    status = serializers.IntegerField()
    detail = serializers.CharField(help_text="What went wrong, for a human; names allowed values where it helps.")
    code = serializers.CharField(help_text="A stable machine-readable code, e.g. `invalid`, `not_authenticated`.")
    # A field named like Serializer.errors (the body's `errors` member); only ever used as a schema.
    errors = ProblemFieldErrorSerializer(many=True, required=False, help_text="Validation errors, one per field.")  # type: ignore[assignment]


def problem_responses(descriptions: dict[int, str]) -> dict[tuple[int, str], Any]:
    """`extend_schema(responses=...)` entries documenting problem-details errors.

    `{**problem_responses({404: "No agent with this instance_id."}), 200: AgentSerializer}`
    """
    from drf_spectacular.utils import OpenApiResponse

    return {
        (status, PROBLEM_CONTENT_TYPE): OpenApiResponse(response=ProblemDetailsSerializer, description=description)
        for status, description in descriptions.items()
    }


class ProblemDetailsMiddleware:
    """Keeps HTML error pages away from API paths.

    Refuses oversized bodies with 413 before any view reads them (DRF's parsers read the raw
    stream and would not enforce DATA_UPLOAD_MAX_MEMORY_SIZE; a view may take larger ones,
    agentplatform/plumbing/body_limits.py) and chunked bodies the server left
    without a length with 411, renders unhandled exceptions as a
    logged 500 problem, and turns any non-JSON error response (Django's 404 page, for one) into
    problem details.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.prefixes = api_path_prefixes()

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not request.path.startswith(self.prefixes):
            return self.get_response(request)
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > settings.DATA_UPLOAD_MAX_MEMORY_SIZE and (limit := body_limit_exceeded(request.path_info, length)):
            return problem_response(**_too_large_problem(limit))
        if is_chunked(request.META) and not request.META.get("CONTENT_LENGTH"):
            # A chunked body the server did not de-chunk (agentplatform/plumbing/chunked_bodies.py) would read
            # as empty; refuse it rather than act on nothing.
            return problem_response(
                status=411,
                code="length_required",
                detail="This server cannot read a chunked body here; send the body with Content-Length.",
            )
        response = self.get_response(request)
        if response.status_code < 500:
            database_outage.request_succeeded()
        content_type = response.get("Content-Type", "")
        if response.status_code >= 400 and "json" not in content_type:
            return _problem_for_status(response)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not request.path.startswith(self.prefixes):
            return None
        if isinstance(exception, Http404):
            return problem_response(status=404, code="not_found", detail="Not found.")
        if isinstance(exception, RequestDataTooBig):
            return problem_response(**_too_large_problem())
        if isinstance(exception, DATABASE_UNAVAILABLE_ERRORS):
            response = problem_response(**database_unavailable_problem(exception))
            response._has_been_logged = True  # type: ignore[attr-defined]  # logged once per outage, not by django.request
            return response
        logger.exception("Unhandled error on %s %s", request.method, request.path)
        return problem_response(status=500, code="server_error", detail="An unexpected error occurred.")


def _problem_for_status(response: HttpResponse) -> HttpResponse:
    status = response.status_code
    codes = {404: "not_found", 405: "method_not_allowed", 400: "bad_request", 403: "forbidden", 413: "body_too_large"}
    detail = {
        404: "No endpoint at this path.",
        405: "This method is not allowed on this path.",
    }.get(status, HTTPStatus(status).phrase + ".")
    problem = problem_response(
        status=status, code=codes.get(status, "server_error" if status >= 500 else "error"), detail=detail
    )
    if allow := response.get("Allow"):
        problem["Allow"] = allow
    return problem


def handler404(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api_path(request.path):
        return problem_response(status=404, code="not_found", detail="No endpoint at this path.")
    from django.views.defaults import page_not_found

    return page_not_found(request, exception)


def handler500(request: HttpRequest) -> HttpResponse:
    if is_api_path(request.path):
        # Django calls this inside its `except`: a database error raised outside a view (in a
        # middleware) is still a 503, logged once per outage rather than as a traceback.
        exception = sys.exc_info()[1]
        if isinstance(exception, DATABASE_UNAVAILABLE_ERRORS):
            response = problem_response(**database_unavailable_problem(exception))
            response._has_been_logged = True  # type: ignore[attr-defined]
            return response
        return problem_response(status=500, code="server_error", detail="An unexpected error occurred.")
    from django.views.defaults import server_error

    return server_error(request)
