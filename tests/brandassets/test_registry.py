"""brand-assets.yml parsing and validation: explicit entries only, errors that name the entry."""

from __future__ import annotations

from pathlib import Path

import pytest

from brandassets.registry import AssetEntry, RepoSource, content_type_for, registry_parse
from groundtruth.ingest.git_refs import REF_RULE
from groundtruth.registry_files import RegistryInvalid


@pytest.fixture(autouse=True)
def _repositories_under_srv(settings) -> None:
    """The examples name local repositories under /srv."""
    settings.GIT_LOCAL_ROOTS = [Path("/srv")]


def _errors(text: str) -> list[str]:
    with pytest.raises(RegistryInvalid) as caught:
        registry_parse(text=text)
    return caught.value.errors


def test_entries_keep_registry_order_with_index_per_product_and_kind():
    registry = registry_parse(
        text="""\
defaults: {ref: release}
repos:
  acme/brand: {url: https://git.example.com/acme/brand.git, ref: stable}
  acme/other: {url: /srv/git/other}
products:
  acme-app:
    logo:
      - {repo: acme/brand, path: logos/light.svg, theme: light, width: 240, height: 64, description: " Light "}
      - {repo: acme/other, path: logos/dark.svg, ref: v2, theme: dark, format: SVG}
    favicon:
      - {repo: acme/other, path: web/favicon.ico}
  acme-docs:
    logo:
      - {repo: acme/undeclared, path: docs/logo.png}
"""
    )

    assert registry.repos == {
        "acme/brand": RepoSource(name="acme/brand", url="https://git.example.com/acme/brand.git", ref="stable"),
        "acme/other": RepoSource(name="acme/other", url="/srv/git/other"),
    }
    light, dark, favicon, docs = registry.entries
    assert light == AssetEntry(
        "acme-app", "logo", 0, 0, "acme/brand", "logos/light.svg", "stable", "svg", "light", 240, 64, "Light", 8
    )
    assert dark == AssetEntry("acme-app", "logo", 1, 1, "acme/other", "logos/dark.svg", "v2", "svg", "dark", line=9)
    assert favicon == AssetEntry(
        "acme-app", "favicon", 0, 2, "acme/other", "web/favicon.ico", "release", "ico", line=11
    )
    assert docs == AssetEntry("acme-docs", "logo", 0, 3, "acme/undeclared", "docs/logo.png", "release", "png", line=14)


def test_nothing_is_inferred_an_empty_products_map_lists_no_assets():
    assert registry_parse(text="products: {}\n").entries == []
    assert registry_parse(text="products:\n").entries == []


def test_any_kind_name_is_allowed_and_unknown_extensions_have_no_format():
    text = "products:\n  acme-app:\n    brand-guide:\n      - {repo: a/b, path: guide/usage.txt}\n"
    registry = registry_parse(text=text)

    assert [(entry.kind, entry.format) for entry in registry.entries] == [("brand-guide", "")]


