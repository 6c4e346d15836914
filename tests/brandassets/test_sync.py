"""asset_registry_sync(): reads brand-assets.yml from the registry repo, resolves every listed
asset in real git repositories, reports missing files and keeps the last good registry."""

from __future__ import annotations

import shutil

import pytest

from brandassets.models import AssetBlob, AssetRegistry, BrandAsset
from brandassets.services import asset_registry_sync
from groundtruth.models import Repository
from tests.brandassets.conftest import LIGHT_LOGO, UNLISTED, BrandFixture
from tests.gitserver import GitHttpServer, served_bare_clone, update_served

pytestmark = pytest.mark.django_db

ASSET_FIELDS = ("product", "kind", "asset_index", "path", "ref", "format", "theme", "missing")


def _stored() -> list[tuple]:
    return list(BrandAsset.objects.order_by("position").values_list(*ASSET_FIELDS))


def _full_rows() -> list[dict]:
    return list(BrandAsset.objects.order_by("pk").values())


def test_sync_stores_exactly_the_listed_assets_resolved_at_their_refs(brand_repos: BrandFixture):
    report = asset_registry_sync()

    assert report.status == "synced"
    assert report.commit == brand_repos.registry.head()
    assert (report.listed, report.served, report.missing, report.errors) == (8, 8, [], [])
    assert _stored() == [
        ("acme-app", "logo", 0, "logos/acme-light.svg", "main", "svg", "light", False),
        ("acme-app", "logo", 1, "logos/acme-dark.svg", "main", "svg", "dark", False),
        ("acme-app", "favicon", 0, "web/favicon.ico", "main", "ico", "", False),
        ("acme-app", "font", 0, "fonts/AcmeSans-Regular.woff2", "main", "woff2", "", False),
        ("acme-app", "store-badge", 0, "badges/app-store.svg", "main", "svg", "", False),
        ("acme-app", "store-badge", 1, "badges/google-play.png", "main", "png", "", False),
        ("acme-app", "guideline", 0, "guides/usage.txt", "main", "", "", False),
        ("acme-docs", "logo", 0, "logos/acme-docs.svg", "v1", "svg", "", False),
    ]
    stored_paths = set(BrandAsset.objects.values_list("path", flat=True))
    assert stored_paths.isdisjoint(UNLISTED)
    docs_logo = BrandAsset.objects.get(product="acme-docs")
    v1_commit = brand_repos.brand.git("rev-parse", "v1^{commit}").strip()
    assert docs_logo.commit == v1_commit
    assert docs_logo.blob_sha == brand_repos.brand.git("rev-parse", "v1:logos/acme-docs.svg").strip()
    light = BrandAsset.objects.get(product="acme-app", kind="logo", asset_index=0)
    assert (light.commit, light.width, light.height, light.description, light.size) == (
        brand_repos.brand.head(),
        240,
        64,
        "Primary logo for light backgrounds",
        len((brand_repos.brand.path / "logos/acme-light.svg").read_bytes()),
    )
    registry = AssetRegistry.objects.get()
    assert (registry.commit, registry.last_error, registry.content) == (
        brand_repos.registry.head(),
        "",
        brand_repos.default_registry_text(),
    )
    assert registry.last_report["status"] == "synced"


def test_a_second_sync_of_the_same_registry_changes_no_row(brand_repos: BrandFixture):
    asset_registry_sync()
    before = [{k: v for k, v in row.items() if k != "synced_at"} for row in _full_rows()]

    asset_registry_sync()

    assert [{k: v for k, v in row.items() if k != "synced_at"} for row in _full_rows()] == before


