"""What a git host's webhook delivery (POST /hooks/git) says, once its signature is checked.

The hosts are told apart by their event header. Gitea and Forgejo also send GitHub's headers
(X-GitHub-Event, X-Hub-Signature-256) for compatibility, so they are recognised first:

    host               event header                      delivery id             secret
    Gitea, Forgejo     X-Gitea-Event, X-Forgejo-Event    X-Gitea-Delivery,       X-Gitea-Signature or
                                                         X-Forgejo-Delivery      X-Forgejo-Signature: HMAC-SHA256
                                                                                 of the body, hex
    GitLab             X-Gitlab-Event                    X-Gitlab-Event-UUID     X-Gitlab-Token: the secret itself
    GitHub             X-GitHub-Event                    X-GitHub-Delivery       X-Hub-Signature-256:
                                                                                 sha256=<HMAC-SHA256 of the body, hex>

The secret is compared in constant time (`hmac.compare_digest`), as bytes so that a header
with non-ASCII characters is a mismatch, not an error. Nothing about the secret or a signature
sent is ever put in an error. The body is parsed only after its signature matched.

`repository_url_key` names a repository by host and path, so that the URLs a push names (its
https clone URL, web page, SSH URL) match the URL the registry lists it under.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from agentplatform.plumbing.errors import InvalidInput, Unauthenticated

GITHUB = "github"
GITLAB = "gitlab"
GITEA = "gitea"  # Forgejo is a fork of Gitea and sends the same delivery

# The events that carry a push, by host: a tag push is a push too (a registry `ref` may be a tag).
_PUSH_EVENTS = {GITHUB: {"push"}, GITLAB: {"Push Hook", "Tag Push Hook"}, GITEA: {"push"}}
# Where a push names its repository: GitHub and Gitea under `repository`, GitLab under `project`
# (and, older, `repository`).
_URL_KEYS = (
    "clone_url",
    "html_url",
    "ssh_url",
    "git_url",
    "svn_url",
    "git_http_url",
    "git_ssh_url",
    "web_url",
    "http_url",
    "url",
    "homepage",
)
_SCP_LIKE_URL = re.compile(r"^(?:[\w.+-]+@)?(?P<host>[\w.-]+):(?P<path>(?!//)[^\\]+)$")
SIGNATURE_HEADERS = "X-Hub-Signature-256 (GitHub), X-Gitlab-Token (GitLab) or X-Gitea-Signature (Gitea, Forgejo)"


@dataclass(frozen=True)
class PushHook:
    """A delivery whose signature matched. `is_push` False: an event that is not a push (a
    ping); then `ref` and `repository_urls` are empty."""

    provider: str
    event: str
    delivery_id: str
    is_push: bool
    ref: str = ""
    deleted: bool = False
    repository_urls: tuple[str, ...] = ()
    repository_label: str = ""


def push_hook_read(*, headers: Mapping[str, str], body: bytes, content_type: str, secret: str) -> PushHook:
    """The delivery in `headers` and `body`, checked against `secret`.

    Raises Unauthenticated (401) when no known signature header is sent or it does not match,
    InvalidInput (400) when a signed push is not a push payload (not JSON, no `ref`, no
    repository URL)."""
    provider, event, delivery_id = _provider_of(headers)
    if provider is None or not _signature_matches(provider, headers, body, secret.encode()):
        raise Unauthenticated(
            f"The delivery is not signed with the configured secret: send {SIGNATURE_HEADERS}.",
            code="invalid_signature",
        )
    if event not in _PUSH_EVENTS[provider]:
        return PushHook(provider=provider, event=event, delivery_id=delivery_id, is_push=False)
    payload = _payload(body, content_type)
    ref = payload.get("ref")
    if not isinstance(ref, str) or not ref:
        raise InvalidInput.for_field("ref", "a push names the ref it moved (refs/heads/<branch>)")
    sources = [payload.get(key) for key in ("repository", "project")]
    urls = tuple(
        dict.fromkeys(
            source[key]
            for source in sources
            if isinstance(source, dict)
            for key in _URL_KEYS
            if isinstance(source.get(key), str) and source[key]
        )
    )
    if not urls:
        raise InvalidInput.for_field("repository", "a push names its repository's clone URL")
    label = next(
        (
            source[key]
            for source in sources
            if isinstance(source, dict)
            for key in ("full_name", "path_with_namespace")
            if isinstance(source.get(key), str)
        ),
        "",
    )
    after = payload.get("after")
    # GitHub and Gitea say `deleted`; GitLab sends an all-zero `after` for a deleted branch.
    deleted = payload.get("deleted") is True or (isinstance(after, str) and after != "" and not after.strip("0"))
    return PushHook(
        provider=provider,
        event=event,
        delivery_id=delivery_id,
        is_push=True,
        ref=ref,
        deleted=deleted,
        repository_urls=urls,
        repository_label=label,
    )


def _provider_of(headers: Mapping[str, str]) -> tuple[str | None, str, str]:
    for name in ("Forgejo", "Gitea"):
        if event := headers.get(f"X-{name}-Event"):
            return GITEA, event, headers.get(f"X-{name}-Delivery", "")
    if event := headers.get("X-Gitlab-Event"):
        return GITLAB, event, headers.get("X-Gitlab-Event-UUID", "")
    if event := headers.get("X-GitHub-Event"):
        return GITHUB, event, headers.get("X-GitHub-Delivery", "")
    return None, "", ""


def _signature_matches(provider: str, headers: Mapping[str, str], body: bytes, secret: bytes) -> bool:
    if provider == GITLAB:
        return hmac.compare_digest(_header_bytes(headers, "X-Gitlab-Token"), secret)
    expected = hmac.new(secret, body, hashlib.sha256).hexdigest().encode()
    if provider == GITEA:
        sent = _header_bytes(headers, "X-Forgejo-Signature") or _header_bytes(headers, "X-Gitea-Signature")
        return hmac.compare_digest(sent.lower(), expected)
    sent = _header_bytes(headers, "X-Hub-Signature-256")
    return hmac.compare_digest(sent, b"sha256=" + expected)


def _header_bytes(headers: Mapping[str, str], name: str) -> bytes:
    # Header values reach Django as ISO-8859-1 text: every one encodes back to its bytes.
    return headers.get(name, "").encode("iso-8859-1", errors="replace")


def _payload(body: bytes, content_type: str) -> dict[str, Any]:
    """The push payload: a JSON body, or GitHub's form encoding (`payload=<JSON>`)."""
    text: str | None
    try:
        text = body.decode("utf-8")
        if content_type.split(";")[0].strip().lower() == "application/x-www-form-urlencoded":
            text = parse_qs(text).get("payload", [None])[0]
        payload = json.loads(text) if text is not None else None
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise InvalidInput("The push payload is not JSON.", code="invalid_json") from exc
    if not isinstance(payload, dict):
        raise InvalidInput("The push payload is not a JSON object.", code="invalid_json")
    return payload


def repository_url_key(url: str) -> str:
    """A repository's URL as host and path, for comparing URLs of one repository written in
    different forms: `https://GitHub.com/acme/docs.git`, `git@github.com:acme/docs.git` and
    `ssh://git@github.com:22/acme/docs` are all `github.com/acme/docs` (scheme, user, port, a
    trailing `.git` or `/` and letter case aside: hosts compare paths case-insensitively). A
    local path or file:// URL is `file:<normalised absolute path>`."""
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme in {"http", "https", "ssh", "git", "git+ssh"} and parts.hostname:
        return _host_path_key(parts.hostname, parts.path)
    if parts.scheme == "file":
        return _local_key(unquote(parts.path))
    scp = _SCP_LIKE_URL.match(url)
    if scp and len(scp["host"]) > 1:  # a one-letter "host" is a Windows drive
        return _host_path_key(scp["host"], scp["path"])
    return _local_key(url)


def _host_path_key(host: str, path: str) -> str:
    return f"{host}/{path.strip('/').removesuffix('.git').strip('/')}".casefold()


def _local_key(path: str) -> str:
    return "file:" + os.path.abspath(path).removesuffix(".git")
