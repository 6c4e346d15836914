"""The brand-asset tools of the MCP server (agentplatform/mcp_app.py): find_brand_assets and
fetch_brand_asset.

They call the selectors and services of the /assets endpoints and describe an asset with the
endpoints' serializer (its contentUrl pointing at the web tier, WEB_BASE_URL), so that a record
reads as GET /assets gives it. An asset's bytes come back as MCP image content when the asset is
a raster image of at most MCP_IMAGE_MAX_BYTES; anything else (SVG, fonts, larger images) as a
resource link to its contentUrl, which needs the same service key.
"""

from __future__ import annotations

import base64
import json
from typing import Annotated, Any

from django.conf import settings
from django.db.models import QuerySet
from mcp_types import ContentBlock, ImageContent, ResourceLink, TextContent
from pydantic import Field

from agentplatform.plumbing.mcp_tool_calls import WebTierRequest, arguments_validated, django_tool, tool_caller
from brandassets import selectors, services
from brandassets.registry import content_type_for
from brandassets.serializers import AssetQuerySerializer, BrandAssetSerializer
from groundtruth.models import Repository
from groundtruth.selectors import repository_visible_queryset

# What MCP clients show as images; SVG is a document (it could carry script), so it is linked.
IMAGE_CONTENT_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})

Name = Annotated[str, Field(description="Lower-case letters, digits, '-' and '_'.", max_length=64)]


def _visible() -> QuerySet[Repository] | None:
    """The repositories whose assets the calling key sees: None (all) for an unscoped key."""
    caller = tool_caller()
    if getattr(caller, "repository_scope", None) is None:
        return None
    return repository_visible_queryset(viewer=caller)


@django_tool
def find_brand_assets(
    product: Annotated[Name | None, Field(description="Only this product's assets.")] = None,
    kind: Annotated[Name | None, Field(description="Only assets of this kind (logo, icon, font, ...).")] = None,
    q: Annotated[
        str | None,
        Field(description="Free text: every word must occur in product, kind, path or description.", max_length=200),
    ] = None,
) -> dict[str, Any]:
    """Find brand assets (logos, icons, fonts, ...) of the registry (as GET /assets): product,
    kind, assetIndex, repo, path, ref, format, theme, size in pixels, description, and
    contentUrl. Get an asset's content with fetch_brand_asset(product, kind, assetIndex)."""
    query = {name: value for name, value in {"product": product, "kind": kind, "q": q}.items() if value is not None}
    assets = selectors.asset_list(**arguments_validated(AssetQuerySerializer, query), visible=_visible())
    return {"assets": BrandAssetSerializer(assets, many=True, context={"request": WebTierRequest()}).data}


@django_tool
def fetch_brand_asset(
    product: Name,
    kind: Name,
    asset_index: Annotated[int, Field(description="The asset's assetIndex from find_brand_assets.", ge=0)],
) -> list[ContentBlock]:
    """The content of one brand asset: its record as JSON text, then the image itself for a PNG,
    JPEG, GIF or WebP image up to MCP_IMAGE_MAX_BYTES, or else a link to its contentUrl (fetch it
    with the same service key as a Bearer token)."""
    asset = selectors.asset_get_for_content(product=product, kind=kind, asset_index=asset_index, visible=_visible())
    record = BrandAssetSerializer(asset, context={"request": WebTierRequest()}).data
    content_type = content_type_for(format=asset.format, path=asset.path)
    description: list[ContentBlock] = [TextContent(text=json.dumps(record))]
    if content_type in IMAGE_CONTENT_TYPES and asset.size is not None and asset.size <= settings.MCP_IMAGE_MAX_BYTES:
        data = services.asset_content_fetch(asset=asset)
        return [*description, ImageContent(data=base64.b64encode(data).decode("ascii"), mime_type=content_type)]
    return [
        *description,
        ResourceLink(
            uri=record["contentUrl"],
            name=f"{asset.product}/{asset.kind}/{asset.asset_index}",
            description=record["description"],
            mime_type=content_type,
            size=asset.size,
        ),
    ]


BRAND_ASSET_TOOLS = (find_brand_assets, fetch_brand_asset)
