from __future__ import annotations

from urllib.parse import quote

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agentplatform.plumbing.json_bodies import StrictCharField, StrictRegexField
from brandassets.models import BrandAsset
from brandassets.registry import NAME_PATTERN
from groundtruth.ingest.git_access import blob_url

_NAME_HELP = "lower-case letters, digits, '-' and '_'"


_NAME_ERRORS = dict.fromkeys(("invalid", "blank", "max_length"), f"must be 1-64 characters of {_NAME_HELP}")


class AssetQuerySerializer(serializers.Serializer):
    product = StrictRegexField(
        NAME_PATTERN, required=False, max_length=64, error_messages=_NAME_ERRORS, help_text=f"a product ({_NAME_HELP})"
    )
    kind = StrictRegexField(
        NAME_PATTERN, required=False, max_length=64, error_messages=_NAME_ERRORS, help_text=f"a kind ({_NAME_HELP})"
    )
    q = StrictCharField(
        required=False,
        max_length=200,
        trim_whitespace=True,
        allow_blank=True,
        help_text="free text: every word must occur in the product, kind, path or description",
    )


class BrandAssetSerializer(serializers.ModelSerializer):
    """An asset record: the spec's field names (camelCase) plus the registry's metadata."""

    assetIndex = serializers.IntegerField(source="asset_index")  # the spec's wire names are camelCase
    blobUrl = serializers.SerializerMethodField()
    contentUrl = serializers.SerializerMethodField()
    format = serializers.SerializerMethodField()
    theme = serializers.SerializerMethodField()
    description = serializers.SerializerMethodField()

    class Meta:
        model = BrandAsset
        fields = [
            "product",
            "kind",
            "assetIndex",
            "repo",
            "path",
            "ref",
            "blobUrl",
            "contentUrl",
            "format",
            "theme",
            "width",
            "height",
            "description",
        ]

    @extend_schema_field({"type": "string", "format": "uri", "nullable": True})
    def get_blobUrl(self, asset: BrandAsset) -> str | None:
        """The file at its registered ref in its repository's web view; null for repos with no
        web address (local and file:// repos without `web_url` in the registry)."""
        return blob_url(asset.web_url or asset.repo_url, asset.ref, quote(asset.path))

    @extend_schema_field(OpenApiTypes.URI)
    def get_contentUrl(self, asset: BrandAsset) -> str:
        path = reverse("asset-content", args=[asset.product, asset.kind, asset.asset_index])
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request is not None else path

    @extend_schema_field({"type": "string", "nullable": True, "example": "svg"})
    def get_format(self, asset: BrandAsset) -> str | None:
        return asset.format or None

    @extend_schema_field({"type": "string", "nullable": True, "enum": ["light", "dark", None]})
    def get_theme(self, asset: BrandAsset) -> str | None:
        return asset.theme or None

    @extend_schema_field({"type": "string", "nullable": True})
    def get_description(self, asset: BrandAsset) -> str | None:
        return asset.description or None


class AssetProductSerializer(serializers.Serializer):
    product = serializers.CharField()
    kinds = serializers.ListField(child=serializers.CharField())
    assetCount = serializers.IntegerField(source="asset_count")


class AssetKindSerializer(serializers.Serializer):
    kind = serializers.CharField()
    products = serializers.ListField(child=serializers.CharField())
    assetCount = serializers.IntegerField(source="asset_count")
