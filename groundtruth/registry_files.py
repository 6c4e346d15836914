"""The registry repository's files (sources.yml, brand-assets.yml): where they live, how they are
named, and the one validator both files are read with.

- `registry_location(path)` names a registry file in its row, the admin and every log line:
  `<SOURCE_REGISTRY_REPO>@<SOURCE_REGISTRY_REF>:<path>`, with any credentials in the URL left out.
- `registry_base_dir()` is where relative local paths in either file start from.
- `registry_yaml_compose` reads a file into YAML nodes that keep their line numbers;
  `RegistryFileValidator` checks them, collecting every problem as `file:line: key: problem`
  (keys as `repos[0].url`, `products.acme-app.logo[2].path`), and `RegistryInvalid` carries them.
  Repository URLs follow the one source rule (groundtruth/ingest/source_policy.py), refs the one
  ref rule (groundtruth/ingest/git_refs.py).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml
from django.conf import settings

from groundtruth.ingest.git_refs import REF_RULE, ref_is_valid
from groundtruth.ingest.source_policy import SourceRefused, source_location, url_without_credentials

_STRING_TAG = "tag:yaml.org,2002:str"
_BOOLEAN_TAG = "tag:yaml.org,2002:bool"
_NULL_TAG = "tag:yaml.org,2002:null"


class RegistryInvalid(Exception):
    """A registry file could not be used; `errors` lists each problem as `file:line: key: problem`."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


def registry_location(path: str) -> str:
    """How the registry file `path` is named in rows, the admin and logs (never with credentials)."""
    return f"{url_without_credentials(settings.SOURCE_REGISTRY_REPO)}@{settings.SOURCE_REGISTRY_REF}:{path}"


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


def is_null(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.tag == _NULL_TAG


Items = dict[str, tuple[yaml.Node, yaml.Node]]


class RegistryFileValidator:
    """Reads values out of a registry file's nodes; every problem is recorded, not raised, so that
    one pass reports them all. Each reader returns None for a value it refused."""

    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.errors: list[str] = []

    def error(self, node: yaml.Node | None, key: str, problem: str) -> None:
        line = f":{node.start_mark.line + 1}" if node is not None else ""
        self.errors.append(f"{self.filename}{line}: {key}: {problem}" if key else f"{self.filename}{line}: {problem}")

    def raise_if_invalid(self) -> None:
        if self.errors:
            raise RegistryInvalid(self.errors)

    def root(
        self, text: str | bytes, *, allowed_keys: set[str] | tuple[str, ...], when_empty: str
    ) -> tuple[yaml.Node, Items]:
        """The file's node tree and its top-level mapping, unknown keys reported. Raises
        RegistryInvalid at once for a file that is empty (`when_empty` says what it needs) or is
        not a mapping: nothing else can be read from it."""
        root = registry_yaml_compose(text=text, filename=self.filename)
        if root is None:
            raise RegistryInvalid([f"{self.filename}: the file is empty; {when_empty}"])
        top = self.mapping(root, "")
        if top is None:
            raise RegistryInvalid(self.errors)
        self.unknown_keys(top, allowed_keys, "")
        return root, top

    def mapping(self, node: yaml.Node, key: str) -> Items | None:
        """name -> (key node, value node); a repeated or non-scalar key is a problem (the first wins)."""
        if not isinstance(node, yaml.MappingNode):
            self.error(node, key, "must be a mapping")
            return None
        items: Items = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                self.error(key_node, key, "keys must be plain strings")
                continue
            name = str(key_node.value)
            if name in items:
                self.error(key_node, f"{key}.{name}" if key else name, "duplicate key")
                continue
            items[name] = (key_node, value_node)
        return items

    def unknown_keys(self, items: Items, allowed: set[str] | tuple[str, ...], key: str) -> None:
        for name, (key_node, _) in items.items():
            if name not in allowed:
                where = f"{key}.{name}" if key else name
                self.error(key_node, where, f"unknown key; allowed keys: {', '.join(sorted(allowed))}")

    def scalar(self, node: yaml.Node, key: str) -> Any:
        """The Python value of a single value (YAML 1.1 core types, as PyYAML's safe loader reads them)."""
        if not isinstance(node, yaml.ScalarNode):
            self.error(node, key, "must be a single value")
            return None
        loader = yaml.SafeLoader("")
        try:
            return loader.construct_object(node, deep=True)
        finally:
            loader.dispose()

    def string(
        self, node: yaml.Node, key: str, *, pattern: re.Pattern[str] | None = None, hint: str = ""
    ) -> str | None:
        """A non-empty string, stripped; with `pattern`, one that matches it (`hint` says how)."""
        if not isinstance(node, yaml.ScalarNode) or node.tag != _STRING_TAG or not node.value.strip():
            self.error(node, key, "must be a non-empty string")
            return None
        value = node.value.strip()
        if pattern is not None and not pattern.match(value):
            self.error(node, key, f"{value!r} is not valid{': ' + hint if hint else ''}")
            return None
        return value

    def boolean(self, node: yaml.Node, key: str) -> bool | None:
        if not isinstance(node, yaml.ScalarNode) or node.tag != _BOOLEAN_TAG:
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

    def ref(self, node: yaml.Node, key: str) -> str | None:
        """A branch, tag or commit SHA by the one ref rule."""
        value = self.string(node, key)
        if value is not None and not ref_is_valid(value):
            self.error(node, key, f"invalid ref {value!r}: {REF_RULE}")
            return None
        return value

    def repository_url(self, node: yaml.Node, key: str, *, base_dir: Path | None) -> str | None:
        """A repository URL or local path the source rule allows, as git gets it (relative local
        paths resolved against `base_dir`)."""
        value = self.string(node, key)
        if value is None:
            return None
        try:
            return source_location(value, base_dir=base_dir)
        except SourceRefused as exc:
            self.error(node, key, str(exc))
            return None
