"""GET /assets/<product>/<kind>/<assetIndex>/content: the bytes at the registered ref, as the sync
stored them in the database."""

from __future__ import annotations

import shutil

import pytest

from brandassets.content_cache import blob_contents
from brandassets.models import AssetBlob, BrandAsset
from brandassets.services import asset_registry_sync
from tests.brandassets.conftest import (
    APP_STORE_BADGE,
    DOCS_LOGO_V1,
    FAVICON,
    FONT,
    GOOGLE_PLAY_BADGE,
    GUIDE,
    LIGHT_LOGO,
    UNLISTED,
    BrandFixture,
)
from tests.gitrepos import GitWorkTree
from tests.gitserver import GitHttpServer, served_bare_clone

pytestmark = pytest.mark.django_db


def _blob_sha(product: str, kind: str, index: int) -> str:
    return BrandAsset.objects.get(product=product, kind=kind, asset_index=index).blob_sha


@pytest.mark.parametrize(
    ("path", "body", "content_type", "filename"),
    [
        ("/assets/acme-app/logo/0/content", LIGHT_LOGO, "image/svg+xml", "acme-light.svg"),
        ("/assets/acme-app/favicon/0/content", FAVICON, "image/x-icon", "favicon.ico"),
        ("/assets/acme-app/font/0/content", FONT, "font/woff2", "AcmeSans-Regular.woff2"),
        ("/assets/acme-app/store-badge/0/content", APP_STORE_BADGE, "image/svg+xml", "app-store.svg"),
        ("/assets/acme-app/store-badge/1/content", GOOGLE_PLAY_BADGE, "image/png", "google-play.png"),
        ("/assets/acme-app/guideline/0/content", GUIDE, "text/plain", "usage.txt"),
        # Registered at tag v1: the bytes of v1, not of main (which has a newer docs logo).
        ("/assets/acme-docs/logo/0/content", DOCS_LOGO_V1, "image/svg+xml", "acme-docs.svg"),
    ],
)
def test_content_is_the_registered_file_at_its_ref(reader, synced, path, body, content_type, filename):
    response = reader.get(path)

    assert response.status_code == 200
    assert response.content == body
    assert response["Content-Type"] == content_type
    assert response["Content-Length"] == str(len(body))
    assert response["Content-Disposition"] == f'inline; filename="{filename}"'
    assert response["Cache-Control"] == "private, max-age=300"
    assert response["X-Content-Type-Options"] == "nosniff"
    product, kind, index = path.split("/")[2:5]
    assert response["ETag"] == f'"{_blob_sha(product, kind, int(index))}"'


def test_svg_is_sandboxed_and_other_formats_are_not(reader, synced):
    svg = reader.get("/assets/acme-app/logo/0/content")
    png = reader.get("/assets/acme-app/store-badge/1/content")

    assert svg["Content-Security-Policy"] == "sandbox"
    assert "Content-Security-Policy" not in png


def test_registry_format_decides_the_content_type(reader, brand_repos: BrandFixture):
    brand_repos.registry_commit(
        brand_repos.default_registry_text().replace("path: guides/usage.txt}", "path: guides/usage.txt, format: json}")
    )
    asset_registry_sync()

    assert reader.get("/assets/acme-app/guideline/0/content")["Content-Type"] == "application/json"


def test_image_accept_headers_are_served_not_406(reader, synced):
    response = reader.get("/assets/acme-app/store-badge/1/content", HTTP_ACCEPT="image/avif,image/webp,image/*;q=0.8")

    assert response.status_code == 200
    assert response.content == GOOGLE_PLAY_BADGE


@pytest.mark.parametrize(
    "if_none_match",
    ['"{sha}"', 'W/"{sha}"', '"other", "{sha}"', "*"],
)
def test_if_none_match_with_the_blob_etag_is_304_without_body(reader, synced, if_none_match):
    sha = _blob_sha("acme-app", "logo", 0)

    response = reader.get("/assets/acme-app/logo/0/content", HTTP_IF_NONE_MATCH=if_none_match.format(sha=sha))

    assert response.status_code == 304
    assert response.content == b""
    assert response["ETag"] == f'"{sha}"'
    assert response["Cache-Control"] == "private, max-age=300"


def test_stale_etag_gets_the_new_bytes(reader, synced):
    response = reader.get(
        "/assets/acme-app/logo/0/content", HTTP_IF_NONE_MATCH='"0000000000000000000000000000000000000000"'
    )

    assert response.status_code == 200
    assert response.content == LIGHT_LOGO


def test_a_changed_file_gets_a_new_etag_after_sync(reader, brand_repos: BrandFixture):
    asset_registry_sync()
    first = reader.get("/assets/acme-app/logo/0/content")
    brand_repos.brand.write("logos/acme-light.svg", b"<svg>v2</svg>")
    brand_repos.brand.commit("new light logo")
    asset_registry_sync()

    second = reader.get("/assets/acme-app/logo/0/content", HTTP_IF_NONE_MATCH=first["ETag"])

    assert second.status_code == 200
    assert second.content == b"<svg>v2</svg>"
    assert second["ETag"] != first["ETag"]


