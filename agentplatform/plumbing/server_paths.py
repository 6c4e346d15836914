"""This machine's directories kept out of the error texts clients read.

An error recorded from a git command or a file operation quotes absolute paths (`fatal: could not
read /srv/app/var/git-cache/acme__handbook.git/...`): where the service is installed, its user and
its layout are nobody's business but the operator's. Each path under one of the configured
directories is written relative to the setting that names it (`GIT_CACHE_DIR/acme__handbook.git/...`),
which still tells an operator where to look. A repository's own URL is left as the registry has it
(`GET /repos` shows it as `url`), even a local path. Applied when an error is recorded and again
when one is served, for rows stored before.
"""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings


def _directories() -> list[tuple[str, str]]:
    """(absolute path, setting name), longest path first so the most specific setting names it."""
    named: list[tuple[Path, str]] = [
        (Path(settings.GIT_CACHE_DIR), "GIT_CACHE_DIR"),
        (Path(settings.VAR_DIR), "VAR_DIR"),
        (Path(settings.BASE_DIR), "BASE_DIR"),
    ]
    spelled: dict[str, str] = {}
    for path, name in named:
        for form in (path.absolute(), path.resolve()):  # as configured, and with symlinks resolved
            text = str(form).rstrip("/")
            if text and text not in spelled:
                spelled[text] = name
    return sorted(spelled.items(), key=lambda item: len(item[0]), reverse=True)


def server_paths_hidden(text: str) -> str:
    """`text` with every path under a configured directory written relative to its setting's name."""
    if "/" not in text:
        return text
    for path, name in _directories():
        # Only the whole directory: /srv/var names /srv/var/x, not /srv/various.
        text = re.sub(re.escape(path) + r"(?![^/\s'\"`:;,)\]])", name, text)
    return text
