"""The ingest pipeline against real git repositories, the real database and a local embedding server."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from groundtruth.ingest.chunking import file_lines
from groundtruth.ingest.foreground import ingest_foreground
from groundtruth.ingest.index_text import INDEX_VERSION, content_hash
from groundtruth.models import Chunk, CorpusStatistic, IngestStatus, LexemeStatistic, Repository, SourceFile
from groundtruth.search.everyday_words import everyday_lexemes
from tests.groundtruth.conftest import sources_yaml

pytestmark = pytest.mark.django_db


def test_first_ingest_indexes_selected_files_with_exact_citations(handbook_registered, embedding_server):
    [run] = ingest_foreground(repository_name="acme/handbook", ref=None)

    assert run.status == IngestStatus.SUCCEEDED, run.error
    commit = handbook_registered.head()
    assert run.commit == commit
    repository = Repository.objects.get(name="acme/handbook")
    assert sorted(SourceFile.objects.values_list("path", flat=True)) == [
        "README.md",
        "config/settings.yml",
        "docs/guide.rst",
        "docs/index.md",
    ]
    assert run.files_skipped == [["docs/logo.md", "binary"]]
    chunks = list(Chunk.objects.filter(repository=repository).order_by("path", "ordinal"))
    assert [(c.path, c.start_line, c.end_line, c.heading) for c in chunks] == [
        ("README.md", 1, 3, ["Acme"]),
        ("config/settings.yml", 1, 5, []),
        ("docs/guide.rst", 1, 4, ["Guide"]),
        ("docs/guide.rst", 6, 9, ["Guide", "Deploying"]),
        ("docs/index.md", 1, 3, ["Handbook"]),
        ("docs/index.md", 5, 12, ["Handbook", "Install"]),
        ("docs/index.md", 14, 16, ["Handbook", "Configure"]),
    ]
    for chunk in chunks:
        lines = file_lines(handbook_registered.show(commit, chunk.path).decode())
        assert chunk.text == "\n".join(lines[chunk.start_line - 1 : chunk.end_line])
        assert chunk.commit == commit
        assert chunk.trust == "canonical"
        assert chunk.embedding_model == "test-embed-32"
        assert len(chunk.embedding) == 32
        assert (chunk.heading_embedding is None) == (not chunk.heading)
        assert chunk.search_vector is not None
        assert chunk.lexeme_count > 0
    assert (run.files_added, run.chunks_added, run.chunks_embedded) == (4, 7, 7)
    repository.refresh_from_db()
    assert (repository.last_commit, repository.file_count, repository.chunk_count) == (commit, 4, 7)
    assert repository.index_version == INDEX_VERSION
    assert lexical_statistics(repository) == (7, sum(chunk.lexeme_count for chunk in chunks))


def lexical_statistics(repository: Repository) -> tuple[int, int]:
    """(chunk count, total length) of a repository's lexical statistics."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT document_count, total_length FROM groundtruth_corpus_statistic WHERE repository_id = %s",
            [repository.pk],
        )
        return cursor.fetchone()


# The MiniLM vocabulary's everyday lexemes the handbook's text uses ("install", "run", ...).
EVERYDAY_USED = 20


def everyday_counts(repository: Repository) -> tuple[float, int]:
    """The repository's everyday share times the number of everyday lexemes, and how many
    everyday lexemes its lexical statistics hold."""
    everyday = set(everyday_lexemes())
    lexemes = set(LexemeStatistic.objects.filter(repository=repository).values_list("lexeme", flat=True))
    share = CorpusStatistic.objects.get(repository=repository).everyday_share
    return round(share * len(everyday), 9), len(lexemes & everyday)


def test_an_ingest_recounts_the_everyday_share(handbook_registered, embedding_server):
    tree = handbook_registered
    ingest_foreground(repository_name="acme/handbook", ref=None)
    repository = Repository.objects.get(name="acme/handbook")
    assert everyday_counts(repository) == (EVERYDAY_USED, EVERYDAY_USED)

    # Four everyday words the handbook did not use: "upgrade", "every", "winter" and "weekend".
    tree.write("docs/index.md", tree.show("HEAD", "docs/index.md").decode() + "\n## Upgrade\n\nEvery winter weekend.\n")
    tree.commit("a section of everyday words")
    ingest_foreground(repository_name="acme/handbook", ref=None)

    assert everyday_counts(repository) == (EVERYDAY_USED + 4, EVERYDAY_USED + 4)


def chunk_rows(repository_name: str = "acme/handbook") -> list[tuple[str, int, int, str]]:
    return list(
        Chunk.objects.filter(repository__name=repository_name)
        .order_by("path", "ordinal")
        .values_list("path", "start_line", "end_line", "commit")
    )


