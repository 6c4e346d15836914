"""Parsing and validation of `brand-assets.yml`, the explicit brand asset registry.

The file lists every asset; nothing is inferred from file extensions:

```yaml
defaults:                      # optional
  ref: main
repos:                         # optional: where each repo named below lives
  acme/brand:
    url: https://git.example.com/acme/brand.git   # https URL, file:// URL or local path (as in sources.yml)
    web_url: https://github.com/acme/brand        # optional, for blobUrl when url is a mirror
    ref: main                                     # optional default ref of this repo's assets
products:
  acme-app:
    logo:
      - {repo: acme/brand, path: logos/acme-light.svg, ref: main, theme: light, format: svg}
    favicon:
      - {repo: acme/brand, path: web/favicon.ico}
```

A repo not declared under `repos:` is looked up among the repositories of the source registry
(sources.yml) by name at sync time.

Read with the validator sources.yml uses (groundtruth/registry_files.py): errors name the file,
the line and the entry (`brand-assets.yml:12: products.acme-app.logo[0].colour: unknown key;
allowed keys: ...`), and all errors of a file are collected, not only the first.
"""

from __future__ import annotations

import mimetypes
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

# The toolkit both registry files share: YAML with line numbers, one validator, one error type.
from groundtruth.registry_files import RegistryFileValidator, is_null

# Product and kind names are URL path segments of /assets/<product>/<kind>: keep them to a
# conservative alphabet so that no name can carry a separator, a dot segment or an escape.
NAME_PATTERN = re.compile(r"^[a-z0-9](?:[a-z0-9_-]{0,62}[a-z0-9])?\Z")
REPO_NAME_PATTERN = re.compile(r"^(?!.*(?:^|/)\.{1,2}(?:/|\Z))[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)+\Z")
THEMES = ("light", "dark")

# Formats the registry may name, with the Content-Type the content endpoint sends for each.
CONTENT_TYPES: dict[str, str] = {
    "svg": "image/svg+xml",
    "png": "image/png",
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "gif": "image/gif",
    "webp": "image/webp",
    "avif": "image/avif",
    "ico": "image/x-icon",
    "woff": "font/woff",
    "woff2": "font/woff2",
    "ttf": "font/ttf",
    "otf": "font/otf",
    "eot": "application/vnd.ms-fontobject",
    "pdf": "application/pdf",
    "eps": "application/postscript",
    "json": "application/json",
}
IMAGE_FORMATS = frozenset({"svg", "png", "jpg", "jpeg", "gif", "webp", "avif", "ico"})

ENTRY_KEYS = ("repo", "path", "ref", "format", "theme", "width", "height", "description")
REPO_KEYS = ("url", "web_url", "ref")
TOP_LEVEL_KEYS = ("defaults", "repos", "products")
DEFAULT_KEYS = ("ref",)


@dataclass(frozen=True)
class RepoSource:
    name: str
    url: str
    web_url: str = ""
    ref: str = ""


@dataclass(frozen=True)
class AssetEntry:
    """One listed asset. `asset_index` is its position among its product's assets of its kind."""

    product: str
    kind: str
    asset_index: int
    position: int
    repo: str
    path: str
    ref: str
    format: str = ""
    theme: str = ""
    width: int | None = None
    height: int | None = None
    description: str = ""
    line: int | None = None

    @property
    def label(self) -> str:
        return f"products.{self.product}.{self.kind}[{self.asset_index}]"


@dataclass
class BrandRegistry:
    entries: list[AssetEntry] = field(default_factory=list)
    repos: dict[str, RepoSource] = field(default_factory=dict)


def format_for(*, declared: str, path: str) -> str:
    """The asset's format: the registry's, else the registered file's extension when it is known."""
    if declared:
        return declared
    extension = posixpath.splitext(path)[1].lstrip(".").lower()
    return extension if extension in CONTENT_TYPES else ""


