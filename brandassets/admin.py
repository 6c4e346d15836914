"""Staff browse brand assets by product and kind with previews, see missing ones flagged and
trigger a sync. Everything here is read-only: brand-assets.yml in the registry repo is the
source of truth, and a sync is the only way rows change."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.urls import path, reverse
from django.utils.html import format_html

from brandassets.models import AssetRegistry, BrandAsset
from brandassets.registry import IMAGE_FORMATS
from brandassets.services import SyncReport, asset_registry_sync
from groundtruth.registry_files import registry_location


def _report_to_messages(request: HttpRequest, report: SyncReport) -> None:
    head, *details = report.lines()
    if not report.ok:
        level = messages.ERROR
    else:
        level = messages.WARNING if report.missing or report.warnings else messages.SUCCESS
    messages.add_message(request, level, head)
    for line in details:
        messages.add_message(request, messages.ERROR if not report.ok else messages.WARNING, line.strip())


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(BrandAsset)
class BrandAssetAdmin(ReadOnlyAdmin):
    list_display = [
        "preview",
        "product",
        "kind",
        "asset_index",
        "theme",
        "format",
        "path",
        "ref",
        "repo",
        "status",
    ]
    list_display_links = ["product", "kind", "asset_index"]
    list_filter = ["product", "kind", "missing", "theme", "format", "repo"]
    search_fields = ["product", "kind", "path", "description"]
    ordering = ["product", "kind", "asset_index"]
    readonly_fields = [
        "preview",
        "status",
        *[field.name for field in BrandAsset._meta.concrete_fields if field.name != "id"],
    ]
    list_per_page = 100

    @admin.display(description="preview")
    def preview(self, asset: BrandAsset) -> str:
        if asset.missing:
            return "—"
        url = reverse("asset-content", args=[asset.product, asset.kind, asset.asset_index])
        if asset.format in IMAGE_FORMATS:
            # Dark-theme artwork is drawn for dark backgrounds: preview it on one.
            background = "#212529" if asset.theme == "dark" else "#f1f3f5"
            return format_html(
                '<a href="{}"><img src="{}" alt="{}" style="max-height:48px;max-width:160px;'
                'padding:4px;background:{}"></a>',
                url,
                url,
                asset.path,
                background,
            )
        return format_html('<a href="{}">download</a>', url)

    @admin.display(description="status", ordering="missing")
    def status(self, asset: BrandAsset) -> str:
        if asset.missing:
            return format_html('<strong style="color:#c92a2a">missing</strong>: {}', asset.missing_reason)
        return format_html("served (blob {})", asset.blob_sha[:12])

    def get_urls(self) -> list[Any]:
        sync = path("sync/", self.admin_site.admin_view(self.sync_view), name="brandassets_brandasset_sync")
        return [sync, *super().get_urls()]

    def sync_view(self, request: HttpRequest) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.has_view_permission(request):
            messages.error(request, "You may not sync brand assets.")
        else:
            _report_to_messages(request, asset_registry_sync())
        return HttpResponseRedirect(reverse("admin:brandassets_brandasset_changelist"))

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        registry = AssetRegistry.objects.filter(location=registry_location(settings.BRAND_ASSETS_PATH)).first()
        context = {
            "asset_registry": registry,
            "missing_count": BrandAsset.objects.filter(missing=True).count(),
            **(extra_context or {}),
        }
        return super().changelist_view(request, extra_context=context)


@admin.register(AssetRegistry)
class AssetRegistryAdmin(ReadOnlyAdmin):
    list_display = ["location", "short_commit", "loaded_at", "last_sync_at", "last_sync_status", "has_error"]
    readonly_fields = [
        "location",
        "commit",
        "loaded_at",
        "last_sync_at",
        "last_error",
        "last_error_at",
        "content",
        "last_report",
    ]
    actions = ["sync_now"]

    @admin.display(description="commit")
    def short_commit(self, registry: AssetRegistry) -> str:
        return registry.commit[:12]

    @admin.display(description="last sync")
    def last_sync_status(self, registry: AssetRegistry) -> str:
        return registry.last_report.get("status", "")

    @admin.display(description="error", boolean=True)
    def has_error(self, registry: AssetRegistry) -> bool:
        return bool(registry.last_error)

    @admin.action(description="Sync brand assets now")
    def sync_now(self, request: HttpRequest, queryset: Any) -> None:
        _report_to_messages(request, asset_registry_sync())
