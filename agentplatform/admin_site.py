"""The admin site, with sign-in attempts limited per client IP and per user name, and the staff
console's pages (groundtruth/console_views.py: "Ask the docs", an ingest run's live progress).

`agentplatform.apps.ThrottledAdminConfig` (in INSTALLED_APPS in place of `django.contrib.admin`)
makes it the default `admin.site`, so every app's `@admin.register` lands here.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, URLResolver

from agentplatform.plumbing.ratelimits import AdminLoginRefusal, admin_login_attempt_count
from groundtruth.console_views import console_urls


class ThrottledAdminSite(admin.AdminSite):
    site_header = "Agent platform and ground truth"
    site_title = "Agent platform admin"
    index_title = "Back office"
    site_url = "/"  # "View site": the landing page (agentplatform/landing.py)
    # The model list beside every page took 290 of 1400 pixels from the change lists; the index and
    # the breadcrumbs lead to every model.
    enable_nav_sidebar = False

    def get_urls(self) -> list[URLPattern | URLResolver]:
        # The staff console's pages (linked from the index, templates/admin/index.html) come
        # before the admin's own patterns, whose `<app_label>/` would otherwise be tried first.
        return [*console_urls(self), *super().get_urls()]

    def login(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        """Past RATE_LIMIT_ADMIN_LOGIN attempts the answer is a 429 page, and the password is not
        even checked: a guess there learns nothing."""
        if request.method == "POST":
            refusal = admin_login_attempt_count(request)
            if refusal is not None:
                return self.login_refused(request, refusal)
        return super().login(request, extra_context)

    def login_refused(self, request: HttpRequest, refusal: AdminLoginRefusal) -> HttpResponse:
        seconds = refusal.retry_after_seconds
        context = {
            **self.each_context(request),
            "title": "Too many sign-in attempts",
            "message": (
                f"Too many sign-in attempts for this {refusal.counted_by}. "
                f"Try again in {seconds} second{'s' if seconds != 1 else ''}."
            ),
        }
        response = TemplateResponse(request, "admin/login_throttled.html", context, status=429)
        response["Retry-After"] = str(seconds)
        return response
