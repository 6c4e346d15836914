"""The landing page at `/`: what the service is, where its API docs, admin and health are, and the
two commands a newcomer runs. Plain server-rendered HTML; the admin's "View site" links here."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from agentplatform.health import health_report


def landing_page(request: HttpRequest) -> HttpResponse:
    # The report /health gives (computed here, the same cached probe): the page answers 200 even
    # while the database is down, saying so, since a person reading it wants to know that.
    report, serving = health_report()
    checks = report["checks"]
    assert isinstance(checks, dict)
    context = {
        "health_status": report["status"],
        "serving": serving,
        "checks": [{"name": name, **check} for name, check in checks.items()],
        "docs_url": reverse("docs"),
        "schema_url": reverse("schema"),
        "admin_url": reverse("admin:index"),
        "health_url": reverse("health"),
        "chat_live_url": reverse("chat-live"),
        "ground_truth_prefix": f"/{settings.GROUNDTRUTH_PREFIX}" if settings.GROUNDTRUTH_PREFIX else "",
        "coin_segment": settings.COIN_SEGMENT,
    }
    return render(request, "landing.html", context)
