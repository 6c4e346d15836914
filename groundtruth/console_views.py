"""The staff console's ground-truth pages, served inside the admin (agentplatform/admin_site.py
adds `console_urls`): "Ask the docs", an ingest run's live progress, and "Re-ingest now".

Plain Django views, not the API's viewsets: a staff session is the only credential, answers are
HTML pages (and one JSON document for the progress poll), and the admin's sign-in guards them.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from agentplatform.plumbing.errors import ApplicationError, problem_response
from groundtruth import selectors, services
from groundtruth.ingest.runs import ingest_runs_stale_clear
from groundtruth.models import IngestTrigger
from groundtruth.search.inspection import passages_with_source_urls, question_inspect, repository_choices
from groundtruth.search_serializers import (
    QUERY_MAX_CHARS,
    SEARCH_LIMIT_DEFAULT,
    SEARCH_LIMIT_MAX,
    AskResponseSerializer,
)
from groundtruth.serializers import IngestRunSerializer


class AskConsoleForm(forms.Form):
    """The question of both /ask and /search, so it is held to the shorter limit (/search's)."""

    q = forms.CharField(
        label="Question",
        max_length=QUERY_MAX_CHARS,
        strip=True,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 80}),
    )
    repo = forms.MultipleChoiceField(
        label="Repositories",
        required=False,
        help_text="None selected: every enabled repository, as /ask and /search search without a scope.",
    )
    limit = forms.IntegerField(
        label="Search results",
        min_value=1,
        max_value=SEARCH_LIMIT_MAX,
        required=False,
        help_text=f"How many /search results, 1 to {SEARCH_LIMIT_MAX} (default {SEARCH_LIMIT_DEFAULT}).",
    )

    def __init__(self, *args: Any, repositories: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        repo_field = self.fields["repo"]
        assert isinstance(repo_field, forms.MultipleChoiceField)
        repo_field.choices = [(name, name) for name in repositories]
        repo_field.widget.attrs["size"] = min(max(len(repositories), 2), 8)


def ask_console(request: HttpRequest, *, site: admin.AdminSite) -> HttpResponse:
    """GET only, so that a result's URL can be shared. No question: the empty form."""
    form = AskConsoleForm(request.GET if "q" in request.GET else None, repositories=repository_choices())
    context: dict[str, Any] = {**site.each_context(request), "title": "Ask the docs", "form": form}
    if not form.is_bound:
        return TemplateResponse(request, "admin/console/ask.html", context)
    if not form.is_valid():
        return TemplateResponse(request, "admin/console/ask.html", context, status=400)
    data = form.cleaned_data
    try:
        inspection = question_inspect(
            question=data["q"],
            repository_names=data["repo"] or None,
            search_limit=data["limit"] or SEARCH_LIMIT_DEFAULT,
        )
    except ApplicationError as exc:
        # A repository disabled between the form's choices and the search.
        form.add_error(None, exc.detail)
        return TemplateResponse(request, "admin/console/ask.html", context, status=exc.status)
    context["inspection"] = passages_with_source_urls(inspection, request=request)
    ask = AskResponseSerializer(inspection.ask, context={"request": request}).data
    context["ask_json"] = json.dumps(ask, indent=2, ensure_ascii=False)
    return TemplateResponse(request, "admin/console/ask.html", context)


@never_cache
@require_GET
def ingest_run_progress(request: HttpRequest, run_id: int) -> HttpResponse:
    """The run as GET /ingest/runs/{id} shows it, for the run page's progress bar to poll.

    Not the API path itself: a poll a second from a staff browser would spend the IP's public
    rate limit. A JSON client gets a 403 problem rather than the admin's sign-in redirect."""
    user = getattr(request, "user", None)
    if user is None or not (user.is_active and user.is_staff):
        return problem_response(status=403, code="forbidden", detail="A signed-in staff session is required.")
    ingest_runs_stale_clear()
    try:
        run = selectors.ingest_run_get(run_id=run_id)
    except ApplicationError as exc:
        return problem_response(status=exc.status, code=exc.code, detail=exc.detail)
    return JsonResponse(IngestRunSerializer(run).data)


@require_POST
def ingest_run_repeat(request: HttpRequest, run_id: int) -> HttpResponse:
    """The "Re-ingest now" button of a run's page: a run of the same repository at the registry's
    ref (or its active run, when one is queued or running), then that run's page."""
    try:
        run = selectors.ingest_run_get(run_id=run_id)
    except ApplicationError as exc:
        raise Http404(exc.detail) from exc
    try:
        [item] = services.ingest_request(repository_name=run.repository.name, ref=None, trigger=IngestTrigger.ADMIN)
    except ApplicationError as exc:
        details = "; ".join(error["message"] for error in exc.errors or [])
        messages.error(request, f"{run.repository.name}: {exc.detail} {details}".strip())
        return HttpResponseRedirect(reverse("admin:groundtruth_ingestrun_change", args=[run.pk]))
    verb = "queued as" if item.created else "already has"
    messages.success(request, f"{run.repository.name}: {verb} run {item.run.pk} ({item.run.status})")
    return HttpResponseRedirect(reverse("admin:groundtruth_ingestrun_change", args=[item.run.pk]))


def console_urls(site: admin.AdminSite) -> list[URLPattern]:
    """The console's routes under the admin, each behind the admin's staff sign-in."""

    def ask(request: HttpRequest) -> HttpResponse:
        return ask_console(request, site=site)

    return [
        path("console/ask/", site.admin_view(require_GET(ask)), name="console_ask"),
        # Its own staff check: a poll must get JSON, not the sign-in page.
        path("console/ingest-runs/<int:run_id>/progress/", ingest_run_progress, name="console_ingest_run_progress"),
        path(
            "console/ingest-runs/<int:run_id>/reingest/",
            site.admin_view(ingest_run_repeat),
            name="console_ingest_run_repeat",
        ),
    ]
