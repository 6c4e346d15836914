"""GET /sources/<repo>/<path>: exact lines from the source store, against real git repositories and a
real ingest; and every citation of /search and /ask, followed through its `source_url`, shows
exactly the lines the index cites."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from rest_framework.test import APIRequestFactory

from agentplatform.plumbing.errors import InvalidInput
from groundtruth.ingest.foreground import ingest_foreground
from groundtruth.ingest.git_access import GitError, GitRepository
from groundtruth.models import Chunk, IngestStatus, Repository, SourceBlob
from groundtruth.search.citations import citation_for
from groundtruth.search_serializers import CitationSerializer
from groundtruth.source_lines import read_source_lines
from tests.gitrepos import GitWorkTree
from tests.groundtruth.conftest import HANDBOOK_GLOBS, HANDBOOK_INDEX, sources_yaml
from tests.groundtruth.factories import IngestRunFactory, bearer, service_key

pytestmark = pytest.mark.django_db

INDEX_PATH = "/sources/acme/handbook/docs/index.md"
FERRITE_CORPUS = Path(__file__).resolve().parents[2] / "benchmarks" / "corpus" / "ferrite"


def _ingested(repository_name: str = "acme/handbook") -> str:
    [run] = ingest_foreground(repository_name=repository_name, ref=None)
    assert run.status == IngestStatus.SUCCEEDED, run.error
    return run.commit


@pytest.fixture
def commit(handbook_registered, no_embeddings) -> str:
    return _ingested()


@pytest.fixture
def reader() -> dict[str, str]:
    return bearer(service_key("read"))


def _problem(response) -> dict:
    assert response["Content-Type"] == "application/problem+json"
    return response.json()


def test_lines_of_an_indexed_file_at_its_commit(api_client, commit, reader):
    response = api_client.get(INDEX_PATH, {"commit": commit, "start": 5, "end": 7}, **reader)

    assert response.status_code == 200
    assert response.json() == {
        "repo": "acme/handbook",
        "path": "docs/index.md",
        "commit": commit,
        "start": 5,
        "end": 7,
        "line_count": 16,
        "lines": ["## Install", "", "Run `pip install acme`."],
        "url": None,
    }


def test_text_plain_when_asked_is_the_lines_alone(api_client, commit, reader):
    response = api_client.get(INDEX_PATH, {"commit": commit, "start": 9, "end": 11}, HTTP_ACCEPT="text/plain", **reader)

    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert "Accept" in response["Vary"]
    assert response.content == b"```sh\n# not a heading\nacme --version\n"


def test_without_end_reads_to_the_files_end_or_source_lines_max(api_client, commit, reader, settings):
    whole = api_client.get(INDEX_PATH, {"commit": commit}, **reader).json()
    settings.SOURCE_LINES_MAX = 4
    capped = api_client.get(INDEX_PATH, {"commit": commit, "start": 2}, **reader).json()

    assert (whole["start"], whole["end"], whole["lines"]) == (1, 16, HANDBOOK_INDEX.splitlines())
    assert (capped["start"], capped["end"], capped["lines"]) == (2, 5, HANDBOOK_INDEX.splitlines()[1:5])


def test_a_unique_commit_prefix_reads_the_full_commit(api_client, commit, reader):
    response = api_client.get(INDEX_PATH, {"commit": commit[:7].upper(), "start": 1, "end": 1}, **reader)

    assert response.status_code == 200
    assert (response.json()["commit"], response.json()["lines"]) == (commit, ["# Handbook"])


def test_an_ambiguous_commit_prefix_is_400(api_client, commit, reader):
    repository = Repository.objects.get(name="acme/handbook")
    IngestRunFactory(repository=repository, commit="abcdef1" + "0" * 33, status=IngestStatus.FAILED)
    IngestRunFactory(repository=repository, commit="abcdef1" + "1" * 33, status=IngestStatus.FAILED)

    response = api_client.get(INDEX_PATH, {"commit": "abcdef1", "start": 1, "end": 1}, **reader)

    assert response.status_code == 400
    assert _problem(response)["code"] == "ambiguous_commit"
    assert _problem(response)["errors"] == [
        {"field": "commit", "message": "abcdef1 names 2 commits of acme/handbook; give more of the SHA"}
    ]


@pytest.mark.parametrize(
    ("query", "field", "message"),
    [
        ({"start": "1"}, "commit", "is required: the SHA of an indexed commit"),
        (
            {"commit": "abc123", "start": "1"},
            "commit",
            "commit must be a commit SHA, or a prefix of it of at least 7 hex digits",
        ),
        (
            {"commit": "zzzzzzz", "start": "1"},
            "commit",
            "commit must be a commit SHA, or a prefix of it of at least 7 hex digits",
        ),
        ({"start": "0"}, "start", "start must be a line number: an integer, 1 or more"),
        ({"start": "-1"}, "start", "start must be a line number: an integer, 1 or more"),
        ({"start": "x"}, "start", "start must be a line number: an integer, 1 or more"),
        ({"start": ""}, "start", "start must be a line number: an integer, 1 or more"),
        ({"start": "2", "end": "1.5"}, "end", "end must be a line number: an integer, 1 or more"),
        ({"start": "5", "end": "4"}, "end", "end must not be before start (5)"),
        ({"start": "2", "end": "5"}, "end", "at most 3 lines per request (SOURCE_LINES_MAX): end may be at most 4"),
    ],
)
def test_bad_query_parameters_are_400(api_client, commit, reader, settings, query, field, message):
    settings.SOURCE_LINES_MAX = 3
    params = query if field == "commit" else {"commit": commit, **query}

    response = api_client.get(INDEX_PATH, params, **reader)

    assert response.status_code == 400
    body = _problem(response)
    assert body["errors"] == [{"field": field, "message": message}]
    assert body["code"] == ("invalid_range" if field == "end" and "line number" not in message else "invalid")


def test_a_range_past_the_files_end_is_416_with_its_line_count(api_client, commit, reader):
    past_end = api_client.get(INDEX_PATH, {"commit": commit, "start": 15, "end": 17}, **reader)
    past_start = api_client.get(INDEX_PATH, {"commit": commit, "start": 17}, **reader)

    assert past_end.status_code == past_start.status_code == 416
    assert _problem(past_end) == {
        "type": "urn:problem:range_not_satisfiable",
        "title": "Range Not Satisfiable",
        "status": 416,
        "detail": f"docs/index.md at {commit[:12]} has 16 lines; lines 15..17 are past its end.",
        "code": "range_not_satisfiable",
        "line_count": 16,
    }
    assert _problem(past_start)["line_count"] == 16


@pytest.mark.parametrize(
    ("path", "detail"),
    [
        ("/sources/acme/nowhere/docs/index.md", "No repository named 'acme/nowhere' is in the registry."),
        ("/sources/acme/handbook/docs/missing.md", "No file 'docs/missing.md' at commit {commit} of acme/handbook."),
        # In the tree but not selected by the registry's globs (src/*.py), or excluded (drafts).
        ("/sources/acme/handbook/src/app.py", "No file 'src/app.py' is indexed in acme/handbook."),
        ("/sources/acme/handbook/docs/drafts/wip.md", "No file 'docs/drafts/wip.md' is indexed in acme/handbook."),
        # A directory is not a file.
        ("/sources/acme/handbook/docs", None),
    ],
)
def test_unknown_repository_or_path_is_404(api_client, commit, reader, path, detail):
    response = api_client.get(path, {"commit": commit, "start": 1, "end": 1}, **reader)

    assert response.status_code == 404
    body = _problem(response)
    assert body["code"] == "not_found"
    if detail is not None:
        assert body["detail"] == detail.format(commit=commit)


@pytest.mark.parametrize(
    "path",
    [
        "/sources/acme/handbook/../handbook/docs/index.md",
        "/sources/acme/handbook/docs/../docs/index.md",
        "/sources/acme/handbook/docs/../../../../etc/passwd",
        "/sources/acme/handbook/./docs/index.md",
        "/sources/acme/handbook//etc/passwd",
        "/sources/acme/handbook/docs//index.md",
        "/sources/acme/handbook/docs/%0Aindex.md",
    ],
)
def test_a_path_that_leaves_the_repository_or_is_not_plain_is_404(api_client, commit, reader, path):
    response = api_client.get(path, {"commit": commit, "start": 1, "end": 1}, **reader)

    assert response.status_code == 404
    assert _problem(response)["code"] == "not_found"


def test_a_symlink_is_followed_inside_the_commit_and_never_out_of_it(
    api_client, handbook, registry_repo, no_embeddings, reader
):
    handbook.symlink("docs/alias.md", "index.md")
    handbook.symlink("docs/escape.md", "../../../etc/passwd")
    handbook.symlink("docs/dangling.md", "nothing.md")
    registry_repo(sources_yaml({"name": "acme/handbook", "url": str(handbook.path), **HANDBOOK_GLOBS}))
    commit = handbook.commit("links")
    _ingested()

    alias = api_client.get("/sources/acme/handbook/docs/alias.md", {"commit": commit, "end": 1}, **reader)
    escape = api_client.get("/sources/acme/handbook/docs/escape.md", {"commit": commit, "end": 1}, **reader)
    dangling = api_client.get("/sources/acme/handbook/docs/dangling.md", {"commit": commit, "end": 1}, **reader)

    assert alias.json()["lines"] == ["# Handbook"]
    assert escape.status_code == dangling.status_code == 404


def test_a_commit_no_ingest_has_seen_is_404(api_client, handbook_registered, no_embeddings, reader):
    first = _ingested()
    handbook_registered.write("docs/index.md", "# Later\n")
    later = handbook_registered.commit("not ingested")
    # The cache holds the later commit (a fetch brings it), yet no ingest saw it.
    GitRepository(str(handbook_registered.path)).fetch()

    unseen = api_client.get(INDEX_PATH, {"commit": later, "start": 1, "end": 1}, **reader)
    never = api_client.get(INDEX_PATH, {"commit": "f" * 40, "start": 1, "end": 1}, **reader)
    seen = api_client.get(INDEX_PATH, {"commit": first, "start": 1, "end": 1}, **reader)

    assert unseen.status_code == never.status_code == 404
    assert _problem(unseen)["detail"] == f"No ingest of acme/handbook has seen a commit '{later}'."
    assert seen.json()["lines"] == ["# Handbook"]


def test_a_disabled_repository_is_404(api_client, commit, reader):
    Repository.objects.filter(name="acme/handbook").update(enabled=False)

    response = api_client.get(INDEX_PATH, {"commit": commit, "start": 1, "end": 1}, **reader)

    assert response.status_code == 404
    assert _problem(response)["detail"] == "No repository named 'acme/handbook' is in the registry."


def test_a_binary_file_is_refused_with_422(api_client, commit, reader):
    # docs/logo.md matches the globs; the ingest skipped it as binary.
    response = api_client.get("/sources/acme/handbook/docs/logo.md", {"commit": commit, "end": 1}, **reader)

    assert response.status_code == 422
    assert _problem(response) == {
        "type": "urn:problem:not_text",
        "title": "Unprocessable Content",
        "status": 422,
        "detail": f"docs/logo.md at {commit[:12]} is a binary file (not UTF-8 text); it has no lines to show.",
        "code": "not_text",
    }


def test_a_file_over_ingest_max_file_bytes_is_refused_with_422(api_client, commit, reader, settings):
    settings.INGEST_MAX_FILE_BYTES = 100

    response = api_client.get(INDEX_PATH, {"commit": commit, "end": 1}, **reader)

    assert response.status_code == 422
    assert _problem(response)["code"] == "file_too_large"
    assert _problem(response)["detail"] == (
        f"docs/index.md has {len(HANDBOOK_INDEX.encode())} bytes, more than INGEST_MAX_FILE_BYTES (100): "
        "the index never holds such a file."
    )


def test_lines_are_read_from_the_source_store_with_the_git_cache_gone(api_client, commit, reader, settings):
    shutil.rmtree(settings.GIT_CACHE_DIR)

    response = api_client.get(INDEX_PATH, {"commit": commit, "start": 5, "end": 7}, **reader)

    assert response.status_code == 200
    assert response.json()["lines"] == ["## Install", "", "Run `pip install acme`."]


def test_a_file_whose_text_is_not_stored_is_503_source_unavailable(api_client, commit, reader):
    # An index built before the source store existed holds no text until its next ingest.
    SourceBlob.objects.all().delete()

    response = api_client.get(INDEX_PATH, {"commit": commit, "end": 1}, **reader)

    assert response.status_code == 503
    assert _problem(response) == {
        "type": "urn:problem:source_unavailable",
        "title": "Service unavailable",
        "status": 503,
        "detail": f"The text of docs/index.md at {commit[:12]} of acme/handbook is not in the source store yet "
        "(an index built before the store existed): the next ingest of the repository stores it.",
        "code": "source_unavailable",
    }


def test_reading_from_a_cache_that_is_gone_is_a_git_error_every_time(tmp_path):
    # git exits at once without a cache repository, often before its input is written: that
    # race once surfaced as a BrokenPipeError (a 500). Three hundred tries lose it almost surely.
    repository = GitRepository(str(tmp_path / "origin"), cache_dir=tmp_path / "gone")

    failures = set()
    for _ in range(300):
        with pytest.raises(GitError) as raised:
            repository.read_file_at("a" * 40, "docs/index.md", max_bytes=1000)
        failures.add(type(raised.value))

    assert failures == {GitError}


def test_errors_asked_as_text_plain_are_still_problem_details(api_client, commit, reader):
    response = api_client.get(INDEX_PATH, {"commit": commit, "start": 99}, HTTP_ACCEPT="text/plain", **reader)

    assert response.status_code == 416
    assert _problem(response)["line_count"] == 16


def test_without_credentials_is_401(api_client, commit):
    response = api_client.get(INDEX_PATH, {"commit": commit, "end": 1})

    assert response.status_code == 401
    assert _problem(response)["code"] == "not_authenticated"


def test_with_an_ingest_only_key_is_403(api_client, commit):
    response = api_client.get(INDEX_PATH, {"commit": commit, "end": 1}, **bearer(service_key("ingest")))

    assert response.status_code == 403
    assert _problem(response)["detail"] == "A service key with scope 'read' is required."


def test_read_source_lines_checks_its_range_itself(commit):
    # The function is called directly too (the MCP read_source tool), without the query parser.
    with pytest.raises(InvalidInput) as refused:
        read_source_lines(repository_name="acme/handbook", path="docs/index.md", commit=commit, start=3, end=2)

    assert refused.value.errors == [{"field": "end", "message": "end must not be before start (3)"}]


# --- every citation, followed through its source_url, is the file's lines ---------------------

CRLF_FAQ = "# FAQ\r\n\r\n## Proxy\r\n\r\nSet `HTTPS_PROXY` for the proxy.\r\n"
UNICODE_NOTES = "# Notes\n\nGrüße, naïve café: “quoted” — ✓.\n\n## 日本語\n\n設定はここです。\n"


def _long_guide(sections: int) -> str:
    parts = ["# Long guide\n"]
    for number in range(sections):
        parts.append(f"\n## Part {number}\n\n" + "".join(f"Line {number}.{line} of the guide.\n" for line in range(12)))
    return "".join(parts)


@pytest.fixture
def varied(handbook, registry_repo, settings, embedding_server) -> GitWorkTree:
    """The handbook with CRLF, non-ASCII and long (split) files and a symlink, ingested twice: the
    second commit changes one file, so the chunks of the others still cite the first commit."""
    settings.CHUNK_MAX_CHARS = 300
    handbook.write("docs/faq.md", CRLF_FAQ)
    handbook.write("docs/notes.md", UNICODE_NOTES)
    handbook.write("docs/long.md", _long_guide(4))
    handbook.symlink("docs/alias.md", "notes.md")
    handbook.write("docs/Über uns #1 & 100%?.md", "# Über uns\n\nWer wir sind.\n")
    registry_repo(sources_yaml({"name": "acme/handbook", "url": str(handbook.path), **HANDBOOK_GLOBS}))
    handbook.commit("more docs")
    _ingested()
    handbook.write("docs/long.md", _long_guide(6))
    handbook.commit("longer guide")
    _ingested()
    return handbook


def test_every_search_citation_source_url_shows_exactly_the_chunks_lines(api_client, varied, embedding_server, reader):
    chunks = {chunk.pk: chunk for chunk in Chunk.objects.filter(repository__name="acme/handbook")}
    assert len({chunk.commit for chunk in chunks.values()}) == 2  # old and new commits are both cited

    results = api_client.get("/search", {"q": "guide proxy notes", "limit": 50}, **reader).json()["results"]
    unusual = next(result["citation"]["source_url"] for result in results if "ber uns" in result["citation"]["path"])

    assert sorted(result["chunk_id"] for result in results) == sorted(chunks)
    for result in results:
        chunk, citation = chunks[result["chunk_id"]], result["citation"]
        source = api_client.get(citation["source_url"], **reader)
        assert source.status_code == 200, (citation, source.content)
        assert source.json()["commit"] == chunk.commit == citation["commit"]
        assert (source.json()["start"], source.json()["end"]) == (chunk.start_line, chunk.end_line)
        assert source.json()["lines"] == chunk.text.split("\n")
        text = api_client.get(citation["source_url"], HTTP_ACCEPT="text/plain", **reader)
        assert text.content.decode() == chunk.text + "\n"
    # A file name with non-ASCII letters, spaces and URL delimiters travels percent-encoded.
    assert unusual.startswith("http://testserver/sources/acme/handbook/docs/%C3%9Cber%20uns%20%231%20&%20100%25%3F.md?")


def test_every_ask_citation_source_url_shows_exactly_its_snippet(
    api_client, varied, embedding_server, reader, settings
):
    settings.LLM_BASE_URL = ""
    settings.ASK_CITATION_COUNT = 10
    settings.ASK_CITATION_MARGIN = 1.0
    settings.ASK_ABSTENTION_THRESHOLD = 0.0  # never declare sources missing: the citations are the point

    body = api_client.post("/ask", {"question": "How do I set the proxy?"}, format="json", **reader).json()

    assert len(body["citations"]) == 10
    for citation in body["citations"]:
        source = api_client.get(citation["source_url"], **reader).json()
        assert (source["commit"], source["start"], source["end"]) == (
            citation["commit"],
            citation["line"],
            citation["end_line"],
        )
        assert source["lines"] == citation["snippet"].split("\n")


def test_every_chunk_of_a_real_documentation_corpus_is_its_files_lines(
    api_client, tmp_path, registry_repo, no_embeddings, reader
):
    # The project's own documentation corpus (benchmarks/corpus/ferrite: Markdown, YAML, prose,
    # tables, code fences), ingested whole; each chunk's citation URL is built as /search builds it.
    tree = GitWorkTree.create(tmp_path / "ferrite")
    shutil.copytree(FERRITE_CORPUS, tree.path, dirs_exist_ok=True)
    tree.commit("ferrite docs")
    registry_repo(sources_yaml({"name": "acme/ferrite", "url": str(tree.path), "include": ["**/*.md", "**/*.yml"]}))
    _ingested("acme/ferrite")
    request = APIRequestFactory().get("/search")
    chunks = list(Chunk.objects.filter(repository__name="acme/ferrite").select_related("repository"))

    assert len(chunks) == 196  # every chunk of the 50 files: no sample, all of them
    for chunk in chunks:
        citation = CitationSerializer(
            citation_for(chunk, start_line=chunk.start_line, end_line=chunk.end_line), context={"request": request}
        ).data
        source = api_client.get(citation["source_url"], **reader)
        assert source.status_code == 200, (citation, source.content)
        assert source.json()["lines"] == chunk.text.split("\n"), citation
