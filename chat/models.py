"""The shared chat feed."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from agents.models import Agent

MESSAGE_MAX_LENGTH = 2000


class MessageType(models.TextChoices):
    CHAT = "chat", "Chat"
    STATUS = "status", "Status"
    TRADE = "trade", "Trade"
    SYSTEM = "system", "System"


# What an agent may post; `system` messages come from staff only (through the admin).
AGENT_MESSAGE_TYPES: tuple[str, ...] = (MessageType.CHAT, MessageType.STATUS, MessageType.TRADE)


class ChatMessage(models.Model):
    """One message of the feed, posted by an agent or, for `system` messages, by staff.

    `idempotency_key` and `request_fingerprint` remember an agent's `Idempotency-Key` header and
    the SHA-256 of the request it came with; the unique constraint makes concurrent retries
    with one key store one message.
    """

    agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.CASCADE, related_name="chat_messages")
    message = models.CharField(max_length=MESSAGE_MAX_LENGTH)
    message_type = models.CharField(max_length=16, choices=MessageType.choices, default=MessageType.CHAT)
    created_at = models.DateTimeField(default=timezone.now)
    hidden_at = models.DateTimeField(null=True, blank=True, editable=False)
    hidden_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, editable=False, related_name="+"
    )
    idempotency_key = models.CharField(max_length=255, blank=True, editable=False)
    request_fingerprint = models.CharField(max_length=64, blank=True, editable=False)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["agent", "idempotency_key"],
                condition=~Q(idempotency_key=""),
                name="chat_message_idempotency_key_unique_per_agent",
            ),
            # System messages have no agent; every other message has one.
            models.CheckConstraint(
                name="chat_message_sender_matches_type",
                condition=Q(message_type="system", agent__isnull=True)
                | (~Q(message_type="system") & Q(agent__isnull=False)),
            ),
        ]
        indexes = [
            # The feed: visible messages, newest first, paged by id.
            models.Index(fields=["-id"], condition=Q(hidden_at__isnull=True), name="chat_message_visible_feed"),
            models.Index(fields=["agent", "-id"], name="chat_message_agent_recent"),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.message_type}: {self.message[:40]}"

    @property
    def is_hidden(self) -> bool:
        return self.hidden_at is not None
