"""A web host that never ran an ingest: gunicorn and the MCP server started with an empty git cache
and an empty VAR_DIR, after an ingest and a brand asset sync done in this process (a worker
elsewhere), with the upstream repositories deleted. Every citation's source_url, GET /sources, MCP
read_source and asset content answer from the database alone."""

from __future__ import annotations

import base64
import shutil
from pathlib import Path

import httpx
import pytest
from mcp_types import ImageContent

from brandassets.services import asset_registry_sync
from groundtruth.ingest.foreground import ingest_foreground
from groundtruth.models import Chunk, IngestStatus
from tests import celeryworker
from tests.brandassets.conftest import GOOGLE_PLAY_BADGE, LIGHT_LOGO, REGISTRY_TEMPLATE, brand_work_tree
from tests.gitrepos import GitWorkTree
from tests.groundtruth.conftest import HANDBOOK_GLOBS, sources_yaml
from tests.groundtruth.factories import service_key
from tests.liveserver import gunicorn_server, procfile_server
from tests.platform.test_mcp_server import call_tool

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_web_host_without_git_cache_or_var_dir_answers_every_source_and_asset(
    handbook: GitWorkTree, tmp_path: Path, settings
):
    brand = brand_work_tree(tmp_path / "brand")
    registry = GitWorkTree.create(tmp_path / "registry")
    registry.write("sources.yml", sources_yaml({"name": "acme/handbook", "url": str(handbook.path), **HANDBOOK_GLOBS}))
    registry.write("brand-assets.yml", REGISTRY_TEMPLATE.format(brand_url=brand.path))
    registry.commit("registry")
    settings.SOURCE_REGISTRY_REPO = str(registry.path)
    settings.SOURCE_REGISTRY_REF = "main"
    settings.SOURCE_REGISTRY_PATH = "sources.yml"
    settings.BRAND_ASSETS_PATH = "brand-assets.yml"
    settings.EMBEDDING_BACKEND = "none"
    # The worker's side: ingest and sync with its own git cache.
    [run] = ingest_foreground(repository_name="acme/handbook", ref=None)
    assert run.status == IngestStatus.SUCCEEDED, run.error
    assert asset_registry_sync().status == "synced"
    chunks = {chunk.pk: chunk.text for chunk in Chunk.objects.all()}
    # Upstream goes, and so does the worker's cache: nothing of git is left anywhere.
    for gone in (handbook.path, brand.path, registry.path, Path(settings.GIT_CACHE_DIR)):
        shutil.rmtree(gone)
    empty_cache, empty_var = tmp_path / "web-git-cache", tmp_path / "web-var"
    environment = {
        "DATABASE_URL": celeryworker.test_database_url(),
        "GIT_CACHE_DIR": str(empty_cache),
        "VAR_DIR": str(empty_var),
        "SOURCE_REGISTRY_REPO": str(registry.path),
        "SOURCE_REGISTRY_REF": "main",
        "SOURCE_REGISTRY_PATH": "sources.yml",
        "BRAND_ASSETS_PATH": "brand-assets.yml",
        "EMBEDDING_BACKEND": "none",
        "GROUNDTRUTH_PREFIX": "",
    }
    token = service_key("read")
    headers = {"Authorization": f"Bearer {token}"}

    with gunicorn_server(environment=environment, log_path=tmp_path / "web.log") as web:
        results = httpx.get(f"{web}/search", params={"q": "handbook install configure", "limit": 50}, headers=headers)
        sources = {
            hit["chunk_id"]: httpx.get(hit["citation"]["source_url"], headers=headers)
            for hit in results.json()["results"]
        }
        logo = httpx.get(f"{web}/assets/acme-app/logo/0/content", headers=headers)
    with procfile_server(
        name="mcp", port_variable="MCP_PORT", environment=environment, log_path=tmp_path / "mcp.log"
    ) as mcp:
        read = call_tool(
            f"{mcp}/mcp",
            token,
            "read_source",
            {"repo": "acme/handbook", "path": "docs/index.md", "commit": run.commit, "start": 1, "end": 1},
        )
        badge = call_tool(
            f"{mcp}/mcp", token, "fetch_brand_asset", {"product": "acme-app", "kind": "store-badge", "asset_index": 1}
        )

    assert results.status_code == 200
    assert sorted(sources) == sorted(chunks)
    for chunk_id, source in sources.items():
        assert source.status_code == 200, source.text
        assert source.json()["lines"] == chunks[chunk_id].split("\n")
    assert (logo.status_code, logo.content) == (200, LIGHT_LOGO)
    assert read.is_error is False
    assert read.structured_content["lines"] == ["# Handbook"]
    assert badge.is_error is False
    image = badge.content[1]
    assert isinstance(image, ImageContent)
    assert base64.b64decode(image.data) == GOOGLE_PLAY_BADGE
    # The web host never ran git: nothing was cloned or fetched into its cache.
    assert not empty_cache.exists()
