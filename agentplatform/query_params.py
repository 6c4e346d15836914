"""How every endpoint reads its query string (README, Errors and input rules).

- `query_validated` hands the serializer a plain dict (the last value of each name): an empty
  value (`?limit=`) is then refused like any malformed one; DRF reading a QueryDict with form
  semantics would take it as absent.
- Integers are plain ASCII digits (`QueryIntegerField`): `+5`, ` 5`, `1.0` and non-ASCII digits
  (Arabic-Indic, full-width) are refused on every endpoint alike, though Python's int() takes them.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.request import Request


class QueryIntegerField(serializers.IntegerField):
    """A query-string integer written as plain ASCII digits."""

    def to_internal_value(self, data: Any) -> int:
        if not (isinstance(data, str) and data.isascii() and data.isdigit()):
            self.fail("invalid")
        return super().to_internal_value(data)


def query_validated(serializer_class: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    """The request's query parameters validated by `serializer_class`; a 400 problem otherwise."""
    query = serializer_class(data=request.query_params.dict())
    query.is_valid(raise_exception=True)
    return query.validated_data
