"""How every endpoint reads its query string (docs/apis.md, "Input rules").

- `query_validated` hands the serializer a plain dict (the last value of each name): an empty
  value (`?limit=`) is then refused like any malformed one; DRF reading a QueryDict with form
  semantics would take it as absent.
- Integers are plain ASCII digits (`QueryIntegerField`): `+5`, ` 5`, `1.0` and non-ASCII digits
  (Arabic-Indic, full-width) are refused on every endpoint alike, though Python's int() takes them.
- The busiest reads pass `remember=True`: their query strings repeat, and validating one again
  costs a serializer built and run (a sizeable share of a request answered from the database).
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.request import Request

from agentplatform.plumbing.bounded_cache import BoundedCache

# Query strings that passed validation, per serializer: (serializer, sorted items) -> validated data.
_remembered: BoundedCache[tuple[type, tuple[tuple[str, str], ...]], dict[str, Any]] = BoundedCache(max_entries=1024)


class QueryIntegerField(serializers.IntegerField):
    """A query-string integer written as plain ASCII digits."""

    def to_internal_value(self, data: Any) -> int:
        if not (isinstance(data, str) and data.isascii() and data.isdigit()):
            self.fail("invalid")
        return super().to_internal_value(data)


def query_validated(
    serializer_class: type[serializers.Serializer], request: Request, *, remember: bool = False
) -> dict[str, Any]:
    """The request's query parameters validated by `serializer_class`; a 400 problem otherwise.

    `remember=True` keeps each valid query string's result (a copy is returned): only for a
    serializer whose answer depends on the query string alone (no database, clock or user) and
    whose values are immutable. A refused query string is validated again each time.
    """
    params = request.query_params.dict()
    key = (serializer_class, tuple(sorted(params.items()))) if remember else None
    if key is not None and (known := _remembered.get(key)) is not None:
        return dict(known)
    query = serializer_class(data=params)
    query.is_valid(raise_exception=True)
    if key is not None:
        _remembered.put(key, dict(query.validated_data))
    return query.validated_data