def counts(run) -> dict[str, int]:
    fields = ["files_added", "files_updated", "files_removed", "files_unchanged"]
    fields += ["chunks_added", "chunks_updated", "chunks_removed", "chunks_unchanged", "chunks_embedded"]
    return {field: getattr(run, field) for field in fields}


def test_reingest_without_changes_reads_and_embeds_nothing(handbook_registered, embedding_server):
    ingest_foreground(repository_name="acme/handbook", ref=None)
    before = chunk_rows()
    requests_before = embedding_server.requests

    [run] = ingest_foreground(repository_name="acme/handbook", ref=None)

    assert run.status == IngestStatus.SUCCEEDED
    assert counts(run) == {
        "files_added": 0,
        "files_updated": 0,
        "files_removed": 0,
        "files_unchanged": 4,
        "chunks_added": 0,
        "chunks_updated": 0,
        "chunks_removed": 0,
        "chunks_unchanged": 7,
        "chunks_embedded": 0,
    }
    assert embedding_server.requests == requests_before
    assert chunk_rows() == before


def test_edits_renames_and_deletions_update_only_what_changed(handbook_registered, embedding_server):
    tree = handbook_registered
    handbook_first_commit = tree.head()
    ingest_foreground(repository_name="acme/handbook", ref=None)
    embedding_server.texts_embedded.clear()

    tree.write("docs/index.md", tree.show("HEAD", "docs/index.md").decode() + "\n## Upgrade\n\nRun `acme upgrade`.\n")
    tree.rename("docs/guide.rst", "docs/manual/guide.rst")
    tree.delete("config/settings.yml")
    second = tree.commit("edit, rename, delete")

    [run] = ingest_foreground(repository_name="acme/handbook", ref=None)

    assert run.status == IngestStatus.SUCCEEDED, run.error
    assert counts(run) == {
        "files_added": 1,  # docs/manual/guide.rst
        "files_updated": 1,  # docs/index.md
        "files_removed": 2,  # docs/guide.rst (renamed away), config/settings.yml
        "files_unchanged": 1,  # README.md
        "chunks_added": 2 + 1,  # the renamed file's two chunks, the new Upgrade section
        "chunks_updated": 3,
        "chunks_removed": 2 + 1,
        "chunks_unchanged": 1,
        "chunks_embedded": 1,  # only the Upgrade section: the rest is reused by content hash
    }
    # The new section's passage (repository label, heading trail, text) and its title.
    assert embedding_server.texts_embedded == [
        "handbook: Handbook > Upgrade\n## Upgrade\n\nRun `acme upgrade`.",
        "Upgrade",
    ]
    first = handbook_first_commit
    assert chunk_rows() == [
        ("README.md", 1, 3, first),  # unchanged blob: cited at the commit it was indexed at
        ("docs/index.md", 1, 3, second),
        ("docs/index.md", 5, 12, second),
        ("docs/index.md", 14, 16, second),
        ("docs/index.md", 18, 20, second),
        ("docs/manual/guide.rst", 1, 4, second),
        ("docs/manual/guide.rst", 6, 9, second),
    ]
    assert sorted(SourceFile.objects.values_list("path", "commit")) == [
        ("README.md", first),
        ("docs/index.md", second),
        ("docs/manual/guide.rst", second),
    ]
    for chunk in Chunk.objects.all():
        for commit in {chunk.commit, second}:  # exact at its own commit and at the indexed one
            lines = file_lines(tree.show(commit, chunk.path).decode())
            assert chunk.text == "\n".join(lines[chunk.start_line - 1 : chunk.end_line])
    repository = Repository.objects.get()
    assert (repository.file_count, repository.chunk_count, repository.last_commit) == (3, 7, second)


def test_symlinks_inside_are_followed_and_those_leaving_the_repository_or_too_big_files_are_skipped(
    handbook, registry_repo, embedding_server, settings
):
    settings.INGEST_MAX_FILE_BYTES = 200
    handbook.symlink("docs/alias.md", "../README.md")
    handbook.symlink("docs/escape.md", "../../outside.md")
    handbook.symlink("docs/absolute.md", "/etc/hostname")
    handbook.symlink("docs/dangling.md", "nowhere.md")
    handbook.write("docs/huge.md", "# Huge\n\n" + "text " * 100)
    handbook.commit("links")
    registry_repo(sources_yaml({"name": "acme/handbook", "url": str(handbook.path), "include": ["docs/*.md"]}))

    [run] = ingest_foreground(repository_name="acme/handbook", ref=None)

    assert run.status == IngestStatus.SUCCEEDED, run.error
    assert sorted(map(tuple, run.files_skipped)) == [
        ("docs/absolute.md", "symlink leaves the repository"),
        ("docs/dangling.md", "symlink points at nothing in the commit"),
        ("docs/escape.md", "symlink leaves the repository"),
        ("docs/huge.md", "larger than 200 bytes"),
        ("docs/logo.md", "binary"),
    ]
    assert sorted(SourceFile.objects.values_list("path", flat=True)) == ["docs/alias.md", "docs/index.md"]
    alias = Chunk.objects.get(path="docs/alias.md")
    assert (alias.start_line, alias.end_line, alias.text) == (1, 3, "# Acme\n\nThe Acme handbook.")


