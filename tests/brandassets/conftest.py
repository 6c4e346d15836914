"""Fixtures: a real brand git repo, a registry repo holding brand-assets.yml, a service key."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from agentplatform.demo.brand_assets import png_bytes
from agents.services import api_key_create
from brandassets.content_cache import asset_record_cache, blob_contents
from brandassets.services import SyncReport, asset_registry_sync
from tests.gitrepos import GitWorkTree

LIGHT_LOGO = b'<svg xmlns="http://www.w3.org/2000/svg" width="240" height="64"><text>light</text></svg>\n'
DARK_LOGO = b'<svg xmlns="http://www.w3.org/2000/svg" width="240" height="64"><text>dark</text></svg>\n'
DOCS_LOGO_V1 = b'<svg xmlns="http://www.w3.org/2000/svg"><text>docs v1</text></svg>\n'
DOCS_LOGO_MAIN = b'<svg xmlns="http://www.w3.org/2000/svg"><text>docs main</text></svg>\n'
APP_STORE_BADGE = b'<svg xmlns="http://www.w3.org/2000/svg"><text>App Store</text></svg>\n'
GOOGLE_PLAY_BADGE = png_bytes(18, 6, lambda x, y: (0, 0, 0, 255))
FAVICON = b"\x00\x00\x01\x00\x01\x00" + bytes(range(64))
FONT = b"wOF2\x00\x01\x00\x00" + bytes(range(200))
GUIDE = b"Use the light logo on light backgrounds.\n"
UNLISTED = {
    "logos/acme-legacy.png": png_bytes(8, 8, lambda x, y: (200, 0, 0, 255)),
    "marketing/banner.png": png_bytes(8, 4, lambda x, y: (0, 200, 0, 255)),
    "icons/unused-icon.png": png_bytes(4, 4, lambda x, y: (0, 0, 200, 255)),
}

BRAND_FILES = {
    "logos/acme-light.svg": LIGHT_LOGO,
    "logos/acme-dark.svg": DARK_LOGO,
    "logos/acme-docs.svg": DOCS_LOGO_V1,
    "web/favicon.ico": FAVICON,
    "fonts/AcmeSans-Regular.woff2": FONT,
    "badges/app-store.svg": APP_STORE_BADGE,
    "badges/google-play.png": GOOGLE_PLAY_BADGE,
    "guides/usage.txt": GUIDE,
    **UNLISTED,
}

REGISTRY_TEMPLATE = """\
defaults:
  ref: main
repos:
  acme/brand:
    url: {brand_url}
    web_url: https://git.example.com/acme/brand
products:
  acme-app:
    logo:
      - {{repo: acme/brand, path: logos/acme-light.svg, theme: light, format: svg, width: 240, height: 64,
         description: Primary logo for light backgrounds}}
      - {{repo: acme/brand, path: logos/acme-dark.svg, theme: dark, format: svg}}
    favicon:
      - {{repo: acme/brand, path: web/favicon.ico}}
    font:
      - {{repo: acme/brand, path: fonts/AcmeSans-Regular.woff2, description: Acme Sans}}
    store-badge:
      - {{repo: acme/brand, path: badges/app-store.svg, description: Download on the App Store}}
      - {{repo: acme/brand, path: badges/google-play.png, description: Get it on Google Play}}
    guideline:
      - {{repo: acme/brand, path: guides/usage.txt}}
  acme-docs:
    logo:
      - {{repo: acme/brand, path: logos/acme-docs.svg, ref: v1, description: Docs logo}}
"""


@dataclass
class BrandFixture:
    brand: GitWorkTree
    registry: GitWorkTree
    cache_dir: Path

    def registry_commit(self, text: str, message: str = "update brand-assets.yml") -> str:
        self.registry.write("brand-assets.yml", text)
        return self.registry.commit(message)

    def default_registry_text(self) -> str:
        return REGISTRY_TEMPLATE.format(brand_url=self.brand.path)


def brand_work_tree(path: Path) -> GitWorkTree:
    tree = GitWorkTree.create(path)
    for relative_path, content in BRAND_FILES.items():
        tree.write(relative_path, content)
    tree.commit("brand kit")
    tree.tag("v1")
    tree.write("logos/acme-docs.svg", DOCS_LOGO_MAIN)
    tree.commit("new docs logo on main")
    return tree


@pytest.fixture(autouse=True)
def _fresh_content_caches():
    blob_contents.clear()
    asset_record_cache.clear()
    yield
    blob_contents.clear()
    asset_record_cache.clear()


@pytest.fixture
def brand_repos(tmp_path: Path, settings) -> BrandFixture:
    brand = brand_work_tree(tmp_path / "brand")
    registry = GitWorkTree.create(tmp_path / "registry")
    registry.write("sources.yml", "repos: []\n")
    fixture = BrandFixture(brand=brand, registry=registry, cache_dir=tmp_path / "git-cache")
    fixture.registry_commit(fixture.default_registry_text(), "registry")
    settings.SOURCE_REGISTRY_REPO = str(registry.path)
    settings.SOURCE_REGISTRY_REF = "main"
    settings.BRAND_ASSETS_PATH = "brand-assets.yml"
    settings.GIT_CACHE_DIR = fixture.cache_dir
    settings.GIT_HTTP_TOKEN = ""
    settings.GROUNDTRUTH_PREFIX = ""
    return fixture


@pytest.fixture
def synced(brand_repos: BrandFixture, db) -> SyncReport:
    report = asset_registry_sync()
    assert report.status == "synced", report.lines()
    return report


@pytest.fixture
def service_token(db) -> str:
    _key, token = api_key_create(kind="service", name="asset reader", scopes=["read"])
    return token


@pytest.fixture
def reader(api_client, service_token):
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {service_token}")
    return api_client
