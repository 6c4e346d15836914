"""GET /assets, /assets/products, /assets/kinds, /assets/<product>/<kind>."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.services import api_key_create
from brandassets.models import BrandAsset
from brandassets.services import asset_registry_sync
from tests.brandassets.conftest import UNLISTED, BrandFixture
from tests.brandassets.factories import BrandAssetFactory

pytestmark = pytest.mark.django_db

LIGHT_LOGO_RECORD = {
    "product": "acme-app",
    "kind": "logo",
    "assetIndex": 0,
    "repo": "acme/brand",
    "path": "logos/acme-light.svg",
    "ref": "main",
    "blobUrl": "https://git.example.com/acme/brand/blob/main/logos/acme-light.svg",
    "contentUrl": "http://testserver/assets/acme-app/logo/0/content",
    "format": "svg",
    "theme": "light",
    "width": 240,
    "height": 64,
    "description": "Primary logo for light backgrounds",
}


def _record(product: str, kind: str, index: int, path: str, **extra) -> dict:
    record = {
        "product": product,
        "kind": kind,
        "assetIndex": index,
        "repo": "acme/brand",
        "path": path,
        "ref": "main",
        "blobUrl": f"https://git.example.com/acme/brand/blob/main/{path}",
        "contentUrl": f"http://testserver/assets/{product}/{kind}/{index}/content",
        "format": None,
        "theme": None,
        "width": None,
        "height": None,
        "description": None,
    }
    record.update(extra)
    return record


ALL_RECORDS = [
    _record("acme-app", "favicon", 0, "web/favicon.ico", format="ico"),
    _record("acme-app", "font", 0, "fonts/AcmeSans-Regular.woff2", format="woff2", description="Acme Sans"),
    _record("acme-app", "guideline", 0, "guides/usage.txt"),
    LIGHT_LOGO_RECORD,
    _record("acme-app", "logo", 1, "logos/acme-dark.svg", format="svg", theme="dark"),
    _record(
        "acme-app", "store-badge", 0, "badges/app-store.svg", format="svg", description="Download on the App Store"
    ),
    _record("acme-app", "store-badge", 1, "badges/google-play.png", format="png", description="Get it on Google Play"),
    _record(
        "acme-docs",
        "logo",
        0,
        "logos/acme-docs.svg",
        ref="v1",
        blobUrl="https://git.example.com/acme/brand/blob/v1/logos/acme-docs.svg",
        format="svg",
        description="Docs logo",
    ),
]


def test_list_returns_every_served_asset_and_nothing_unlisted(reader, synced):
    response = reader.get("/assets")

    assert response.status_code == 200
    assert response.json() == ALL_RECORDS
    assert not {record["path"] for record in response.json()} & set(UNLISTED)
    assert response["X-RateLimit-Limit"] == "500"


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"product": "acme-docs"}, [ALL_RECORDS[7]]),
        ({"kind": "logo"}, [ALL_RECORDS[3], ALL_RECORDS[4], ALL_RECORDS[7]]),
        ({"product": "acme-app", "kind": "store-badge"}, ALL_RECORDS[5:7]),
        ({"q": "google"}, [ALL_RECORDS[6]]),
        ({"q": "LIGHT backgrounds"}, [LIGHT_LOGO_RECORD]),
        ({"q": "badge play"}, [ALL_RECORDS[6]]),
        ({"q": "docs", "kind": "logo"}, [ALL_RECORDS[7]]),
        ({"q": "acme-legacy"}, []),
        ({"q": "png"}, [ALL_RECORDS[6]]),
        ({"product": "no-such-product"}, []),
        ({"q": "   "}, ALL_RECORDS),
    ],
)
def test_list_filters(reader, synced, query, expected):
    response = reader.get("/assets", query)

    assert response.status_code == 200
    assert response.json() == expected


@pytest.mark.parametrize(
    ("query", "field", "message"),
    [
        ({"product": "../etc"}, "product", "must be 1-64 characters of lower-case letters, digits, '-' and '_'"),
        ({"kind": "Logo"}, "kind", "must be 1-64 characters of lower-case letters, digits, '-' and '_'"),
        ({"q": "x" * 201}, "q", "Ensure this field has no more than 200 characters."),
    ],
)
def test_list_with_invalid_filter_is_400_naming_the_allowed_values(reader, synced, query, field, message):
    response = reader.get("/assets", query)

    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert response.json() == {
        "type": "urn:problem:invalid",
        "title": "Invalid input",
        "status": 400,
        "detail": f"{field}: {message}",
        "code": "invalid",
        "errors": [{"field": field, "message": message}],
    }


def test_products(reader, synced):
    response = reader.get("/assets/products")

    assert response.status_code == 200
    assert response.json() == [
        {
            "product": "acme-app",
            "kinds": ["favicon", "font", "guideline", "logo", "store-badge"],
            "assetCount": 7,
        },
        {"product": "acme-docs", "kinds": ["logo"], "assetCount": 1},
    ]


def test_kinds(reader, synced):
    response = reader.get("/assets/kinds")

    assert response.status_code == 200
    assert response.json() == [
        {"kind": "favicon", "products": ["acme-app"], "assetCount": 1},
        {"kind": "font", "products": ["acme-app"], "assetCount": 1},
        {"kind": "guideline", "products": ["acme-app"], "assetCount": 1},
        {"kind": "logo", "products": ["acme-app", "acme-docs"], "assetCount": 3},
        {"kind": "store-badge", "products": ["acme-app"], "assetCount": 2},
    ]


def test_assets_of_product_and_kind(reader, synced):
    response = reader.get("/assets/acme-app/logo")

    assert response.status_code == 200
    assert response.json() == [LIGHT_LOGO_RECORD, ALL_RECORDS[4]]


@pytest.mark.parametrize(
    ("path", "detail"),
    [
        ("/assets/acme-shop/logo", "No product 'acme-shop' has assets. GET /assets/products lists the products."),
        (
            "/assets/acme-docs/font",
            "Product 'acme-docs' has no assets of kind 'font'; its kinds: logo.",
        ),
        ("/assets/ACME/logo", "No product 'ACME'. GET /assets/products lists the products."),
        ("/assets/acme-app/..", "No kind '..'. GET /assets/kinds lists the kinds."),
    ],
)
def test_unknown_product_or_kind_is_404_problem(reader, synced, path, detail):
    response = reader.get(path)

    assert response.status_code == 404
    assert response["Content-Type"] == "application/problem+json"
    assert response.json() == {
        "type": "urn:problem:not_found",
        "title": "Not Found",
        "status": 404,
        "detail": detail,
        "code": "not_found",
    }


def test_missing_assets_are_never_listed(reader, brand_repos: BrandFixture):
    brand_repos.registry_commit(brand_repos.default_registry_text().replace("logos/acme-dark.svg", "logos/gone.svg"))
    asset_registry_sync()

    listed = reader.get("/assets", {"kind": "logo"}).json()
    of_kind = reader.get("/assets/acme-app/logo").json()
    kinds = reader.get("/assets/kinds").json()

    assert [record["path"] for record in listed] == ["logos/acme-light.svg", "logos/acme-docs.svg"]
    assert of_kind == [LIGHT_LOGO_RECORD]
    assert {"kind": "logo", "products": ["acme-app", "acme-docs"], "assetCount": 2} in kinds


def test_blob_url_is_null_for_a_repo_without_a_web_address(reader, brand_repos: BrandFixture):
    brand_repos.registry_commit(
        brand_repos.default_registry_text().replace("    web_url: https://git.example.com/acme/brand\n", "")
    )
    asset_registry_sync()

    record = reader.get("/assets/acme-app/logo").json()[0]

    assert (record["blobUrl"], record["contentUrl"]) == (None, "http://testserver/assets/acme-app/logo/0/content")
    assert str(brand_repos.brand.path) not in str(reader.get("/assets").json())


def test_list_runs_a_constant_number_of_queries(reader, db):
    BrandAssetFactory.create_batch(2)
    reader.get("/assets")  # verifies the key (and writes last_used_at); the worker then remembers it
    with CaptureQueriesContext(connection) as few:
        assert len(reader.get("/assets").json()) == 2
    BrandAssetFactory.create_batch(30)
    with CaptureQueriesContext(connection) as many:
        assert len(reader.get("/assets").json()) == 32

    assert len(few) == len(many) == 1  # the assets


def test_without_credentials_is_401_problem(api_client, synced):
    response = api_client.get("/assets")

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    assert response.json()["code"] == "not_authenticated"


@pytest.mark.parametrize("path", ["/assets", "/assets/products", "/assets/kinds", "/assets/acme-app/logo"])
def test_keys_without_read_scope_are_403(api_client, synced, path):
    _key, ingest_only = api_key_create(kind="service", name="ingester", scopes=["ingest"])
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {ingest_only}")

    response = api_client.get(path)

    assert response.status_code == 403
    assert response.json()["detail"] == "A service key with scope 'read' is required."


def test_agent_key_is_403(api_client, synced):
    from agents.models import Agent

    agent = Agent.objects.create(instance_id="bot-1", name="Bot")
    _key, token = api_key_create(kind="agent", name="bot", agent=agent)
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")

    assert api_client.get("/assets").status_code == 403


def test_revoked_service_key_is_401(api_client, synced):
    from agents.services import api_key_revoke

    key, token = api_key_create(kind="service", name="old", scopes=["read"])
    api_key_revoke(key=key)
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")

    assert api_client.get("/assets").status_code == 401


def test_staff_session_reads_and_plain_user_session_is_403(api_client, synced):
    staff = User.objects.create_user("staff", password="x", is_staff=True)
    member = User.objects.create_user("member", password="x")

    api_client.force_login(staff)
    assert api_client.get("/assets/products").status_code == 200
    api_client.force_login(member)
    assert api_client.get("/assets/products").status_code == 403


def test_asset_count_matches_database(reader, synced):
    assert len(reader.get("/assets").json()) == BrandAsset.objects.filter(missing=False).count() == 8
