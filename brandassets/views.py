"""The /assets endpoints: brand asset records, and their bytes (stored in the database by the sync).

Private like every ground-truth endpoint but /health: a service key with scope `read`, or a
signed-in staff session (which is how the admin's previews load their images).
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from django.http import HttpResponse
from django.utils.http import parse_etags
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import viewsets
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from agentplatform.plumbing.authentication import SERVICE_AUTHENTICATION_CLASSES, SERVICE_OPENAPI_SECURITY
from agentplatform.plumbing.errors import InvalidInput, NotFound, problem_responses
from agentplatform.plumbing.permissions import HasServiceReadScope
from agentplatform.plumbing.query_params import query_validated
from agentplatform.plumbing.ratelimits import RateLimitedViewMixin
from brandassets import selectors, services
from brandassets.models import BrandAsset
from brandassets.registry import NAME_PATTERN, content_type_for
from brandassets.renderers import AnyMediaTypeRenderer
from brandassets.serializers import (
    AssetKindSerializer,
    AssetProductSerializer,
    AssetQuerySerializer,
    BrandAssetSerializer,
)
from groundtruth.models import Repository
from groundtruth.selectors import repository_visible_queryset

_PROBLEM_DESCRIPTIONS = {
    400: "Invalid query parameter or asset index (the allowed values are named).",
    404: "Unknown product, kind or asset index, or an asset whose file is missing at its ref.",
    503: "The asset's bytes are not stored yet (the next sync of the registry stores them).",
}


def _problems(*statuses: int) -> dict[tuple[int, str], Any]:
    """Problem responses of these views; 401, 403 and 429 are added by the schema class."""
    return problem_responses({status: _PROBLEM_DESCRIPTIONS[status] for status in statuses})


PRODUCT_PARAMETER = OpenApiParameter("product", OpenApiTypes.STR, OpenApiParameter.PATH, description="a product name")
KIND_PARAMETER = OpenApiParameter("kind", OpenApiTypes.STR, OpenApiParameter.PATH, description="an asset kind")
# An asset index in the URL: a non-negative decimal integer, nothing else (no sign, no spaces).
_INDEX_PATTERN = re.compile(r"^[0-9]+\Z")


def _named_segment(value: str, what: str) -> str:
    """A product or kind from the URL. Names outside the registry's alphabet cannot exist (so
    `..`, encoded separators and the like end here, as an unknown name)."""
    if not NAME_PATTERN.match(value):
        raise NotFound(f"No {what} '{value[:64]}'. GET /assets/{what}s lists the {what}s.")
    return value


def _visible(request: Request) -> QuerySet[Repository] | None:
    """The repositories whose assets the caller sees: None (all) for an unscoped key or staff."""
    if getattr(request.user, "repository_scope", None) is None:
        return None
    return repository_visible_queryset(viewer=request.user)


class BrandAssetViewSet(RateLimitedViewMixin, viewsets.GenericViewSet):
    """Brand asset records resolved from brand-assets.yml."""

    authentication_classes = SERVICE_AUTHENTICATION_CLASSES
    permission_classes = [HasServiceReadScope]
    serializer_class = BrandAssetSerializer
    pagination_class = None

    @extend_schema(
        operation_id="assets_list",
        summary="List brand assets",
        description=(
            "Every served asset of the registry (missing ones are never listed), ordered by product, kind "
            "and assetIndex. `q` matches each of its words against product, kind, path and description."
        ),
        parameters=[AssetQuerySerializer],
        responses={200: BrandAssetSerializer(many=True), **_problems(400)},
        auth=SERVICE_OPENAPI_SECURITY,
    )
    def list(self, request: Request) -> Response:
        assets = selectors.asset_list(**query_validated(AssetQuerySerializer, request), visible=_visible(request))
        return Response(BrandAssetSerializer(assets, many=True, context={"request": request}).data)

    @extend_schema(
        operation_id="assets_products",
        summary="Products that have assets",
        responses={200: AssetProductSerializer(many=True)},
        auth=SERVICE_OPENAPI_SECURITY,
    )
    def products(self, request: Request) -> Response:
        return Response(AssetProductSerializer(selectors.asset_products(visible=_visible(request)), many=True).data)

    @extend_schema(
        operation_id="assets_kinds",
        summary="Kinds of asset",
        description="Every kind some product has served assets of, with those products.",
        responses={200: AssetKindSerializer(many=True)},
        auth=SERVICE_OPENAPI_SECURITY,
    )
    def kinds(self, request: Request) -> Response:
        return Response(AssetKindSerializer(selectors.asset_kinds(visible=_visible(request)), many=True).data)

    @extend_schema(
        operation_id="assets_of_product_kind",
        summary="Assets of one product and kind",
        parameters=[PRODUCT_PARAMETER, KIND_PARAMETER],
        responses={200: BrandAssetSerializer(many=True), **_problems(404)},
        auth=SERVICE_OPENAPI_SECURITY,
    )
    def of_product_kind(self, request: Request, product: str, kind: str) -> Response:
        product, kind = _named_segment(product, "product"), _named_segment(kind, "kind")
        assets = selectors.asset_list_for_product_kind(product=product, kind=kind, visible=_visible(request))
        return Response(BrandAssetSerializer(assets, many=True, context={"request": request}).data)


class AssetContentResponse(HttpResponse):
    """The bytes of one asset with the headers a browser or CDN needs to use them safely."""

    def __init__(self, *, asset: BrandAsset, data: bytes | None) -> None:
        super().__init__(data if data is not None else b"", status=200 if data is not None else 304)
        content_type = content_type_for(format=asset.format, path=asset.path)
        if data is not None:
            self["Content-Type"] = content_type
            self["Content-Length"] = str(len(data))
            filename = re.sub(r"[^A-Za-z0-9._-]", "_", posixpath.basename(asset.path))
            self["Content-Disposition"] = f'inline; filename="{filename}"'
        else:
            del self["Content-Type"]
        self["ETag"] = f'"{asset.blob_sha}"'
        # private: the endpoint needs credentials, so shared caches must not keep the bytes.
        self["Cache-Control"] = f"private, max-age={settings.ASSET_CONTENT_MAX_AGE_SECONDS}"
        self["X-Content-Type-Options"] = "nosniff"
        if content_type == "image/svg+xml":
            # An SVG opened directly is a document that could run script: sandbox it.
            self["Content-Security-Policy"] = "sandbox"


def _etag_matches(if_none_match: str, blob_sha: str) -> bool:
    if not if_none_match:
        return False
    if if_none_match.strip() == "*":
        return True
    # Weak comparison (RFC 9110 13.1.2): W/"x" matches "x".
    return blob_sha in {tag.removeprefix("W/").strip('"') for tag in parse_etags(if_none_match)}


class BrandAssetContentViewSet(RateLimitedViewMixin, viewsets.GenericViewSet):
    """The raw bytes of one asset at its registered ref, as the sync stored them (private repos too)."""

    authentication_classes = SERVICE_AUTHENTICATION_CLASSES
    permission_classes = [HasServiceReadScope]
    renderer_classes = [JSONRenderer, AnyMediaTypeRenderer]

    @extend_schema(
        operation_id="assets_content",
        summary="Raw content of one asset",
        description=(
            "The asset's bytes at its registered ref (stored by the registry's sync), with Content-Type from "
            "the registry's format or the file name, Content-Length, an ETag (the git blob SHA; If-None-Match gives "
            "304) and "
            "Cache-Control. SVG comes with `Content-Security-Policy: sandbox`; every response with "
            "`X-Content-Type-Options: nosniff`. assetIndex must be a non-negative integer written in digits "
            "(anything else, a sign included, is 400); an integer with no asset there is 404."
        ),
        parameters=[
            PRODUCT_PARAMETER,
            KIND_PARAMETER,
            OpenApiParameter(
                "asset_index",
                {"type": "integer", "minimum": 0},
                OpenApiParameter.PATH,
                description="position among the assets of the product and kind, from 0",
            ),
            OpenApiParameter("If-None-Match", OpenApiTypes.STR, OpenApiParameter.HEADER, required=False),
        ],
        responses={
            (200, "*/*"): OpenApiResponse(response=OpenApiTypes.BINARY, description="The asset's bytes."),
            304: OpenApiResponse(description="Not modified: the ETag matched If-None-Match."),
            **_problems(400, 404, 503),
        },
        auth=SERVICE_OPENAPI_SECURITY,
    )
    def content(self, request: Request, product: str, kind: str, asset_index: str) -> HttpResponse:
        product, kind = _named_segment(product, "product"), _named_segment(kind, "kind")
        if not _INDEX_PATTERN.match(asset_index):
            raise InvalidInput.for_field("assetIndex", "must be a non-negative integer (0, 1, 2, ...)")
        # A number too long to be an index is simply not one: the selector answers 404 for it.
        index = int(asset_index) if len(asset_index) <= 12 else selectors.MAX_ASSET_INDEX + 1
        asset = selectors.asset_get_for_content(
            product=product, kind=kind, asset_index=index, visible=_visible(request)
        )
        if _etag_matches(request.headers.get("If-None-Match", ""), asset.blob_sha):
            return AssetContentResponse(asset=asset, data=None)
        return AssetContentResponse(asset=asset, data=services.asset_content_fetch(asset=asset))
