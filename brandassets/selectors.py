"""Reads of the brand asset registry. The API only ever sees served assets (not missing).

Every read takes `visible`: the repositories the caller may see (groundtruth.selectors
.repository_visible_queryset; None: all). An asset of a repository outside it is answered
exactly as one that does not exist, and counts nothing: a key limited to some repositories
learns nothing about the others' assets."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.postgres.aggregates import ArrayAgg
from django.db.models import Count, Q, QuerySet

from agentplatform.plumbing.errors import NotFound
from brandassets.content_cache import asset_record_cache
from brandassets.models import BrandAsset
from groundtruth.models import Repository

# PostgreSQL integer columns end here; a larger index cannot exist and is not sent to the database.
MAX_ASSET_INDEX = 2**31 - 1


def _visible_assets(visible: QuerySet[Repository] | None) -> QuerySet[BrandAsset]:
    assets = BrandAsset.objects.all()
    if visible is not None:
        assets = assets.filter(repo__in=visible.values("name"))
    return assets


def served_assets(*, visible: QuerySet[Repository] | None = None) -> QuerySet[BrandAsset]:
    return _visible_assets(visible).filter(missing=False)


def asset_list(
    *, product: str = "", kind: str = "", q: str = "", visible: QuerySet[Repository] | None = None
) -> QuerySet[BrandAsset]:
    """Served assets (of `visible` repositories), optionally of one product and kind, matching
    every word of `q` in the product, kind, path or description (case-insensitive)."""
    assets = served_assets(visible=visible)
    if product:
        assets = assets.filter(product=product)
    if kind:
        assets = assets.filter(kind=kind)
    for word in q.split():
        assets = assets.filter(
            Q(product__icontains=word)
            | Q(kind__icontains=word)
            | Q(path__icontains=word)
            | Q(description__icontains=word)
        )
    return assets.order_by("product", "kind", "asset_index")


def asset_products(*, visible: QuerySet[Repository] | None = None) -> list[dict[str, Any]]:
    """Each product with served assets, its kinds and its asset count, by product name."""
    rows = (
        served_assets(visible=visible)
        .values("product")
        .annotate(kinds=ArrayAgg("kind", distinct=True, order_by="kind"), asset_count=Count("id"))
        .order_by("product")
    )
    return list(rows)


def asset_kinds(*, visible: QuerySet[Repository] | None = None) -> list[dict[str, Any]]:
    """Each kind with served assets, the products that have it and its asset count, by kind."""
    rows = (
        served_assets(visible=visible)
        .values("kind")
        .annotate(products=ArrayAgg("product", distinct=True, order_by="product"), asset_count=Count("id"))
        .order_by("kind")
    )
    return list(rows)


def _not_found_detail(*, product: str, kind: str, visible: QuerySet[Repository] | None) -> str | None:
    """Why there is nothing at /assets/<product>/<kind>, or None when that product has that kind."""
    assets = served_assets(visible=visible)
    if not assets.filter(product=product).exists():
        return f"No product '{product}' has assets. GET /assets/products lists the products."
    if not assets.filter(product=product, kind=kind).exists():
        kinds = sorted(set(assets.filter(product=product).values_list("kind", flat=True)))
        return f"Product '{product}' has no assets of kind '{kind}'; its kinds: {', '.join(kinds)}."
    return None


def asset_list_for_product_kind(
    *, product: str, kind: str, visible: QuerySet[Repository] | None = None
) -> list[BrandAsset]:
    """The served assets of one product and kind, by index; NotFound when there are none."""
    assets = list(asset_list(product=product, kind=kind, visible=visible))
    if not assets:
        raise NotFound(_not_found_detail(product=product, kind=kind, visible=visible) or "No such assets.")
    return assets


def asset_get(*, product: str, kind: str, asset_index: int, visible: QuerySet[Repository] | None = None) -> BrandAsset:
    """The asset at `asset_index` of a product and kind. NotFound when there is none there (or
    none `visible`) or when the registry lists it but its file is missing (never served)."""
    asset = None
    if 0 <= asset_index <= MAX_ASSET_INDEX:
        asset = _visible_assets(visible).filter(product=product, kind=kind, asset_index=asset_index).first()
    if asset is not None and asset.missing:
        raise NotFound(
            f"Asset {asset_index} of {product}/{kind} is listed in the registry but its file is missing "
            "at its ref; it is not served until the registry or the repository is fixed.",
            code="asset_missing",
        )
    if asset is None:
        detail = _not_found_detail(product=product, kind=kind, visible=visible)
        if detail is None and visible is not None:
            # The indexes of a product and kind count the assets of every repository: no range
            # is given to a key that sees only some of them.
            detail = f"{product}/{kind} has no asset at index {asset_index}."
        elif detail is None:
            count = BrandAsset.objects.filter(product=product, kind=kind).count()
            detail = f"{product}/{kind} has no asset at index {asset_index}; its indexes run from 0 to {count - 1}."
        raise NotFound(detail)
    return asset


def asset_get_for_content(
    *, product: str, kind: str, asset_index: int, visible: QuerySet[Repository] | None = None
) -> BrandAsset:
    """asset_get() for the content endpoint, answered from the in-process record cache for up to
    ASSET_RECORD_CACHE_SECONDS (0: always from the database). A caller limited to some
    repositories (`visible` given) always asks the database: the cache holds unscoped answers."""
    if visible is not None:
        return asset_get(product=product, kind=kind, asset_index=asset_index, visible=visible)
    key = (product, kind, asset_index)
    ttl = settings.ASSET_RECORD_CACHE_SECONDS
    if ttl and (cached := asset_record_cache.get(key)) is not None:
        return cached
    asset = asset_get(product=product, kind=kind, asset_index=asset_index)
    if ttl:
        asset_record_cache.put(key, asset, ttl_seconds=ttl)
    return asset
