"""Files a repository may hold that once failed a run or made a search answer 500: names no
citation can link to, a NUL byte past the binary sniff, lines longer than any chunk."""

from __future__ import annotations

import json

import pytest
from django.db.models.functions import Length

from groundtruth.ingest.chunking import HEADING_TITLE_MAX_CHARS, ChunkDraft, file_chunk
from groundtruth.ingest.foreground import ingest_foreground
from groundtruth.models import Chunk, IngestStatus, Repository, SourceFile
from groundtruth.search.lexical_search import lexical_query_build
from groundtruth.search.snippets import snippets_narrow
from tests.gitrepos import GitWorkTree
from tests.groundtruth.conftest import sources_yaml
from tests.groundtruth.factories import RepositoryFactory, bearer, service_key
from tests.groundtruth.search_fixtures import COMMIT, Section, chunks_index

pytestmark = pytest.mark.django_db

LONG_DIRECTORY = "d" * 200
LONG_PATH = "docs/" + "/".join([LONG_DIRECTORY] * 5) + "/long.md"  # 1013 characters
ODD_PATH = "docs/odd 100%25 ?x=1#frag & name.md"


@pytest.fixture
def reader() -> dict[str, str]:
    return bearer(service_key("read"))


def registered(registry_repo, tree: GitWorkTree) -> None:
    registry_repo(sources_yaml({"name": "acme/hostile", "url": str(tree.path), "include": ["docs/**"]}))


def test_paths_no_citation_can_link_are_skipped_with_their_reason_and_the_others_are_searched_and_served(
    api_client, registry_repo, embedding_server, reader, tmp_path
):
    tree = GitWorkTree.create(tmp_path / "hostile")
    tree.write("docs/evil\nname.md", "# Evil\n\nzebracorn behind a newline.\n")
    tree.write("docs/tab\tname.md", "# Tab\n\nzebracorn behind a tab.\n")
    tree.write("docs/caf\udce9.md", "# Latin-1\n\nzebracorn in a name that is not UTF-8.\n")
    tree.write(LONG_PATH, "# Long\n\nzebracorn at the end of a long path.\n")
    tree.write(ODD_PATH, "# Odd\n\nzebracorn behind percent, question mark, hash and spaces.\n")
    tree.write("docs/plain.md", "# Plain\n\nzebracorn in plain sight.\n")
    commit = tree.commit("hostile names")
    registered(registry_repo, tree)

    [run] = ingest_foreground(repository_name="acme/hostile", ref=None)

    assert run.status == IngestStatus.SUCCEEDED, run.error
    assert sorted(map(tuple, run.files_skipped)) == [
        ("docs/caf\\xe9.md", "path is not UTF-8"),
        (LONG_PATH, "path longer than 1000 characters"),
        ("docs/evil\nname.md", "path has a control character (newline, tab, ...): no source_url can cite it"),
        ("docs/tab\tname.md", "path has a control character (newline, tab, ...): no source_url can cite it"),
    ]
    assert sorted(SourceFile.objects.values_list("path", flat=True)) == [ODD_PATH, "docs/plain.md"]

    response = api_client.get("/search", {"q": "zebracorn", "repo": "acme/hostile"}, **reader)
    assert response.status_code == 200
    citations = sorted((hit["citation"] for hit in response.json()["results"]), key=lambda c: c["path"])
    assert [(c["path"], c["line"], c["end_line"], c["commit"]) for c in citations] == [
        (ODD_PATH, 1, 3, commit),
        ("docs/plain.md", 1, 3, commit),
    ]
    assert citations[0]["source_url"] == (
        "http://testserver/sources/acme/hostile/docs/odd%20100%2525%20%3Fx=1%23frag%20&%20name.md"
        f"?commit={commit}&start=1&end=3"
    )
    for citation in citations:
        served = api_client.get(citation["source_url"].removeprefix("http://testserver"), **reader)
        assert served.status_code == 200, served.content
        assert (served.json()["path"], served.json()["lines"][0]) == (citation["path"], served.json()["lines"][0])


