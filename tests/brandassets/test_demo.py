"""The demo brand repo and registry that seed_demo creates: every endpoint answers on it."""

from __future__ import annotations

import pytest

from agentplatform.demo.brand_assets import BRAND_DIRECTORY, brand_repo_files, demo_brand_assets_create
from brandassets.services import asset_registry_sync
from tests.gitrepos import GitWorkTree

pytestmark = pytest.mark.django_db

UNLISTED_DEMO_FILES = {"logos/acme-legacy-2019.png", "marketing/hero-banner.png", "icons/unused-icon.png"}


@pytest.fixture
def demo(tmp_path, settings):
    registry = GitWorkTree.create(tmp_path / "registry")
    registry.write("sources.yml", "repos: []\n")
    registry.commit("sources")
    demo_brand_assets_create(root=tmp_path, registry_repo=registry.path)
    settings.SOURCE_REGISTRY_REPO = str(registry.path)
    settings.SOURCE_REGISTRY_REF = "main"
    settings.BRAND_ASSETS_PATH = "brand-assets.yml"
    settings.GIT_CACHE_DIR = tmp_path / "git-cache"
    return registry


def test_demo_registry_serves_every_listed_asset_and_no_unlisted_file(reader, demo, tmp_path):
    report = asset_registry_sync()

    assert (report.status, report.listed, report.served, report.missing) == ("synced", 10, 10, [])
    records = reader.get("/assets").json()
    assert {record["path"] for record in records}.isdisjoint(UNLISTED_DEMO_FILES)
    assert {(r["product"], r["kind"]) for r in records} == {
        ("acme-app", "logo"),
        ("acme-app", "favicon"),
        ("acme-app", "app-icon"),
        ("acme-app", "font"),
        ("acme-app", "store-badge"),
        ("acme-docs", "logo"),
        ("acme-docs", "favicon"),
    }
    files = brand_repo_files()
    for record in records:
        content = reader.get(record["contentUrl"])
        assert content.status_code == 200, record
        assert content.content == files[record["path"]]
    assert reader.get("/assets/products").status_code == 200
    assert reader.get("/assets/kinds").status_code == 200
    assert [r["theme"] for r in reader.get("/assets/acme-app/logo").json()] == ["light", "dark"]
    assert (tmp_path / BRAND_DIRECTORY / "logos/acme-legacy-2019.png").exists()


def test_demo_creation_is_idempotent(demo, tmp_path):
    brand = GitWorkTree(tmp_path / BRAND_DIRECTORY)
    heads = (brand.head(), demo.head())

    demo_brand_assets_create(root=tmp_path, registry_repo=demo.path)

    assert (brand.head(), demo.head()) == heads