def content_type_for(*, format: str, path: str) -> str:
    """Content-Type from the registry's format, else from the registered file's name."""
    if format in CONTENT_TYPES:
        return CONTENT_TYPES[format]
    guessed, _encoding = mimetypes.guess_type(posixpath.basename(path), strict=False)
    return guessed or "application/octet-stream"


def path_problem(path: str) -> str | None:
    """Why `path` cannot name a file inside a repository, or None when it can."""
    if not path:
        return "must not be empty"
    if "\x00" in path or "\\" in path or any(ord(char) < 32 for char in path):
        return "must not contain backslashes or control characters"
    if path.startswith("/"):
        return "must be relative to the repository root"
    if any(segment in {"", ".", ".."} for segment in path.split("/")):
        return "must not contain empty, '.' or '..' segments"
    if path.split("/")[0] == ".git":
        return "must not point into .git"
    if len(path) > 1000:
        return "must be at most 1000 characters"
    return None


class _Validator(RegistryFileValidator):
    """The shared registry-file readers, plus brand-assets.yml's pixel sizes."""

    def positive_int(self, node: yaml.Node, key: str) -> int | None:
        value = self.scalar(node, key)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= 100_000:
            self.error(node, key, "must be a whole number of pixels between 1 and 100000")
            return None
        return value


def registry_parse(
    *, text: str | bytes, file_name: str = "brand-assets.yml", base_dir: Path | None = None
) -> BrandRegistry:
    """Parses and validates the registry; raises RegistryInvalid listing every problem found.

    Repo URLs follow sources.yml's rule (groundtruth/ingest/source_policy.py); `base_dir`
    resolves relative local paths, as there.
    """
    validator = _Validator(file_name)
    root, top = validator.root(text, allowed_keys=TOP_LEVEL_KEYS, when_empty="write `products: {}` to list no assets")
    sections = {key: value for key, (_key_node, value) in top.items()}

    default_ref = "main"
    if "defaults" in sections:
        defaults = validator.mapping(sections["defaults"], "defaults") or {}
        validator.unknown_keys(defaults, DEFAULT_KEYS, "defaults")
        if "ref" in defaults:
            default_ref = validator.ref(defaults["ref"][1], "defaults.ref") or "main"

    repos: dict[str, RepoSource] = {}
    if "repos" in sections:
        for name, (name_node, value) in (validator.mapping(sections["repos"], "repos") or {}).items():
            if source := _repo_source(validator, name, name_node, value, base_dir):
                repos[name] = source

    entries: list[AssetEntry] = []
    if "products" not in sections:
        validator.error(root, "", "missing required key 'products'")
    else:
        products_node = sections["products"]
        products = {} if is_null(products_node) else validator.mapping(products_node, "products") or {}
        for product, (product_key, kinds_node) in products.items():
            if not NAME_PATTERN.match(product):
                validator.error(product_key, f"products.{product}", _name_hint("product"))
                continue
            for kind, (kind_key, list_node) in (validator.mapping(kinds_node, f"products.{product}") or {}).items():
                where_kind = f"products.{product}.{kind}"
                if not NAME_PATTERN.match(kind):
                    validator.error(kind_key, where_kind, _name_hint("kind"))
                    continue
                if not isinstance(list_node, yaml.SequenceNode):
                    validator.error(list_node, where_kind, "must be a list of assets")
                    continue
                for index, item in enumerate(list_node.value):
                    entry = _entry(validator, item, product, kind, index, len(entries), default_ref, repos)
                    if entry is not None:
                        entries.append(entry)
    validator.raise_if_invalid()
    return BrandRegistry(entries=entries, repos=repos)


