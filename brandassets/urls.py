"""The /assets routes. Explicit paths: the spec's layout is not a router's.

Path segments are matched as opaque strings and checked by the views, so that a malformed
product, kind or index answers a problem (404 or 400) rather than falling through to another
route.
"""

from django.urls import path

from brandassets.views import BrandAssetContentViewSet, BrandAssetViewSet

urlpatterns = [
    path("assets", BrandAssetViewSet.as_view({"get": "list"}), name="asset-list"),
    path("assets/products", BrandAssetViewSet.as_view({"get": "products"}), name="asset-products"),
    path("assets/kinds", BrandAssetViewSet.as_view({"get": "kinds"}), name="asset-kinds"),
    path(
        "assets/<str:product>/<str:kind>",
        BrandAssetViewSet.as_view({"get": "of_product_kind"}),
        name="asset-product-kind",
    ),
    path(
        "assets/<str:product>/<str:kind>/<str:asset_index>/content",
        BrandAssetContentViewSet.as_view({"get": "content"}),
        name="asset-content",
    ),
]
