"""Read-only access to git repositories through the git CLI, with a local cache.

The one entry point is `GitRepository(url)`:

    repo = GitRepository("https://git.example.com/acme/handbook.git")  # or a local path / file:// URL
    repo.fetch()                          # clones once into settings.GIT_CACHE_DIR, then fetches incrementally
    commit = repo.resolve("main")         # -> full commit SHA (branch, tag, or a SHA already fetched)
    for entry in repo.list_files(commit): # -> [TreeEntry(path, blob_sha, mode, size)], sorted by path
        ...
    data = repo.read_file(commit, "docs/index.md")  # -> bytes
    data = repo.read_blob(entry.blob_sha)           # -> bytes
    with repo.blob_reader() as read: read(sha)      # many blobs through one `git cat-file --batch`

`registry_file_read(path="brand-assets.yml")` reads one file of the registry repository
(SOURCE_REGISTRY_REPO at SOURCE_REGISTRY_REF) and returns its commit and bytes.

How the cache works: every remote gets one bare repository under GIT_CACHE_DIR, named after the
URL (readable part + hash). `fetch()` runs `git fetch <url> +refs/heads/*:refs/heads/*
+refs/tags/*:refs/tags/*` with `--prune`; the URL is passed on the command line each time and never
stored as a remote, so nothing about the remote persists in the cache's config.

Private https repositories: GIT_HTTP_TOKEN is sent as an `Authorization` header through
`GIT_CONFIG_COUNT/KEY/VALUE` environment variables (git >= 2.31), so it never appears in argv
(`ps`), in a remote URL, in the cache's config, in logs or in error messages (any error text is
scrubbed of it). It is sent only to http(s) URLs of hosts listed in GIT_HTTP_TOKEN_HOSTS (the
settings refuse a token without that list). The header is HTTP Basic with user GIT_HTTP_USERNAME (default
`x-access-token`, what GitHub expects; GitLab and Gitea accept any user name with a token).

Where a fetch may go is checked right before it (groundtruth/ingest/source_policy.py): local
paths under GIT_LOCAL_ROOTS, http(s) hosts on public addresses unless GIT_ALLOW_PRIVATE_HOSTS
names them. git then connects to exactly the addresses checked and follows no redirect.

Errors: `GitNetworkError` for transient failures worth retrying (host unreachable, timeouts,
5xx, dropped connections), `GitError` for everything else (bad ref, authentication refused,
repository missing): retrying those cannot help.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import re
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings

from groundtruth.ingest.git_refs import REF_RULE, ref_is_valid
from groundtruth.ingest.source_policy import (
    SourceRefused,
    SourceUnresolved,
    remote_addresses,
    source_location,
    url_without_credentials,
)

# Modes in a git tree (`git ls-tree`): regular, executable, symlink, submodule.
MODE_FILE = "100644"
MODE_EXECUTABLE = "100755"
MODE_SYMLINK = "120000"
MODE_SUBMODULE = "160000"

_SHA_RE = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
# stderr fragments of git/curl that mean "the network failed, try again later".
_TRANSIENT_MARKERS = (
    "could not resolve host",
    "connection refused",
    "connection reset",
    "connection timed out",
    "operation timed out",
    "timed out",
    "early eof",
    "the remote end hung up unexpectedly",
    "rpc failed",
    "http 500",
    "http 502",
    "http 503",
    "http 504",
    "returned error: 50",
    "failed to connect",
    "network is unreachable",
    "temporary failure in name resolution",
    "ssl_error",
    "gnutls_handshake",
)


class GitError(Exception):
    """A git operation failed for a reason retrying will not fix."""


class GitNetworkError(GitError):
    """A git operation failed on the network; retrying later may succeed."""


class GitCommitMissing(GitError):
    """The cache holds no such commit (never fetched here, or pruned since)."""


class GitPathMissing(GitError):
    """The path names no file at the commit: absent, a directory, a submodule, or a symlink that
    dangles, loops or leaves the repository."""


class GitFileTooLarge(GitError):
    """The file is larger than the caller accepts (its size in bytes is `size`)."""

    def __init__(self, message: str, *, size: int) -> None:
        super().__init__(message)
        self.size = size


@dataclass(frozen=True)
class TreeEntry:
    path: str
    blob_sha: str
    mode: str
    size: int

    @property
    def is_symlink(self) -> bool:
        return self.mode == MODE_SYMLINK

    @property
    def is_submodule(self) -> bool:
        return self.mode == MODE_SUBMODULE


@dataclass(frozen=True)
class RegistryFile:
    commit: str
    content: bytes


def is_remote_url(url: str) -> bool:
    return urlsplit(url).scheme in {"http", "https", "ssh", "git"} or bool(re.match(r"^[\w.-]+@[\w.-]+:", url))


def normalized_source(url: str) -> str:
    """The form handed to git: local paths become absolute; URLs stay as they are."""
    if "://" in url or re.match(r"^[\w.-]+@[\w.-]+:", url):
        return url
    return str(Path(url).expanduser().resolve())


def cache_directory_name(url: str) -> str:
    """A stable, filesystem-safe name for the cache of `url`: readable tail plus a hash."""
    source = normalized_source(url)
    tail = re.sub(r"[^A-Za-z0-9._-]+", "-", source.rstrip("/").split("/")[-1] or "repo")[:60]
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    return f"{tail.removesuffix('.git')}-{digest}.git"


class GitRepository:
    """One remote (https URL, file:// URL or local path), mirrored into a bare cache repository."""

    def __init__(
        self,
        url: str,
        *,
        cache_dir: Path | None = None,
        token: str | None = None,
        timeout_seconds: float | None = None,
    ) -> None:
        self.url = url
        self.source = normalized_source(url)
        # What messages and logs name: the source without any credentials in its URL.
        self.shown_as = url_without_credentials(self.source)
        self.cache_root = Path(cache_dir if cache_dir is not None else settings.GIT_CACHE_DIR)
        self.path = self.cache_root / cache_directory_name(url)
        self._token = settings.GIT_HTTP_TOKEN if token is None else token
        # curl `host:port:address,...` entries pinning the checked addresses (set by fetch).
        self._resolved: list[str] = []
        self.timeout_seconds = timeout_seconds if timeout_seconds is not None else settings.GIT_TIMEOUT_SECONDS

    def __repr__(self) -> str:
        return f"GitRepository({self.shown_as!r})"

    # --- environment and process handling ------------------------------------------------
    def _sends_token(self) -> bool:
        if not self._token:
            return False
        parts = urlsplit(self.source)
        if parts.scheme not in {"http", "https"}:
            return False
        return (parts.hostname or "").rstrip(".") in {host.rstrip(".") for host in settings.GIT_HTTP_TOKEN_HOSTS}

    def _environment(self) -> dict[str, str]:
        environment = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("GIT_CONFIG_", "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"))
        }
        # Never prompt for credentials, never read the user's or system's git configuration
        # (credential helpers, url rewrites): behaviour depends only on what we pass here.
        environment.update(
            {
                "GIT_TERMINAL_PROMPT": "0",
                "GIT_ASKPASS": "",
                "SSH_ASKPASS": "",
                "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_CONFIG_GLOBAL": os.devnull,
                "LC_ALL": "C",
            }
        )
        config: list[tuple[str, str]] = [
            ("protocol.file.allow", "always"),
            ("credential.helper", ""),
            # A redirect could lead anywhere the source rule refuses; a moved repository needs its
            # new URL in the registry.
            ("http.followRedirects", "false"),
        ]
        config += [("http.curloptResolve", entry) for entry in self._resolved]
        if self._sends_token():
            username = settings.GIT_HTTP_USERNAME
            basic = base64.b64encode(f"{username}:{self._token}".encode()).decode()
            config.append(("http.extraHeader", f"Authorization: Basic {basic}"))
        environment["GIT_CONFIG_COUNT"] = str(len(config))
        for index, (key, value) in enumerate(config):
            environment[f"GIT_CONFIG_KEY_{index}"] = key
            environment[f"GIT_CONFIG_VALUE_{index}"] = value
        return environment

    def _scrub(self, text: str) -> str:
        text = text.replace(self.source, self.shown_as)
        if self._token:
            text = text.replace(self._token, "***")
            username = settings.GIT_HTTP_USERNAME
            text = text.replace(base64.b64encode(f"{username}:{self._token}".encode()).decode(), "***")
        return text.strip()

    def _git(self, *args: str, input_bytes: bytes | None = None, in_cache: bool = True) -> bytes:
        command = ["git", *(["--git-dir", str(self.path)] if in_cache else []), *args]
        try:
            completed = subprocess.run(
                command,
                input=input_bytes,
                capture_output=True,
                env=self._environment(),
                timeout=self.timeout_seconds,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            timeout = f"{self.timeout_seconds:g} s"
            raise GitNetworkError(f"git {args[0]} on {self.shown_as} timed out after {timeout}") from exc
        if completed.returncode != 0:
            message = self._scrub(completed.stderr.decode(errors="replace")) or f"exit status {completed.returncode}"
            lowered = message.lower()
            if "could not read username" in lowered or "authentication failed" in lowered:
                # The host wants credentials we do not have, or refused the ones we sent.
                message = f"authentication required or refused (check GIT_HTTP_TOKEN): {message}"
            error_class = GitNetworkError if _is_transient(message) else GitError
            raise error_class(f"git {args[0]} failed for {self.shown_as}: {message}")
        return completed.stdout

    # --- public API ----------------------------------------------------------------------
    def fetch(self) -> None:
        """Clones into the cache on first use, then fetches branches and tags incrementally.

        Raises GitError when the source rule refuses the URL (nothing is contacted), and
        GitNetworkError when its host does not resolve.
        """
        self._resolved = self._source_checked()
        if not (self.path / "HEAD").exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._git("init", "--quiet", "--bare", str(self.path), in_cache=False)
        self._git(
            "fetch",
            "--quiet",
            "--prune",
            "--force",
            "--no-tags",
            self.source,
            "+refs/heads/*:refs/heads/*",
            "+refs/tags/*:refs/tags/*",
        )
        # The remote's default branch, so that resolve("HEAD") means what it means upstream.
        with contextlib.suppress(GitError):
            symref = self._git("ls-remote", "--symref", self.source, "HEAD").decode()
            match = re.search(r"^ref: (refs/heads/\S+)\tHEAD$", symref, re.MULTILINE)
            if match:
                self._git("symbolic-ref", "HEAD", match.group(1))

    def _source_checked(self) -> list[str]:
        """Applies the source rule now; returns the curl resolve entries pinning the checked addresses."""
        try:
            source_location(self.source)
            addresses = remote_addresses(self.source)
        except SourceRefused as exc:
            raise GitError(f"git fetch refused for {self.shown_as}: {exc}") from exc
        except SourceUnresolved as exc:
            raise GitNetworkError(f"git fetch failed for {self.shown_as}: {exc}") from exc
        if not addresses:
            return []
        parts = urlsplit(self.source)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        listed = ",".join(f"[{address}]" if ":" in address else address for address in addresses)
        return [f"{parts.hostname}:{port}:{listed}"]

    def resolve(self, ref: str) -> str:
        """The full commit SHA `ref` names in the cache (a branch, a tag or a commit SHA).

        Call `fetch()` first. Raises GitError naming the ref when it does not exist.
        """
        if not ref_is_valid(ref):
            raise GitError(f"invalid ref {ref!r}: {REF_RULE}")
        candidates = [ref] if _SHA_RE.match(ref) else [f"refs/heads/{ref}", f"refs/tags/{ref}", ref]
        for candidate in candidates:
            try:
                return self._git("rev-parse", "--verify", "--quiet", f"{candidate}^{{commit}}").decode().strip()
            except GitNetworkError:
                raise
            except GitError:
                continue
        raise GitError(f"ref {ref!r} not found in {self.shown_as}")

    def list_files(self, commit: str) -> list[TreeEntry]:
        """Every blob, symlink and submodule in the tree of `commit`, sorted by path."""
        output = self._git("ls-tree", "-r", "-z", "--long", "--full-tree", commit)
        entries: list[TreeEntry] = []
        for record in output.split(b"\0"):
            if not record:
                continue
            meta, _, raw_path = record.partition(b"\t")
            mode, _kind, sha, size = meta.decode().split(maxsplit=3)
            path = raw_path.decode("utf-8", errors="surrogateescape")
            entries.append(TreeEntry(path=path, blob_sha=sha, mode=mode, size=int(size) if size != "-" else 0))
        entries.sort(key=lambda entry: entry.path)
        return entries

    def read_blob(self, blob_sha: str) -> bytes:
        return self._git("cat-file", "blob", blob_sha)

    def read_file(self, commit: str, path: str) -> bytes:
        """The bytes of `path` at `commit`. Raises GitError when it is missing there."""
        return self._git("cat-file", "blob", f"{commit}:{path}")

    def read_file_at(self, commit: str, path: str, *, max_bytes: int) -> bytes:
        """The bytes of the file at `path` in `commit`, symlinks followed inside the commit's tree
        as the ingest follows them (a link is read as its target's content), through one
        `git cat-file --batch --follow-symlinks` that reads no more than `max_bytes` of it.

        `path` must already be a plain relative path (no `.`/`..` segments, no newline): git
        would resolve `./` and `../` against the working directory. Raises GitCommitMissing,
        GitPathMissing, GitFileTooLarge, or GitError when the cache cannot be read.
        """
        process = subprocess.Popen(
            ["git", "--git-dir", str(self.path), "cat-file", "--batch", "--follow-symlinks"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self._environment(),
        )
        assert process.stdin is not None and process.stdout is not None and process.stderr is not None
        # A git that hangs (a stalled disk) is killed: its output then ends, and the read fails.
        watchdog = threading.Timer(self.timeout_seconds, process.kill)
        watchdog.start()
        try:
            # The commit first, so that a commit the cache lacks is told apart from a missing path.
            try:
                process.stdin.write(f"{commit}^{{commit}}\n{commit}:{path}\n".encode("utf-8", errors="surrogateescape"))
                process.stdin.close()
            except BrokenPipeError:
                pass  # git exited before reading (no cache repository): its empty output says so below
            header = process.stdout.readline().split()
            if len(header) != 3 or header[1] != b"commit":
                if not header:  # git refused to start: no cache repository, for one
                    message = self._scrub(process.stderr.read().decode(errors="replace"))
                    raise GitError(f"git cat-file failed for {self.shown_as}: {message or 'no output'}")
                raise GitCommitMissing(f"commit {commit} is not in the cache of {self.shown_as}")
            process.stdout.read(int(header[2]) + 1)  # the commit object and its newline
            header = process.stdout.readline().split()
            if len(header) != 3 or header[1] != b"blob":
                # `<name> missing`, `dangling|loop|notdir|symlink <size>`, or a tree or submodule commit.
                raise GitPathMissing(f"{path} is not a file at {commit[:12]} of {self.shown_as}")
            size = int(header[2])
            if size > max_bytes:
                raise GitFileTooLarge(f"{path} at {commit[:12]} has {size} bytes, over {max_bytes}", size=size)
            data = process.stdout.read(size)
            if len(data) != size:
                raise GitError(f"git cat-file ended early reading {path} at {commit[:12]} of {self.shown_as}")
            return data
        finally:
            watchdog.cancel()
            # Nothing more is read: a file too large is not streamed to its end.
            if process.poll() is None:
                process.kill()
            process.wait(timeout=30)
            process.stdout.close()
            process.stderr.close()

    @contextlib.contextmanager
    def blob_reader(self) -> Iterator[Callable[[str], bytes]]:
        """Reads many blobs through one `git cat-file --batch` process (one fork, not one per blob)."""
        process = subprocess.Popen(
            ["git", "--git-dir", str(self.path), "cat-file", "--batch"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=self._environment(),
        )
        assert process.stdin is not None and process.stdout is not None
        stdin, stdout = process.stdin, process.stdout

        def read(blob_sha: str) -> bytes:
            try:
                stdin.write(f"{blob_sha}\n".encode())
                stdin.flush()
            except BrokenPipeError as exc:  # git is gone (killed, or the cache removed under it)
                raise GitError(f"git cat-file ended early in {self.shown_as}") from exc
            header = stdout.readline().decode().split()
            if len(header) != 3 or header[1] != "blob":
                raise GitError(f"blob {blob_sha} not found in {self.shown_as}")
            size = int(header[2])
            data = stdout.read(size)
            stdout.read(1)  # the newline after each object
            return data

        try:
            yield read
        finally:
            with contextlib.suppress(OSError):
                stdin.close()
            process.wait(timeout=30)


def _is_transient(message: str) -> bool:
    lowered = message.lower()
    return any(marker in lowered for marker in _TRANSIENT_MARKERS)


def blob_url(
    repository_url: str, commit: str, path: str, start_line: int | None = None, end_line: int | None = None
) -> str | None:
    """The web URL of `path` at `commit` with a line anchor, for http(s) hosts.

    Built from GIT_BLOB_URL_TEMPLATE (default GitHub's `{base}/blob/{commit}/{path}`, which GitLab
    and Gitea redirect too). Local and file:// repositories have no web page: None.
    """
    parts = urlsplit(repository_url)
    if parts.scheme not in {"http", "https"}:
        return None
    base = f"{parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}{parts.path}"
    base = base.rstrip("/").removesuffix(".git")
    url = settings.GIT_BLOB_URL_TEMPLATE.format(base=base, commit=commit, path=path)
    if start_line:
        url += f"#L{start_line}" + (f"-L{end_line}" if end_line and end_line != start_line else "")
    return url


def registry_repository() -> GitRepository:
    """The repository that holds sources.yml and brand-assets.yml (SOURCE_REGISTRY_REPO)."""
    return GitRepository(settings.SOURCE_REGISTRY_REPO)


def registry_file_read(*, path: str, ref: str | None = None, fetch: bool = True) -> RegistryFile:
    """Fetches the registry repository and returns `path` at SOURCE_REGISTRY_REF (or `ref`).

    Raises GitError (or GitNetworkError) when the repository, the ref or the file is missing.
    """
    repository = registry_repository()
    if fetch:
        repository.fetch()
    commit = repository.resolve(ref or settings.SOURCE_REGISTRY_REF)
    try:
        content = repository.read_file(commit, path)
    except GitNetworkError:
        raise
    except GitError as exc:
        raise GitError(f"{path} not found at {commit[:12]} of {repository.shown_as}") from exc
    return RegistryFile(commit=commit, content=content)
