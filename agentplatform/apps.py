from django.apps import AppConfig


class AgentPlatformConfig(AppConfig):
    name = "agentplatform"
    verbose_name = "Platform"
