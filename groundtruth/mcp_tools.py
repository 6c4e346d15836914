"""The ground-truth tools of the MCP server (agentplatform/mcp_app.py): search_docs, ask,
read_source and list_repositories.

Each checks its arguments with the serializer of the REST endpoint it mirrors and calls the same
service or selector, so that it answers exactly what /search, /ask, /sources and /repos answer
(the same JSON as structured content, and as text). The JSON schemas state the same limits; a
refusal is a tool error with the endpoint's message (agentplatform/plumbing/mcp_tool_calls.py).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from agentplatform.plumbing.mcp_tool_calls import WebTierRequest, arguments_validated, django_tool, tool_caller
from groundtruth import selectors
from groundtruth.question_audit import asked_question_record
from groundtruth.search.ask import question_answer
from groundtruth.search.hybrid_search import chunk_search, search_scope_resolve
from groundtruth.search_serializers import (
    QUERY_MAX_CHARS,
    QUESTION_MAX_CHARS,
    SEARCH_LIMIT_DEFAULT,
    SEARCH_LIMIT_MAX,
    AskRequestSerializer,
    AskResponseSerializer,
    SearchQuerySerializer,
    SearchResponseSerializer,
)
from groundtruth.serializers import RepositoryListSerializer
from groundtruth.source_lines import read_source_lines
from groundtruth.source_serializers import SourceLinesQuerySerializer, SourceLinesSerializer

RepositoryName = Annotated[
    str, Field(description="A repository as list_repositories names it: owner/name.", max_length=200)
]


@django_tool
def search_docs(
    query: Annotated[
        str,
        Field(description="What to look for: words, a question or an exact identifier.", max_length=QUERY_MAX_CHARS),
    ],
    repo: RepositoryName | None = None,
    limit: Annotated[
        int, Field(description="How many passages to return.", ge=1, le=SEARCH_LIMIT_MAX)
    ] = SEARCH_LIMIT_DEFAULT,
) -> dict[str, Any]:
    """Search the indexed documentation and code of the registered repositories (hybrid BM25 and
    vector search, as GET /search). Returns the best passages, each with its text, heading trail,
    trust tier and a citation (repo, path, commit, line, end_line, url) that read_source can check.
    `repo` limits the search to one repository."""
    data = arguments_validated(
        SearchQuerySerializer, {"q": query, "limit": str(limit), **({"repo": repo} if repo is not None else {})}
    )
    repositories = search_scope_resolve(
        names=[data["repo"]] if "repo" in data else None,
        visible=selectors.repository_visible_queryset(viewer=tool_caller()),
    )
    outcome = chunk_search(query=data["q"], repositories=repositories, limit=data["limit"])
    asked_question_record(
        caller=tool_caller(),
        via="mcp:search_docs",
        question=data["q"],
        repository_names=[repository.name for repository in repositories],
        sources_missing=not outcome.hits,
    )
    return SearchResponseSerializer(
        {"query": data["q"], "results": outcome.hits}, context={"request": WebTierRequest()}
    ).data


@django_tool
def ask(
    question: Annotated[str, Field(description="The question, in plain words.", max_length=QUESTION_MAX_CHARS)],
    repos: Annotated[
        list[str] | None,
        Field(description="Only these repositories (owner/name); left out: every one.", min_length=1, max_length=100),
    ] = None,
) -> dict[str, Any]:
    """Ask a question about the indexed documentation (as POST /ask). Returns the passages that
    answer it as numbered citations with their snippets (and, when a language model is set up, an
    answer citing them as [n]). When the documentation does not answer it, `sources_missing` is
    true, there are no citations and `message` says what was searched: do not guess then."""
    body: dict[str, Any] = {"question": question}
    if repos is not None:
        body["scope"] = {"repos": repos}
    data = arguments_validated(AskRequestSerializer, body)
    result = question_answer(
        question=data["question"],
        repository_names=data.get("scope", {}).get("repos"),
        visible=selectors.repository_visible_queryset(viewer=tool_caller()),
    )
    asked_question_record(
        caller=tool_caller(),
        via="mcp:ask",
        question=data["question"],
        repository_names=[searched["repo"] for searched in result.searched],
        sources_missing=result.sources_missing,
    )
    return AskResponseSerializer(result, context={"request": WebTierRequest()}).data


@django_tool
def read_source(
    repo: RepositoryName,
    path: Annotated[str, Field(description="The file's path in the repository, as a citation gives it.")],
    commit: Annotated[
        str,
        Field(
            description="The commit: the full SHA a citation gives, or a prefix of at least 7 hex digits.",
            pattern=r"^[0-9a-fA-F]{7,64}$",
        ),
    ],
    start: Annotated[int, Field(description="First line, 1-based.", ge=1)] = 1,
    end: Annotated[
        int | None,
        Field(description="Last line, inclusive; left out: to the file's end (SOURCE_LINES_MAX lines at most).", ge=1),
    ] = None,
) -> dict[str, Any]:
    """The exact lines start..end of a file at a commit, read from the service's source store (as
    GET /sources/{repo}/{path}: the whole indexed file, not the index's chunks): check what a
    citation of search_docs or ask says (its repo, path, commit, line and end_line) against the
    file itself. Only repositories
    and commits the service has indexed."""
    query = {"commit": commit, "start": str(start), **({"end": str(end)} if end is not None else {})}
    data = arguments_validated(SourceLinesQuerySerializer, query)
    source = read_source_lines(
        repository_name=repo,
        path=path,
        commit=data["commit"],
        start=data["start"],
        end=data.get("end"),
        visible=selectors.repository_visible_queryset(viewer=tool_caller()),
    )
    return SourceLinesSerializer(source).data


@django_tool
def list_repositories() -> dict[str, Any]:
    """The repositories the service indexes (as GET /repos): name, URL, ref, owners, trust tier,
    state, the indexed commit and when it was indexed, file and chunk counts, the latest ingest
    run; and the registry they come from."""
    registry = selectors.registry_current(viewer=tool_caller())
    repositories = selectors.repository_list(visible=selectors.repository_visible_queryset(viewer=tool_caller()))
    return RepositoryListSerializer({"registry": registry, "repositories": repositories}).data


GROUND_TRUTH_TOOLS = (search_docs, ask, read_source, list_repositories)