def test_ingest_at_a_tag_or_commit_given_as_ref(handbook_registered, embedding_server):
    tree = handbook_registered
    first = tree.head()
    tree.tag("v1")
    tree.delete("README.md")
    tree.commit("drop readme")

    [run] = ingest_foreground(repository_name="acme/handbook", ref="v1")
    assert (run.status, run.ref, run.commit, run.files_added) == (IngestStatus.SUCCEEDED, "v1", first, 4)

    [run] = ingest_foreground(repository_name="acme/handbook", ref=None)
    assert (run.status, run.ref, run.files_removed) == (IngestStatus.SUCCEEDED, "main", 1)

    [run] = ingest_foreground(repository_name="acme/handbook", ref=first)
    assert (run.status, run.commit, run.files_added) == (IngestStatus.SUCCEEDED, first, 1)


def test_failed_run_leaves_the_previous_index_served(handbook_registered, embedding_server):
    tree = handbook_registered
    ingest_foreground(repository_name="acme/handbook", ref=None)
    before = chunk_rows()
    first = tree.head()

    tree.write("docs/index.md", "# Rewritten\n\nEverything changed.\n")
    tree.commit("rewrite")
    embedding_server.fail_with = 400  # a terminal error of the embedding endpoint, mid-ingest

    [run] = ingest_foreground(repository_name="acme/handbook", ref=None)

    assert run.status == IngestStatus.FAILED
    assert run.error.startswith("EmbeddingError: embedding endpoint ")
    assert run.error.endswith("refused the request: 400")
    assert chunk_rows() == before
    assert all(commit == first for *_, commit in before)
    assert Repository.objects.get().last_commit == first

    [run] = ingest_foreground(repository_name="acme/handbook", ref="no-such-ref")
    assert run.status == IngestStatus.FAILED
    assert run.error == f"GitError: ref 'no-such-ref' not found in {tree.path}"
    assert chunk_rows() == before


def test_network_errors_of_the_embedding_endpoint_fail_a_foreground_run_and_keep_the_index(
    handbook_registered, embedding_server
):
    ingest_foreground(repository_name="acme/handbook", ref=None)
    before = chunk_rows()
    handbook_registered.write("docs/new.md", "# New\n\nNew page.\n")
    handbook_registered.commit("new page")
    embedding_server.fail_with = 503

    [run] = ingest_foreground(repository_name="acme/handbook", ref=None)

    assert run.status == IngestStatus.FAILED
    assert "answered 503" in run.error
    assert chunk_rows() == before


@pytest.mark.django_db(transaction=True)  # the new model's index is DDL after chunk writes: real commits
def test_model_change_without_reembed_is_a_clear_error_and_reembed_fixes_it(
    handbook_registered, embedding_server, settings
):
    from django.core.management import call_command

    ingest_foreground(repository_name="acme/handbook", ref=None)
    other = embedding_server.__class__(dimension=16, model="other-embed-16").start()
    try:
        settings.EMBEDDING_URL = other.base_url
        settings.EMBEDDING_MODEL = other.model

        [run] = ingest_foreground(repository_name="acme/handbook", ref=None)
        assert run.status == IngestStatus.FAILED
        assert run.error == (
            "EmbeddingMismatch: Stored vectors do not match the configured embedding model 'other-embed-16' "
            "(dimension 16): 7 chunks by 'test-embed-32' (dimension 32). Run `python manage.py reembed` to "
            "re-embed every chunk with the configured model."
        )

        call_command("reembed", "--no-progress", stdout=open("/dev/null", "w"))
        assert set(Chunk.objects.values_list("embedding_model", flat=True)) == {"other-embed-16"}
        assert {len(vector) for vector in Chunk.objects.values_list("embedding", flat=True)} == {16}
        # One probe learnt the dimension, then the 7 passages and their 6 distinct titles.
        assert other.texts_embedded[0] == "dimension probe"
        assert len(other.texts_embedded) == 1 + 7 + 6
        assert sorted(other.texts_embedded[8:]) == ["Acme", "Configure", "Deploying", "Guide", "Handbook", "Install"]

        [run] = ingest_foreground(repository_name="acme/handbook", ref=None)
        assert (run.status, run.chunks_embedded) == (IngestStatus.SUCCEEDED, 0)
    finally:
        other.stop()


