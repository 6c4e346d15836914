"""A threaded HTTP server on 127.0.0.1 for the fake peers of the tests (git host, embedding and
chat-completion endpoints): one lifecycle, each peer brings its own request handler."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LocalHttpServer:
    def __init__(self, handler: type[BaseHTTPRequestHandler], *, host: str = "127.0.0.1", port: int = 0) -> None:
        self._server = ThreadingHTTPServer((host, port), handler)
        self._server.daemon_threads = True
        self.host = host
        self.port: int = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, name=handler.__name__, daemon=True).start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