@pytest.mark.parametrize(
    ("path", "detail"),
    [
        (
            "/assets/acme-shop/logo/0/content",
            "No product 'acme-shop' has assets. GET /assets/products lists the products.",
        ),
        (
            "/assets/acme-app/mascot/0/content",
            "Product 'acme-app' has no assets of kind 'mascot'; its kinds: favicon, font, "
            "guideline, logo, store-badge.",
        ),
        ("/assets/acme-app/logo/2/content", "acme-app/logo has no asset at index 2; its indexes run from 0 to 1."),
        (
            "/assets/acme-app/logo/2147483648/content",
            "acme-app/logo has no asset at index 2147483648; its indexes run from 0 to 1.",
        ),
    ],
)
def test_unknown_product_kind_or_index_is_404_problem(reader, synced, path, detail):
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


def test_huge_index_is_404_without_reaching_the_database_range(reader, synced):
    response = reader.get("/assets/acme-app/logo/" + "9" * 40 + "/content")

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


@pytest.mark.parametrize("index", ["-1", "abc", "1.0", "0x1", "+1", "1e3", " 1", "\u0661"])
def test_non_integer_index_is_400_problem(reader, synced, index):
    response = reader.get(f"/assets/acme-app/logo/{index}/content")

    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert response.json() == {
        "type": "urn:problem:invalid",
        "title": "Invalid input",
        "status": 400,
        "detail": "assetIndex: must be a non-negative integer (0, 1, 2, ...)",
        "code": "invalid",
        "errors": [{"field": "assetIndex", "message": "must be a non-negative integer (0, 1, 2, ...)"}],
    }


@pytest.mark.parametrize(
    "path",
    [
        # product segment
        "/assets/../logo/0/content",
        "/assets/..%2F..%2Fetc/logo/0/content",
        "/assets/%2e%2e/logo/0/content",
        "/assets/acme-app%2F..%2Facme-docs/logo/0/content",
        "/assets/acme-app%00/logo/0/content",
        # kind segment
        "/assets/acme-app/../0/content",
        "/assets/acme-app/..%2F..%2Fsecret/0/content",
        "/assets/acme-app/logo%2F..%2Ffavicon/0/content",
        "/assets/acme-app/%2e%2e%5c%2e%2e/0/content",
        # index segment
        "/assets/acme-app/logo/../content",
        "/assets/acme-app/logo/..%2F..%2Fmarketing%2Fbanner.png/content",
        "/assets/acme-app/logo/0%2F..%2F1/content",
        "/assets/acme-app/logo/%2e%2e/content",
        # the final segment
        "/assets/acme-app/logo/0/..%2F..%2F..%2Fmarketing%2Fbanner.png",
        "/assets/acme-app/logo/0/content%2F..%2F..%2Fsecret",
        "/assets/acme-app/logo/0/..",
    ],
)
def test_traversal_in_any_segment_never_reaches_another_file(reader, synced, path):
    response = reader.get(path)

    assert response.status_code in {400, 404}
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["status"] == response.status_code
    for content in [*UNLISTED.values(), b"top secret"]:
        assert content not in response.content


def test_query_parameters_cannot_redirect_the_read(reader, synced, tmp_path):
    other = GitWorkTree.create(tmp_path / "other")
    other.write("secret.txt", "top secret")
    other.commit("secret")

    response = reader.get(
        "/assets/acme-app/logo/0/content",
        {"repo": str(other.path), "path": "secret.txt", "ref": "main", "url": other.file_url},
    )

    assert response.status_code == 200
    assert response.content == LIGHT_LOGO


def test_missing_asset_is_404_and_never_served(reader, brand_repos: BrandFixture):
    text = brand_repos.default_registry_text().replace("logos/acme-dark.svg", "logos/acme-night.svg")
    brand_repos.registry_commit(text)
    asset_registry_sync()

    response = reader.get("/assets/acme-app/logo/1/content")

    assert response.status_code == 404
    assert response.json() == {
        "type": "urn:problem:asset_missing",
        "title": "Not Found",
        "status": 404,
        "detail": "Asset 1 of acme-app/logo is listed in the registry but its file is missing at its ref; it is not "
        "served until the registry or the repository is fixed.",
        "code": "asset_missing",
    }


def test_content_requires_read_scope(api_client, synced):
    assert api_client.get("/assets/acme-app/logo/0/content").status_code == 401


def test_error_bodies_stay_problem_json_whatever_the_accept_header(api_client, synced):
    response = api_client.get("/assets/acme-app/logo/0/content", HTTP_ACCEPT="image/png")

    assert response.status_code == 401
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "not_authenticated"


