"""sources.yml: validation errors naming file, line, key and problem; loading from the registry
repository at every ingest; the last good registry kept when a new one is invalid."""

from __future__ import annotations

from pathlib import Path

import pytest

from groundtruth.models import Registry, Repository
from groundtruth.registry import registry_parse
from groundtruth.registry_files import RegistryInvalid
from groundtruth.services import registry_load
from tests.groundtruth.conftest import HANDBOOK_GLOBS, sources_yaml

VALID = """\
defaults:
  ref: main
  include: ["README.md", "docs/**/*.md"]
  exclude: ["**/node_modules/**"]
  trust: reviewed
repos:
  - name: acme/handbook
    url: https://git.example.com/acme/handbook.git
    owners: [docs-team]
    trust: canonical
    include: ["docs/**/*.md", "config/*.yml"]
  - name: acme/notes
    url: /srv/git/notes
transcripts:
  enabled: false
  repos:
    - name: acme/calls
      url: file:///srv/git/calls
      include: ["calls/*.md"]
"""


@pytest.fixture(autouse=True)
def _repositories_under_srv(settings) -> None:
    """The examples name local repositories under /srv (besides the tests' own directories)."""
    settings.GIT_LOCAL_ROOTS = [*settings.GIT_LOCAL_ROOTS, Path("/srv")]


def problems(text: str) -> list[str]:
    with pytest.raises(RegistryInvalid) as caught:
        registry_parse(content=text, filename="sources.yml")
    return caught.value.errors


def test_valid_registry_applies_defaults_and_keeps_transcripts_disabled_and_never_canonical():
    registry = registry_parse(content=VALID, filename="sources.yml")
    handbook, notes, calls = registry.repositories
    assert handbook.__dict__ == {
        "name": "acme/handbook",
        "url": "https://git.example.com/acme/handbook.git",
        "ref": "main",
        "include": ("docs/**/*.md", "config/*.yml"),
        "exclude": ("**/node_modules/**",),
        "trust": "canonical",
        "owners": ("docs-team",),
        "enabled": True,
        "is_transcript": False,
    }
    assert (notes.include, notes.trust, notes.owners, notes.url) == (
        ("README.md", "docs/**/*.md"),
        "reviewed",
        (),
        "/srv/git/notes",
    )
    assert (calls.trust, calls.enabled, calls.is_transcript) == ("transcript", False, True)
    assert registry.transcripts_enabled is False


def test_bad_yaml_names_the_file_and_line():
    assert problems("repos:\n  - name: acme/x\n    url: [unclosed\n") == [
        "sources.yml:4: invalid YAML: expected ',' or ']', but got '<stream end>'"
    ]


def test_unknown_keys_are_errors_with_line_and_key_path():
    text = "repos:\n  - name: acme/x\n    url: /srv/x\n    include: ['*.md']\n    turst: canonical\nextra: 1\n"
    assert problems(text) == [
        "sources.yml:6: extra: unknown key; allowed keys: defaults, repos, transcripts",
        "sources.yml:5: repos[0].turst: unknown key; allowed keys: enabled, exclude, include, name, owners, ref, "
        "trust, url",
    ]


def test_globs_escaping_the_repository_are_refused():
    text = (
        "defaults:\n  include: ['docs/**/*.md']\nrepos:\n  - name: acme/x\n    url: /srv/x\n"
        "    include: ['../secrets/*.md', '/etc/*.conf']\n    exclude: ['docs/../../x']\n"
    )
    assert problems(text) == [
        "sources.yml:6: repos[0].include[0]: glob '../secrets/*.md' escapes the repository ('..' segments are "
        "not allowed)",
        "sources.yml:6: repos[0].include[1]: glob '/etc/*.conf' is absolute; globs are relative to the repository root",
        "sources.yml:7: repos[0].exclude[0]: glob 'docs/../../x' escapes the repository ('..' segments are not "
        "allowed)",
    ]


