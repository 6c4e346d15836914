"""Brand assets under keys limited to repositories: a key sees the assets of its repositories only
(list, products, kinds, one product and kind, content); another repository's asset answers
exactly as one that does not exist, and counts in nothing it is shown."""

from __future__ import annotations

import pytest

from agents.models import ApiKeyKind
from agents.services import api_key_create
from brandassets.models import BrandAsset
from brandassets.services import asset_registry_sync
from tests.brandassets.conftest import DARK_LOGO, LIGHT_LOGO, REGISTRY_TEMPLATE, BrandFixture
from tests.groundtruth.factories import RepositoryFactory, bearer

pytestmark = pytest.mark.django_db

# The brand kit, and a press repository (the same files, under another name and team) that adds a
# third logo to acme-app and a product of its own.
SCOPED_REGISTRY = (
    REGISTRY_TEMPLATE.replace(
        "repos:\n",
        "repos:\n  acme/press:\n    url: {brand_url}\n",
    ).replace(
        "      - {{repo: acme/brand, path: logos/acme-dark.svg, theme: dark, format: svg}}\n",
        "      - {{repo: acme/brand, path: logos/acme-dark.svg, theme: dark, format: svg}}\n"
        "      - {{repo: acme/press, path: logos/acme-dark.svg, description: Press logo}}\n",
    )
    + "  press-kit:\n    logo:\n      - {{repo: acme/press, path: logos/acme-light.svg}}\n"
)


def _key(*, scope_repositories: tuple[str, ...] = (), scope_owners: tuple[str, ...] = ()) -> dict[str, str]:
    _, secret = api_key_create(
        kind=ApiKeyKind.SERVICE,
        name="scoped",
        scopes=["read"],
        scope_repositories=list(scope_repositories),
        scope_owners=list(scope_owners),
    )
    return bearer(secret)


@pytest.fixture
def keys(brand_repos: BrandFixture) -> dict[str, dict[str, str]]:
    RepositoryFactory(name="acme/brand", owners=["brand-team"])
    RepositoryFactory(name="acme/press", owners=["press-team"])
    RepositoryFactory(name="platform/runbooks", owners=["platform"])
    brand_repos.registry_commit(SCOPED_REGISTRY.format(brand_url=brand_repos.brand.path))
    report = asset_registry_sync()
    assert (report.status, report.served) == ("synced", 10), report.lines()
    return {
        # The brand team's key: every repository whose registry owners list brand-team.
        "owner": _key(scope_owners=("brand-team",)),
        # A teammate's key: the same GitHub owner (acme), another repository.
        "teammate": _key(scope_repositories=("acme/press",)),
        # An outsider's key: another team's repositories only.
        "outsider": _key(scope_owners=("platform",)),
        "unscoped": _key(),
    }


def _listed(api_client, key) -> list[tuple[str, str, int, str]]:
    response = api_client.get("/assets", **key)
    assert response.status_code == 200
    return [(asset["product"], asset["kind"], asset["assetIndex"], asset["repo"]) for asset in response.json()]


def test_each_key_lists_only_the_assets_of_its_repositories(api_client, keys):
    assert _listed(api_client, keys["teammate"]) == [
        ("acme-app", "logo", 2, "acme/press"),
        ("press-kit", "logo", 0, "acme/press"),
    ]
    assert len(_listed(api_client, keys["owner"])) == 8
    assert {repo for *_, repo in _listed(api_client, keys["owner"])} == {"acme/brand"}
    assert _listed(api_client, keys["outsider"]) == []
    assert len(_listed(api_client, keys["unscoped"])) == 10


def test_products_and_kinds_count_only_the_keys_assets(api_client, keys):
    products = api_client.get("/assets/products", **keys["teammate"]).json()
    kinds = api_client.get("/assets/kinds", **keys["teammate"]).json()

    assert products == [
        {"product": "acme-app", "kinds": ["logo"], "assetCount": 1},
        {"product": "press-kit", "kinds": ["logo"], "assetCount": 1},
    ]
    assert kinds == [{"kind": "logo", "products": ["acme-app", "press-kit"], "assetCount": 2}]
    assert api_client.get("/assets/products", **keys["outsider"]).json() == []
    assert api_client.get("/assets/kinds", **keys["outsider"]).json() == []


def test_content_of_the_keys_own_asset_is_served(api_client, keys):
    owner = api_client.get("/assets/acme-app/logo/0/content", **keys["owner"])
    teammate = api_client.get("/assets/acme-app/logo/2/content", **keys["teammate"])

    assert (owner.status_code, owner.content) == (200, LIGHT_LOGO)
    assert (teammate.status_code, teammate.content) == (200, DARK_LOGO)


def test_another_repositorys_asset_is_404_byte_for_byte_as_if_absent(api_client, keys):
    url = "/assets/acme-app/logo/0/content"
    teammate = api_client.get(url, **keys["teammate"])
    outsider = api_client.get(url, **keys["outsider"])
    owner_press = api_client.get("/assets/press-kit/logo/0/content", **keys["owner"])
    # The same requests once those assets really are gone.
    BrandAsset.objects.filter(product="acme-app", kind="logo", asset_index=0).delete()
    teammate_absent = api_client.get(url, **keys["teammate"])
    BrandAsset.objects.filter(product="acme-app").delete()
    outsider_absent = api_client.get(url, **keys["unscoped"])
    BrandAsset.objects.filter(product="press-kit").delete()
    owner_absent = api_client.get("/assets/press-kit/logo/0/content", **keys["unscoped"])

    assert teammate.status_code == outsider.status_code == owner_press.status_code == 404
    assert teammate.content == teammate_absent.content
    assert teammate.json()["detail"] == "acme-app/logo has no asset at index 0."
    assert outsider.content == outsider_absent.content
    assert outsider.json()["detail"] == "No product 'acme-app' has assets. GET /assets/products lists the products."
    assert owner_press.content == owner_absent.content
    assert owner_press.json()["detail"] == "No product 'press-kit' has assets. GET /assets/products lists the products."


def test_one_product_and_kind_lists_only_the_keys_assets(api_client, keys):
    teammate = api_client.get("/assets/acme-app/logo", **keys["teammate"])
    outsider = api_client.get("/assets/acme-app/logo", **keys["outsider"])

    assert [(asset["assetIndex"], asset["repo"]) for asset in teammate.json()] == [(2, "acme/press")]
    assert outsider.status_code == 404
    assert outsider.json()["detail"] == "No product 'acme-app' has assets. GET /assets/products lists the products."
