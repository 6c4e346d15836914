"""The source registry (sources.yml): parsing and validation, where it lives, and how it is named.

Loading it into the Registry and Repository rows is a write: `groundtruth.services.registry_load`.

Format:

    defaults:                      # optional; applied to every repo that does not say otherwise
      ref: main
      include: ["README.md", "docs/**/*.md"]
      exclude: ["**/node_modules/**"]
      trust: reviewed              # canonical | reviewed | community
      owners: []
    repos:
      - name: acme/handbook        # owner/name, unique; neither part "." or ".."
        url: https://git.example.com/acme/handbook.git   # https/http URL, file:// URL or local path
        owners: [docs-team]
        trust: canonical
        include: ["docs/**/*.md", "config/*.yml"]
        exclude: []
        ref: main
        enabled: true
    transcripts:                   # raw transcripts: off by default, never canonical
      enabled: false
      repos: []                    # same keys as repos; trust is always "transcript"

Validation errors name the file, the line and the key, e.g.
`sources.yml:7: repos[0].url: credentials in the URL are not allowed; use GIT_HTTP_TOKEN`.
Unknown keys are errors (a typo must not silently change what is indexed). Relative local paths
are resolved against the registry repository's work tree location when it is local, else refused.
Both registry files are read with one toolkit (groundtruth/registry_files.py), and where a URL
may point is one rule for both (groundtruth/ingest/source_policy.py): local paths under
GIT_LOCAL_ROOTS, http(s) hosts on private addresses only when GIT_ALLOW_PRIVATE_HOSTS allows them.

Glob semantics (wcmatch `globmatch` with GLOBSTAR | BRACE | DOTGLOB | FORCEUNIX):
paths are matched relative to the repository root with `/` separators; `*` and `?` match within
one path segment, `**` as a whole segment matches any number of segments (including none, so
`docs/**/*.md` matches `docs/a.md` and `docs/x/y/a.md`, and `**/node_modules/**` matches at any
depth); `[abc]` classes and `{md,rst}` braces work; dot files match like any other. A file is
selected when it matches an include glob and no exclude glob. Globs must be relative and may not
contain `..` segments (they could never match inside the repository).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from wcmatch import glob as wcglob

from groundtruth.models import TrustTier
from groundtruth.registry_files import RegistryFileValidator

GLOB_FLAGS = wcglob.GLOBSTAR | wcglob.BRACE | wcglob.DOTGLOB | wcglob.FORCEUNIX
REPO_TRUST_TIERS = (TrustTier.CANONICAL.value, TrustTier.REVIEWED.value, TrustTier.COMMUNITY.value)
# owner/name, each part of letters, digits, '.', '_' and '-' but neither '.' nor '..': a name is a
# path segment of /sources URLs and of git cache directories, where those two would climb out.
REPOSITORY_NAME_PATTERN = re.compile(r"^(?!\.\.?/)[A-Za-z0-9_.-]+/(?!\.\.?\Z)[A-Za-z0-9_.-]+\Z")
_TOP_KEYS = {"defaults", "repos", "transcripts"}
_DEFAULT_KEYS = {"ref", "include", "exclude", "trust", "owners"}
_REPO_KEYS = {"name", "url", "ref", "include", "exclude", "trust", "owners", "enabled"}
_TRANSCRIPT_KEYS = {"enabled", "repos"}


@dataclass(frozen=True)
class RepositorySpec:
    name: str
    url: str
    ref: str
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    trust: str
    owners: tuple[str, ...]
    enabled: bool
    is_transcript: bool = False


@dataclass
class SourceRegistry:
    repositories: list[RepositorySpec] = field(default_factory=list)
    transcripts_enabled: bool = False

    def by_name(self, name: str) -> RepositorySpec | None:
        return next((spec for spec in self.repositories if spec.name == name), None)


class _Validator(RegistryFileValidator):
    """The shared registry-file readers, plus sources.yml's globs and trust tiers."""

    def globs(self, node: yaml.Node, key: str) -> list[str] | None:
        patterns = self.string_list(node, key)
        if patterns is None:
            return None
        for index, (pattern, item) in enumerate(zip(patterns, node.value, strict=False)):
            problem = glob_problem(pattern)
            if problem:
                self.error(item, f"{key}[{index}]", problem)
        return patterns

    def trust(self, node: yaml.Node, key: str) -> str | None:
        value = self.string(node, key)
        if value is not None and value not in REPO_TRUST_TIERS:
            self.error(node, key, f"unknown trust tier {value!r}; allowed: {', '.join(REPO_TRUST_TIERS)}")
            return None
        return value


def glob_problem(pattern: str) -> str | None:
    """Why `pattern` cannot be a repository glob, or None when it can."""
    if pattern.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", pattern):
        return f"glob {pattern!r} is absolute; globs are relative to the repository root"
    if ".." in re.split(r"[/\\]", pattern):
        return f"glob {pattern!r} escapes the repository ('..' segments are not allowed)"
    if "\\" in pattern:
        return f"glob {pattern!r} uses backslashes; use '/' between path segments"
    try:
        wcglob.translate(pattern, flags=GLOB_FLAGS)
    except (ValueError, re.error) as exc:
        return f"glob {pattern!r} is malformed: {exc}"
    return None