def test_cached_bytes_are_served_when_git_is_gone(reader, brand_repos: BrandFixture):
    asset_registry_sync()
    assert reader.get("/assets/acme-app/logo/0/content").content == LIGHT_LOGO
    sha = _blob_sha("acme-app", "logo", 0)
    assert blob_contents.get(sha) == LIGHT_LOGO
    shutil.rmtree(brand_repos.cache_dir)
    shutil.rmtree(brand_repos.brand.path)

    response = reader.get("/assets/acme-app/logo/0/content")

    assert response.status_code == 200
    assert response.content == LIGHT_LOGO


def test_without_the_process_cache_or_git_the_content_comes_from_the_database(
    reader, brand_repos: BrandFixture, settings
):
    settings.ASSET_CONTENT_CACHE_BYTES = 0
    asset_registry_sync()
    shutil.rmtree(brand_repos.cache_dir)
    shutil.rmtree(brand_repos.brand.path)

    response = reader.get("/assets/acme-app/logo/0/content")

    assert response.status_code == 200
    assert response.content == LIGHT_LOGO
    assert len(blob_contents) == 0
    assert not brand_repos.cache_dir.exists()  # nothing was fetched


def test_bytes_not_stored_are_503_problem(reader, brand_repos: BrandFixture, settings):
    settings.ASSET_CONTENT_CACHE_BYTES = 0
    asset_registry_sync()
    AssetBlob.objects.all().delete()  # as after an upgrade, before the next sync

    response = reader.get("/assets/acme-app/logo/0/content")

    assert response.status_code == 503
    assert response.json() == {
        "type": "urn:problem:asset_unavailable",
        "title": "Service unavailable",
        "status": 503,
        "detail": "The content of acme-app/logo/0 is not stored yet; the next sync of the brand asset registry "
        "stores it.",
        "code": "asset_unavailable",
    }
    asset_registry_sync()
    assert reader.get("/assets/acme-app/logo/0/content").content == LIGHT_LOGO


def test_private_repo_bytes_are_stored_by_the_sync_and_served_without_git(
    reader, brand_repos: BrandFixture, tmp_path, settings
):
    token = "brand-token-Qw2"
    settings.GIT_HTTP_TOKEN = token
    settings.GIT_HTTP_TOKEN_HOSTS = ["127.0.0.1"]
    with GitHttpServer(project_root=tmp_path / "served", token=token) as server:
        served_bare_clone(brand_repos.brand.path, server.project_root, "acme/private-brand.git")
        url = server.url_for("acme/private-brand.git")
        brand_repos.registry_commit(brand_repos.default_registry_text().replace(str(brand_repos.brand.path), url))
        asset_registry_sync()
        assert server.unauthorized_requests == 0
        # A web worker on a machine whose git cache is empty, with no token: nothing goes over HTTP.
        shutil.rmtree(brand_repos.cache_dir)
        settings.GIT_HTTP_TOKEN = ""
        requests_before = len(server.requests)

        response = reader.get("/assets/acme-app/store-badge/1/content")

        assert response.status_code == 200
        assert response.content == GOOGLE_PLAY_BADGE
        assert len(server.requests) == requests_before
        listed = reader.get("/assets").content.decode()
        assert token not in listed and url not in listed


def test_content_resolution_is_kept_for_the_record_cache_ttl_and_a_sync_clears_it(
    reader, brand_repos: BrandFixture, settings
):
    settings.ASSET_RECORD_CACHE_SECONDS = 3600  # long enough that no slow machine sees it expire here
    asset_registry_sync()
    assert reader.get("/assets/acme-app/logo/0/content").content == LIGHT_LOGO
    # Another process's sync (simulated by a direct row change) is seen once the TTL has passed.
    BrandAsset.objects.filter(product="acme-app", kind="logo", asset_index=0).update(missing=True)

    assert reader.get("/assets/acme-app/logo/0/content").status_code == 200
    settings.ASSET_RECORD_CACHE_SECONDS = 0
    assert reader.get("/assets/acme-app/logo/0/content").status_code == 404
    settings.ASSET_RECORD_CACHE_SECONDS = 3600

    asset_registry_sync()  # in this process: the cache is cleared at once
    first = reader.get("/assets/acme-app/logo/0/content")
    brand_repos.brand.write("logos/acme-light.svg", b"<svg>v3</svg>")
    brand_repos.brand.commit("v3")
    asset_registry_sync()

    second = reader.get("/assets/acme-app/logo/0/content")
    assert (first.content, second.content) == (LIGHT_LOGO, b"<svg>v3</svg>")


def test_head_gives_the_headers_without_the_body(reader, synced):
    response = reader.head("/assets/acme-app/store-badge/1/content")

    assert response.status_code == 200
    assert response.content == b""
    assert response["Content-Length"] == str(len(GOOGLE_PLAY_BADGE))
    assert response["ETag"] == f'"{_blob_sha("acme-app", "store-badge", 1)}"'
