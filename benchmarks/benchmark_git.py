"""git for the benchmarks' own repositories: one identity, and none of the user's or the
system's git configuration (a signing key or a hook there would change or break the run)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

_ENVIRONMENT = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(directory: Path, *args: str) -> str:
    """Runs `git -C directory args...`; its standard output. Raises CalledProcessError on failure."""
    return subprocess.run(
        ["git", "-C", str(directory), *args],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, **_ENVIRONMENT},
    ).stdout