def test_listed_file_missing_at_its_ref_is_stored_missing_and_reported(brand_repos: BrandFixture):
    text = brand_repos.default_registry_text().replace("logos/acme-dark.svg", "logos/acme-night.svg")
    brand_repos.registry_commit(text)

    report = asset_registry_sync()

    head = brand_repos.brand.head()
    assert report.status == "synced"
    assert (report.listed, report.served) == (8, 7)
    assert [missing.render() for missing in report.missing] == [
        f"acme-app/logo[1] acme/brand:logos/acme-night.svg@main: path not found at ref 'main' (commit {head[:12]})"
    ]
    dark = BrandAsset.objects.get(product="acme-app", kind="logo", asset_index=1)
    assert (dark.missing, dark.blob_sha, dark.missing_reason) == (
        True,
        "",
        f"path not found at ref 'main' (commit {head[:12]})",
    )
    assert report.lines()[0] == (
        f"Brand assets synced from {report.location} at {report.commit[:12]}: 8 listed, 7 served, 1 missing."
    )


def test_unknown_ref_symlink_and_directory_are_missing_with_their_reason(brand_repos: BrandFixture):
    brand_repos.brand.symlink("logos/link.svg", "acme-light.svg")
    brand_repos.brand.commit("a symlink")
    text = brand_repos.default_registry_text() + (
        "  acme-extra:\n"
        "    logo:\n"
        "      - {repo: acme/brand, path: logos/link.svg}\n"
        "      - {repo: acme/brand, path: logos}\n"
        "      - {repo: acme/brand, path: logos/acme-light.svg, ref: no-such-branch}\n"
    )
    brand_repos.registry_commit(text)

    report = asset_registry_sync()

    head = brand_repos.brand.head()[:12]
    reasons = {(m.asset_index, m.reason.split(":")[0]) for m in report.missing}
    assert reasons == {
        (0, f"path is a symlink at ref 'main' (commit {head}); only regular files are served"),
        (1, f"path not found at ref 'main' (commit {head})"),
        (2, "ref 'no-such-branch' could not be resolved"),
    }
    assert BrandAsset.objects.filter(product="acme-extra", missing=True).count() == 3


def test_malformed_registry_keeps_the_last_good_registry_and_assets(brand_repos: BrandFixture):
    asset_registry_sync()
    rows_before = _full_rows()
    good_commit = brand_repos.registry.head()
    brand_repos.registry_commit("products:\n  acme-app:\n    logo:\n      - {repo: a/b, path: ../../etc/passwd}\n")

    report = asset_registry_sync()

    assert report.status == "invalid"
    assert report.errors == [
        "brand-assets.yml:4: products.acme-app.logo[0].path: '../../etc/passwd' must not contain empty, '.' or '..' "
        "segments"
    ]
    assert report.lines()[0] == (
        f"Brand asset registry {report.location} is invalid; the last good registry stays in use."
    )
    assert _full_rows() == rows_before
    registry = AssetRegistry.objects.get()
    assert (registry.commit, registry.content) == (good_commit, brand_repos.default_registry_text())
    assert registry.last_error == report.errors[0]
    assert registry.last_report["status"] == "invalid"

    brand_repos.registry_commit(brand_repos.default_registry_text().replace("theme: dark", "theme: light"))
    fixed = asset_registry_sync()

    assert fixed.status == "synced"
    registry.refresh_from_db()
    assert (registry.last_error, registry.last_error_at, registry.commit) == ("", None, brand_repos.registry.head())
    assert BrandAsset.objects.get(product="acme-app", kind="logo", asset_index=1).theme == "light"


def test_bad_yaml_is_invalid_and_changes_nothing(brand_repos: BrandFixture):
    asset_registry_sync()
    rows_before = _full_rows()
    brand_repos.registry_commit("products: [oops\n")

    report = asset_registry_sync()

    assert (report.status, report.errors) == (
        "invalid",
        ["brand-assets.yml:2: invalid YAML: expected ',' or ']', but got '<stream end>'"],
    )
    assert _full_rows() == rows_before


def test_registry_file_absent_fails_and_keeps_the_last_good_assets(brand_repos: BrandFixture, settings):
    asset_registry_sync()
    rows_before = _full_rows()
    settings.BRAND_ASSETS_PATH = "no-such-file.yml"

    report = asset_registry_sync()

    assert report.status == "failed"
    assert report.errors[0].startswith("no-such-file.yml not found at ")
    assert _full_rows() == rows_before


