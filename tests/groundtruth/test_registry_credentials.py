"""A registry URL with credentials in it (`https://user:secret@host/...`) is refused, and the
secret never reaches a log line, a stored row, an admin page or an API answer: both registry files
are named by the one registry_location(), which leaves credentials out."""

from __future__ import annotations

import logging

import pytest
from django.contrib.auth.models import User

from brandassets.models import AssetRegistry
from brandassets.services import asset_registry_sync
from groundtruth.models import Registry
from groundtruth.registry_files import RegistryInvalid, registry_location
from groundtruth.services import registry_load
from tests.agents.factories import bearer, service_key

pytestmark = pytest.mark.django_db

SECRET = "s3cr3t-t0ken"
REGISTRY_URL = f"https://reader:{SECRET}@git.example.com:8443/acme/registry.git"
SHOWN = "https://git.example.com:8443/acme/registry.git"
REFUSAL = "credentials in the URL are not allowed; set GIT_HTTP_TOKEN instead"


@pytest.fixture(autouse=True)
def _registry_with_credentials(settings) -> None:
    settings.SOURCE_REGISTRY_REPO = REGISTRY_URL


@pytest.fixture
def staff_client(client):
    client.force_login(User.objects.create_superuser("admin", "admin@example.invalid", "pw"))
    return client


def test_both_registry_files_are_named_without_the_credentials():
    assert registry_location("sources.yml") == f"{SHOWN}@main:sources.yml"
    assert registry_location("brand-assets.yml") == f"{SHOWN}@main:brand-assets.yml"


def test_the_brand_asset_sync_refuses_it_and_no_log_line_or_row_holds_the_secret(caplog):
    caplog.set_level(logging.DEBUG)

    report = asset_registry_sync()

    assert (report.status, report.location) == ("failed", f"{SHOWN}@main:brand-assets.yml")
    assert report.errors == [f"git fetch refused for {SHOWN}: {REFUSAL}"]
    assert report.lines() == [
        f"Brand asset registry {SHOWN}@main:brand-assets.yml could not be read; the last good registry stays in use.",
        f"  error: git fetch refused for {SHOWN}: {REFUSAL}",
    ]
    assert [record.getMessage() for record in caplog.records] == report.lines()
    row = AssetRegistry.objects.get()
    assert SECRET not in f"{row.location} {row.last_error} {row.last_report}"


def test_the_sources_registry_load_refuses_it_and_no_log_line_or_row_holds_the_secret(caplog):
    caplog.set_level(logging.DEBUG)

    with pytest.raises(RegistryInvalid) as refused:
        registry_load()

    assert refused.value.errors == [f"SOURCE_REGISTRY_REPO: {REFUSAL}"]
    row = Registry.objects.get()
    assert (row.location, row.last_error) == (f"{SHOWN}@main:sources.yml", f"SOURCE_REGISTRY_REPO: {REFUSAL}")
    assert SECRET not in caplog.text


def test_no_admin_page_or_api_answer_shows_the_secret(staff_client, api_client):
    asset_registry_sync()
    with pytest.raises(RegistryInvalid):
        registry_load()
    synced_now = staff_client.post("/admin/brandassets/brandasset/sync/", follow=True)
    pages = {
        url: staff_client.get(url)
        for url in (
            "/admin/brandassets/brandasset/",
            "/admin/brandassets/assetregistry/",
            f"/admin/brandassets/assetregistry/{AssetRegistry.objects.get().pk}/change/",
            "/admin/groundtruth/registry/",
            f"/admin/groundtruth/registry/{Registry.objects.get().pk}/change/",
        )
    }
    repos = api_client.get("/repos", **bearer(service_key(["read"])))

    for url, page in [*pages.items(), ("sync", synced_now), ("/repos", repos)]:
        assert page.status_code == 200, url
        assert SECRET not in page.content.decode(), url
    assert SHOWN in pages["/admin/brandassets/assetregistry/"].content.decode()
    assert SHOWN in pages["/admin/groundtruth/registry/"].content.decode()
    assert f"git fetch refused for {SHOWN}" in synced_now.content.decode()
