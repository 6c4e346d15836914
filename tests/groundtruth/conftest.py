"""Fixtures of the ground-truth ingest tests: real git repositories, a registry repository, a
local OpenAI-compatible embedding server, and an isolated git cache per test."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.embeddingserver import EmbeddingServer, embedding_server  # noqa: F401 (a fixture)
from tests.gitrepos import GitWorkTree


@pytest.fixture(autouse=True)
def _isolated_git_cache(settings, tmp_path: Path) -> None:
    settings.GIT_CACHE_DIR = tmp_path / "git-cache"
    settings.GIT_HTTP_TOKEN = ""


@pytest.fixture
def no_embeddings(settings) -> None:
    settings.EMBEDDING_BACKEND = "none"


HANDBOOK_INDEX = """\
# Handbook

Intro paragraph of the handbook.

## Install

Run `pip install acme`.

```sh
# not a heading
acme --version
```

## Configure

Set `ACME_TOKEN` in the environment.
"""

HANDBOOK_GUIDE = """\
Guide
=====

Overview of the guide.

Deploying
---------

Deploy with ``acme deploy``.
"""

HANDBOOK_SETTINGS = """\
# service settings
service:
  port: 8000
logging:
  level: info
"""


@pytest.fixture
def handbook(tmp_path: Path) -> GitWorkTree:
    """A documentation repository with one commit: Markdown, RST, YAML, a binary and an
    excluded draft."""
    tree = GitWorkTree.create(tmp_path / "handbook")
    tree.write("README.md", "# Acme\n\nThe Acme handbook.\n")
    tree.write("docs/index.md", HANDBOOK_INDEX)
    tree.write("docs/guide.rst", HANDBOOK_GUIDE)
    tree.write("docs/drafts/wip.md", "# Draft\n\nNot ready.\n")
    tree.write("docs/logo.md", b"\x89PNG\r\n\x1a\n\x00\x00binary")
    tree.write("config/settings.yml", HANDBOOK_SETTINGS)
    tree.write("src/app.py", "print('not selected')\n")
    tree.commit("first")
    return tree


def sources_yaml(*repos: dict[str, object], defaults: str = "", transcripts: str = "") -> str:
    lines = []
    if defaults:
        lines.append(defaults.rstrip("\n"))
    lines.append("repos:")
    for repo in repos:
        first = True
        for key, value in repo.items():
            prefix = "  - " if first else "    "
            first = False
            rendered = "[" + ", ".join(f'"{item}"' for item in value) + "]" if isinstance(value, list) else value
            lines.append(f"{prefix}{key}: {rendered}")
    if transcripts:
        lines.append(transcripts.rstrip("\n"))
    return "\n".join(lines) + "\n"


HANDBOOK_GLOBS = {
    "include": ["README.md", "docs/**/*.md", "docs/**/*.rst", "config/*.yml"],
    "exclude": ["**/drafts/**"],
}


@pytest.fixture
def registry_repo(settings, tmp_path: Path) -> Callable[..., GitWorkTree]:
    """Returns a function that commits a new sources.yml to the registry repository (created on
    first use) and points SOURCE_REGISTRY_REPO at it; with `synced=True` it then loads it into the
    Registry and Repository rows, as a worker does (web requests decide from those rows)."""
    tree: GitWorkTree | None = None

    def commit(content: str, message: str = "registry", *, synced: bool = False) -> GitWorkTree:
        nonlocal tree
        if tree is None:
            tree = GitWorkTree.create(tmp_path / "registry")
        tree.write("sources.yml", content)
        tree.commit(message)
        settings.SOURCE_REGISTRY_REPO = str(tree.path)
        settings.SOURCE_REGISTRY_REF = "main"
        settings.SOURCE_REGISTRY_PATH = "sources.yml"
        if synced:
            from groundtruth.services import registry_load  # the app, once Django is set up

            registry_load()
        return tree

    return commit


@pytest.fixture
def handbook_registered(handbook: GitWorkTree, registry_repo) -> GitWorkTree:
    registry_repo(
        sources_yaml({"name": "acme/handbook", "url": str(handbook.path), "trust": "canonical", **HANDBOOK_GLOBS}),
        synced=True,
    )
    return handbook