def registry_parse(*, content: bytes | str, filename: str, base_dir: Path | None = None) -> SourceRegistry:
    """Parses and validates sources.yml. Raises RegistryInvalid listing every problem found.

    `base_dir` resolves relative local repository paths (the registry repository's location when
    it is local); without it, relative paths are refused.
    """
    text = content.decode("utf-8") if isinstance(content, bytes) else content
    validator = _Validator(filename)
    root, top = validator.root(text, allowed_keys=_TOP_KEYS, when_empty="it needs a 'repos' list")

    defaults: dict[str, Any] = {"ref": "main", "include": [], "exclude": [], "trust": "reviewed", "owners": []}
    if "defaults" in top:
        default_items = validator.mapping(top["defaults"][1], "defaults")
        if default_items is not None:
            validator.unknown_keys(default_items, _DEFAULT_KEYS, "defaults")
            defaults.update(_repo_fields(validator, default_items, "defaults", transcript=False))

    registry = SourceRegistry()
    names: set[str] = set()
    if "repos" not in top:
        validator.error(root, "repos", "missing; list the repositories to index")
    else:
        repos_node = top["repos"][1]
        if not isinstance(repos_node, yaml.SequenceNode):
            validator.error(repos_node, "repos", "must be a list")
        else:
            for index, item in enumerate(repos_node.value):
                spec = _repository(validator, item, f"repos[{index}]", defaults, names, base_dir, transcript=False)
                if spec is not None:
                    registry.repositories.append(spec)

    if "transcripts" in top:
        items = validator.mapping(top["transcripts"][1], "transcripts")
        if items is not None:
            validator.unknown_keys(items, _TRANSCRIPT_KEYS, "transcripts")
            if "enabled" in items:
                registry.transcripts_enabled = bool(validator.boolean(items["enabled"][1], "transcripts.enabled"))
            if "repos" in items:
                node = items["repos"][1]
                if not isinstance(node, yaml.SequenceNode):
                    validator.error(node, "transcripts.repos", "must be a list")
                else:
                    for index, item in enumerate(node.value):
                        spec = _repository(
                            validator, item, f"transcripts.repos[{index}]", defaults, names, base_dir, transcript=True
                        )
                        if spec is not None:
                            # Transcripts are indexed only when the section is enabled, and never canonical.
                            registry.repositories.append(
                                RepositorySpec(
                                    **{**spec.__dict__, "enabled": spec.enabled and registry.transcripts_enabled}
                                )
                            )
    validator.raise_if_invalid()
    return registry


def _repo_fields(
    validator: _Validator, items: dict[str, tuple[yaml.Node, yaml.Node]], key: str, *, transcript: bool
) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for name in ("include", "exclude"):
        if name in items:
            value = validator.globs(items[name][1], f"{key}.{name}")
            if value is not None:
                fields[name] = value
    if "owners" in items:
        value = validator.string_list(items["owners"][1], f"{key}.owners")
        if value is not None:
            fields["owners"] = value
    if "ref" in items:
        ref = validator.ref(items["ref"][1], f"{key}.ref")
        if ref is not None:
            fields["ref"] = ref
    if "trust" in items:
        node = items["trust"][1]
        if transcript:
            validator.error(node, f"{key}.trust", "transcripts always have trust 'transcript' and are never canonical")
        else:
            trust = validator.trust(node, f"{key}.trust")
            if trust is not None:
                fields["trust"] = trust
    return fields


def _repository(
    validator: _Validator,
    node: yaml.Node,
    key: str,
    defaults: dict[str, Any],
    names: set[str],
    base_dir: Path | None,
    *,
    transcript: bool,
) -> RepositorySpec | None:
    items = validator.mapping(node, key)
    if items is None:
        return None
    errors_before = len(validator.errors)
    validator.unknown_keys(items, _REPO_KEYS, key)
    name = validator.string(items["name"][1], f"{key}.name") if "name" in items else None
    if "name" not in items:
        validator.error(node, f"{key}.name", "missing (owner/name)")
    elif name is not None and not REPOSITORY_NAME_PATTERN.match(name):
        problem = f"{name!r} is not of the form owner/name"
        if any(part in (".", "..") for part in name.split("/")):
            problem += " ('.' and '..' are not names)"
        validator.error(items["name"][1], f"{key}.name", problem)
    elif name is not None and name in names:
        validator.error(items["name"][1], f"{key}.name", f"duplicate repository name {name!r}")
    if name:
        names.add(name)
    url = validator.repository_url(items["url"][1], f"{key}.url", base_dir=base_dir) if "url" in items else None
    if "url" not in items:
        validator.error(node, f"{key}.url", "missing (https URL, file:// URL or local path)")
    enabled = True
    if "enabled" in items:
        enabled = bool(validator.boolean(items["enabled"][1], f"{key}.enabled"))
    fields = {**defaults, **_repo_fields(validator, items, key, transcript=transcript)}
    if not fields["include"]:
        validator.error(node, f"{key}.include", "no include globs (set them here or in defaults)")
    if len(validator.errors) != errors_before or name is None or url is None:
        return None
    return RepositorySpec(
        name=name,
        url=url,
        ref=fields["ref"],
        include=tuple(fields["include"]),
        exclude=tuple(fields["exclude"]),
        trust=TrustTier.TRANSCRIPT.value if transcript else fields["trust"],
        owners=tuple(fields["owners"]),
        enabled=enabled,
        is_transcript=transcript,
    )
