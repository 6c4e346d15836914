from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from brandassets.models import BrandAsset
from tests.brandassets.conftest import BrandFixture

pytestmark = pytest.mark.django_db


def test_sync_assets_prints_the_report_with_missing_assets(brand_repos: BrandFixture):
    brand_repos.registry_commit(brand_repos.default_registry_text().replace("web/favicon.ico", "web/gone.ico"))
    out = StringIO()

    call_command("sync_assets", stdout=out)

    head = brand_repos.brand.head()[:12]
    location = f"{brand_repos.registry.path}@main:brand-assets.yml"
    assert out.getvalue().splitlines() == [
        f"Brand assets synced from {location} at {brand_repos.registry.head()[:12]}: 8 listed, 7 served, 1 missing.",
        f"  missing: acme-app/favicon[0] acme/brand:web/gone.ico@main: path not found at ref 'main' (commit {head})",
    ]


def test_sync_assets_fails_on_an_invalid_registry_and_keeps_assets(brand_repos: BrandFixture):
    call_command("sync_assets", stdout=StringIO())
    brand_repos.registry_commit("products:\n  acme-app:\n    logo:\n      - {repo: acme/brand, path: a.svg, size: 3}\n")
    err = StringIO()

    with pytest.raises(CommandError) as caught:
        call_command("sync_assets", stdout=StringIO(), stderr=err)

    assert str(caught.value) == (
        f"Brand asset registry {brand_repos.registry.path}@main:brand-assets.yml is invalid; "
        "the last good registry stays in use."
    )
    assert err.getvalue().splitlines() == [
        "  error: brand-assets.yml:4: products.acme-app.logo[0].size: unknown key; allowed keys: description, "
        "format, height, path, ref, repo, theme, width"
    ]
    assert BrandAsset.objects.count() == 8
