"""Query, header and body parsing of the chat endpoints, and the feed's message shape."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from agentplatform.plumbing.errors import InvalidInput
from agentplatform.plumbing.json_bodies import StrictBodySerializer, StrictRegexField
from agentplatform.plumbing.query_params import QueryIntegerField
from agentplatform.plumbing.serializer_fields import FlatRowSerializer
from chat.models import AGENT_MESSAGE_TYPES, MESSAGE_MAX_LENGTH, MessageType
from chat.services import IDEMPOTENCY_KEY_MAX_LENGTH, MESSAGE_PATTERN, MESSAGE_RULE

FEED_LIMIT_MAX = 200
FEED_LIMIT_DEFAULT = 50
FEED_LIMIT_RULE = f"must be an integer from 1 to {FEED_LIMIT_MAX}"
BEFORE_RULE = "must be a message id (a positive integer)"
MESSAGE_TYPE_RULE = f"allowed: {', '.join(AGENT_MESSAGE_TYPES)} (system is staff-only)"
IDEMPOTENCY_KEY_RULE = f"must be 1 to {IDEMPOTENCY_KEY_MAX_LENGTH} visible ASCII characters"
IDEMPOTENCY_KEY_PATTERN = f"^[!-~]{{1,{IDEMPOTENCY_KEY_MAX_LENGTH}}}$"
BIGINT_MAX = 2**63 - 1
LAST_EVENT_ID_RULE = "must be a message id (digits; 0 replays every visible message)"


def _same_message(rule: str, *keys: str) -> dict[str, Any]:
    return dict.fromkeys(keys, rule)


class ChatFeedQuerySerializer(serializers.Serializer):
    limit = QueryIntegerField(
        required=False,
        default=FEED_LIMIT_DEFAULT,
        min_value=1,
        max_value=FEED_LIMIT_MAX,
        error_messages=_same_message(FEED_LIMIT_RULE, "invalid", "min_value", "max_value", "max_string_length"),
        help_text=f"Newest messages to return; {FEED_LIMIT_RULE}.",
    )
    before = QueryIntegerField(
        required=False,
        min_value=1,
        max_value=BIGINT_MAX,  # beyond a bigint the database would refuse the comparison
        error_messages=_same_message(BEFORE_RULE, "invalid", "min_value", "max_value", "max_string_length"),
        help_text=f"Only messages older than this id; {BEFORE_RULE}.",
    )


class ChatPostSerializer(StrictBodySerializer):
    message = StrictRegexField(
        MESSAGE_PATTERN,
        regex_refuses_nul=True,
        max_length=MESSAGE_MAX_LENGTH,
        # Leading and trailing whitespace is dropped; a message of only whitespace is empty.
        trim_whitespace=True,
        error_messages=_same_message(
            MESSAGE_RULE, "required", "blank", "max_length", "invalid", "not_a_string", "null"
        ),
        help_text=f"1 to {MESSAGE_MAX_LENGTH} characters, not only whitespace or zero-width ones; no NUL (U+0000).",
    )
    message_type = serializers.ChoiceField(
        choices=MessageType.choices,
        required=False,
        default=MessageType.CHAT,
        error_messages={
            "invalid_choice": f'"{{input}}" is not a message_type; {MESSAGE_TYPE_RULE}',
            "null": MESSAGE_TYPE_RULE,
        },
        help_text="chat (default), status or trade; system is refused for agents (staff post it in the admin).",
    )


def idempotency_key_parse(value: str | None) -> str:
    """The Idempotency-Key header: absent means "", anything sent must be 1..255 visible ASCII characters."""
    if value is None:
        return ""
    if not 1 <= len(value) <= IDEMPOTENCY_KEY_MAX_LENGTH or not all("!" <= char <= "~" for char in value):
        raise InvalidInput.for_field("Idempotency-Key", IDEMPOTENCY_KEY_RULE)
    return value


def last_event_id_parse(*, header: str | None, query: str | None) -> int | None:
    """Where a stream resumes: the `Last-Event-ID` header (an EventSource sends it when it
    reconnects, while its URL keeps the query it opened with), else `?last_event_id=`; None
    for neither. Each one sent must be digits up to a bigint (an empty value is refused too)."""
    parsed: dict[str, int] = {}
    for field, value in (("Last-Event-ID", header), ("last_event_id", query)):
        if value is None:
            continue
        if not (value.isascii() and value.isdigit() and int(value) <= BIGINT_MAX):
            raise InvalidInput.for_field(field, LAST_EVENT_ID_RULE)
        parsed[field] = int(value)
    return parsed.get("Last-Event-ID", parsed.get("last_event_id"))


class ChatMessageSerializer(FlatRowSerializer):
    """A chat message as the feed shows it (also the body of a successful POST)."""

    id = serializers.CharField(read_only=True, help_text="The message id (digits); pass it as `before` to page.")
    sender_name = serializers.CharField(read_only=True, help_text='The agent\'s name; "System" for system messages.')
    sender_instance_id = serializers.CharField(
        read_only=True, help_text="The sending agent's instance_id; empty for system messages."
    )
    message = serializers.CharField(read_only=True)
    message_type = serializers.ChoiceField(choices=MessageType.choices, read_only=True)
    created_at = serializers.DateTimeField(read_only=True)
