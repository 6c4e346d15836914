"""The rules every JSON request body follows (docs/apis.md, "Input rules").

- The body is parsed by `JSONParser` (DEFAULT_PARSER_CLASSES): malformed JSON, bytes that are
  not UTF-8, NaN/Infinity, a key repeated within one object and nesting deeper than
  `JSON_MAX_DEPTH` are a 400 problem with code `invalid_json`. The depth is checked before
  parsing because Python's parser recurses: a 2 KB body of a thousand `[` raised RecursionError,
  a 500 with a traceback per request.
- A body serializer derives from `StrictBodySerializer`: keys it does not declare are refused
  (a misspelt `scope` or `repo` must not silently widen the request); the schema says
  `additionalProperties: false` (agentplatform.plumbing.openapi).
- A string field takes JSON strings only (`StrictCharField`, `StrictRegexField`): DRF's own
  would turn `0` into `"0"` where the schema says string.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core.validators import ProhibitNullCharactersValidator, RegexValidator
from rest_framework import exceptions, parsers, serializers

# The deepest body the API takes is three levels (`{"scope": {"repos": [...]}}`).
JSON_MAX_DEPTH = 32
# A JSON string (escapes included); removed before brackets are counted.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


class InvalidJson(exceptions.ParseError):
    # A DRF exception (not an ApplicationError): DRF imports this module while agentplatform.plumbing.errors
    # is still importing DRF. The problem handler renders it with its code.
    default_code = "invalid_json"


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


class DuplicateKey(ValueError):
    pass


def _object_without_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # RFC 8259 leaves a repeated name's meaning to the parser; Python keeps the last, another
    # parser (a proxy, a log pipeline, a signature check) the first: one body, two meanings.
    built: dict[str, Any] = {}
    for key, value in pairs:
        if key in built:
            raise DuplicateKey(f"the key {json.dumps(key, ensure_ascii=False)} appears twice in one object")
        built[key] = value
    return built


def json_depth_exceeds(text: str, limit: int) -> bool:
    """True when arrays and objects in `text` nest deeper than `limit` (brackets inside strings
    do not count)."""
    depth = 0
    for bracket in _BRACKET.findall(_JSON_STRING.sub("", text)):
        depth += 1 if bracket in "[{" else -1
        if depth > limit:
            return True
    return False


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser with one error code for every bad body and no recursion past the cap."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Mapping[str, Any] | None = None) -> Any:
        encoding = (parser_context or {}).get("encoding") or settings.DEFAULT_CHARSET
        raw = stream.read()
        try:
            text = raw.decode(encoding)
        except (UnicodeDecodeError, LookupError) as exc:
            raise InvalidJson(f"The body is not valid JSON: it is not {encoding} text.") from exc
        if json_depth_exceeds(text, JSON_MAX_DEPTH):
            raise InvalidJson(f"The body is not accepted: its JSON nests deeper than {JSON_MAX_DEPTH} levels.")
        try:
            return json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=_object_without_duplicate_keys)
        except DuplicateKey as exc:
            raise InvalidJson(f"The body is not accepted: {exc}.") from exc
        except ValueError as exc:
            raise InvalidJson(f"The body is not valid JSON: {exc}.") from exc
        except RecursionError as exc:  # not reachable under the cap; kept so no body can make a 500
            raise InvalidJson(f"The body is not accepted: its JSON nests deeper than {JSON_MAX_DEPTH} levels.") from exc


class StrictBodySerializer(serializers.Serializer):
    # A JSON object that may hold only the declared keys. (A comment, not a docstring:
    # drf-spectacular would print a docstring as every subclass's description.)

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError(
                    {name: f"unknown field; allowed: {', '.join(self.fields)}" for name in unknown}
                )
        return super().to_internal_value(data)


NOT_A_STRING = "Not a valid string."


class StrictCharField(serializers.CharField):
    r"""A JSON string only: DRF's CharField would turn 42 into "42".

    `max_length` counts the string as sent (before trimming), as the schema's maxLength does; a
    trimmed field that may not be blank is documented with the pattern `\S` (some non-space
    character), which is what the blank check enforces.
    """

    default_error_messages = {"not_a_string": NOT_A_STRING}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.some_visible_validator: RegexValidator | None = None
        if self.trim_whitespace and not self.allow_blank:
            self.some_visible_validator = RegexValidator(r"\S", message=self.error_messages["blank"])
            self.validators.append(self.some_visible_validator)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("not_a_string")
        if self.max_length is not None and len(data) > self.max_length:
            self.fail("max_length", max_length=self.max_length)
        return super().to_internal_value(data)


class StrictRegexField(StrictCharField):
    r"""A JSON string that matches `regex` (anchor it with ^ and \Z), taken as sent (not trimmed).

    Trimmed (`trim_whitespace=True`), the trimmed string must match, and `regex` is the one
    `pattern` of the schema: it replaces StrictCharField's `\S` (drf-spectacular documents only
    the first pattern). With `regex_refuses_nul`, `regex` alone refuses U+0000 (and the schema's
    `pattern` says so): DRF's own NUL check is left out, so a NUL is one error with the field's
    rule, not two.
    """

    def __init__(self, regex: str | re.Pattern[str], *, regex_refuses_nul: bool = False, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)
        self.validators = [
            validator
            for validator in self.validators
            if validator is not self.some_visible_validator
            and not (regex_refuses_nul and isinstance(validator, ProhibitNullCharactersValidator))
        ]
        self.validators.append(RegexValidator(regex, message=self.error_messages["invalid"]))
