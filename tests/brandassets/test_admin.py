"""The admin: browse by product and kind with previews, missing assets flagged, sync now."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.contrib.messages import get_messages

from brandassets.models import AssetRegistry, BrandAsset
from brandassets.services import asset_registry_sync
from tests.brandassets.conftest import BrandFixture

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(client):
    client.force_login(User.objects.create_superuser("admin", "admin@example.invalid", "pw"))
    return client


def test_changelist_shows_previews_through_the_content_endpoint_and_flags_missing(staff_client, brand_repos):
    brand_repos.registry_commit(brand_repos.default_registry_text().replace("logos/acme-dark.svg", "logos/gone.svg"))
    asset_registry_sync()

    page = staff_client.get("/admin/brandassets/brandasset/?product=acme-app&kind=logo").content.decode()

    assert '<img src="/assets/acme-app/logo/0/content"' in page
    assert "background:#f1f3f5" in page
    assert "/assets/acme-app/logo/1/content" not in page
    assert '<strong style="color:#c92a2a">missing</strong>: path not found at ref' in page
    assert "1 listed asset missing" in page
    assert "logos/acme-docs.svg" not in page  # filtered to acme-app logos


def test_preview_image_loads_with_the_staff_session(staff_client, synced):
    response = staff_client.get("/assets/acme-app/logo/0/content")

    assert response.status_code == 200
    assert response["Content-Type"] == "image/svg+xml"


def test_non_image_assets_get_a_download_link(staff_client, synced):
    page = staff_client.get("/admin/brandassets/brandasset/?kind=font").content.decode()

    assert '<a href="/assets/acme-app/font/0/content">download</a>' in page


def test_sync_now_runs_a_sync_and_reports_it(staff_client, brand_repos):
    response = staff_client.post("/admin/brandassets/brandasset/sync/")

    assert response.status_code == 302
    assert response["Location"] == "/admin/brandassets/brandasset/"
    assert BrandAsset.objects.count() == 8
    messages = [str(message) for message in get_messages(response.wsgi_request)]
    assert len(messages) == 1
    assert messages[0].endswith(": 8 listed, 8 served, 0 missing.")


def test_sync_now_with_an_invalid_registry_shows_the_errors_and_keeps_assets(staff_client, brand_repos: BrandFixture):
    asset_registry_sync()
    brand_repos.registry_commit("products: {acme-app: {logo: [{repo: acme/brand}]}}\n")

    response = staff_client.post("/admin/brandassets/brandasset/sync/", follow=True)

    page = response.content.decode()
    assert "is invalid; the last good registry stays in use." in page
    assert "brand-assets.yml:1: products.acme-app.logo[0]: missing required key &#x27;path&#x27;" in page
    assert BrandAsset.objects.count() == 8


def test_sync_url_refuses_get(staff_client, brand_repos):
    assert staff_client.get("/admin/brandassets/brandasset/sync/").status_code == 405
    assert BrandAsset.objects.count() == 0


def test_non_staff_cannot_sync(client, brand_repos):
    client.force_login(User.objects.create_user("member", password="pw"))

    response = client.post("/admin/brandassets/brandasset/sync/")

    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")
    assert BrandAsset.objects.count() == 0


def test_registry_admin_action_syncs(staff_client, synced):
    registry = AssetRegistry.objects.get()
    BrandAsset.objects.all().delete()

    response = staff_client.post(
        "/admin/brandassets/assetregistry/",
        {"action": "sync_now", "_selected_action": [registry.pk]},
    )

    assert response.status_code == 302
    assert BrandAsset.objects.count() == 8


def test_assets_are_read_only_in_the_admin(staff_client, synced):
    asset = BrandAsset.objects.get(product="acme-docs")

    assert staff_client.get("/admin/brandassets/brandasset/add/").status_code == 403
    assert staff_client.post(f"/admin/brandassets/brandasset/{asset.pk}/delete/", {"post": "yes"}).status_code == 403
    detail = staff_client.get(f"/admin/brandassets/brandasset/{asset.pk}/change/")
    assert detail.status_code == 200
    assert BrandAsset.objects.filter(pk=asset.pk).exists()
