"""An OpenAI-compatible `/v1/embeddings` server on 127.0.0.1 for tests.

    with EmbeddingServer(dimension=32) as server:
        settings.EMBEDDING_BACKEND = "openai"; settings.EMBEDDING_URL = server.base_url
        ...
        server.texts_embedded   # every input text it received, in order

Vectors are deterministic: a hashed bag of lower-cased words, so texts sharing words are close
(good enough for ranking tests) and equal texts get equal vectors. `delay_seconds` slows every
request (to catch an ingest mid-run); `fail_with` makes every request answer that status; an
`api_key` makes requests without `Authorization: Bearer <api_key>` answer 401.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

import pytest

from groundtruth.embeddings import _backend_for
from tests.localhttp import LocalHttpServer


def hashed_vector(text: str, dimension: int) -> list[float]:
    vector = [0.0] * dimension
    for word in re.findall(r"[a-z0-9_]+", text.lower()):
        digest = hashlib.sha256(word.encode()).digest()
        vector[int.from_bytes(digest[:4], "big") % dimension] += 1.0 if digest[4] % 2 else -1.0
    norm = math.sqrt(sum(value * value for value in vector)) or 1.0
    if norm == 1.0 and not any(vector):
        vector[0] = 1.0
    return [value / norm for value in vector]


@dataclass
class EmbeddingServer:
    dimension: int = 32
    model: str = "test-embed-32"
    api_key: str | None = None
    delay_seconds: float = 0.0
    fail_with: int | None = None
    host: str = "127.0.0.1"
    port: int = 0
    texts_embedded: list[str] = field(default_factory=list)
    requests: int = 0

    def __post_init__(self) -> None:
        self._server: LocalHttpServer | None = None
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> EmbeddingServer:
        state = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with state._lock:
                    state.requests += 1
                if state.delay_seconds:
                    time.sleep(state.delay_seconds)
                if self.path.rstrip("/") != "/v1/embeddings":
                    return self._answer(404, {"error": "not found"})
                if state.api_key and self.headers.get("Authorization") != f"Bearer {state.api_key}":
                    return self._answer(401, {"error": "bad key"})
                if state.fail_with:
                    return self._answer(state.fail_with, {"error": "failing on purpose"})
                inputs = body.get("input")
                inputs = [inputs] if isinstance(inputs, str) else list(inputs or [])
                with state._lock:
                    state.texts_embedded.extend(inputs)
                data = [
                    {"object": "embedding", "index": index, "embedding": hashed_vector(text, state.dimension)}
                    for index, text in enumerate(inputs)
                ]
                # Answer out of order: clients must sort by index.
                return self._answer(200, {"object": "list", "model": body.get("model"), "data": data[::-1]})

            def _answer(self, status: int, payload: dict) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self._server = LocalHttpServer(Handler, host=self.host, port=self.port)
        self.port = self._server.port
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def __enter__(self) -> EmbeddingServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


@pytest.fixture
def embedding_server(settings) -> Iterator[EmbeddingServer]:
    """EMBEDDING_BACKEND=openai against a local server with deterministic 32-dimension vectors."""
    with EmbeddingServer(dimension=32, model="test-embed-32") as server:
        settings.EMBEDDING_BACKEND = "openai"
        settings.EMBEDDING_URL = server.base_url
        settings.EMBEDDING_MODEL = server.model
        settings.EMBEDDING_API_KEY = ""
        settings.EMBEDDING_DIMENSION = None
        yield server
    _backend_for.cache_clear()
