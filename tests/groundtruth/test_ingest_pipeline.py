"""The ingest pipeline against real git repositories, the real database and a local embedding server."""

from __future__ import annotations

import pytest

from groundtruth.ingest.chunking import file_lines
from groundtruth.models import Chunk, IngestStatus, Repository, SourceFile
from groundtruth.services import ingest_foreground

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
        assert chunk.search_vector is not None
        assert chunk.lexeme_count > 0
    assert (run.files_added, run.chunks_added, run.chunks_embedded) == (4, 7, 7)
    repository.refresh_from_db()
    assert (repository.last_commit, repository.file_count, repository.chunk_count) == (commit, 4, 7)