def test_every_problem_is_reported_with_line_and_entry():
    errors = _errors(
        """\
products:
  acme-app:
    logo:
      - {repo: acme/brand, path: logos/a.svg, colour: red, theme: blue, width: -3, format: bmp}
      - {path: logos/b.svg}
      - just-a-string
    Bad Kind: []
    favicon: {repo: acme/brand}
  x: 3
surprise: 1
"""
    )

    assert errors == [
        "brand-assets.yml:10: surprise: unknown key; allowed keys: defaults, products, repos",
        "brand-assets.yml:4: products.acme-app.logo[0].colour: unknown key; allowed keys: description, format, height, "
        "path, ref, repo, theme, width",
        "brand-assets.yml:4: products.acme-app.logo[0].format: unknown format 'bmp'; allowed: svg, png, jpg, jpeg, "
        "gif, webp, avif, ico, woff, woff2, ttf, otf, eot, pdf, eps, json",
        "brand-assets.yml:4: products.acme-app.logo[0].theme: must be one of light, dark",
        "brand-assets.yml:4: products.acme-app.logo[0].width: must be a whole number of pixels between 1 and 100000",
        "brand-assets.yml:5: products.acme-app.logo[1]: missing required key 'repo'",
        "brand-assets.yml:6: products.acme-app.logo[2]: must be a mapping",
        "brand-assets.yml:7: products.acme-app.Bad Kind: kind names are lower-case letters, digits, '-' and '_' "
        "(1-64 characters, no leading or trailing '-')",
        "brand-assets.yml:8: products.acme-app.favicon: must be a list of assets",
        "brand-assets.yml:9: products.x: must be a mapping",
    ]


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("../secrets/key.pem", "must not contain empty, '.' or '..' segments"),
        ("logos/../../etc/passwd", "must not contain empty, '.' or '..' segments"),
        ("/etc/passwd", "must be relative to the repository root"),
        ("logos//a.svg", "must not contain empty, '.' or '..' segments"),
        ("./logos/a.svg", "must not contain empty, '.' or '..' segments"),
        ("logos\\\\a.svg", "must not contain backslashes or control characters"),
        (".git/config", "must not point into .git"),
    ],
)
def test_paths_that_could_leave_the_repository_are_refused(path, problem):
    errors = _errors(f'products:\n  p:\n    logo:\n      - {{repo: a/b, path: "{path}"}}\n')

    shown = path.replace("\\\\", "\\")
    assert errors == [f"brand-assets.yml:4: products.p.logo[0].path: {shown!r} {problem}"]


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        (
            "https://user:s3cret@git.example.com/a/b.git",
            "credentials in the URL are not allowed; set GIT_HTTP_TOKEN instead",
        ),
        ("ftp://git.example.com/brand", "unsupported URL scheme 'ftp'; use https://, http://, file:// or a local path"),
    ],
)
def test_repo_urls_with_credentials_or_other_schemes_are_refused(url, problem):
    errors = _errors(f"repos:\n  acme/brand: {{url: '{url}'}}\nproducts: {{}}\n")

    assert errors == [f"brand-assets.yml:2: repos.acme/brand.url: {problem}"]


def test_refs_names_and_repo_names_are_checked():
    errors = _errors(
        """\
products:
  acme-app:
    logo:
      - {repo: ../acme, path: a.svg}
      - {repo: acme/brand, path: a.svg, ref: --upload-pack=evil}
      - {repo: acme/brand, path: a.svg, ref: "main..dev"}
  ../up:
    logo: []
"""
    )

    assert errors == [
        "brand-assets.yml:4: products.acme-app.logo[0].repo: '../acme' is not valid: expected owner/name",
        f"brand-assets.yml:5: products.acme-app.logo[1].ref: invalid ref '--upload-pack=evil': {REF_RULE}",
        f"brand-assets.yml:6: products.acme-app.logo[2].ref: invalid ref 'main..dev': {REF_RULE}",
        "brand-assets.yml:7: products.../up: product names are lower-case letters, digits, '-' and '_' "
        "(1-64 characters, no leading or trailing '-')",
    ]


def test_malformed_yaml_names_the_line():
    assert _errors("products:\n  acme-app: [unclosed\n") == [
        "brand-assets.yml:3: invalid YAML: expected ',' or ']', but got '<stream end>'"
    ]


def test_empty_file_and_missing_products_are_errors():
    assert _errors("") == ["brand-assets.yml: the file is empty; write `products: {}` to list no assets"]
    assert _errors("defaults: {ref: main}\n") == ["brand-assets.yml:1: missing required key 'products'"]
    assert _errors("- a\n- b\n") == ["brand-assets.yml:1: must be a mapping"]


def test_duplicate_keys_are_errors_not_silently_overwritten():
    errors = _errors("products:\n  acme-app:\n    logo: []\n    logo: []\n")

    assert errors == ["brand-assets.yml:4: products.acme-app.logo: duplicate key"]


@pytest.mark.parametrize(
    ("asset_format", "path", "content_type"),
    [
        ("svg", "a.bin", "image/svg+xml"),
        ("", "logos/a.png", "image/png"),
        ("ico", "favicon.ico", "image/x-icon"),
        ("woff2", "f.woff2", "font/woff2"),
        ("", "guides/usage.txt", "text/plain"),
        ("", "LICENSE", "application/octet-stream"),
    ],
)
def test_content_type_comes_from_format_else_file_name(asset_format, path, content_type):
    assert content_type_for(format=asset_format, path=path) == content_type
