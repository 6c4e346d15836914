"""The API's JSON renderer: DRF's, which also sends bodies the database has already rendered.

A view returns `Response(RenderedJSON(text))` for a body built in SQL (agentplatform/plumbing/sql_json.py)
and this renderer sends those bytes as DRF's own rendering of the same data would be: compact,
non-ASCII kept, U+2028 and U+2029 escaped. A body that is an object some of whose values are
RenderedJSON (a serializer's output with a list written in SQL, see FlatRowSerializer) is written
key by key, those values as they are. A client asking for an indent
(`Accept: application/json; indent=2`) gets the document parsed and indented by DRF, as before.
Everything else is rendered by DRF unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from rest_framework import renderers
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request


class RenderedJSON:
    """A JSON document already written out (compact, as DRF writes it)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def compact_json(value: Any) -> str:
    """`value` (plain JSON types) as DRF's JSONRenderer writes it, for joining with RenderedJSON text."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


class JSONRenderer(renderers.JSONRenderer):
    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Mapping[str, Any] | None = None
    ) -> bytes:
        if isinstance(data, Mapping) and any(isinstance(value, RenderedJSON) for value in data.values()):
            data = RenderedJSON(self._object_text(data))
        if isinstance(data, RenderedJSON):
            if self.get_indent(accepted_media_type or "", renderer_context or {}) is None:
                return data.text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029").encode()
            data = json.loads(data.text)
        return super().render(data, accepted_media_type, renderer_context)

    def _object_text(self, data: Mapping[str, Any]) -> str:
        """`data` as compact JSON text, its RenderedJSON values spliced in as written."""
        encode = _compact_encoder.encode
        members = (
            f"{encode(key)}:{value.text if isinstance(value, RenderedJSON) else encode(value)}"
            for key, value in data.items()
        )
        return "{" + ",".join(members) + "}"


# DRF's encoder (it knows Decimal, datetime, ... beyond plain JSON) set as DRF's JSONRenderer sets it
# for a compact answer; one instance, as json.dumps would build one per call.
_compact_encoder = JSONRenderer.encoder_class(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


class PlainTextRenderer(renderers.BaseRenderer):
    """`text/plain` for an action that answers a client asking for it with a str; anything else it
    is handed (an error's problem details) is sent as JSON, as the response's content type says."""

    media_type = "text/plain"
    format = "txt"
    charset = "utf-8"

    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Mapping[str, Any] | None = None
    ) -> bytes:
        if isinstance(data, str):
            return data.encode()
        return JSONRenderer().render(data, None, renderer_context)


class FirstRendererNegotiation(BaseContentNegotiation):
    """For a view whose answers (refusals as problem JSON, a redirect) do not depend on Accept: a
    client asking for another type (an MCP client's `application/json, text/event-stream`, a
    browser EventSource's `text/event-stream`) must not make it a 406."""

    def select_parser(self, request: Request, parsers: Iterable[BaseParser]) -> BaseParser | None:
        return next(iter(parsers), None)

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        renderer = next(iter(renderers))
        return renderer, renderer.media_type
