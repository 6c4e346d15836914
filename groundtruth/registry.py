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
      - name: acme/handbook        # owner/name, unique
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
Where a URL may point is one rule for both registry files (groundtruth/ingest/source_policy.py):
local paths under GIT_LOCAL_ROOTS, http(s) hosts on private addresses only when
GIT_ALLOW_PRIVATE_HOSTS allows them.

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
from urllib.parse import urlsplit

import yaml
from django.conf import settings
from wcmatch import glob as wcglob

from groundtruth.ingest.git_refs import REF_RULE, ref_is_valid
from groundtruth.ingest.source_policy import SourceRefused, source_location
from groundtruth.models import TrustTier

GLOB_FLAGS = wcglob.GLOBSTAR | wcglob.BRACE | wcglob.DOTGLOB | wcglob.FORCEUNIX
REPO_TRUST_TIERS = (TrustTier.CANONICAL.value, TrustTier.REVIEWED.value, TrustTier.COMMUNITY.value)
_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_TOP_KEYS = {"defaults", "repos", "transcripts"}
_DEFAULT_KEYS = {"ref", "include", "exclude", "trust", "owners"}
_REPO_KEYS = {"name", "url", "ref", "include", "exclude", "trust", "owners", "enabled"}
_TRANSCRIPT_KEYS = {"enabled", "repos"}


class RegistryInvalid(Exception):
    """sources.yml could not be used; `errors` lists each problem as `file:line: key: problem`."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


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


class _Validator:
    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.errors: list[str] = []

    def error(self, node: yaml.Node | None, key: str, problem: str) -> None:
        line = f":{node.start_mark.line + 1}" if node is not None else ""
        self.errors.append(f"{self.filename}{line}: {key}: {problem}" if key else f"{self.filename}{line}: {problem}")

    # --- node helpers ------------------------------------------------------------------
    def mapping(self, node: yaml.Node, key: str) -> dict[str, tuple[yaml.Node, yaml.Node]] | None:
        if not isinstance(node, yaml.MappingNode):
            self.error(node, key, "must be a mapping")
            return None
        items: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        for key_node, value_node in node.value:
            name = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node)
            if name in items:
                self.error(key_node, f"{key}.{name}" if key else name, "duplicate key")
            items[name] = (key_node, value_node)
        return items

    def unknown_keys(self, items: dict[str, tuple[yaml.Node, yaml.Node]], allowed: set[str], key: str) -> None:
        for name, (key_node, _) in items.items():
            if name not in allowed:
                where = f"{key}.{name}" if key else name
                self.error(key_node, where, f"unknown key; allowed keys: {', '.join(sorted(allowed))}")

    def string(self, node: yaml.Node, key: str) -> str | None:
        if not isinstance(node, yaml.ScalarNode) or node.tag != "tag:yaml.org,2002:str" or not node.value.strip():
            self.error(node, key, "must be a non-empty string")
            return None
        return node.value.strip()

    def boolean(self, node: yaml.Node, key: str) -> bool | None:
        if not isinstance(node, yaml.ScalarNode) or node.tag != "tag:yaml.org,2002:bool":
            self.error(node, key, "must be true or false")
            return None
        return node.value.lower() in {"true", "yes", "on"}

    def string_list(self, node: yaml.Node, key: str) -> list[str] | None:
        if not isinstance(node, yaml.SequenceNode):
            self.error(node, key, "must be a list of strings")
            return None
        values = []
        for index, item in enumerate(node.value):
            value = self.string(item, f"{key}[{index}]")
            if value is not None:
                values.append(value)
        return values

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


def registry_yaml_compose(*, text: str | bytes, filename: str) -> yaml.Node | None:
    """The YAML node tree of a registry file (nodes keep their line numbers for error messages);
    a syntax error raises RegistryInvalid naming the file and line. None for an empty file."""
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise RegistryInvalid([f"{filename}{line}: invalid YAML: {problem}"]) from exc


def registry_parse(*, content: bytes | str, filename: str, base_dir: Path | None = None) -> SourceRegistry:
    """Parses and validates sources.yml. Raises RegistryInvalid listing every problem found.

    `base_dir` resolves relative local repository paths (the registry repository's location when
    it is local); without it, relative paths are refused.
    """
    text = content.decode("utf-8") if isinstance(content, bytes) else content
    validator = _Validator(filename)
    root = registry_yaml_compose(text=text, filename=filename)
    if root is None:
        raise RegistryInvalid([f"{filename}: the file is empty; it needs a 'repos' list"])
    top = validator.mapping(root, "")
    if top is None:
        raise RegistryInvalid(validator.errors)
    validator.unknown_keys(top, _TOP_KEYS, "")

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
    if validator.errors:
        raise RegistryInvalid(validator.errors)
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
        value = validator.string(items["ref"][1], f"{key}.ref")
        if value is not None:
            if not ref_is_valid(value):
                validator.error(items["ref"][1], f"{key}.ref", f"invalid ref {value!r}: {REF_RULE}")
            else:
                fields["ref"] = value
    if "trust" in items:
        node = items["trust"][1]
        if transcript:
            validator.error(node, f"{key}.trust", "transcripts always have trust 'transcript' and are never canonical")
        else:
            value = validator.trust(node, f"{key}.trust")
            if value is not None:
                fields["trust"] = value
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
    elif name is not None and not _NAME_RE.match(name):
        validator.error(items["name"][1], f"{key}.name", f"{name!r} is not of the form owner/name")
    elif name is not None and name in names:
        validator.error(items["name"][1], f"{key}.name", f"duplicate repository name {name!r}")
    if name:
        names.add(name)
    url = validator.string(items["url"][1], f"{key}.url") if "url" in items else None
    if "url" not in items:
        validator.error(node, f"{key}.url", "missing (https URL, file:// URL or local path)")
    elif url is not None:
        try:
            url = source_location(url, base_dir=base_dir)
        except SourceRefused as exc:
            validator.error(items["url"][1], f"{key}.url", str(exc))
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


# --- where it lives --------------------------------------------------------------------------
def registry_location() -> str:
    """How the registry is named in the Registry row and the admin (never holds credentials)."""
    source = settings.SOURCE_REGISTRY_REPO
    parts = urlsplit(source)
    if parts.username or parts.password:
        source = source.replace(f"{parts.netloc}", parts.hostname or "", 1)
    return f"{source}@{settings.SOURCE_REGISTRY_REF}:{settings.SOURCE_REGISTRY_PATH}"


def registry_base_dir() -> Path | None:
    """The directory relative local paths in the registry files start from: the registry
    repository's parent when it is local, else None (relative paths are refused)."""
    source = settings.SOURCE_REGISTRY_REPO
    parts = urlsplit(source)
    if parts.scheme == "file":
        return Path(parts.path)
    if not parts.scheme or len(parts.scheme) == 1:
        return Path(source).expanduser().resolve().parent
    return None