def _repo_source(
    validator: _Validator, name: str, name_node: yaml.Node, node: yaml.Node, base_dir: Path | None
) -> RepoSource | None:
    where = f"repos.{name}"
    if not REPO_NAME_PATTERN.match(name):
        validator.error(name_node, where, "repo names are owner/name")
        return None
    fields = validator.mapping(node, where)
    if fields is None:
        return None
    validator.unknown_keys(fields, REPO_KEYS, where)
    if "url" not in fields:
        validator.error(node, where, "missing required key 'url'")
        return None
    url = validator.repository_url(fields["url"][1], f"{where}.url", base_dir=base_dir)
    web_url = ""
    if "web_url" in fields:
        web_url = validator.string(fields["web_url"][1], f"{where}.web_url") or ""
        if web_url and not web_url.startswith(("https://", "http://")):
            validator.error(fields["web_url"][1], f"{where}.web_url", "must be an http(s) URL")
            web_url = ""
    repo_ref = (validator.ref(fields["ref"][1], f"{where}.ref") or "") if "ref" in fields else ""
    return RepoSource(name=name, url=url, web_url=web_url, ref=repo_ref) if url else None


def _name_hint(what: str) -> str:
    return f"{what} names are lower-case letters, digits, '-' and '_' (1-64 characters, no leading or trailing '-')"


def _entry(
    validator: _Validator,
    node: yaml.Node,
    product: str,
    kind: str,
    index: int,
    position: int,
    default_ref: str,
    repos: dict[str, RepoSource],
) -> AssetEntry | None:
    where = f"products.{product}.{kind}[{index}]"
    items = validator.mapping(node, where)
    if items is None:
        return None
    before = len(validator.errors)
    validator.unknown_keys(items, ENTRY_KEYS, where)
    fields = {key: value for key, (_key_node, value) in items.items()}
    for required in ("repo", "path"):
        if required not in fields:
            validator.error(node, where, f"missing required key '{required}'")
    repo = path = None
    if "repo" in fields:
        repo = validator.string(fields["repo"], f"{where}.repo", pattern=REPO_NAME_PATTERN, hint="expected owner/name")
    if "path" in fields:
        path = validator.string(fields["path"], f"{where}.path")
        if path is not None and (problem := path_problem(path)):
            validator.error(fields["path"], f"{where}.path", f"{path!r} {problem}")
            path = None
    ref = ""
    if "ref" in fields:
        ref = validator.ref(fields["ref"], f"{where}.ref") or ""
    asset_format = ""
    if "format" in fields:
        value = validator.string(fields["format"], f"{where}.format")
        if value is not None and value.lower() not in CONTENT_TYPES:
            validator.error(
                fields["format"], f"{where}.format", f"unknown format {value!r}; allowed: {', '.join(CONTENT_TYPES)}"
            )
        elif value is not None:
            asset_format = value.lower()
    theme = ""
    if "theme" in fields:
        value = validator.string(fields["theme"], f"{where}.theme")
        if value is not None and value not in THEMES:
            validator.error(fields["theme"], f"{where}.theme", f"must be one of {', '.join(THEMES)}")
        elif value is not None:
            theme = value
    width = validator.positive_int(fields["width"], f"{where}.width") if "width" in fields else None
    height = validator.positive_int(fields["height"], f"{where}.height") if "height" in fields else None
    description = ""
    if "description" in fields:
        value = validator.scalar(fields["description"], f"{where}.description")
        if not isinstance(value, str) or len(value) > 1000:
            validator.error(
                fields["description"], f"{where}.description", "must be a string of at most 1000 characters"
            )
        else:
            description = value.strip()
    if len(validator.errors) != before or repo is None or path is None:
        return None
    if not ref:
        ref = repos[repo].ref if repo in repos and repos[repo].ref else default_ref
    return AssetEntry(
        product=product,
        kind=kind,
        asset_index=index,
        position=position,
        repo=repo,
        path=path,
        ref=ref,
        format=format_for(declared=asset_format, path=path),
        theme=theme,
        width=width,
        height=height,
        description=description,
        line=node.start_mark.line + 1,
    )
