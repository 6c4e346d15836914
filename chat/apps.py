from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "chat"

    def ready(self) -> None:
        from agentplatform.plumbing.cache_generations import RESPONSES, bump_on_change
        from chat.models import ChatMessage

        bump_on_change(RESPONSES, ChatMessage)
