"""The one ref rule (groundtruth.ingest.git_refs) against git itself, and in both registry files."""

from __future__ import annotations

import subprocess

import pytest

from brandassets.registry import registry_parse as brand_registry_parse
from groundtruth.ingest.git_refs import REF_RULE, ref_is_valid
from groundtruth.registry import registry_parse
from groundtruth.registry_files import RegistryInvalid

ACCEPTED = ["main", "v1.2.3", "release/2026-01", "feature/a_b+c", "a-b", "x" * 200, "0123abcd" * 5, "a.b/c.d"]
REFUSED_BY_GIT = [
    "-x", "a..b", "a//b", "/main", "main/", "main.", ".hidden", "a/.b", "x.lock", "a/x.lock/b", "a@{1}", "@",
    "v1^", "a:b", "a~1", "a*", "a?", "a[b", "a\\b", "a b", "a\tb", "a\x7fb",
]  # fmt: skip
# Git takes these; the rule's portable alphabet refuses them at the door.
REFUSED_BY_THE_ALPHABET_ONLY = ["main;id", "a#b", "é", "a$b", "a'b", 'a"b', "a|b", "x" * 201]


def git_accepts(ref: str) -> bool:
    return subprocess.run(["git", "check-ref-format", "--allow-onelevel", ref], capture_output=True).returncode == 0


@pytest.mark.parametrize("ref", ACCEPTED)
def test_refs_the_rule_accepts_are_valid_for_git(ref):
    assert ref_is_valid(ref) is True
    assert git_accepts(ref) is True


@pytest.mark.parametrize("ref", REFUSED_BY_GIT)
def test_refs_git_refuses_are_refused(ref):
    assert git_accepts(ref) is False
    assert ref_is_valid(ref) is False


@pytest.mark.parametrize("ref", REFUSED_BY_THE_ALPHABET_ONLY)
def test_refs_outside_the_portable_alphabet_are_refused_though_git_takes_them(ref):
    assert git_accepts(ref) is True
    assert ref_is_valid(ref) is False


def test_a_newline_after_a_valid_ref_is_refused():
    assert ref_is_valid("main\n") is False


def test_sources_yml_refuses_a_ref_outside_the_rule_naming_line_and_key():
    content = (
        "repos:\n  - name: acme/handbook\n    url: https://example.com/acme/handbook.git\n    ref: main;id\n"
        "    include: ['docs/**']\n"
    )

    with pytest.raises(RegistryInvalid) as refused:
        registry_parse(content=content, filename="sources.yml")

    assert refused.value.errors == [f"sources.yml:4: repos[0].ref: invalid ref 'main;id': {REF_RULE}"]


def test_brand_assets_yml_refuses_a_ref_outside_the_rule():
    content = (
        "repos:\n  acme/brand:\n    url: https://example.com/acme/brand.git\n"
        "products:\n  acme-app:\n    logo:\n      - {repo: acme/brand, path: logo.svg, ref: 'main;id'}\n"
    )

    with pytest.raises(RegistryInvalid) as refused:
        brand_registry_parse(text=content, file_name="brand-assets.yml")

    assert refused.value.errors == [
        f"brand-assets.yml:7: products.acme-app.logo[0].ref: invalid ref 'main;id': {REF_RULE}"
    ]
