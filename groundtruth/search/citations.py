"""The citation of a chunk (or of some of its lines): {repo, path, commit, line, end_line, url},
the shape every /search hit and /ask citation carries, `url` a link to those lines at that commit
when the repository has a web address (docs/spec/DECISIONS.md)."""

from __future__ import annotations

from typing import Any

from groundtruth.ingest.git_access import blob_url
from groundtruth.models import Chunk


def citation_for(chunk: Chunk, *, start_line: int, end_line: int) -> dict[str, Any]:
    """`url` is the blob URL at the indexed commit with a line anchor, built from the repository
    URL (GIT_BLOB_URL_TEMPLATE, GitHub's form by default) for http(s) repositories; local and
    file:// repositories have no web page, so it is null there (repo, path, commit and the lines
    still identify the text: `git show <commit>:<path>`)."""
    return {
        "repo": chunk.repository.name,
        "path": chunk.path,
        "commit": chunk.commit,
        "line": start_line,
        "end_line": end_line,
        "url": blob_url(chunk.repository.url, chunk.commit, chunk.path, start_line, end_line),
    }
