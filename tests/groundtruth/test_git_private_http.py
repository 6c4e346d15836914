"""A private repository behind a token-gated git HTTP server on 127.0.0.1: the token from
GIT_HTTP_TOKEN opens it, and never shows up in argv, URLs, the git cache, run errors, logs or /repos."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from agents.services import api_key_create
from groundtruth.ingest.foreground import ingest_foreground
from groundtruth.ingest.git_access import GitError, GitNetworkError, GitRepository
from groundtruth.models import Chunk, IngestStatus
from tests.gitrepos import GitWorkTree
from tests.gitserver import GitHttpServer, served_bare_clone, update_served
from tests.groundtruth.conftest import sources_yaml

TOKEN = "tok_9f8e7d6c5b4a39281706"


@pytest.fixture
def private_repo(tmp_path: Path):
    tree = GitWorkTree.create(tmp_path / "private-src")
    tree.write("docs/secret-plan.md", "# Plan\n\nShip the private feature in May.\n")
    tree.commit("plan")
    with GitHttpServer(project_root=tmp_path / "served", token=TOKEN) as server:
        served = served_bare_clone(tree.path, server.project_root, "acme/private.git")
        yield tree, server, served


@pytest.mark.django_db
def test_private_repository_needs_the_token_and_the_token_never_leaks(
    private_repo, registry_repo, embedding_server, settings, api_client, caplog
):
    tree, server, served = private_repo
    url = server.url_for("acme/private.git")
    registry_repo(sources_yaml({"name": "acme/private", "url": url, "include": ["docs/**/*.md"]}))
    caplog.set_level(logging.DEBUG)

    [refused] = ingest_foreground(repository_name="acme/private", ref=None)
    assert refused.status == IngestStatus.FAILED
    assert refused.error.startswith(
        f"GitError: git fetch failed for {url}: authentication required or refused (check GIT_HTTP_TOKEN)"
    )
    assert Chunk.objects.count() == 0

    settings.GIT_HTTP_TOKEN = TOKEN
    settings.GIT_HTTP_TOKEN_HOSTS = ["127.0.0.1"]
    [run] = ingest_foreground(repository_name="acme/private", ref=None)
    assert run.status == IngestStatus.SUCCEEDED, run.error
    assert list(Chunk.objects.values_list("path", "text")) == [
        ("docs/secret-plan.md", "# Plan\n\nShip the private feature in May.")
    ]

    tree.write("docs/secret-plan.md", "# Plan\n\nShip the private feature in June.\n")
    second = tree.commit("slip")
    update_served(tree.path, served)
    [run] = ingest_foreground(repository_name="acme/private", ref=None)
    assert (run.status, run.commit, run.files_updated) == (IngestStatus.SUCCEEDED, second, 1)

    authorized = [request for request in server.requests if request.authorized]
    assert authorized and all(request.authorization_header_present for request in authorized)
    assert all(TOKEN not in request.path for request in server.requests)
    for config in (settings.GIT_CACHE_DIR).glob("*/config"):
        text = config.read_text()
        assert TOKEN not in text and "extraheader" not in text.lower() and "[remote" not in text
    assert TOKEN not in refused.error and TOKEN not in caplog.text

    _, secret = api_key_create(kind="service", name="reader", scopes=["read"])
    response = api_client.get("/repos", HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert response.status_code == 200
    assert response.json()["repositories"][0]["url"] == url
    assert TOKEN not in response.content.decode()


def test_token_is_sent_only_to_http_hosts_it_is_meant_for(private_repo, settings, tmp_path):
    _, server, _ = private_repo
    url = server.url_for("acme/private.git")

    settings.GIT_HTTP_TOKEN_HOSTS = ["git.example.com"]
    with pytest.raises(GitError, match="authentication required or refused"):
        GitRepository(url, token=TOKEN).fetch()
    assert not any(request.authorization_header_present for request in server.requests)

    settings.GIT_HTTP_TOKEN_HOSTS = ["127.0.0.1"]
    repository = GitRepository(url, token=TOKEN)
    repository.fetch()
    assert len(repository.resolve("main")) == 40

    local = GitRepository(str(tmp_path / "private-src"), token=TOKEN)
    assert not any(value.startswith("Authorization:") for value in local._environment().values())  # local path


def test_unreachable_host_is_a_network_error_worth_retrying(tmp_path):
    with GitHttpServer(project_root=tmp_path / "gone") as server:
        url = server.url_for("acme/x.git")
    with pytest.raises(GitNetworkError, match=r"Could not connect|Failed to connect|Couldn't connect"):
        GitRepository(url).fetch()
