"""Request bodies sent with `Transfer-Encoding: chunked` (no Content-Length).

Django reads `CONTENT_LENGTH` bytes of `wsgi.input`, and a chunked request has no such header:
its body read as empty, so `POST /ingest/repo` with `{"repo": ...}` chunked meant "every
repository". gunicorn de-chunks the stream itself and says so with `wsgi.input_terminated`;
`ChunkedBodyMiddleware` (wrapped around the application in agentplatform/wsgi.py) then reads the
body up to one byte past DATA_UPLOAD_MAX_MEMORY_SIZE (or the larger limit of the view at the path,
agentplatform/plumbing/body_limits.py) and hands Django a stream of known length,
so the body is parsed as if it had been sent with Content-Length, and one over the limit gets
the same 413 problem (ProblemDetailsMiddleware). A server that does not de-chunk (Django's
runserver) leaves no length to read by: ProblemDetailsMiddleware refuses such a request with a
411 problem rather than acting on an empty body.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable
from typing import Any

from agentplatform.plumbing.body_limits import body_limit


def is_chunked(environ: dict[str, Any]) -> bool:
    return "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()


class ChunkedBodyMiddleware:
    """WSGI middleware: a de-chunked body becomes a body with a CONTENT_LENGTH."""

    def __init__(self, application: Callable[..., Iterable[bytes]]) -> None:
        self.application = application

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if is_chunked(environ) and not environ.get("CONTENT_LENGTH") and environ.get("wsgi.input_terminated"):
            # One byte past the limit is enough to know the body is too large (413), and no more is held.
            path_info = environ.get("PATH_INFO", "").encode("iso-8859-1", "replace").decode("utf-8", "replace")
            body = environ["wsgi.input"].read(body_limit(path_info) + 1)
            environ["wsgi.input"] = io.BytesIO(body)
            environ["CONTENT_LENGTH"] = str(len(body))
        return self.application(environ, start_response)