def test_without_embeddings_chunks_are_stored_without_vectors(handbook_registered, no_embeddings):
    [run] = ingest_foreground(repository_name="acme/handbook", ref=None)
    assert (run.status, run.chunks_added, run.chunks_embedded) == (IngestStatus.SUCCEEDED, 7, 0)
    assert set(Chunk.objects.values_list("embedding", "embedding_model")) == {(None, "")}


def test_registry_glob_change_applies_on_next_ingest(handbook_registered, registry_repo, embedding_server):
    ingest_foreground(repository_name="acme/handbook", ref=None)
    registry_repo(
        sources_yaml(
            {"name": "acme/handbook", "url": str(handbook_registered.path), "include": ["docs/**/*.md", "src/*.py"]}
        ),
        "narrow globs",
    )
    [run] = ingest_foreground(repository_name="acme/handbook", ref=None)
    assert (run.files_added, run.files_removed, run.files_unchanged) == (2, 3, 1)
    assert sorted(SourceFile.objects.values_list("path", flat=True)) == [
        "docs/drafts/wip.md",
        "docs/index.md",
        "src/app.py",
    ]


def _index_of_an_older_recipe(repository: Repository) -> None:
    """What a repository indexed before index version 2 looks like: another content hash, no
    title vectors."""
    Repository.objects.filter(pk=repository.pk).update(index_version=1)
    Chunk.objects.filter(repository=repository).update(content_hash="older recipe", heading_embedding=None)


def test_reindex_rebuilds_an_index_of_an_older_recipe_at_the_commit_it_reflects(handbook_registered, embedding_server):
    tree = handbook_registered
    indexed_commit = tree.head()
    ingest_foreground(repository_name="acme/handbook", ref=None)
    repository = Repository.objects.get(name="acme/handbook")
    _index_of_an_older_recipe(repository)
    tree.write("docs/new.md", "# New\n\nNot indexed yet.\n")
    tree.commit("a newer commit")
    embedding_server.texts_embedded.clear()
    out = io.StringIO()

    call_command("reindex", "--no-progress", stdout=out)

    repository.refresh_from_db()
    assert (repository.index_version, repository.last_commit, repository.chunk_count) == (
        INDEX_VERSION,
        indexed_commit,
        7,
    )
    chunks = list(Chunk.objects.filter(repository=repository).order_by("path", "ordinal"))
    assert [chunk.content_hash for chunk in chunks] == [
        content_hash(repository_name="acme/handbook", heading=chunk.heading, text=chunk.text) for chunk in chunks
    ]
    assert [chunk.heading_embedding is not None for chunk in chunks] == [bool(chunk.heading) for chunk in chunks]
    assert {chunk.commit for chunk in chunks} == {indexed_commit}
    assert len(embedding_server.texts_embedded) == 7 + 6  # every passage and each distinct title
    [line] = out.getvalue().splitlines()
    assert line.startswith(f"acme/handbook @ {indexed_commit[:12]}: run ")
    assert "succeeded: files +0 ~4 -0 =0; chunks +0 ~7 -0 =0, 7 embedded" in line

    out = io.StringIO()
    call_command("reindex", "--no-progress", stdout=out)
    assert out.getvalue() == f"Every index is current (index version {INDEX_VERSION}); nothing to rebuild.\n"


def test_a_failed_reindex_keeps_the_previous_index_served(handbook_registered, embedding_server):
    ingest_foreground(repository_name="acme/handbook", ref=None)
    repository = Repository.objects.get(name="acme/handbook")
    _index_of_an_older_recipe(repository)
    before = list(Chunk.objects.filter(repository=repository).order_by("pk").values_list("pk", "content_hash", "text"))
    embedding_server.fail_with = 400

    with pytest.raises(CommandError, match="could not be rebuilt; its previous index is still served"):
        call_command("reindex", "acme/handbook", "--no-progress", stdout=io.StringIO())

    assert (
        list(Chunk.objects.filter(repository=repository).order_by("pk").values_list("pk", "content_hash", "text"))
        == before
    )
    repository.refresh_from_db()
    assert repository.index_version == 1


def test_reindex_of_an_unknown_repository_is_a_clear_error(handbook_registered, embedding_server):
    with pytest.raises(CommandError, match="No enabled repository named 'acme/nope'"):
        call_command("reindex", "acme/nope", "--no-progress", stdout=io.StringIO())
