"""A token-gated git smart-HTTP server on 127.0.0.1 for tests: `git http-backend` behind http.server.

    with GitHttpServer(project_root=tmp_path / "served", token="s3cret") as server:
        url = server.url_for("acme/private.git")   # http://127.0.0.1:<port>/acme/private.git
        ...
        assert server.unauthorized_requests == 0

Repositories under `project_root` are served read-only (clone/fetch). With a token set, every
request must carry it as `Authorization: Bearer <token>` or HTTP Basic with the token as the
password (any user name); others get 401 with a Basic challenge, like a real host. The server
records every request line and whether it was authorized, so tests can assert the token never
travelled in a URL.

`served_bare_clone(tree, project_root, "acme/private.git")` makes a bare copy of a work tree
(`tests.gitrepos.GitWorkTree`) to serve; call `update_served(...)` after new commits.
"""

from __future__ import annotations

import base64
import hmac
import os
import shutil
import subprocess
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import urlsplit

from tests.localhttp import LocalHttpServer


@dataclass
class RecordedRequest:
    method: str
    path: str
    authorized: bool
    authorization_header_present: bool


@dataclass
class GitHttpServer:
    project_root: Path
    token: str | None = None
    host: str = "127.0.0.1"
    port: int = 0
    requests: list[RecordedRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.project_root = Path(self.project_root)
        self.project_root.mkdir(parents=True, exist_ok=True)
        self._server: LocalHttpServer | None = None
        self._lock = threading.Lock()

    # --- lifecycle -----------------------------------------------------------------------
    def start(self) -> GitHttpServer:
        server_state = self

        class Handler(_GitBackendHandler):
            state = server_state

        self._server = LocalHttpServer(Handler, host=self.host, port=self.port)
        self.port = self._server.port
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def __enter__(self) -> GitHttpServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # --- helpers -------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def url_for(self, repository_path: str) -> str:
        return f"{self.base_url}/{repository_path.lstrip('/')}"

    @property
    def unauthorized_requests(self) -> int:
        return sum(1 for request in self.requests if not request.authorized)

    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def is_authorized(self, header: str | None) -> bool:
        if not self.token:
            return True
        if not header:
            return False
        scheme, _, value = header.partition(" ")
        if scheme.lower() == "bearer":
            return hmac.compare_digest(value.strip(), self.token)
        if scheme.lower() == "basic":
            try:
                decoded = base64.b64decode(value.strip()).decode()
            except ValueError:
                return False
            _user, _, password = decoded.partition(":")
            return hmac.compare_digest(password, self.token)
        return False


class _GitBackendHandler(BaseHTTPRequestHandler):
    state: GitHttpServer
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: object) -> None:  # quiet test output
        return

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            # git switches to chunked uploads above http.postBuffer (1 MiB).
            chunks = []
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _serve(self) -> None:
        header = self.headers.get("Authorization")
        authorized = self.state.is_authorized(header)
        self.state.record(
            RecordedRequest(
                method=self.command,
                path=self.path,
                authorized=authorized,
                authorization_header_present=header is not None,
            )
        )
        body = self._read_body()
        if not authorized:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        parts = urlsplit(self.path)
        environment = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": str(self.state.project_root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "REQUEST_METHOD": self.command,
            "PATH_INFO": parts.path,
            "QUERY_STRING": parts.query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_ADDR": self.client_address[0],
            "REMOTE_USER": "token" if self.state.token else "",
            "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
        }
        if encoding := self.headers.get("Content-Encoding"):
            environment["HTTP_CONTENT_ENCODING"] = encoding
        completed = subprocess.run(
            ["git", "http-backend"], input=body, capture_output=True, env=environment, check=False
        )
        raw_headers, _, payload = completed.stdout.partition(b"\r\n\r\n")
        if not _:
            raw_headers, _, payload = completed.stdout.partition(b"\n\n")
        status = 200
        headers: list[tuple[str, str]] = []
        for line in raw_headers.decode(errors="replace").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def served_bare_clone(source: Path, project_root: Path, repository_path: str) -> Path:
    """Copies the work tree at `source` as a bare repository served at `repository_path`."""
    target = Path(project_root) / repository_path
    if target.exists():
        shutil.rmtree(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["git", "clone", "--quiet", "--bare", str(source), str(target)],
        check=True,
        capture_output=True,
        env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull},
    )
    return target


def update_served(source: Path, served: Path) -> None:
    """Pushes every branch and tag of the work tree at `source` into the served bare repository."""
    subprocess.run(
        ["git", "-C", str(source), "push", "--quiet", "--force", "--all", str(served)],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        ["git", "-C", str(source), "push", "--quiet", "--force", "--tags", str(served)],
        check=True,
        capture_output=True,
    )