def test_a_newline_in_a_file_name_never_makes_search_fail(
    api_client, registry_repo, embedding_server, reader, tmp_path
):
    tree = GitWorkTree.create(tmp_path / "hostile")
    tree.write("docs/evil\nname.md", "# Evil\n\nzebracorn behind a newline.\n")
    tree.write("docs/plain.md", "# Plain\n\nzebracorn in plain sight.\n")
    tree.commit("a newline in a name")
    registered(registry_repo, tree)

    [run] = ingest_foreground(repository_name="acme/hostile", ref=None)

    # Before: NoReverseMatch building the source_url of the newline's chunk, a 500.
    response = api_client.get("/search", {"q": "zebracorn"}, **reader)
    assert response.status_code == 200
    assert [hit["citation"]["path"] for hit in response.json()["results"]] == ["docs/plain.md"]
    assert run.files_skipped == [
        ["docs/evil\nname.md", "path has a control character (newline, tab, ...): no source_url can cite it"]
    ]


def test_a_nul_byte_after_the_first_8_kib_skips_that_file_and_indexes_the_rest(
    registry_repo, embedding_server, tmp_path
):
    tree = GitWorkTree.create(tmp_path / "hostile")
    tree.write("docs/late-nul.md", b"# Late NUL\n\n" + b"text " * 2000 + b"\0 after 10 KB\n")
    tree.write("docs/early-nul.md", b"# Early\0NUL\n")
    tree.write("docs/good.md", "# Good\n\nIndexed.\n")
    commit = tree.commit("a NUL byte past the sniff")
    registered(registry_repo, tree)

    [run] = ingest_foreground(repository_name="acme/hostile", ref=None)

    assert run.status == IngestStatus.SUCCEEDED, run.error
    assert sorted(map(tuple, run.files_skipped)) == [
        ("docs/early-nul.md", "binary"),
        ("docs/late-nul.md", "NUL byte at byte 10012: PostgreSQL text cannot hold it"),
    ]
    assert list(Chunk.objects.values_list("path", "text")) == [("docs/good.md", "# Good\n\nIndexed.")]
    assert Repository.objects.get().last_commit == commit


def test_a_line_longer_than_a_chunk_is_cut_by_characters_and_cites_its_line():
    text = "# Long\n\n" + "x" * 2500 + "\n\nafter\n"

    drafts = file_chunk(path="docs/long.md", text=text, max_chars=1000, config_whole_max_chars=3000)

    assert [(d.start_line, d.end_line, len(d.text)) for d in drafts] == [
        (1, 1, 6),
        (3, 3, 1000),
        (3, 3, 1000),
        (3, 3, 500),
        (5, 5, 5),
    ]
    assert "".join(d.text for d in drafts[1:4]) == "x" * 2500


def test_a_long_line_of_words_is_cut_at_spaces_in_the_second_half_of_the_window():
    line = " ".join(["word"] * 500)  # 2499 characters

    drafts = file_chunk(path="notes.txt", text=line + "\n", max_chars=1000, config_whole_max_chars=3000)

    # 1000 characters end in the middle of a word; the last space before it is at 999 - 4.
    assert [(d.start_line, d.end_line, len(d.text)) for d in drafts] == [(1, 1, 999), (1, 1, 999), (1, 1, 499)]
    assert " ".join(d.text for d in drafts) == line


def test_a_huge_heading_is_cut_in_the_trail_and_its_line_in_the_chunks():
    title = "h" * 3000
    text = f"# {title}\n\nBody text.\n"

    drafts = file_chunk(path="docs/title.md", text=text, max_chars=1000, config_whole_max_chars=3000)

    cut = ("h" * (HEADING_TITLE_MAX_CHARS - 1) + "…",)
    assert drafts == [
        ChunkDraft(1, 1, cut, "# " + "h" * 998),
        ChunkDraft(1, 1, cut, "h" * 1000),
        ChunkDraft(1, 1, cut, "h" * 1000),
        ChunkDraft(1, 1, cut, "h" * 2),
        ChunkDraft(3, 3, cut, "Body text."),
    ]


def test_lines_that_fit_are_unchanged_and_keep_their_breaks():
    text = "# Short\n\n" + "\n".join(f"line {number}" for number in range(300)) + "\n"

    drafts = file_chunk(path="docs/short.md", text=text, max_chars=1000, config_whole_max_chars=3000)

    assert all(len(d.text) <= 1000 for d in drafts)
    lines = text.split("\n")
    for draft in drafts:
        assert draft.text == "\n".join(lines[draft.start_line - 1 : draft.end_line])


