"""The source store (groundtruth/source_store.py): what an ingest stores, what GET /sources reads
from it on a host without the git cache or the upstream repository, which commits it answers
for, and which blobs the collection removes, by exact SHAs and counts."""

from __future__ import annotations

import hashlib
import io
import shutil

import pytest
from django.core.management import call_command

from groundtruth.ingest.foreground import ingest_foreground
from groundtruth.models import Chunk, IngestStatus, Repository, SourceBlob
from groundtruth.source_store import BlobText, source_blobs_collect, source_blobs_store
from tests.gitrepos import GitWorkTree
from tests.groundtruth.conftest import HANDBOOK_GLOBS, HANDBOOK_GUIDE, HANDBOOK_INDEX, HANDBOOK_SETTINGS, sources_yaml
from tests.groundtruth.factories import bearer, service_key

pytestmark = pytest.mark.django_db

README = "# Acme\n\nThe Acme handbook.\n"
INDEX_LATER = HANDBOOK_INDEX.replace("Intro paragraph", "A new intro paragraph")


def blob_sha(text: str) -> str:
    """git's blob SHA of a text (`git hash-object`)."""
    data = text.encode()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _ingested(repository_name: str) -> str:
    [run] = ingest_foreground(repository_name=repository_name, ref=None)
    assert run.status == IngestStatus.SUCCEEDED, run.error
    return run.commit


def _stored() -> set[str]:
    return set(SourceBlob.objects.values_list("sha", flat=True))


@pytest.fixture
def reader() -> dict[str, str]:
    return bearer(service_key("read"))


@pytest.fixture
def two_repositories(handbook, tmp_path, registry_repo, no_embeddings):
    """The handbook, and a mirror that holds the handbook's README byte for byte and a file of its own."""
    mirror = GitWorkTree.create(tmp_path / "mirror")
    mirror.write("README.md", README)
    mirror.write("docs/extra.md", "# Extra\n\nOnly in the mirror.\n")
    mirror.commit("mirror")
    registry_repo(
        sources_yaml(
            {"name": "acme/handbook", "url": str(handbook.path), **HANDBOOK_GLOBS},
            {"name": "acme/mirror", "url": str(mirror.path), "include": ["**/*.md"]},
        )
    )
    return handbook, mirror


def test_an_ingest_stores_each_indexed_text_once_per_blob_across_repositories(two_repositories):
    _ingested("acme/handbook")
    _ingested("acme/mirror")

    # Not the binary docs/logo.md, the excluded draft or the unselected src/app.py; the README
    # both repositories hold is one row.
    assert _stored() == {
        blob_sha(README),
        blob_sha(HANDBOOK_INDEX),
        blob_sha(HANDBOOK_GUIDE),
        blob_sha(HANDBOOK_SETTINGS),
        blob_sha("# Extra\n\nOnly in the mirror.\n"),
    }
    stored = SourceBlob.objects.get(sha=blob_sha(HANDBOOK_INDEX))
    assert (stored.text, stored.size) == (HANDBOOK_INDEX, len(HANDBOOK_INDEX.encode()))


def test_storing_again_is_idempotent(two_repositories):
    _ingested("acme/handbook")
    before = {blob.sha: (blob.text, blob.stored_at) for blob in SourceBlob.objects.all()}

    _ingested("acme/handbook")
    again = source_blobs_store(blobs=[BlobText(sha=blob_sha(README), text="something else", size=14)])

    assert again == 0
    assert {blob.sha: (blob.text, blob.stored_at) for blob in SourceBlob.objects.all()} == before


def test_blobs_no_stored_commit_cites_are_collected_and_shared_ones_kept(two_repositories):
    handbook, _mirror = two_repositories
    _ingested("acme/handbook")
    _ingested("acme/mirror")
    handbook.write("docs/index.md", INDEX_LATER)
    handbook.delete("docs/guide.rst")
    handbook.delete("README.md")
    handbook.commit("rewrite")

    _ingested("acme/handbook")  # collects what it stopped citing

    # The old index and the guide are gone; the README stays: the mirror still cites it.
    assert _stored() == {
        blob_sha(README),
        blob_sha(INDEX_LATER),
        blob_sha(HANDBOOK_SETTINGS),
        blob_sha("# Extra\n\nOnly in the mirror.\n"),
    }

    Repository.objects.filter(name="acme/mirror").delete()
    assert source_blobs_collect() == 2
    assert _stored() == {blob_sha(INDEX_LATER), blob_sha(HANDBOOK_SETTINGS)}
    assert source_blobs_collect() == 0


