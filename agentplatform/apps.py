from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps


class AgentPlatformConfig(AppConfig):
    name = "agentplatform"
    verbose_name = "Platform"


class ThrottledAdminConfig(admin_apps.AdminConfig):
    """django.contrib.admin whose `admin.site` limits sign-in attempts (agentplatform/admin_site.py)."""

    default = False  # not the configuration of the `agentplatform` app itself
    default_site = "agentplatform.admin_site.ThrottledAdminSite"
