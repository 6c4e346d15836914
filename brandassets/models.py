from __future__ import annotations

from django.db import models


class AssetRegistry(models.Model):
    """The last good brand asset registry (brand-assets.yml) and the outcome of the last sync.

    One row per registry location. `content` is the raw YAML of the last valid load (what the
    stored assets were built from); an invalid file sets `last_error` and leaves the rest alone.
    """

    location = models.CharField(max_length=700, unique=True, help_text="registry repo, ref and file path")
    commit = models.CharField(max_length=64, blank=True, help_text="registry commit of the last good load")
    content = models.TextField(blank=True)
    loaded_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)
    last_sync_at = models.DateTimeField(null=True, blank=True)
    last_report = models.JSONField(default=dict, blank=True, help_text="the report of the last sync")

    class Meta:
        verbose_name = "brand asset registry"
        verbose_name_plural = "brand asset registries"

    def __str__(self) -> str:
        return self.location


class BrandAsset(models.Model):
    """One asset listed in brand-assets.yml, resolved at its ref by the last good sync.

    `asset_index` is the position among the assets of the same product and kind, in registry
    order. A `missing` asset is listed but its file could not be found at its ref: it is shown in
    the admin and the sync report, never served.
    """

    product = models.CharField(max_length=64)
    kind = models.CharField(max_length=64)
    asset_index = models.PositiveIntegerField()
    position = models.PositiveIntegerField(help_text="position in the whole registry file")
    repo = models.CharField(max_length=200, help_text="owner/name")
    repo_url = models.CharField(max_length=500, help_text="where the repo is fetched from")
    web_url = models.CharField(max_length=500, blank=True, help_text="web address for blob URLs")
    path = models.CharField(max_length=1000)
    ref = models.CharField(max_length=200)
    format = models.CharField(max_length=16, blank=True)
    theme = models.CharField(max_length=8, blank=True)
    width = models.PositiveIntegerField(null=True, blank=True)
    height = models.PositiveIntegerField(null=True, blank=True)
    description = models.TextField(blank=True)
    commit = models.CharField(max_length=64, blank=True, help_text="the commit the ref resolved to")
    blob_sha = models.CharField(max_length=64, blank=True)
    size = models.PositiveBigIntegerField(null=True, blank=True)
    missing = models.BooleanField(default=False)
    missing_reason = models.TextField(blank=True)
    synced_at = models.DateTimeField()

    class Meta:
        ordering = ["product", "kind", "asset_index"]
        constraints = [
            models.UniqueConstraint(fields=["product", "kind", "asset_index"], name="unique_brand_asset_index"),
        ]
        indexes = [models.Index(fields=["kind", "product"], name="brand_asset_kind_product")]

    def __str__(self) -> str:
        return f"{self.product}/{self.kind}/{self.asset_index} ({self.path})"


class AssetBlob(models.Model):
    """The bytes of a registered asset, once per git blob SHA, stored by the sync that resolved it
    (brandassets/services.py) so that the content endpoint reads them from the database on any web
    host, without git, its token or network egress. A row lives while a BrandAsset names its SHA;
    the sync deletes the others."""

    sha = models.CharField(max_length=64, primary_key=True)
    content = models.BinaryField()
    size = models.PositiveBigIntegerField(help_text="bytes")
    stored_at = models.DateTimeField()

    class Meta:
        db_table = "brandassets_asset_blob"

    def __str__(self) -> str:
        return f"asset blob {self.sha[:12]} ({self.size} bytes)"
