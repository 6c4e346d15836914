from __future__ import annotations

import factory

from chat.models import ChatMessage, MessageType
from tests.agents.factories import AgentFactory


class ChatMessageFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ChatMessage

    agent = factory.SubFactory(AgentFactory)
    message = factory.Sequence(lambda n: f"message {n}")
    message_type = MessageType.CHAT
