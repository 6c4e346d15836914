"""Which files of a commit are indexed: include/exclude globs, size limit, symlinks, binaries.

Glob semantics are documented in `groundtruth.registry` (wcmatch globmatch with GLOBSTAR,
BRACE, DOTGLOB: `**` spans directories). Rules, in order:

- submodules are skipped (their content lives in another repository);
- a path must match an include glob and no exclude glob;
- a symlink is followed inside the commit's tree (up to 8 hops); one that points outside the
  repository (absolute, or `..` above the root) or at nothing is skipped; one that resolves to a
  file is indexed under the link's path with the target's content;
- files over INGEST_MAX_FILE_BYTES are skipped;
- a path that GET /sources cannot serve, and so no citation can link to, is skipped with its
  reason (`path_unindexable_reason`): one with a control character (a newline, a tab, ...: legal
  in git), one that is not UTF-8, one longer than PATH_MAX_CHARS;
- binaries are recognised by content when read (`is_binary`): a NUL byte in the first 8 KiB or
  bytes that are not UTF-8. A text file with a NUL byte further on is skipped too (`text_problem`):
  PostgreSQL text cannot hold a NUL, and dropping it would make the indexed text differ from
  the file's bytes that citations point at.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from wcmatch import glob as wcglob

from groundtruth.ingest.git_access import TreeEntry
from groundtruth.registry import GLOB_FLAGS

MAX_SYMLINK_HOPS = 8
PATH_MAX_CHARS = 1000  # SourceFile.path and Chunk.path
_CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class SelectedFile:
    path: str
    blob_sha: str
    size: int


@dataclass
class Selection:
    files: list[SelectedFile] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)


def path_matches(path: str, include: Iterable[str], exclude: Iterable[str]) -> bool:
    include, exclude = list(include), list(exclude)
    if not include or not wcglob.globmatch(path, include, flags=GLOB_FLAGS):
        return False
    return not (exclude and wcglob.globmatch(path, exclude, flags=GLOB_FLAGS))


def files_select(
    entries: list[TreeEntry],
    *,
    include: Iterable[str],
    exclude: Iterable[str],
    max_bytes: int,
    read_blob: Callable[[str], bytes],
) -> Selection:
    """Applies the selection rules above to the entries of one commit's tree."""
    include, exclude = list(include), list(exclude)
    by_path = {entry.path: entry for entry in entries}
    selection = Selection()
    for entry in entries:
        if entry.is_submodule or not path_matches(entry.path, include, exclude):
            continue
        if problem := path_unindexable_reason(entry.path):
            selection.skipped.append((path_printable(entry.path), problem))
            continue
        target = entry
        if entry.is_symlink:
            resolved, problem = _symlink_resolve(entry, by_path, read_blob)
            if resolved is None:
                selection.skipped.append((entry.path, problem))
                continue
            target = resolved
        if target.size > max_bytes:
            selection.skipped.append((entry.path, f"larger than {max_bytes} bytes"))
            continue
        selection.files.append(SelectedFile(path=entry.path, blob_sha=target.blob_sha, size=target.size))
    return selection


def _symlink_resolve(
    link: TreeEntry, by_path: dict[str, TreeEntry], read_blob: Callable[[str], bytes]
) -> tuple[TreeEntry | None, str]:
    current = link
    for _ in range(MAX_SYMLINK_HOPS):
        target = read_blob(current.blob_sha).decode("utf-8", errors="replace")
        if target.startswith("/"):
            return None, "symlink leaves the repository"
        joined = posixpath.normpath(posixpath.join(posixpath.dirname(current.path), target))
        if joined == ".." or joined.startswith("../"):
            return None, "symlink leaves the repository"
        entry = by_path.get(joined)
        if entry is None:
            return None, "symlink points at nothing in the commit"
        if entry.is_submodule:
            return None, "symlink points at a submodule"
        if not entry.is_symlink:
            return entry, ""
        current = entry
    return None, "symlink chain too long"


def path_unindexable_reason(path: str) -> str | None:
    """Why a path of the repository is not indexed, or None. Such a path would make a citation
    whose `source_url` cannot be built or served (Django's path converter refuses a newline, and
    GET /sources refuses control characters) or a row PostgreSQL refuses (a lone surrogate from a
    name that is not UTF-8, a path longer than the column)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return "path is not UTF-8"
    if _CONTROL_CHARACTER.search(path):
        return "path has a control character (newline, tab, ...): no source_url can cite it"
    if len(path) > PATH_MAX_CHARS:
        return f"path longer than {PATH_MAX_CHARS} characters"
    return None


def path_printable(path: str) -> str:
    """`path` as a run's skipped files can store it: the bytes of a name that is not UTF-8 as
    \\xNN escapes (git lists such names; a lone surrogate cannot be stored)."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def text_problem(data: bytes) -> str | None:
    """Why a file read for indexing is not indexed, or None for text that can be."""
    if is_binary(data):
        return "binary"
    if (offset := data.find(b"\0")) >= 0:
        return f"NUL byte at byte {offset}: PostgreSQL text cannot hold it"
    return None


def text_decoded(data: bytes) -> str | None:
    """The file's text, or None for a binary: a NUL byte in the first 8 KiB, or bytes that are not UTF-8."""
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def is_binary(data: bytes) -> bool:
    return text_decoded(data) is None
