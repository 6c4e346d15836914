"""JSON built by PostgreSQL, written exactly as DRF's JSONRenderer writes the same values.

The busiest reads (the agent list, the chat feed, the price history) have the database render
their rows: one SQL query returns the finished JSON text, so a request right after a write spends
no time in the ORM, in psycopg's row loaders, in serializer fields or in the json module. The
shape is defined once, by the serializer that documents it in the OpenAPI schema:
`serializer_json_object` writes the SQL of that serializer's object from its declared fields (keys,
order, and each value's builder from the field's type), given only the SQL expression each field
is read from. Each builder takes an SQL expression and returns the SQL of its JSON text; a NULL
value is `null`, as the serializers write None.

- `json_text`: a JSON string. `to_json` escapes as Python's json module does with
  `ensure_ascii=False`: quote, backslash, \\b \\f \\n \\r \\t, other control characters as \\u00xx.
  (DRF also escapes U+2028 and U+2029; agentplatform/plumbing/renderers.py does that on the whole body.)
- `json_number`: a NUMERIC as the JSON number `float()` of it prints: PostgreSQL prints a float8
  as the shortest text that reads back as the same double, as Python does (PostgreSQL 12 and
  later, with `extra_float_digits` at its default of 1), and whole numbers get Python's `.0`.
  Both write positional notation from 1e-4 to 1e15 and the same exponent form below; money
  columns (NUMERIC(20, 8)) stay below 1e12.
- `json_timestamp`: ISO 8601 in UTC ending in `Z`, with microseconds only when there are any,
  as `datetime.isoformat()` writes them.
- `json_object`: an object with its keys in the order given; `json_array`: the objects of the
  rows aggregated in the order given, `[]` for none.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from rest_framework import serializers

_KEY = re.compile(r"[a-z_][a-z0-9_]*")


def json_text(expression: str) -> str:
    return f"coalesce(to_json(({expression})::text)::text, 'null')"


def json_number(expression: str) -> str:
    value = f"({expression})::float8"
    return (
        f"coalesce({value}::text"
        f" || CASE WHEN {value} = trunc({value}) AND abs({value}) < 1e15 THEN '.0' ELSE '' END, 'null')"
    )


def json_timestamp(expression: str) -> str:
    # One to_char with the microseconds, dropped when they are all zero (no other "." in it).
    iso = f"""to_char(({expression}) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US')"""
    return f"""coalesce('"' || replace({iso}, '.000000', '') || 'Z"', 'null')"""


def json_object(fields: list[tuple[str, str]]) -> str:
    """`fields`: (key, SQL of the value's JSON text) pairs; keys are plain lower-case names."""
    parts = []
    for position, (key, value) in enumerate(fields):
        if not _KEY.fullmatch(key):
            raise ValueError(f"JSON key {key!r} is not a plain name")
        parts.append(f"""'{"{" if position == 0 else ","}"{key}":' || {value}""")
    return " || ".join(parts) + " || '}'" if parts else "'{}'"


def json_array(object_sql: str, *, order_by: str) -> str:
    """An aggregate: use it in the SELECT list of a query over the rows."""
    return f"'[' || coalesce(string_agg({object_sql}, ',' ORDER BY {order_by}), '') || ']'"


def _builder(field: serializers.Field) -> Callable[[str], str]:
    # What each field type's to_representation writes; a field type not listed has no SQL twin yet.
    if isinstance(field, serializers.DecimalField) and field.coerce_to_string is False:
        return json_number
    if isinstance(field, serializers.DateTimeField):
        return json_timestamp
    if isinstance(field, serializers.CharField | serializers.ChoiceField):
        return json_text
    raise TypeError(f"no SQL JSON builder for {type(field).__name__}")


def serializer_json_object(serializer_class: type[serializers.Serializer], values: Mapping[str, str]) -> str:
    """The SQL of `serializer_class`'s JSON object: its declared fields in their order, each
    written by the builder of its type (a number for a DecimalField sent as a number, a timestamp
    for a DateTimeField, a string for a CharField or ChoiceField) from the SQL expression
    `values[name]`. A field without an expression, or an expression naming no field, raises
    ValueError (when the module that declares the SQL is imported): adding a field to the
    serializer fails until its SQL is given."""
    fields = serializer_class().fields
    missing = [name for name in fields if name not in values]
    unknown = [name for name in values if name not in fields]
    if missing or unknown:
        raise ValueError(
            f"{serializer_class.__name__}'s SQL expressions do not match its fields:"
            f" missing {missing or 'none'}, unknown {unknown or 'none'}"
        )
    return json_object([(name, _builder(field)(values[name])) for name, field in fields.items()])