def test_a_failed_ingest_changes_nothing_served_and_its_blobs_are_collected(
    api_client, handbook, registry_repo, embedding_server, reader
):
    registry_repo(sources_yaml({"name": "acme/handbook", "url": str(handbook.path), **HANDBOOK_GLOBS}))
    first = _ingested("acme/handbook")
    handbook.write("docs/index.md", INDEX_LATER)
    later = handbook.commit("later")
    embedding_server.fail_with = 400  # the ingest dies inside its index transaction

    [run] = ingest_foreground(repository_name="acme/handbook", ref=None)

    assert (run.status, run.commit) == (IngestStatus.FAILED, later)
    # The previous good state is served: the index still cites the first commit's text.
    served = api_client.get("/sources/acme/handbook/docs/index.md", {"commit": first, "end": 3}, **reader)
    assert served.json()["lines"] == ["# Handbook", "", "Intro paragraph of the handbook."]
    # The text it stored before dying is cited by nothing, and goes at the next collection.
    assert blob_sha(INDEX_LATER) in _stored()
    assert source_blobs_collect() == 1
    assert blob_sha(INDEX_LATER) not in _stored()


def test_an_index_built_before_the_store_is_filled_by_its_next_ingest(
    api_client, handbook_registered, no_embeddings, reader
):
    commit = _ingested("acme/handbook")
    SourceBlob.objects.all().delete()

    [run] = ingest_foreground(repository_name="acme/handbook", ref=None)

    assert (run.status, run.files_unchanged, run.files_added, run.files_updated) == (IngestStatus.SUCCEEDED, 4, 0, 0)
    assert len(_stored()) == 4
    response = api_client.get("/sources/acme/handbook/docs/index.md", {"commit": commit, "end": 1}, **reader)
    assert response.json()["lines"] == ["# Handbook"]


def test_files_are_served_at_their_cited_commit_and_the_last_one_and_an_older_version_is_503(
    api_client, handbook_registered, no_embeddings, reader
):
    first = _ingested("acme/handbook")
    handbook_registered.write("docs/index.md", INDEX_LATER)
    second = handbook_registered.commit("later")
    _ingested("acme/handbook")

    readme_cited = api_client.get("/sources/acme/handbook/README.md", {"commit": first, "end": 1}, **reader)
    readme_last = api_client.get("/sources/acme/handbook/README.md", {"commit": second, "end": 1}, **reader)
    index_now = api_client.get("/sources/acme/handbook/docs/index.md", {"commit": second, "end": 3}, **reader)
    index_before = api_client.get("/sources/acme/handbook/docs/index.md", {"commit": first, "end": 3}, **reader)

    assert readme_cited.json()["lines"] == readme_last.json()["lines"] == ["# Acme"]
    assert index_now.json()["lines"] == ["# Handbook", "", "A new intro paragraph of the handbook."]
    assert index_before.status_code == 503
    assert index_before.json() == {
        "type": "urn:problem:source_unavailable",
        "title": "Service unavailable",
        "status": 503,
        "detail": f"docs/index.md at commit {first[:12]} of acme/handbook is not in the source store (the index "
        f"holds it at {second[:12]}): it keeps each indexed file at the commit its citations name and at the "
        f"last ingested commit ({second[:12]}).",
        "code": "source_unavailable",
    }


def test_every_citation_answers_with_the_git_cache_and_upstream_gone(
    api_client, handbook_registered, no_embeddings, reader, settings, tmp_path
):
    commit = _ingested("acme/handbook")
    shutil.rmtree(settings.GIT_CACHE_DIR)
    shutil.rmtree(handbook_registered.path)
    settings.GIT_CACHE_DIR = tmp_path / "empty-cache"  # a web host that never fetched anything

    chunks = {chunk.pk: chunk.text for chunk in Chunk.objects.all()}
    results = api_client.get("/search", {"q": "handbook install configure guide", "limit": 50}, **reader).json()

    assert sorted(result["chunk_id"] for result in results["results"]) == sorted(chunks)
    for result in results["results"]:
        source = api_client.get(result["citation"]["source_url"], **reader)
        assert source.status_code == 200, source.content
        assert source.json()["commit"] == commit
        assert source.json()["lines"] == chunks[result["chunk_id"]].split("\n")
    assert not (tmp_path / "empty-cache").exists()  # nothing was fetched or cloned


def test_the_command_shows_the_store_and_collects_what_nothing_cites(two_repositories):
    _ingested("acme/handbook")
    _ingested("acme/mirror")
    Repository.objects.filter(name="acme/mirror").delete()
    SourceBlob.objects.filter(sha=blob_sha(HANDBOOK_GUIDE)).delete()
    output = io.StringIO()

    call_command("source_store", "--collect", stdout=output)

    kept = [README, HANDBOOK_INDEX, HANDBOOK_SETTINGS]
    assert output.getvalue() == (
        "Collected 1 blobs no indexed file cites.\n"
        f"3 blobs, {sum(len(text.encode()) for text in kept)} bytes of text; "
        "1 indexed files without their text (stored by their next ingest).\n"
    )
