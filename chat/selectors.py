"""Reads of the chat feed."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection
from django.db.models import F, QuerySet, Value
from django.db.models.functions import Coalesce

from agentplatform.plumbing.prepared_statements import prepared_cursor
from agentplatform.plumbing.renderers import RenderedJSON
from agentplatform.plumbing.sql_json import json_array, serializer_json_object
from agents.models import Agent
from chat.models import ChatMessage
from chat.serializers import ChatMessageSerializer

SYSTEM_SENDER_NAME = "System"


def chat_messages_with_sender() -> QuerySet[ChatMessage]:
    """Messages annotated with what ChatMessageSerializer reads besides their columns: the
    sender's name and instance_id, read in the same query.

    System messages have no agent: their sender is "System" with an empty instance_id.
    """
    return ChatMessage.objects.annotate(
        sender_name=Coalesce(F("agent__name"), Value(SYSTEM_SENDER_NAME)),
        sender_instance_id=Coalesce(F("agent__instance_id"), Value("")),
    )


@dataclass(frozen=True)
class ChatFeedPage:
    body: RenderedJSON  # the messages as GET /api/chat sends them
    count: int
    oldest_id: int | None  # where the next page starts (`before`)


# A message as ChatMessageSerializer writes it, rendered by PostgreSQL (agentplatform/plumbing/sql_json.py):
# each field from its expression over the message `m` and its sender `a`, as chat_messages_with_sender
# reads them.
_FEED_MESSAGE_JSON = serializer_json_object(
    ChatMessageSerializer,
    {
        "id": "m.id",
        "sender_name": f"coalesce(a.name, '{SYSTEM_SENDER_NAME}')",
        "sender_instance_id": "coalesce(a.instance_id, '')",
        "message": "m.message",
        "message_type": "m.message_type",
        "created_at": "m.created_at",
    },
)
# The newest visible messages (the partial index chat_message_visible_feed), each rendered once.
_FEED_SQL = """
SELECT count(*), min(page.id), {messages}
FROM (
    SELECT m.id, {message} AS message_json
    FROM {messages_table} m LEFT JOIN {agents_table} a ON a.id = m.agent_id
    WHERE m.hidden_at IS NULL {before}
    ORDER BY m.id DESC
    LIMIT %(limit)s
) AS page
"""


def chat_feed(*, limit: int, before: int | None = None) -> ChatFeedPage:
    """The newest `limit` visible messages, newest first, as the feed sends them; `before` pages to
    messages older than that id. One query, which also writes the JSON.

    Ids grow in posting order, so paging by id is stable while new messages arrive.
    """
    sql = _FEED_SQL.format(
        messages=json_array("page.message_json", order_by="page.id DESC"),
        message=_FEED_MESSAGE_JSON,
        messages_table=connection.ops.quote_name(ChatMessage._meta.db_table),
        agents_table=connection.ops.quote_name(Agent._meta.db_table),
        before="AND m.id < %(before)s" if before is not None else "",
    )
    with prepared_cursor() as cursor:
        cursor.execute(sql, {"limit": limit, "before": before})
        count, oldest_id, body = cursor.fetchone()
    return ChatFeedPage(body=RenderedJSON(body), count=count, oldest_id=oldest_id)


def chat_message_get(*, message_id: int) -> ChatMessage:
    """One message with its sender, hidden or not (an idempotent retry returns what was first returned)."""
    return chat_messages_with_sender().get(pk=message_id)


# Visible messages after an id, oldest first, each as the feed writes it: what a stream sends.
_AFTER_SQL = """
SELECT m.id, {message}
FROM {messages_table} m LEFT JOIN {agents_table} a ON a.id = m.agent_id
WHERE m.hidden_at IS NULL AND m.id > %(after)s
ORDER BY m.id
LIMIT %(limit)s
"""


def chat_messages_after(*, after_id: int, limit: int) -> list[tuple[int, str]]:
    """Up to `limit` visible messages with an id above `after_id`, oldest first, as (id, the
    message's JSON in the feed's shape, as PostgreSQL writes it). One query.

    Messages become visible in id order (chat/services.py serializes the posts), so reading
    onward from the last id sent never skips one.
    """
    sql = _AFTER_SQL.format(
        message=_FEED_MESSAGE_JSON,
        messages_table=connection.ops.quote_name(ChatMessage._meta.db_table),
        agents_table=connection.ops.quote_name(Agent._meta.db_table),
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, {"after": after_id, "limit": limit})
        return [(message_id, text) for message_id, text in cursor.fetchall()]


def chat_newest_message_id() -> int:
    """The highest message id stored, hidden or not; 0 while there is none."""
    newest = ChatMessage.objects.order_by("-id").values_list("id", flat=True).first()
    return newest or 0