def test_undeclared_repo_is_an_error_unless_sources_yml_lists_it(brand_repos: BrandFixture):
    text = brand_repos.default_registry_text() + "  acme-blog:\n    logo:\n      - {repo: acme/blog, path: logo.svg}\n"
    brand_repos.registry_commit(text)

    refused = asset_registry_sync()

    assert (refused.status, refused.errors) == (
        "invalid",
        [
            "brand-assets.yml:27: products.acme-blog.logo[0].repo: 'acme/blog' is declared neither under repos: in "
            "brand-assets.yml nor in sources.yml"
        ],
    )
    assert BrandAsset.objects.count() == 0

    Repository.objects.create(name="acme/blog", url=str(brand_repos.brand.path), ref="main")
    brand_repos.brand.write("logo.svg", b"<svg/>")
    brand_repos.brand.commit("blog logo")

    accepted = asset_registry_sync()

    assert accepted.status == "synced"
    blog = BrandAsset.objects.get(product="acme-blog")
    assert (blog.repo, blog.repo_url, blog.missing) == ("acme/blog", str(brand_repos.brand.path), False)


def test_reordering_the_registry_reorders_indexes_and_removed_entries_go_away(brand_repos: BrandFixture):
    asset_registry_sync()
    index_0_pk = BrandAsset.objects.get(product="acme-app", kind="logo", asset_index=0).pk
    text = brand_repos.default_registry_text()
    light = (
        "      - {repo: acme/brand, path: logos/acme-light.svg, theme: light, format: svg, width: 240, height: 64,\n"
        "         description: Primary logo for light backgrounds}\n"
    )
    dark = "      - {repo: acme/brand, path: logos/acme-dark.svg, theme: dark, format: svg}\n"
    assert light + dark in text
    text = text.replace(light + dark, dark + light)
    text = text[: text.index("  acme-docs:\n")]
    brand_repos.registry_commit(text)

    asset_registry_sync()

    logos = list(BrandAsset.objects.filter(kind="logo").values_list("product", "asset_index", "path", "pk"))
    # Rows are keyed by (product, kind, assetIndex): index 0 keeps its row and now holds the dark logo.
    assert logos == [
        ("acme-app", 0, "logos/acme-dark.svg", index_0_pk),
        ("acme-app", 1, "logos/acme-light.svg", logos[1][3]),
    ]
    assert not BrandAsset.objects.filter(product="acme-docs").exists()


def test_private_brand_repo_over_http_uses_the_token_and_never_leaks_it(brand_repos: BrandFixture, tmp_path, settings):
    token = "brand-token-Zx81"
    with GitHttpServer(project_root=tmp_path / "served", token=token) as server:
        served_bare_clone(brand_repos.brand.path, server.project_root, "acme/private-brand.git")
        url = server.url_for("acme/private-brand.git")
        brand_repos.registry_commit(brand_repos.default_registry_text().replace(str(brand_repos.brand.path), url))
        settings.GIT_HTTP_TOKEN = token
        settings.GIT_HTTP_TOKEN_HOSTS = ["127.0.0.1"]

        report = asset_registry_sync()

        assert (report.status, report.served, report.missing) == ("synced", 8, [])
        assert server.requests, "the brand repo was fetched over HTTP"
        assert server.unauthorized_requests == 0
        assert all(token not in request.path for request in server.requests)
        assert BrandAsset.objects.filter(repo_url=url).count() == 8

        before = list(BrandAsset.objects.order_by("pk").values_list("blob_sha", "missing"))
        settings.GIT_HTTP_TOKEN = "wrong-token"
        brand_repos.brand.write("logos/acme-light.svg", b"<svg>changed</svg>")
        brand_repos.brand.commit("changed light logo")
        update_served(brand_repos.brand.path, server.project_root / "acme/private-brand.git")
        refused = asset_registry_sync()

    # A refused token keeps the last good resolution (still in the local git cache) and says so.
    assert (refused.status, refused.served, refused.missing) == ("synced", 8, [])
    assert len(refused.warnings) == 8
    assert refused.warnings[0].startswith("products.acme-app.logo[0]: acme/brand could not be fetched (git fetch")
    assert list(BrandAsset.objects.order_by("pk").values_list("blob_sha", "missing")) == before
    assert "wrong-token" not in str(refused.as_dict())
    assert token not in str(AssetRegistry.objects.get().last_report)


