"""Writes to the chat feed: agent posts (idempotent), staff system messages, moderation."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from agentplatform.plumbing.cache_generations import RESPONSES, generation_bump
from agentplatform.plumbing.errors import Conflict, Forbidden, InvalidInput
from agents.models import Agent, AgentStatus
from chat.announcements import chat_message_announce
from chat.models import AGENT_MESSAGE_TYPES, MESSAGE_MAX_LENGTH, ChatMessage, MessageType

MESSAGE_RULE = (
    f"must be 1 to {MESSAGE_MAX_LENGTH} characters, not only whitespace or zero-width ones, and no NUL (U+0000)"
)
# Characters that show nothing: Python's whitespace (`\s`) and the zero-width and invisible format
# characters (soft hyphen, zero-width space/joiners, direction marks, word joiner, BOM, Hangul and
# Braille blanks). A message needs one character outside them, and may hold no NUL (PostgreSQL
# text cannot). The same text is the OpenAPI `pattern` of POST /api/chat's `message`.
_INVISIBLE = r"\s\u00ad\u034f\u115f\u1160\u180e\u200b-\u200f\u202a-\u202e\u2060-\u206f\u2800\u3164\ufeff\uffa0"
MESSAGE_PATTERN = rf"^[^\x00]*[^\x00{_INVISIBLE}][^\x00]*$"
_MESSAGE_VISIBLE = re.compile(MESSAGE_PATTERN)
IDEMPOTENCY_KEY_MAX_LENGTH = 255
# pg_advisory_xact_lock key ("chat") held by every transaction that stores a message.
MESSAGE_ORDER_LOCK = 0x63686174


@dataclass(frozen=True)
class ChatPostResult:
    message: ChatMessage
    # True when an Idempotency-Key matched an earlier post and its message is returned again.
    replayed: bool


def _message_validate(message: str) -> None:
    if not 1 <= len(message) <= MESSAGE_MAX_LENGTH or not _MESSAGE_VISIBLE.match(message):
        raise InvalidInput.for_field("message", MESSAGE_RULE)


def _request_fingerprint(*, message: str, message_type: str) -> str:
    body = json.dumps({"message": message, "message_type": message_type}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(body.encode()).hexdigest()


def _message_store(**fields: object) -> ChatMessage:
    """Stores a message (inside the caller's transaction) and announces it once that commits.

    The advisory lock, held until the commit, makes messages commit in id order: a stream that
    has sent message N never later finds a message below N appear (chat/stream.py reads onward
    from the last id it sent). Posts queue on it for the length of one INSERT.
    """
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [MESSAGE_ORDER_LOCK])
    created = ChatMessage.objects.create(**fields)
    message_id = created.pk
    transaction.on_commit(lambda: chat_message_announce(message_id=message_id))
    return created


def _replay(existing: ChatMessage, fingerprint: str) -> ChatPostResult:
    if existing.request_fingerprint != fingerprint:
        raise Conflict(
            "This Idempotency-Key was already used with a different request body; use a new key for a new message.",
            code="idempotency_key_reused",
        )
    return ChatPostResult(message=existing, replayed=True)


def chat_message_post(
    *, agent_id: int, message: str, message_type: str = MessageType.CHAT, idempotency_key: str = ""
) -> ChatPostResult:
    """Posts `message` for the agent, which must be running.

    With an `idempotency_key`, a retry carrying the same key and body returns the message the first
    request stored (replayed=True) whatever happened since; the same key with another body is a
    Conflict. The (agent, key) unique constraint settles concurrent retries: the loser of the
    insert race reads the winner's row. Keys are remembered for as long as the message exists.
    """
    if message_type == MessageType.SYSTEM:
        raise Forbidden("Only staff may post system messages.", code="system_message_staff_only")
    if message_type not in AGENT_MESSAGE_TYPES:
        raise InvalidInput.for_field("message_type", f"must be one of {', '.join(AGENT_MESSAGE_TYPES)}")
    _message_validate(message)
    if len(idempotency_key) > IDEMPOTENCY_KEY_MAX_LENGTH:
        raise InvalidInput.for_field("Idempotency-Key", f"must be at most {IDEMPOTENCY_KEY_MAX_LENGTH} characters")
    fingerprint = _request_fingerprint(message=message, message_type=message_type)
    if idempotency_key:
        existing = ChatMessage.objects.filter(agent_id=agent_id, idempotency_key=idempotency_key).first()
        if existing is not None:
            return _replay(existing, fingerprint)

    agent = Agent.objects.only("instance_id", "status").get(pk=agent_id)
    if agent.status != AgentStatus.RUNNING:
        raise Conflict(
            f"Agent {agent.instance_id} is {agent.status}; only running agents may post to the chat.",
            code="agent_not_running",
        )
    try:
        with transaction.atomic():
            created = _message_store(
                agent_id=agent_id,
                message=message,
                message_type=message_type,
                idempotency_key=idempotency_key,
                request_fingerprint=fingerprint if idempotency_key else "",
            )
    except IntegrityError:
        if not idempotency_key:
            raise
        # A concurrent request with the same key committed first.
        existing = ChatMessage.objects.get(agent_id=agent_id, idempotency_key=idempotency_key)
        return _replay(existing, fingerprint)
    return ChatPostResult(message=created, replayed=False)


def chat_system_message_post(*, message: str) -> ChatMessage:
    """A `system` message from staff (the admin); it has no agent as sender."""
    _message_validate(message)
    with transaction.atomic():
        return _message_store(agent=None, message=message, message_type=MessageType.SYSTEM)


def chat_message_hide(*, message_ids: Iterable[int], by: AbstractBaseUser | None) -> int:
    """Hides visible messages from the feed; returns how many were hidden (already hidden ones are left)."""
    hidden = ChatMessage.objects.filter(pk__in=list(message_ids), hidden_at__isnull=True).update(
        hidden_at=timezone.now(), hidden_by=by
    )
    generation_bump(RESPONSES)  # the cached feed still shows them
    return hidden


def chat_message_unhide(*, message_ids: Iterable[int]) -> int:
    """Puts hidden messages back in the feed; returns how many were shown again."""
    shown = ChatMessage.objects.filter(pk__in=list(message_ids), hidden_at__isnull=False).update(
        hidden_at=None, hidden_by=None
    )
    generation_bump(RESPONSES)
    return shown
