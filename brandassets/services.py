"""Writes of the brand asset registry: the sync from brand-assets.yml, and reading asset bytes."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agentplatform.plumbing.errors import ServiceUnavailable
from brandassets.content_cache import asset_record_cache, blob_contents
from brandassets.models import AssetBlob, AssetRegistry, BrandAsset
from brandassets.registry import AssetEntry, RepoSource, registry_parse
from groundtruth.ingest.git_access import (
    MODE_EXECUTABLE,
    MODE_FILE,
    GitError,
    GitRepository,
    TreeEntry,
    registry_file_read,
)
from groundtruth.models import Repository
from groundtruth.registry_files import RegistryInvalid, registry_base_dir, registry_location

logger = logging.getLogger(__name__)

SYNCED = "synced"
INVALID = "invalid"
FAILED = "failed"


@dataclass(frozen=True)
class MissingAsset:
    product: str
    kind: str
    asset_index: int
    repo: str
    path: str
    ref: str
    reason: str

    def render(self) -> str:
        return f"{self.product}/{self.kind}[{self.asset_index}] {self.repo}:{self.path}@{self.ref}: {self.reason}"


@dataclass
class SyncReport:
    """What a sync did. `status` is `synced` (the registry was loaded; some assets may be
    missing), `invalid` (the file has errors: the last good registry stays) or `failed` (the
    file could not be read: the last good registry stays)."""

    status: str
    location: str
    commit: str = ""
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    listed: int = 0
    served: int = 0
    missing: list[MissingAsset] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == SYNCED

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self) -> list[str]:
        head = {
            SYNCED: f"Brand assets synced from {self.location} at {self.commit[:12]}: "
            f"{self.listed} listed, {self.served} served, {len(self.missing)} missing.",
            INVALID: f"Brand asset registry {self.location} is invalid; the last good registry stays in use.",
            FAILED: f"Brand asset registry {self.location} could not be read; the last good registry stays in use.",
        }[self.status]
        lines = [head]
        lines += [f"  error: {error}" for error in self.errors]
        lines += [f"  missing: {missing.render()}" for missing in self.missing]
        lines += [f"  warning: {warning}" for warning in self.warnings]
        return lines


@dataclass
class _RepoState:
    """One repo as seen during a sync: its cache, and per ref the commit and its files."""

    source: RepoSource
    repository: GitRepository
    fetch_error: GitError | None = None
    trees: dict[str, tuple[str, dict[str, TreeEntry]] | GitError] = field(default_factory=dict)

    def tree(self, ref: str) -> tuple[str, dict[str, TreeEntry]] | GitError:
        if ref not in self.trees:
            try:
                commit = self.repository.resolve(ref)
                self.trees[ref] = (commit, {entry.path: entry for entry in self.repository.list_files(commit)})
            except GitError as exc:
                self.trees[ref] = exc
        return self.trees[ref]


def asset_registry_sync() -> SyncReport:
    """Reads BRAND_ASSETS_PATH from the registry repository at SOURCE_REGISTRY_REF, validates
    it and stores its assets, resolving each listed path at its ref.

    A listed path that does not exist at its ref (or is a symlink, a directory or a submodule)
    is stored as missing with the reason, reported, and never served. An unreadable or invalid
    file changes no asset and keeps the last good registry; its errors are in the report and in
    the registry row the admin shows. When a brand repo cannot be fetched (network down, token
    refused), its assets keep their last good resolution, whose bytes the database still holds,
    with a warning in the report rather than going dark; assets never resolved before are missing.
    """
    location = registry_location(settings.BRAND_ASSETS_PATH)
    registry_row, _created = AssetRegistry.objects.get_or_create(location=location)
    try:
        registry_file = registry_file_read(path=settings.BRAND_ASSETS_PATH)
    except GitError as exc:
        return _sync_refused(registry_row, SyncReport(status=FAILED, location=location, errors=[str(exc)]))
    try:
        registry = registry_parse(
            text=registry_file.content, file_name=settings.BRAND_ASSETS_PATH, base_dir=registry_base_dir()
        )
        sources = _repo_sources(registry.entries, registry.repos)
    except RegistryInvalid as exc:
        report = SyncReport(status=INVALID, location=location, commit=registry_file.commit, errors=exc.errors)
        return _sync_refused(registry_row, report)

    report = SyncReport(status=SYNCED, location=location, commit=registry_file.commit, listed=len(registry.entries))
    states = {name: _RepoState(source=source, repository=GitRepository(source.url)) for name, source in sources.items()}
    for state in states.values():
        try:
            state.repository.fetch()
        except GitError as exc:
            state.fetch_error = exc
    previous = {(asset.product, asset.kind, asset.asset_index): asset for asset in BrandAsset.objects.all()}
    now = timezone.now()
    rows = [_asset_row(entry, states[entry.repo], previous, report, now) for entry in registry.entries]
    report.served = sum(1 for row in rows if not row.missing)
    blobs = _asset_blobs_read(rows, states, report)

    with transaction.atomic():
        # Syncs (an ingest and an admin click) take turns here, so the stale rows removed
        # below are computed from what is stored now, not from an earlier snapshot.
        registry_row = AssetRegistry.objects.select_for_update().get(pk=registry_row.pk)
        if rows:
            BrandAsset.objects.bulk_create(
                rows,
                update_conflicts=True,
                unique_fields=["product", "kind", "asset_index"],
                update_fields=[f.name for f in BrandAsset._meta.concrete_fields if f.name not in _KEY_FIELDS],
            )
        listed = {(row.product, row.kind, row.asset_index) for row in rows}
        stored = BrandAsset.objects.values_list("pk", "product", "kind", "asset_index")
        BrandAsset.objects.filter(pk__in=[pk for pk, *key in stored if tuple(key) not in listed]).delete()
        # The bytes go in with the rows that name them, and those no asset names any more go: only
        # syncs write either, and they take turns on the registry row above.
        AssetBlob.objects.bulk_create(blobs, ignore_conflicts=True)
        AssetBlob.objects.exclude(sha__in=BrandAsset.objects.filter(missing=False).values("blob_sha")).delete()
        registry_row.commit = registry_file.commit
        registry_row.content = registry_file.content.decode("utf-8", errors="replace")
        registry_row.loaded_at = now
        registry_row.last_error = ""
        registry_row.last_error_at = None
        registry_row.last_sync_at = now
        registry_row.last_report = report.as_dict()
        registry_row.save()
    asset_record_cache.clear()
    for line in report.lines():
        logger.info("%s", line)
    return report


_KEY_FIELDS = {"id", "product", "kind", "asset_index"}


def _sync_refused(registry_row: AssetRegistry, report: SyncReport) -> SyncReport:
    now = timezone.now()
    registry_row.last_error = "\n".join(report.errors)
    registry_row.last_error_at = now
    registry_row.last_sync_at = now
    registry_row.last_report = report.as_dict()
    registry_row.save(update_fields=["last_error", "last_error_at", "last_sync_at", "last_report"])
    for line in report.lines():
        logger.warning("%s", line)
    return report


def _repo_sources(entries: list[AssetEntry], declared: dict[str, RepoSource]) -> dict[str, RepoSource]:
    """Where each repo the entries name lives: brand-assets.yml's `repos:`, else sources.yml's
    repositories (as stored by the last good source registry load)."""
    wanted = {entry.repo for entry in entries}
    sources = {name: declared[name] for name in wanted if name in declared}
    undeclared = wanted - set(sources)
    for repository in Repository.objects.filter(name__in=undeclared):
        sources[repository.name] = RepoSource(name=repository.name, url=repository.url)
    errors = [
        f"{settings.BRAND_ASSETS_PATH}:{entry.line}: {entry.label}.repo: '{entry.repo}' is declared neither under "
        f"repos: in {settings.BRAND_ASSETS_PATH} nor in {settings.SOURCE_REGISTRY_PATH}"
        for entry in entries
        if entry.repo not in sources
    ]
    if errors:
        raise RegistryInvalid(errors)
    return sources


def _asset_row(
    entry: AssetEntry,
    state: _RepoState,
    previous: dict[tuple[str, str, int], BrandAsset],
    report: SyncReport,
    now: Any,
) -> BrandAsset:
    row = BrandAsset(
        product=entry.product,
        kind=entry.kind,
        asset_index=entry.asset_index,
        position=entry.position,
        repo=entry.repo,
        repo_url=state.source.url,
        web_url=state.source.web_url,
        path=entry.path,
        ref=entry.ref,
        format=entry.format,
        theme=entry.theme,
        width=entry.width,
        height=entry.height,
        description=entry.description,
        synced_at=now,
    )
    reason = ""
    if state.fetch_error is not None:
        earlier = previous.get((entry.product, entry.kind, entry.asset_index))
        same_file = earlier is not None and (earlier.repo_url, earlier.path, earlier.ref) == (
            row.repo_url,
            row.path,
            row.ref,
        )
        if earlier is not None and same_file and not earlier.missing:
            row.commit, row.blob_sha, row.size = earlier.commit, earlier.blob_sha, earlier.size
            report.warnings.append(
                f"{entry.label}: {entry.repo} could not be fetched ({state.fetch_error}); "
                f"kept the last good resolution {earlier.commit[:12]}"
            )
            return row
        reason = f"repository could not be fetched: {state.fetch_error}"
    else:
        tree = state.tree(entry.ref)
        if isinstance(tree, GitError):
            reason = f"ref '{entry.ref}' could not be resolved: {tree}"
        else:
            commit, files = tree
            row.commit = commit
            found = files.get(entry.path)
            if found is None:
                reason = f"path not found at ref '{entry.ref}' (commit {commit[:12]})"
            elif found.mode not in {MODE_FILE, MODE_EXECUTABLE}:
                what = "a symlink" if found.is_symlink else "a submodule" if found.is_submodule else "not a file"
                reason = f"path is {what} at ref '{entry.ref}' (commit {commit[:12]}); only regular files are served"
            else:
                row.blob_sha, row.size = found.blob_sha, found.size
    if reason:
        row.missing, row.missing_reason = True, reason
        report.missing.append(
            MissingAsset(
                product=entry.product,
                kind=entry.kind,
                asset_index=entry.asset_index,
                repo=entry.repo,
                path=entry.path,
                ref=entry.ref,
                reason=reason,
            )
        )
    return row


def _asset_blobs_read(rows: list[BrandAsset], states: dict[str, _RepoState], report: SyncReport) -> list[AssetBlob]:
    """The bytes of the served assets' blobs the database does not hold yet, read from the git
    cache the sync just fetched into. A blob that cannot be read is a warning: its asset stays
    listed, and its content answers 503 until a sync stores it."""
    wanted = {row.blob_sha: row for row in rows if not row.missing and row.blob_sha}
    stored = set(AssetBlob.objects.filter(sha__in=list(wanted)).values_list("sha", flat=True))
    now = timezone.now()
    blobs: list[AssetBlob] = []
    for sha in sorted(set(wanted) - stored):
        row = wanted[sha]
        try:
            data = states[row.repo].repository.read_blob(sha)
        except GitError as exc:
            report.warnings.append(
                f"{row.product}/{row.kind}[{row.asset_index}]: the bytes of {row.repo}:{row.path} could not be read "
                f"({exc}); its content answers 503 until a sync stores them"
            )
            continue
        blobs.append(AssetBlob(sha=sha, content=data, size=len(data), stored_at=now))
    return blobs


def asset_content_fetch(*, asset: BrandAsset) -> bytes:
    """The bytes of a served asset, from the in-process cache or from the database (AssetBlob,
    stored by the sync). Never from git: a web host needs no git cache, token or egress.

    Only the stored blob SHA of the registered (repo, path, ref) is ever read, so nothing in a
    request URL can reach another file or another repository.
    """
    data = blob_contents.get(asset.blob_sha)
    if data is not None:
        return data
    stored = AssetBlob.objects.filter(sha=asset.blob_sha).values_list("content", flat=True).first()
    if stored is None:
        logger.warning("Brand asset %s has no stored bytes (blob %s)", asset, asset.blob_sha)
        raise ServiceUnavailable(
            f"The content of {asset.product}/{asset.kind}/{asset.asset_index} is not stored yet; the next sync of "
            "the brand asset registry stores it.",
            code="asset_unavailable",
        )
    data = bytes(stored)
    blob_contents.put(asset.blob_sha, data)
    return data
