"""The audit of questions in the admin: read-only, filterable by key, repository and sources
missing, with the most frequent unanswered questions per repository under the list.

Registered by an import in groundtruth/admin.py.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse

from agentplatform.plumbing.admin_display import moment_text
from groundtruth.models import AskedQuestion, Repository
from groundtruth.question_audit import unanswered_questions_frequent


class KeyFilter(admin.SimpleListFilter):
    title = "key"
    parameter_name = "key"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        prefixes = AskedQuestion.objects.order_by("key_prefix").values_list("key_prefix", flat=True).distinct()
        return [(prefix, prefix) for prefix in prefixes]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        return queryset.filter(key_prefix=self.value()) if self.value() else queryset


class RepositoryFilter(admin.SimpleListFilter):
    title = "repository"
    parameter_name = "repository"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [(name, name) for name in Repository.objects.order_by("name").values_list("name", flat=True)]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        return queryset.filter(repositories__contains=[self.value()]) if self.value() else queryset


@admin.register(AskedQuestion)
class AskedQuestionAdmin(admin.ModelAdmin):
    list_display = ["asked", "key_prefix", "via", "question", "repository_list", "sources_missing"]
    list_filter = [KeyFilter, RepositoryFilter, "sources_missing", "via"]
    search_fields = ["question"]
    date_hierarchy = "asked_at"

    @admin.display(description="asked (UTC)", ordering="asked_at")
    def asked(self, record: AskedQuestion) -> str:
        return moment_text(record.asked_at)

    @admin.display(description="repositories")
    def repository_list(self, record: AskedQuestion) -> str:
        return ", ".join(record.repositories) or "—"

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        context = {
            **(extra_context or {}),
            "unanswered": unanswered_questions_frequent(),
            "retention_days": settings.QUESTION_AUDIT_RETENTION_DAYS,
        }
        return super().changelist_view(request, extra_context=context)

    # A record of what was asked: nobody adds or edits one by hand (the purge deletes them).
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
