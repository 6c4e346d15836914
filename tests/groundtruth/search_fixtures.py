"""Indexed chunks for search and ask tests, and a small OpenAI-compatible chat server.

Chunks are written the way the ingest writes them (real embeddings of the heading trail and
text from the packaged model, the lexical index and its statistics, the HNSW index) without
a git repository: the search tests are about ranking and answers, not about ingest.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from groundtruth.embeddings import embedding_backend
from groundtruth.ingest.index_text import INDEX_VERSION, content_hash, heading_text, passage_text
from groundtruth.models import Chunk, Repository, SourceFile
from groundtruth.search.everyday_words import everyday_shares_refresh
from groundtruth.search.lexical_index import lexical_index_refresh, lexical_statistics_refresh
from groundtruth.vector_index import vector_index_ensure
from tests.localhttp import LocalHttpServer

COMMIT = "c0ffee" + "0" * 34


@dataclass(frozen=True)
class Section:
    path: str
    heading: tuple[str, ...]
    text: str
    start_line: int


def chunks_index(repository: Repository, sections: list[Section]) -> list[Chunk]:
    """Stores `sections` as chunks of `repository` at COMMIT, embedded (passage and title
    vectors, by the index recipe of groundtruth/ingest/index_text.py) and indexed."""
    backend = embedding_backend()
    vector_index_ensure(model_name=backend.model_name, dimension=backend.dimension)
    passages = backend.embed(
        [
            passage_text(repository_name=repository.name, heading=section.heading, text=section.text)
            for section in sections
        ]
    )
    titles = sorted({title for section in sections if (title := heading_text(section.heading))})
    title_vectors = dict(zip(titles, backend.embed(titles), strict=True))
    files: dict[str, SourceFile] = {}
    chunks = []
    for ordinal, (section, vector) in enumerate(zip(sections, passages, strict=True)):
        if section.path not in files:
            files[section.path] = SourceFile.objects.create(
                repository=repository, path=section.path, blob_sha=f"{len(files):040x}", commit=COMMIT
            )
        title = heading_text(section.heading)
        chunks.append(
            Chunk.objects.create(
                repository=repository,
                source_file=files[section.path],
                path=section.path,
                commit=COMMIT,
                start_line=section.start_line,
                end_line=section.start_line + section.text.count("\n"),
                heading=list(section.heading),
                text=section.text,
                content_hash=content_hash(repository_name=repository.name, heading=section.heading, text=section.text),
                trust=repository.trust,
                ordinal=ordinal,
                embedding=vector,
                heading_embedding=title_vectors[title] if title else None,
                embedding_model=backend.model_name,
            )
        )
    lexical_index_refresh(chunk_ids=[chunk.pk for chunk in chunks])
    lexical_statistics_refresh(repository_ids=[repository.pk])
    everyday_shares_refresh(repository_ids=[repository.pk])
    Repository.objects.filter(pk=repository.pk).update(last_commit=COMMIT, index_version=INDEX_VERSION)
    repository.last_commit = COMMIT
    return chunks


HANDBOOK = [
    Section(
        path="docs/celery.md",
        heading=("Background jobs", "Broker"),
        text=(
            "## Broker\n"
            "Workers take jobs from Redis.\n"
            "Set CELERY_BROKER_URL to the Redis URL, for example redis://localhost:6379/1.\n"
            "Keep acks late so that a killed worker's job runs again."
        ),
        start_line=10,
    ),
    Section(
        path="docs/locking.md",
        heading=("Concurrency", "Row locks"),
        text=(
            "## Row locks\n"
            "Claim a job with select_for_update(skip_locked=True) inside a transaction.\n"
            "Two workers never take the same row."
        ),
        start_line=3,
    ),
    Section(
        path="docs/database.md",
        heading=("Configuration", "Database pool"),
        text=(
            "## Database pool\n"
            "Every process keeps its own connection pool.\n"
            "The pool holds at most 20 connections by default.\n"
            "Raise pool_max_size when requests wait for a connection.\n"
            "\n"
            "Statements time out after 10 seconds."
        ),
        start_line=20,
    ),
    Section(
        path="docs/retries.md",
        heading=("Delivery", "Retries"),
        text=(
            "## Retries\n"
            "A failed webhook delivery is retried with exponential backoff.\n"
            "The first retry waits 10 seconds and the longest wait is 6 hours.\n"
            "After 12 attempts the delivery goes to the dead-letter queue."
        ),
        start_line=1,
    ),
    Section(
        path="docs/tls.md",
        heading=("Security", "TLS"),
        text=(
            "## TLS\n"
            "Receivers' certificates are verified against the system trust store.\n"
            "Add an internal certificate authority with ca_bundle."
        ),
        start_line=5,
    ),
]

COMMUNITY = [
    Section(
        path="faq/broker.md",
        heading=("FAQ",),
        text=(
            "## Broker\n"
            "Workers take jobs from Redis.\n"
            "Set CELERY_BROKER_URL to the Redis URL, for example redis://localhost:6379/1.\n"
            "Keep acks late so that a killed worker's job runs again."
        ),
        start_line=1,
    ),
]


def free_port(first: int = 8400, last: int = 8499) -> int:
    """A free TCP port on 127.0.0.1 from this test suite's range."""
    for port in range(first, last + 1):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {first}-{last}")


@dataclass
class ChatServerBehaviour:
    reply: str = "The answer [1]."
    status: int = 200
    delay_seconds: float = 0.0
    raw_body: bytes | None = None


@dataclass
class ChatServer:
    """An OpenAI-compatible `POST /v1/chat/completions` on 127.0.0.1 (real HTTP)."""

    url: str
    behaviour: ChatServerBehaviour
    requests: list[dict[str, Any]] = field(default_factory=list)


def chat_server_run() -> Iterator[ChatServer]:
    behaviour = ChatServerBehaviour()
    port = free_port()
    server_state = ChatServer(url=f"http://127.0.0.1:{port}/v1", behaviour=behaviour)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet test output
            return

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            server_state.requests.append(
                {"path": self.path, "authorization": self.headers.get("Authorization"), "body": body}
            )
            if behaviour.delay_seconds:
                time.sleep(behaviour.delay_seconds)
            if self.path != "/v1/chat/completions":
                payload, status = b'{"error": "not found"}', 404
            elif behaviour.raw_body is not None:
                payload, status = behaviour.raw_body, behaviour.status
            else:
                status = behaviour.status
                payload = json.dumps(
                    {
                        "id": "chatcmpl-test",
                        "object": "chat.completion",
                        "model": body.get("model"),
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": behaviour.reply},
                                "finish_reason": "stop",
                            }
                        ],
                    }
                    if status == 200
                    else {"error": {"message": "model overloaded"}}
                ).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout test)

    server = LocalHttpServer(Handler, port=port)
    try:
        yield server_state
    finally:
        server.stop()
