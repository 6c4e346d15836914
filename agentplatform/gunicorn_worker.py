"""The web process's gunicorn worker: gunicorn's threaded worker (`gthread`) that hands a connection
to a thread only once the request's whole header has arrived.

Why not gunicorn's workers as they are (gunicorn 27, read from its source):
- `sync` reads each request in the worker's only thread: one client that opens a connection and
  sends half a header holds the worker until the client gives up, and the arbiter kills it after
  `timeout` (WORKER TIMEOUT). Four such connections stop the web tier.
- `gthread` waits up to 5 s for a new connection's first byte in a thread (then parks it on the
  poller), but once any byte has come the thread reads the header with a blocking socket and no
  timeout: a client that sends `GET / HTTP/1.1\\r\\nHost: x\\r\\n` and nothing more, or a byte a
  second, holds that thread for as long as it likes. Enough threads to outnumber such clients
  would each keep a database connection (CONN_MAX_AGE), past what PostgreSQL allows.
- The ASGI worker (`gasgi`) reads headers without a thread, but Django would then run each
  request's sync code in a thread of its own, so a database connection could not be kept between
  requests (Django's docs: no persistent connections under ASGI), and every view would pay the
  sync/async hop.

So the worker's main thread, which already polls the listening socket and kept-alive
connections, also reads request headers: without blocking, into a buffer per connection, until
the blank line that ends the header. Only then is the connection given to a thread, with those
bytes put back in front of gunicorn's parser, which parses them exactly as it would have read
them. A thread therefore only ever waits on the application (the database, the model), never on
a client's header, and a fixed pool of threads (each with its own persistent database connection)
serves everything else however many slow clients are connected. A connection whose header has
not ended within HEADER_TIMEOUT_SECONDS of its first wait (a new connection, or a kept-alive one
that started another request) is closed, with a 408 problem if it had sent anything.

Request bodies are still read by the thread (the API's bodies are small JSON); a client that
stops sending its body holds a thread until it disconnects.
"""

from __future__ import annotations

import selectors
import time
from functools import partial
from typing import Any

from gunicorn import util
from gunicorn.workers.gthread import TConn, ThreadWorker

# Long enough for any real client's header over a slow link (a header is well under a few KiB);
# short enough that an idle preconnect or a stalled client holds only a file descriptor, briefly.
HEADER_TIMEOUT_SECONDS = 10.0
_HEADER_END = b"\r\n\r\n"
_READ_SIZE = 65536


class HeaderBufferingThreadWorker(ThreadWorker):
    """gthread, with request headers read by the main thread's poller (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Connections whose header is still arriving -> (deadline, bytes so far). Each gets the
        # same timeout from when it starts waiting, so insertion order is deadline order.
        self.awaiting_header: dict[TConn, tuple[float, bytearray]] = {}
        # A header can be no longer than gunicorn's own limits allow; past that, the parser
        # refuses it (414/431) from what is buffered, without reading more.
        cfg = self.cfg
        field_lines = cfg.limit_request_fields * (cfg.limit_request_field_size + 2)
        self.header_size_limit = cfg.limit_request_line + 2 + field_lines + 2

    def enqueue_req(self, conn: TConn) -> None:
        """Every way a connection reaches the thread pool (accepted, readable after keep-alive,
        read-ahead left after a response) goes through here: a thread gets it only with a whole
        header buffered."""
        buffered = conn.parser.unreader.take_buffered() if conn.parser is not None else b""
        if _HEADER_END in buffered:
            conn.parser.unreader.unread(buffered)
            super().enqueue_req(conn)
            return
        conn.sock.setblocking(False)
        self.awaiting_header[conn] = (time.monotonic() + HEADER_TIMEOUT_SECONDS, bytearray(buffered))
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self.on_header_readable, conn))
        self.on_header_readable(conn, conn.sock)  # often the header is already there

    def on_header_readable(self, conn: TConn, _sock: Any) -> None:
        _deadline, header = self.awaiting_header[conn]
        try:
            received = conn.sock.recv(_READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            received = b""
        if not received:  # the client went away
            self._stop_awaiting(conn)
            self.nr_conns -= 1
            conn.close()
            return
        header += received
        # Handed over once the parser can answer from what is buffered: the header is complete,
        # too long (414/431), or has a bare LF, which gunicorn refuses (400) instead of waiting.
        bare_line_feed = header.count(b"\n") != header.count(b"\r\n")
        if _HEADER_END in header or len(header) > self.header_size_limit or bare_line_feed:
            self._stop_awaiting(conn)
            conn.data_ready = True  # gthread's own wait for a first byte is skipped
            conn.sock.setblocking(True)
            if conn.parser is None:
                conn.init()  # plain HTTP/1.x here (the web process has no TLS and no h2c)
            conn.parser.unreader.unread(bytes(header))
            super().enqueue_req(conn)

    def murder_pending(self) -> None:
        """Runs on every turn of gunicorn's loop: also closes connections whose header is late,
        and, once the worker is stopping, all that are still waiting for one."""
        super().murder_pending()
        now = time.monotonic()
        while self.awaiting_header:
            conn, (deadline, header) = next(iter(self.awaiting_header.items()))
            if deadline > now and self.alive:
                break
            self._stop_awaiting(conn)
            self.nr_conns -= 1
            if header:
                try:
                    util.write_error(conn.sock, 408, "Request Timeout", "The request's header did not arrive in time.")
                except OSError:
                    pass
            conn.close()

    def _stop_awaiting(self, conn: TConn) -> None:
        del self.awaiting_header[conn]
        try:
            self.poller.unregister(conn.sock)
        except (KeyError, ValueError, OSError):
            pass