def test_urls_with_credentials_and_unsupported_schemes_are_refused():
    text = (
        "defaults:\n  include: ['*.md']\nrepos:\n"
        "  - name: acme/a\n    url: https://user:s3cret@git.example.com/a.git\n"
        "  - name: acme/b\n    url: https://ghp_token@git.example.com/b.git\n"
        "  - name: acme/c\n    url: git@github.com:acme/c.git\n"
        "  - name: acme/d\n    url: ftp://example.com/d\n"
    )
    errors = problems(text)
    assert errors == [
        "sources.yml:5: repos[0].url: credentials in the URL are not allowed; set GIT_HTTP_TOKEN instead",
        "sources.yml:7: repos[1].url: credentials in the URL are not allowed; set GIT_HTTP_TOKEN instead",
        "sources.yml:9: repos[2].url: SSH URLs are not supported; use an https URL with GIT_HTTP_TOKEN",
        "sources.yml:11: repos[3].url: unsupported URL scheme 'ftp'; use https://, http://, file:// or a local path",
    ]
    assert all("s3cret" not in error and "ghp_token" not in error for error in errors)


def test_missing_fields_duplicates_bad_types_and_transcript_trust_are_reported_together():
    text = (
        "repos:\n"
        "  - name: acme/a\n    url: /srv/a\n    include: ['*.md']\n"
        "  - name: acme/a\n    url: /srv/a2\n    include: ['*.md']\n"
        "  - name: not-a-name\n    include: '*.md'\n    trust: gold\n    enabled: maybe\n"
        "transcripts:\n  enabled: true\n  repos:\n    - name: acme/t\n      url: /srv/t\n"
        "      include: ['*.md']\n      trust: canonical\n"
    )
    assert problems(text) == [
        "sources.yml:5: repos[1].name: duplicate repository name 'acme/a'",
        "sources.yml:8: repos[2].name: 'not-a-name' is not of the form owner/name",
        "sources.yml:8: repos[2].url: missing (https URL, file:// URL or local path)",
        "sources.yml:11: repos[2].enabled: must be true or false",
        "sources.yml:9: repos[2].include: must be a list of strings",
        "sources.yml:10: repos[2].trust: unknown trust tier 'gold'; allowed: canonical, reviewed, community",
        "sources.yml:8: repos[2].include: no include globs (set them here or in defaults)",
        "sources.yml:18: transcripts.repos[0].trust: transcripts always have trust 'transcript' and are never "
        "canonical",
    ]
    assert problems("") == ["sources.yml: the file is empty; it needs a 'repos' list"]
    assert problems("- a\n- b\n") == ["sources.yml:1: must be a mapping"]


@pytest.mark.django_db
def test_registry_change_takes_effect_on_the_next_load_without_restart(registry_repo, handbook, tmp_path):
    other = tmp_path / "other"
    registry_repo(sources_yaml({"name": "acme/handbook", "url": str(handbook.path), **HANDBOOK_GLOBS}))
    registry_row, parsed = registry_load()
    assert [spec.name for spec in parsed.repositories] == ["acme/handbook"]
    first_commit = registry_row.commit

    registry_repo(
        sources_yaml(
            {"name": "acme/handbook", "url": str(handbook.path), "include": ["docs/**/*.md"], "enabled": "false"},
            {"name": "acme/other", "url": str(other), "include": ["*.md"], "trust": "community"},
        ),
        "disable handbook, add other",
    )
    registry_row, _ = registry_load()
    assert registry_row.commit != first_commit
    assert list(Repository.objects.order_by("name").values_list("name", "enabled", "include", "trust")) == [
        ("acme/handbook", False, ["docs/**/*.md"], "reviewed"),
        ("acme/other", True, ["*.md"], "community"),
    ]

    registry_repo(sources_yaml({"name": "acme/other", "url": str(other), "include": ["*.md"]}), "drop handbook")
    registry_load()
    assert list(Repository.objects.order_by("name").values_list("name", "enabled", "registry_id")) == [
        ("acme/handbook", False, registry_row.pk),
        ("acme/other", True, registry_row.pk),
    ]


