"""Exact lines of an indexed repository's file at a commit, read from the source store (the whole
file's text in PostgreSQL, groundtruth/source_store.py; not from the chunks, and never from git):
what GET /sources/<repo>/<path> answers and what every citation's `source_url` points at, on any
web host, whatever its git cache holds.

    lines = read_source_lines(repository_name="acme/handbook", path="docs/pool.md",
                              commit="3f2c9e1", start=10, end=29)
    lines.commit  # the full SHA; lines.lines: ["...", ...] (lines 10..29); lines.line_count

Lines are numbered as the ingest numbers them (groundtruth/ingest/chunking.py `file_lines`:
split on `\\n`, the `\\r` of a CRLF dropped), so a chunk's text is exactly lines
`start_line..end_line` of what this returns.

What may be read, and the problems otherwise (agentplatform/plumbing/errors.py):
- a repository the registry lists and enables; else 404;
- a path that stays inside the repository (relative, no empty, `.` or `..` segment, no control
  character) and that the repository's include/exclude globs select, so nothing outside what the
  registry chose to index is served (a private repository is fetched with the service's token);
  else 404. A symlink is followed inside the commit's tree, as the ingest follows it;
- a commit an ingest has seen for this repository (a run's commit, or a commit its chunks cite),
  given in full or as an unambiguous prefix of at least COMMIT_PREFIX_MIN_LENGTH hex digits;
  not hex or shorter: 400, unknown: 404, ambiguous: 400. The store must hold the file at that
  commit (it does at the commit the file's citations name and at the last ingested commit):
  503 `source_unavailable` otherwise, saying which;
- a text file (not binary by the ingest's rule, at most INGEST_MAX_FILE_BYTES): 422 otherwise;
- 1 <= start <= end, at most SOURCE_LINES_MAX lines: 400 otherwise; `end` left out means to
  the file's end or SOURCE_LINES_MAX lines, whichever comes first. A range past the file's end
  (or any range of an empty file): 416 with the file's `line_count` in the problem body.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, urlencode

from django.conf import settings
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse

from agentplatform.plumbing.errors import ApplicationError, InvalidInput, NotFound, ServiceUnavailable
from groundtruth.ingest.chunking import file_line_count, file_lines_range
from groundtruth.ingest.git_access import blob_url
from groundtruth.ingest.selection import path_matches
from groundtruth.models import Chunk, IngestRun, IngestStatus, Repository, SourceFile
from groundtruth.source_store import source_blob_text

COMMIT_PREFIX_MIN_LENGTH = 7
COMMIT_PATTERN = re.compile(r"[0-9a-f]{7,64}\Z")
COMMIT_RULE = f"commit must be a commit SHA, or a prefix of it of at least {COMMIT_PREFIX_MIN_LENGTH} hex digits"
LINE_NUMBER_RULE = "must be a line number: an integer, 1 or more"
PATH_MAX_LENGTH = 1000  # SourceFile.path and Chunk.path
_CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f]")


class RangeNotSatisfiable(ApplicationError):
    status, code, title = 416, "range_not_satisfiable", "Range Not Satisfiable"


class FileNotText(ApplicationError):
    status, code, title = 422, "not_text", "Unprocessable Content"


@dataclass(frozen=True)
class SourceLines:
    repo: str
    path: str
    commit: str  # full SHA
    start: int
    end: int
    lines: tuple[str, ...]  # lines start..end, without their line breaks
    line_count: int  # lines in the whole file
    url: str | None  # the blob's web page with a line anchor; None for local repositories


def read_source_lines(
    *,
    repository_name: str,
    path: str,
    commit: str,
    start: int = 1,
    end: int | None = None,
    visible: QuerySet[Repository] | None = None,
) -> SourceLines:
    """Lines `start..end` (1-based, inclusive) of `path` at `commit` in the repository named
    `repository_name`, read from the source store. Raises the problems listed in the module's
    docstring (InvalidInput, NotFound, ServiceUnavailable, FileNotText, RangeNotSatisfiable)."""
    source_range_check(start=start, end=end)
    maximum = settings.SOURCE_LINES_MAX
    # A repository outside `visible` (a scoped key's) is answered as one not in the registry.
    repository = (
        (visible if visible is not None else Repository.objects.all())
        .filter(name=repository_name, enabled=True)
        .first()
    )
    if repository is None:
        raise NotFound(f"No repository named {repository_name!r} is in the registry.")
    if not _path_is_plain(path) or not path_matches(path, repository.include, repository.exclude):
        raise NotFound(f"No file {path!r} is indexed in {repository.name}.")
    full_commit = _commit_resolve(repository=repository, path=path, commit=commit)
    text = _stored_text(repository=repository, path=path, commit=full_commit)
    line_count = file_line_count(text)
    last = min(line_count, start + maximum - 1) if end is None else end
    if start > line_count or last > line_count:
        raise RangeNotSatisfiable(
            f"{path} at {full_commit[:12]} has {line_count} lines; lines {start}..{last} are past its end.",
            extensions={"line_count": line_count},
        )
    return SourceLines(
        repo=repository.name,
        path=path,
        commit=full_commit,
        start=start,
        end=last,
        lines=tuple(file_lines_range(text, start=start, end=last)),
        line_count=line_count,
        url=blob_url(repository.url, full_commit, path, start, last),
    )


def source_lines_url(*, request: HttpRequest, repo: str, path: str, commit: str, start: int, end: int) -> str:
    """The absolute URL of GET /sources/<repo>/<path> for exactly lines start..end at `commit`,
    on the host and scheme the request came in by."""
    owner, name = repo.split("/", 1)
    try:
        location = reverse("source-lines", kwargs={"owner": owner, "name": name, "path": path})
    except NoReverseMatch:
        # A path the URL pattern cannot hold (a newline: chunks indexed before the ingest skipped
        # such paths, until the next ingest removes them). Percent-encoded, it is a URL that
        # answers 404, as GET /sources answers every path it does not serve, not a 500 here.
        prefix = reverse("source-lines", kwargs={"owner": owner, "name": name, "path": "-"}).removesuffix("-")
        location = prefix + quote(path, safe="/")
    query = urlencode({"commit": commit, "start": start, "end": end})
    return request.build_absolute_uri(f"{location}?{query}")


def source_range_check(*, start: int, end: int | None) -> None:
    """1 <= start <= end, at most SOURCE_LINES_MAX lines (end None: no end given); a 400 otherwise.
    A range that breaks the rule between the two numbers is `invalid_range` (no schema can say it)."""
    maximum = settings.SOURCE_LINES_MAX
    if start < 1:
        raise InvalidInput.for_field("start", f"start {LINE_NUMBER_RULE}")
    if end is None:
        return
    if end < start:
        problem = f"end must not be before start ({start})"
    elif end - start + 1 > maximum:
        problem = f"at most {maximum} lines per request (SOURCE_LINES_MAX): end may be at most {start + maximum - 1}"
    else:
        return
    raise InvalidInput(f"end: {problem}", code="invalid_range", errors=[{"field": "end", "message": problem}])


def _stored_text(*, repository: Repository, path: str, commit: str) -> str:
    """The text of `path` at `commit` from the source store (groundtruth/source_store.py), which
    holds each indexed file at the commit its citations name and at the repository's last
    ingested commit. Raises FileNotText, NotFound or ServiceUnavailable saying why not."""
    source = (
        SourceFile.objects.filter(repository=repository, path=path).values_list("blob_sha", "commit", "size").first()
    )
    at_last_commit = commit == repository.last_commit
    if source is not None and (at_last_commit or commit == source[1]):
        blob_sha, _indexed_at, size = source
        maximum = settings.INGEST_MAX_FILE_BYTES
        if size > maximum:
            raise FileNotText(
                f"{path} has {size} bytes, more than INGEST_MAX_FILE_BYTES ({maximum}): "
                "the index never holds such a file.",
                code="file_too_large",
            )
        text = source_blob_text(sha=blob_sha)
        if text is None:
            raise ServiceUnavailable(
                f"The text of {path} at {commit[:12]} of {repository.name} is not in the source store yet "
                "(an index built before the store existed): the next ingest of the repository stores it.",
                code="source_unavailable",
            )
        return text
    if source is None and at_last_commit:
        # The index reflects this commit whole: a selected path it holds no text of was skipped.
        reason = _skipped_reason(repository=repository, path=path, commit=commit)
        if reason == "binary" or (reason or "").startswith("NUL byte"):
            raise FileNotText(f"{path} at {commit[:12]} is a binary file (not UTF-8 text); it has no lines to show.")
        if (reason or "").startswith("larger than"):
            raise FileNotText(
                f"{path} is {reason} (INGEST_MAX_FILE_BYTES): the index never holds such a file.",
                code="file_too_large",
            )
        raise NotFound(f"No file {path!r} at commit {commit} of {repository.name}.")
    indexed = f" (the index holds it at {source[1][:12]})" if source is not None else ""
    raise ServiceUnavailable(
        f"{path} at commit {commit[:12]} of {repository.name} is not in the source store{indexed}: it keeps each "
        f"indexed file at the commit its citations name and at the last ingested commit "
        f"({repository.last_commit[:12] or 'none yet'}).",
        code="source_unavailable",
    )


def _skipped_reason(*, repository: Repository, path: str, commit: str) -> str | None:
    """Why the newest successful ingest of `commit` skipped `path` (its run's record, which
    keeps the first MAX_SKIPPED_RECORDED), or None."""
    skipped = (
        IngestRun.objects.filter(repository=repository, commit=commit, status=IngestStatus.SUCCEEDED)
        .order_by("-finished_at", "-id")
        .values_list("files_skipped", flat=True)
        .first()
    )
    return next((reason for skipped_path, reason in skipped or [] if skipped_path == path), None)


def _path_is_plain(path: str) -> bool:
    """A path relative to the repository's root that names each directory on the way: git would
    resolve `.` and `..` against the working directory, and `..` could leave the repository."""
    if not path or len(path) > PATH_MAX_LENGTH or path.startswith("/") or _CONTROL_CHARACTER.search(path):
        return False
    return all(segment not in {"", ".", ".."} for segment in path.split("/"))


def _commit_resolve(*, repository: Repository, path: str, commit: str) -> str:
    """The full SHA of the commit `commit` names among those an ingest has seen for `repository`:
    its runs' commits, and the commits its chunks of `path` cite (a chunk keeps the commit its blob
    was indexed at, which a run recorded; read from the chunks too so that deleting old runs in
    the admin does not break the citations they left)."""
    prefix = commit.lower()
    if not COMMIT_PATTERN.match(prefix):
        raise InvalidInput.for_field("commit", COMMIT_RULE)
    # UNION removes duplicates; the models' default orderings would only cost a sort.
    runs = IngestRun.objects.filter(repository=repository, commit__startswith=prefix).order_by()
    chunks = Chunk.objects.filter(repository=repository, path=path, commit__startswith=prefix).order_by()
    known = sorted(runs.values_list("commit", flat=True).union(chunks.values_list("commit", flat=True)))
    if not known:
        raise NotFound(f"No ingest of {repository.name} has seen a commit {commit!r}.")
    if len(known) > 1:
        problem = f"{commit} names {len(known)} commits of {repository.name}; give more of the SHA"
        raise InvalidInput(
            f"commit: {problem}", code="ambiguous_commit", errors=[{"field": "commit", "message": problem}]
        )
    return known[0]
