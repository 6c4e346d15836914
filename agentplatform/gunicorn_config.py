"""gunicorn's configuration for the web process (Procfile: `--config python:agentplatform.gunicorn_config`).

- Limits (docs/operations.md, "Server limits"): a request line of up to 8,190 bytes, gunicorn's largest bounded
  value (0 would read an unlimited line), enough for the longest `/search` the API accepts
  (`q` of 500 characters, each up to 12 bytes percent-encoded); 100 header fields of up to 8,190
  bytes each. Bodies are limited by Django (DATA_UPLOAD_MAX_MEMORY_SIZE, a 413 problem).
- Errors gunicorn answers itself, before Django sees the request (a request line or header over
  the limits, a malformed request), are `application/problem+json` like every API error.
- Workers: gunicorn's threaded worker, whose main thread also reads each request's header
  (agentplatform/gunicorn_worker.py says why neither `sync`, plain `gthread` nor the ASGI worker):
  idle, half-sent or trickled headers hold no thread and get no worker killed.
- The application is imported, and the embedding model loaded, by the arbiter before it forks
  its workers (`preload_app`, `when_ready`): every worker, a replaced one too, starts with the
  model ready and shares the arbiter's copy of its prepacked weights copy-on-write
  (groundtruth.embeddings.embedding_backend_load_for_forks says why prepacked). Before the
  first export exists, each worker prepares the model itself, serving meanwhile (post_worker_init).
- Forwarded headers: gunicorn trusts none (see `forwarded_allow_ips` below); Django alone decides,
  from TRUSTED_PROXY_COUNT (agentplatform/settings/security.py).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from gunicorn import util

worker_class = "agentplatform.gunicorn_worker.HeaderBufferingThreadWorker"
# Threads per worker. They wait only on the application (the database, Redis, the embedding
# model), never on a client, so a few per worker suffice; each keeps its own persistent database
# connection (CONN_MAX_AGE): 4 workers x 4 threads = 16 of PostgreSQL's 100, beside Celery, the
# stream and the MCP process. On 2 cores more threads would add connections, not throughput (the
# GIL).
threads = 4

limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 8190

# gunicorn would otherwise trust `X-Forwarded-Proto`/`-Protocol`/`-Ssl` and the SCRIPT_NAME/PATH_INFO
# headers from 127.0.0.1 (its default `forwarded_allow_ips`, or FORWARDED_ALLOW_IPS), whatever
# TRUSTED_PROXY_COUNT says: any local client could make every absolute URL (a chat `Link`, a
# `source_url`) https. The one place that trusts forwarded headers is Django's settings, which set
# SECURE_PROXY_SSL_HEADER only when TRUSTED_PROXY_COUNT is 1 or more; gunicorn passes the headers on
# to it untouched.
forwarded_allow_ips = ""
secure_scheme_headers: dict[str, str] = {}

logger = logging.getLogger("gunicorn.error")

_PROBLEM_CODES = {
    400: "bad_request",
    403: "forbidden",
    408: "request_timeout",
    414: "uri_too_long",
    417: "expectation_failed",
    431: "header_fields_too_large",
    500: "server_error",
    501: "not_implemented",
}


def problem_error(sock: Any, status_int: int, reason: str, mesg: str) -> None:
    """Replaces gunicorn's HTML error page (`gunicorn.util.write_error`, which its workers call
    for requests they refuse) with problem details. The message names what was wrong (e.g. the
    limit a request line exceeded); it never quotes the request's headers."""
    body = json.dumps(
        {
            "type": f"urn:problem:{_PROBLEM_CODES.get(status_int, 'bad_request')}",
            "title": reason,
            "status": status_int,
            "detail": mesg or reason,
            "code": _PROBLEM_CODES.get(status_int, "bad_request"),
        }
    ).encode()
    head = (
        f"HTTP/1.1 {status_int} {reason}\r\n"
        "Connection: close\r\n"
        "Content-Type: application/problem+json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode("latin-1")
    util.write_nonblock(sock, head + body)


util.write_error = problem_error


# Imported once by the arbiter, not by each worker: the forks share its pages (the embedding
# model's above all). A HUP then restarts the workers without re-reading the code; a deploy
# restarts the arbiter (docs/operations.md).
preload_app = True


def when_ready(server: Any) -> None:
    """In the arbiter, after it bound its sockets and before it forks the workers: loads the
    embedding model they will inherit (when its export is ready; under a second)."""
    from groundtruth.embeddings import embedding_backend_load_for_forks

    started = time.monotonic()
    if (described := embedding_backend_load_for_forks()) is not None:
        logger.info("Embedding model loaded for the workers in %.1f s: %s", time.monotonic() - started, described)


# A ready ONNX export loads in well under a second; the first export (or the torch runtime)
# takes longer, and the worker serves meanwhile (lexical search, /health says so) rather than
# leaving connections waiting in the listen queue.
MODEL_PREPARE_WAIT_SECONDS = 10.0


def post_worker_init(worker: Any) -> None:
    """Prepares the embedding model before this worker accepts connections, for at most
    MODEL_PREPARE_WAIT_SECONDS, telling the arbiter the worker is alive meanwhile."""
    from groundtruth.embeddings import embedding_backend, embedding_backend_prepare

    def ready(described: str) -> None:
        logger.info("Worker %s: embedding backend ready: %s", worker.pid, described)

    preparing = embedding_backend_prepare(on_ready=ready)
    deadline = time.monotonic() + MODEL_PREPARE_WAIT_SECONDS
    while preparing is not None and preparing.is_alive() and time.monotonic() < deadline:
        worker.notify()
        preparing.join(timeout=1.0)
    if preparing is None:  # nothing to load (a remote backend, or none)
        ready(embedding_backend().describe())
    elif preparing.is_alive():
        logger.info(
            "Worker %s: embedding backend not ready yet, serving meanwhile: %s",
            worker.pid,
            embedding_backend().describe(),
        )


def worker_exit(server: Any, worker: Any) -> None:
    """Writes the audit records this worker still holds in memory before it exits (a graceful stop,
    a restart, max_requests): groundtruth/question_audit.py. The wiring may import the apps; atexit
    would also do it, but this runs before the interpreter starts tearing down.

    Then ends the worker without that teardown (`worker_process_end`): the embedding model the
    arbiter loaded before forking brought ONNX Runtime's thread pool, whose threads live in the
    arbiter only; destroying it in a worker threw `std::system_error` and aborted the worker, a
    SIGABRT (and a core dump where they are kept) on every graceful stop, HUP and max_requests
    restart."""
    from groundtruth.question_audit import question_audit_writer

    question_audit_writer.close()
    worker_process_end()


def worker_process_end() -> None:
    """Ends this worker process with the exit status gunicorn was exiting with, after flushing the
    log and the standard streams, skipping the interpreter's teardown (atexit handlers, module and
    C++ destructors). Called from `worker_exit`, which gunicorn runs in the `finally` of the
    worker's `sys.exit`: the pending SystemExit carries the status (3 for a worker that failed to
    boot, which stops the arbiter; 0 for a graceful exit)."""
    import os
    import sys

    pending = sys.exc_info()[1]
    if isinstance(pending, SystemExit):
        code = pending.code
        status = code if isinstance(code, int) else (0 if code is None else 1)
    else:
        status = 0 if pending is None else 1
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken stream has nothing left to write
            pass
    os._exit(status)
