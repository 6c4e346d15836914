"""Reads of the chat feed."""

from __future__ import annotations

from typing import Any

from django.db.models import F, QuerySet, Value
from django.db.models.functions import Coalesce

from chat.models import ChatMessage

SYSTEM_SENDER_NAME = "System"


FEED_FIELDS = ("id", "sender_name", "sender_instance_id", "message", "message_type", "created_at")


def chat_messages_with_sender() -> QuerySet[ChatMessage, dict[str, Any]]:
    """Message rows (dicts) in feed shape, the sender's name and instance_id read in the same query.

    System messages have no agent: their sender is "System" with an empty instance_id.
    """
    return ChatMessage.objects.annotate(
        sender_name=Coalesce(F("agent__name"), Value(SYSTEM_SENDER_NAME)),
        sender_instance_id=Coalesce(F("agent__instance_id"), Value("")),
    ).values(*FEED_FIELDS)


def chat_feed(*, limit: int, before: int | None = None) -> QuerySet[ChatMessage, dict[str, Any]]:
    """The newest `limit` visible messages, newest first; `before` pages to messages older than that id.

    Ids grow in posting order, so paging by id is stable while new messages arrive.
    """
    messages = chat_messages_with_sender().filter(hidden_at__isnull=True)
    if before is not None:
        messages = messages.filter(id__lt=before)
    return messages.order_by("-id")[:limit]


def chat_message_get(*, message_id: int) -> dict[str, Any]:
    """One message with its sender, hidden or not (an idempotent retry returns what was first returned)."""
    return chat_messages_with_sender().get(pk=message_id)