def test_a_900000_character_line_is_indexed_in_chunks_of_chunk_max_chars_and_searched_in_small_bodies(
    api_client, registry_repo, embedding_server, reader, settings, tmp_path
):
    settings.CHUNK_MAX_CHARS = 1500
    tree = GitWorkTree.create(tmp_path / "hostile")
    tree.write("docs/one-line.md", "# One line\n\n" + "zebracorn " * 90_000 + "\n")
    tree.write("docs/title.md", "# " + "t" * 200_000 + "\n\nzebracorn under a long title.\n")
    tree.commit("long lines")
    registered(registry_repo, tree)

    [run] = ingest_foreground(repository_name="acme/hostile", ref=None)

    assert run.status == IngestStatus.SUCCEEDED, run.error
    lengths = list(Chunk.objects.filter(path="docs/one-line.md").order_by("ordinal").values_list("text", flat=True))
    # 90,000 words of 10 characters with their spaces: 1,499 characters (149 words and one
    # space short of 1,500 would cut a word) per chunk, the heading alone first.
    assert [len(text) for text in lengths[:3]] == [10, 1499, 1499]
    assert max(len(text) for text in lengths) == 1499
    assert len(lengths) == 1 + 600
    titled = list(Chunk.objects.filter(path="docs/title.md").values_list("heading", flat=True))
    assert {len(heading[0]) for heading in titled} == {HEADING_TITLE_MAX_CHARS}
    assert Chunk.objects.annotate(length=Length("text")).filter(length__gt=1500).count() == 0

    response = api_client.get("/search", {"q": "zebracorn", "repo": "acme/hostile", "limit": 10}, **reader)
    assert response.status_code == 200
    results = response.json()["results"]
    assert len(results) == 10
    assert max(len(hit["text"]) for hit in results) <= 1500
    assert len(response.content) < 10 * (1500 + 1000)


def test_a_snippet_of_one_long_line_is_cut_to_ask_snippet_max_chars(settings, embedding_server):
    settings.ASK_SNIPPET_MAX_CHARS = 300
    repository = RepositoryFactory()
    (long_line,) = chunks_index(
        repository, [Section(path="a.md", heading=(), text="zebra " * 400 + "end", start_line=12)]
    )
    (three_lines,) = chunks_index(
        repository,
        [Section(path="b.md", heading=(), text="\n".join(["zebra " * 30] * 3), start_line=5)],
    )

    first, second = snippets_narrow(
        chunks=[long_line, three_lines], query=lexical_query_build(text="zebra"), max_lines=8
    )

    assert (first.text, first.start_line, first.end_line) == (("zebra " * 50), 12, 12)
    # Two lines of 180 characters and their break would be 361: the first line alone.
    assert (second.text, second.start_line, second.end_line) == ("zebra " * 30, 5, 5)


def test_the_default_snippet_is_never_longer_than_ask_snippet_max_chars(settings, embedding_server):
    repository = RepositoryFactory()
    (chunk,) = chunks_index(repository, [Section(path="a.md", heading=(), text="zebra " * 150_000, start_line=1)])

    (snippet,) = snippets_narrow(chunks=[chunk], query=lexical_query_build(text="zebra"), max_lines=8)

    assert len(snippet.text) == settings.ASK_SNIPPET_MAX_CHARS == 1500
    assert json.dumps(snippet.text)  # a plain string, as the answer serializes it


def test_a_chunk_of_a_newline_path_indexed_before_the_skip_is_searched_with_a_source_url_that_is_404(
    api_client, embedding_server, reader
):
    repository = RepositoryFactory(name="acme/old")
    chunks_index(repository, [Section(path="docs/evil\nname.md", heading=(), text="zebracorn of old", start_line=1)])

    response = api_client.get("/search", {"q": "zebracorn"}, **reader)

    assert response.status_code == 200
    [hit] = response.json()["results"]
    assert hit["citation"]["source_url"] == (
        f"http://testserver/sources/acme/old/docs/evil%0Aname.md?commit={COMMIT}&start=1&end=1"
    )
    served = api_client.get(hit["citation"]["source_url"].removeprefix("http://testserver"), **reader)
    assert (served.status_code, served.json()["code"]) == (404, "not_found")
