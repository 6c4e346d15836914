"""Which git repositories the service may fetch: the one rule for every repository URL.

The registry files (sources.yml, brand-assets.yml) are data, edited by more people than the
server's configuration, so a URL in them reaches only:

- a local path or file:// URL under one of GIT_LOCAL_ROOTS (default VAR_DIR/demo-sources, where
  the demo builds its repositories): not the server's own source tree, not /etc;
- an http(s) host whose every address is publicly routable, unless GIT_ALLOW_PRIVATE_HOSTS names
  the host or a network holding the address: not 127.0.0.1, not the cloud metadata address
  169.254.169.254, not the office network 10.x.

`source_location(url, base_dir=...)` applies the rule when a registry file is validated, so the
error names the file and line; a host name that does not resolve at that moment is left to the
fetch. `remote_addresses(url)` applies it again right before every fetch, with the name resolved
now, and returns the addresses that passed: git is told to connect to exactly those
(http.curloptResolve, in git_access), so a name that resolves elsewhere by then (DNS rebinding)
cannot steer the fetch, and git follows no redirect (http.followRedirects=false).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from pathlib import Path
from urllib.parse import unquote, urlsplit

from django.conf import settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_SSH_URL = re.compile(r"^[\w.-]+@[\w.-]+:")


class SourceRefused(Exception):
    """A repository URL the rule refuses; the message says why and which setting would allow it."""


class SourceUnresolved(Exception):
    """The host of a repository URL does not resolve right now (worth retrying later)."""


def is_local_source(url: str) -> bool:
    """A local path or file:// URL (a one-letter scheme is a Windows drive)."""
    scheme = urlsplit(url).scheme
    return not _SSH_URL.match(url) and (scheme == "file" or len(scheme) <= 1)


def source_location(url: str, *, base_dir: Path | None = None) -> str:
    """The URL as git gets it (a relative local path made absolute against `base_dir`, the
    registry repository's directory); raises SourceRefused when the rule does not allow it."""
    parts = urlsplit(url)
    if parts.scheme in {"http", "https"}:
        if parts.username or parts.password or "@" in parts.netloc:
            raise SourceRefused("credentials in the URL are not allowed; set GIT_HTTP_TOKEN instead")
        if not parts.hostname:
            raise SourceRefused(f"URL {url!r} has no host")
        _addresses_checked(parts.hostname, _port(parts), strict=False)
        return url
    if parts.scheme == "file":
        if parts.netloc not in {"", "localhost"}:
            raise SourceRefused("file:// URLs must name a local path (file:///path)")
        _local_path_checked(Path(unquote(parts.path)))
        return url
    if _SSH_URL.match(url):
        raise SourceRefused("SSH URLs are not supported; use an https URL with GIT_HTTP_TOKEN")
    if parts.scheme and len(parts.scheme) > 1:
        raise SourceRefused(f"unsupported URL scheme {parts.scheme!r}; use https://, http://, file:// or a local path")
    path = Path(url).expanduser()
    if not path.is_absolute():
        if base_dir is None:
            raise SourceRefused("relative paths need a local registry repository")
        path = Path(base_dir) / path
    return str(_local_path_checked(path))


def url_without_credentials(url: str) -> str:
    """`url` as it may be shown or logged: `https://user:secret@host/x` -> `https://host/x`.

    The rule above refuses such URLs, so they are never fetched; this keeps the refusal, and the
    name of a registry configured with one, from repeating the secret in a log line or a page."""
    parts = urlsplit(url)
    if parts.scheme and "@" in parts.netloc:
        return url.replace(parts.netloc, parts.netloc.rpartition("@")[2], 1)
    return url


def remote_addresses(url: str) -> list[str]:
    """For an http(s) URL: the addresses its host resolves to now, every one checked against the
    rule (empty for an IP literal or a host GIT_ALLOW_PRIVATE_HOSTS names). Raises SourceRefused,
    or SourceUnresolved when the name does not resolve."""
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        return []
    return [str(address) for address in _addresses_checked(parts.hostname, _port(parts), strict=True)]


def _port(parts) -> int:
    try:
        port = parts.port
    except ValueError as exc:
        raise SourceRefused(f"invalid port in {parts.netloc!r}") from exc
    return port or (443 if parts.scheme == "https" else 80)


def _local_path_checked(path: Path) -> Path:
    resolved = path.resolve()  # symlinks too: a link under a root may point anywhere
    roots = [Path(root).resolve() for root in settings.GIT_LOCAL_ROOTS]
    if not roots:
        raise SourceRefused(f"local path {resolved} refused: local repositories are off (GIT_LOCAL_ROOTS is none)")
    if not any(resolved.is_relative_to(root) for root in roots):
        listed = ", ".join(str(root) for root in roots)
        raise SourceRefused(f"local path {resolved} is outside GIT_LOCAL_ROOTS ({listed})")
    return resolved


def _allowances() -> tuple[set[str], list[ipaddress.IPv4Network | ipaddress.IPv6Network]]:
    names: set[str] = set()
    networks = []
    for entry in settings.GIT_ALLOW_PRIVATE_HOSTS:
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            names.add(entry.lower().rstrip("."))
    return names, networks


def _addresses_checked(host: str, port: int, *, strict: bool) -> list[IPAddress]:
    host = host.lower().rstrip(".")
    names, networks = _allowances()
    if host in names:
        return []
    try:
        literal: IPAddress | None = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        addresses = [literal]
    else:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            if strict:
                raise SourceUnresolved(f"could not resolve host {host}: {exc}") from exc
            return []  # validation only: the fetch resolves it again and checks then
        addresses = sorted({ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos}, key=str)
    for address in addresses:
        kind = _non_public_kind(address)
        if kind and not any(address in network for network in networks):
            what = f"host {host} is {kind} address" if literal else f"host {host} resolves to {address}, {kind} address"
            raise SourceRefused(
                f"{what}; a repository on a private network needs GIT_ALLOW_PRIVATE_HOSTS to name its host or network"
            )
    return [] if literal is not None else addresses


def _non_public_kind(address: IPAddress) -> str | None:
    """'a loopback', 'a private', ... for an address the internet cannot route to; None when it can."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_loopback:
        return "a loopback"
    if address.is_link_local:
        return "a link-local"
    if address.is_unspecified:
        return "an unspecified"
    if address.is_multicast:
        return "a multicast"
    if address.is_private:
        return "a private"
    if not address.is_global:
        return "a reserved"
    return None