def test_brand_repo_never_fetched_is_missing_when_unreachable(brand_repos: BrandFixture, tmp_path):
    url = "http://127.0.0.1:9/acme/brand.git"  # the discard port: nothing listens there
    brand_repos.registry_commit(brand_repos.default_registry_text().replace(str(brand_repos.brand.path), url))

    report = asset_registry_sync()

    assert (report.status, report.served, len(report.missing)) == ("synced", 0, 8)
    assert report.missing[0].reason.startswith("repository could not be fetched: git fetch failed for " + url)


def test_unreachable_brand_repo_keeps_the_last_good_resolution_with_a_warning(brand_repos: BrandFixture, tmp_path):
    server = GitHttpServer(project_root=tmp_path / "served").start()
    served_bare_clone(brand_repos.brand.path, server.project_root, "acme/brand.git")
    url = server.url_for("acme/brand.git")
    brand_repos.registry_commit(brand_repos.default_registry_text().replace(str(brand_repos.brand.path), url))
    asset_registry_sync()
    before = list(BrandAsset.objects.order_by("pk").values_list("blob_sha", "commit", "missing"))
    server.stop()

    report = asset_registry_sync()

    assert (report.status, report.served, report.missing) == ("synced", 8, [])
    assert len(report.warnings) == 8
    assert "could not be fetched" in report.warnings[0]
    assert "kept the last good resolution" in report.warnings[0]
    assert list(BrandAsset.objects.order_by("pk").values_list("blob_sha", "commit", "missing")) == before


def test_registry_repo_unreachable_fails_and_keeps_assets(brand_repos: BrandFixture, settings):
    asset_registry_sync()
    rows_before = _full_rows()
    shutil.rmtree(brand_repos.cache_dir)
    settings.SOURCE_REGISTRY_REPO = str(brand_repos.registry.path.parent / "gone")

    report = asset_registry_sync()

    assert report.status == "failed"
    assert len(report.errors) == 1
    assert _full_rows() == rows_before


def test_the_sync_stores_each_served_blob_once_and_drops_those_no_asset_names(brand_repos: BrandFixture):
    asset_registry_sync()
    served = set(BrandAsset.objects.filter(missing=False).values_list("blob_sha", flat=True))
    light = BrandAsset.objects.get(product="acme-app", kind="logo", asset_index=0)
    assert set(AssetBlob.objects.values_list("sha", flat=True)) == served
    assert bytes(AssetBlob.objects.get(sha=light.blob_sha).content) == LIGHT_LOGO

    brand_repos.brand.write("logos/acme-light.svg", b"<svg>v2</svg>")
    brand_repos.brand.commit("new light logo")
    asset_registry_sync()

    new_light = BrandAsset.objects.get(product="acme-app", kind="logo", asset_index=0).blob_sha
    assert set(BrandAsset.objects.filter(missing=False).values_list("blob_sha", flat=True)) == (
        served - {light.blob_sha}
    ) | {new_light}  # no other asset had the old light logo's bytes
    assert set(AssetBlob.objects.values_list("sha", flat=True)) == (served - {light.blob_sha}) | {new_light}
    assert AssetBlob.objects.count() == len(served)
    assert bytes(AssetBlob.objects.get(sha=new_light).content) == b"<svg>v2</svg>"
