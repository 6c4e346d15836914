from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents"

    def ready(self) -> None:
        from agentplatform.plumbing.cache_generations import CREDENTIALS, RESPONSES, bump_on_change
        from agents.models import Agent, ApiKey, WalletSession

        bump_on_change(RESPONSES, Agent)
        bump_on_change(CREDENTIALS, ApiKey, WalletSession, on_create=False)
