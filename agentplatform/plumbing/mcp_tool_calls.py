"""How an MCP tool (groundtruth/mcp_tools.py, brandassets/mcp_tools.py) runs Django code.

A tool is a plain function with keyword arguments, typed for its JSON schema, wrapped by
`django_tool`. The MCP SDK runs a synchronous tool on a worker thread (anyio's, at most
MCP_THREADS at once: agentplatform/mcp_app.py), so the ORM is used as in a web request; the
wrapper adds what Django's request cycle does around a view (closing database connections past
CONN_MAX_AGE or broken, before and after) and answers the service's refusals as tool errors:

- an ApplicationError (unknown repository, bad range, missing asset, ...) with its detail;
- a DRF ValidationError from the REST endpoint's own serializer (`arguments_validated`) with every
  field's message, in the words the endpoint's 400 problem uses.

A tool error is an MCP result with `isError: true` that the model reads and can act on; anything
else the tool raises stays a crash (logged by the SDK with its traceback; the caller only learns
that the tool failed).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any, ParamSpec, TypeVar
from urllib.parse import urlsplit

from django.conf import settings
from django.db import close_old_connections
from django.http import HttpRequest
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError as ArgumentsInvalid
from rest_framework import serializers
from rest_framework.exceptions import ValidationError

from agentplatform.plumbing.errors import ApplicationError, validation_messages

Arguments = ParamSpec("Arguments")

# Who the MCP request calling a tool speaks for (the access gate's request.user: a Principal), set
# by agentplatform/mcp_app.py around the transport; the tool's thread inherits it (anyio copies
# the context). Unset, `tool_caller` refuses rather than read as an unlimited caller.
_tool_caller: ContextVar[object] = ContextVar("mcp_tool_caller")


def tool_caller_set(caller: object) -> Any:
    """Sets the caller of the tools run in this context; returns the token to reset it with."""
    return _tool_caller.set(caller)


def tool_caller_reset(token: Any) -> None:
    _tool_caller.reset(token)


def tool_caller() -> object:
    """The principal of the MCP request running this tool (for selectors.repository_visible_queryset)."""
    try:
        return _tool_caller.get()
    except LookupError:
        raise RuntimeError("an MCP tool ran outside a request admitted by the access gate") from None


Result = TypeVar("Result")


def django_tool(function: Callable[Arguments, Result]) -> Callable[Arguments, Result]:
    """`function` as an MCP tool: Django's connection handling around it, refusals as tool errors.
    The SDK reads the schema from `function`'s own signature (functools.wraps sets __wrapped__)."""

    @functools.wraps(function)
    def tool(*args: Arguments.args, **kwargs: Arguments.kwargs) -> Result:
        close_old_connections()
        try:
            return function(*args, **kwargs)
        except ApplicationError as exc:
            raise ToolError(exc.detail) from exc
        except ValidationError as exc:
            raise ToolError("; ".join(validation_messages(exc.detail))) from exc
        finally:
            close_old_connections()

    return tool


# What a rule of a tool's JSON schema says when the SDK's pydantic check refuses an argument, in the
# words of the REST endpoints' refusals; pydantic's own text names its model and links its website.
_ARGUMENT_RULES: dict[str, Callable[[dict[str, Any]], str]] = {
    "missing": lambda context: "is required",
    "greater_than_equal": lambda context: f"must be at least {context['ge']}",
    "less_than_equal": lambda context: f"must be at most {context['le']}",
    "string_too_long": lambda context: f"may be at most {context['max_length']} characters",
    "string_pattern_mismatch": lambda context: f"must match the pattern {context['pattern']}",
    "too_short": lambda context: f"must hold at least {context['min_length']} item(s)",
    "too_long": lambda context: f"may hold at most {context['max_length']} item(s)",
    "int_type": lambda context: "must be an integer",
    "int_parsing": lambda context: "must be an integer",
    "int_from_float": lambda context: "must be an integer",
    "string_type": lambda context: "must be a string",
    "list_type": lambda context: "must be a list",
}


def arguments_invalid_text(exc: ArgumentsInvalid) -> str:
    """`limit: must be at most 50; query: is required`: each refused argument and its rule."""
    messages = []
    for error in exc.errors(include_url=False):
        argument = ".".join(str(part) for part in error["loc"]) or "arguments"
        rule = _ARGUMENT_RULES.get(error["type"])
        messages.append(f"{argument}: {rule(error.get('ctx', {})) if rule else error['msg']}")
    return "; ".join(messages)


def arguments_validated(serializer_class: type[serializers.Serializer], data: Mapping[str, Any]) -> dict[str, Any]:
    """`data` checked by the serializer the REST endpoint checks its input with, so that a tool
    refuses exactly what the endpoint refuses; raises ValidationError (a tool error, see above)."""
    serializer = serializer_class(data=dict(data))
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


class WebTierRequest(HttpRequest):
    """Stands in for a request to the web tier at WEB_BASE_URL, for the REST endpoints' serializers
    that write absolute links with `request.build_absolute_uri` (a citation's source_url, an
    asset's contentUrl): a tool's links then point where the REST endpoint's would, not at the
    MCP process."""

    def __init__(self) -> None:
        super().__init__()
        base = urlsplit(settings.WEB_BASE_URL)
        self._web_scheme, self._web_host = base.scheme, base.netloc

    @property
    def scheme(self) -> str:
        return self._web_scheme

    def get_host(self) -> str:
        return self._web_host