@pytest.mark.django_db
def test_invalid_registry_keeps_the_last_good_one_and_the_repositories(registry_repo, handbook):
    registry_repo(sources_yaml({"name": "acme/handbook", "url": str(handbook.path), **HANDBOOK_GLOBS}))
    good, _ = registry_load()
    before = list(Repository.objects.values_list("name", "url", "include", "enabled", "updated_at"))

    registry_repo("repos:\n  - name: acme/handbook\n    url: https://me:pw@example.com/x.git\n", "break it")
    with pytest.raises(RegistryInvalid) as caught:
        registry_load()
    assert caught.value.errors == [
        "sources.yml:3: repos[0].url: credentials in the URL are not allowed; set GIT_HTTP_TOKEN instead",
        "sources.yml:2: repos[0].include: no include globs (set them here or in defaults)",
    ]
    row = Registry.objects.get()
    assert (row.commit, row.content, row.loaded_at) == (good.commit, good.content, good.loaded_at)
    assert row.last_error == "\n".join(caught.value.errors)
    assert row.last_error_at is not None
    assert list(Repository.objects.values_list("name", "url", "include", "enabled", "updated_at")) == before


@pytest.mark.django_db
def test_missing_registry_file_or_ref_is_an_invalid_registry(registry_repo, handbook, settings):
    registry_repo(sources_yaml({"name": "acme/handbook", "url": str(handbook.path), **HANDBOOK_GLOBS}))
    settings.SOURCE_REGISTRY_PATH = "missing.yml"
    with pytest.raises(RegistryInvalid) as caught:
        registry_load()
    assert len(caught.value.errors) == 1
    assert caught.value.errors[0].startswith("missing.yml: not found at commit ")
    settings.SOURCE_REGISTRY_PATH = "sources.yml"
    settings.SOURCE_REGISTRY_REF = "no-such-branch"
    with pytest.raises(RegistryInvalid) as caught:
        registry_load()
    assert caught.value.errors == [
        f"{settings.SOURCE_REGISTRY_REPO}: ref 'no-such-branch' not found in {settings.SOURCE_REGISTRY_REPO}"
    ]
    assert Repository.objects.count() == 0


@pytest.mark.parametrize("name", ["../..", "acme/..", "../handbook", "./x", "acme/."])
def test_a_repository_named_dot_or_dot_dot_is_refused_by_the_parser(name):
    text = f"repos:\n  - name: '{name}'\n    url: /srv/a\n    include: ['*.md']\n"

    assert problems(text) == [
        f"sources.yml:2: repos[0].name: '{name}' is not of the form owner/name ('.' and '..' are not names)"
    ]


@pytest.mark.django_db
def test_a_registry_naming_a_repository_dot_dot_is_refused_and_changes_nothing(registry_repo, handbook):
    registry_repo(sources_yaml({"name": "acme/handbook", "url": str(handbook.path), **HANDBOOK_GLOBS}))
    good, _ = registry_load()
    before = list(Repository.objects.values_list("name", "url", "include", "enabled", "updated_at"))

    registry_repo(sources_yaml({"name": "../..", "url": str(handbook.path), **HANDBOOK_GLOBS}), "climb out")
    with pytest.raises(RegistryInvalid) as caught:
        registry_load()

    assert caught.value.errors == [
        "sources.yml:2: repos[0].name: '../..' is not of the form owner/name ('.' and '..' are not names)"
    ]
    row = Registry.objects.get()
    assert (row.commit, row.content, row.loaded_at) == (good.commit, good.content, good.loaded_at)
    assert list(Repository.objects.values_list("name", "url", "include", "enabled", "updated_at")) == before
