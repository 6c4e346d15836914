from __future__ import annotations

import factory
from django.utils import timezone

from brandassets.models import BrandAsset


class BrandAssetFactory(factory.django.DjangoModelFactory):
    """A served asset row, for tests of reads that need no git repository behind them."""

    class Meta:
        model = BrandAsset

    product = factory.Sequence(lambda n: f"product-{n}")
    kind = "logo"
    asset_index = 0
    position = factory.Sequence(lambda n: n)
    repo = "acme/brand"
    repo_url = "https://git.example.com/acme/brand.git"
    path = factory.Sequence(lambda n: f"logos/logo-{n}.svg")
    ref = "main"
    format = "svg"
    commit = "a" * 40
    blob_sha = factory.Sequence(lambda n: f"{n:040x}")
    size = 100
    synced_at = factory.LazyFunction(timezone.now)
