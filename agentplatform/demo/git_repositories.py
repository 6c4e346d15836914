"""Local git repositories for the demo data: files written and committed under a fixed identity,
whatever the machine's git configuration."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

_GIT_ENV = {
    "GIT_AUTHOR_NAME": "Demo Author",
    "GIT_AUTHOR_EMAIL": "demo@example.invalid",
    "GIT_COMMITTER_NAME": "Demo Author",
    "GIT_COMMITTER_EMAIL": "demo@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}


def _git(path: Path, *args: str) -> str:
    completed = subprocess.run(
        ["git", "-C", str(path), *args], capture_output=True, text=True, env={**os.environ, **_GIT_ENV}, check=False
    )
    if completed.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} in {path} failed: {completed.stderr.strip()}")
    return completed.stdout


def demo_repository_commit(
    path: Path,
    files: Mapping[str, str | bytes | None],
    message: str,
    *,
    renames: Mapping[str, str] | None = None,
    only_if_changed: bool = False,
) -> str:
    """Writes `files` (None deletes), applies `renames` (old -> new) and commits, creating the
    repository (branch main) first; returns the commit SHA. With `only_if_changed`, a call that
    changes nothing makes no commit (running the seed again leaves the repository as it is)."""
    if not (path / ".git").exists():
        path.mkdir(parents=True, exist_ok=True)
        _git(path, "init", "--quiet", "--initial-branch", "main")
    for old, new in (renames or {}).items():
        (path / new).parent.mkdir(parents=True, exist_ok=True)
        _git(path, "mv", old, new)
    for relative, content in files.items():
        target = path / relative
        if content is None:
            _git(path, "rm", "--quiet", relative)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
    _git(path, "add", "--all")
    if not only_if_changed or _git(path, "status", "--porcelain").strip():
        _git(path, "commit", "--quiet", "--allow-empty", "-m", message)
    return _git(path, "rev-parse", "HEAD").strip()
