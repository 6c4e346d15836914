"""Where one GET /search request's time goes: cProfile around --requests distinct queries served
through the WSGI application as gunicorn serves it (body sent, then close()), in one thread, and
the SQL statements each request sends.

    python benchmarks/search_profile.py [--database gt_bench_throughput_current] [--requests 80] [--top 30]

The database is the one `benchmarks/search_throughput.py` sets up for this build (3,000 generated
chunks); run that first. Printed: wall and CPU milliseconds per request, the SQL statements of one
request, and the functions with the most cumulative and own time, per request.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.benchmark_database import benchmark_database_use


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", default="gt_bench_throughput_current")
    parser.add_argument("--requests", type=int, default=80)
    parser.add_argument("--top", type=int, default=30)
    arguments = parser.parse_args()
    benchmark_database_use(arguments.database)

    from django.conf import settings
    from django.core.wsgi import get_wsgi_application
    from django.db import connection
    from django.test import RequestFactory
    from django.test.utils import CaptureQueriesContext

    from agents.models import ApiKeyKind
    from agents.services import api_key_create
    from groundtruth.question_audit import question_audit_writer

    settings.ALLOWED_HOSTS = ["*"]
    settings.RATE_LIMIT_AUTHENTICATED = "100000000/m"
    _, secret = api_key_create(kind=ApiKeyKind.SERVICE, name="search profile", scopes=["read"])
    application = get_wsgi_application()
    factory = RequestFactory()
    statuses: list[str] = []

    def start_response(
        status: str, headers: list[tuple[str, str]], exc_info: Any = None, /
    ) -> Callable[[bytes], object]:
        statuses.append(status)
        return lambda data: None

    def serve(query: str) -> None:
        environ = factory.get("/search", {"q": query}, HTTP_AUTHORIZATION=f"Bearer {secret}").environ
        statuses.clear()
        body = application(environ, start_response)
        b"".join(body)
        body.close()
        assert statuses == ["200 OK"], statuses

    for number in range(10):  # warm: the model, caches, connections
        serve(f"warm up query {number} configure the worker")
    with CaptureQueriesContext(connection) as captured:
        serve("how does one profiled request configure the broker")
    print(f"SQL statements of one request ({len(captured.captured_queries)}):")
    for query in captured.captured_queries:
        print(f"  {query['time']:>6} s  {query['sql'][:150]}")

    profile = cProfile.Profile()
    wall = time.perf_counter()
    cpu = time.process_time()
    profile.enable()
    for number in range(arguments.requests):
        serve(f"how does profiled client {number} configure worker {number * 7}")
    profile.disable()
    wall = (time.perf_counter() - wall) * 1000 / arguments.requests
    cpu = (time.process_time() - cpu) * 1000 / arguments.requests
    question_audit_writer.flush(timeout=30)
    print(f"\n{arguments.requests} requests, per request: wall {wall:.1f} ms, CPU of this process {cpu:.1f} ms")
    stats = pstats.Stats(profile)
    # Per request: divide the printed seconds by --requests.
    stats.sort_stats("cumulative").print_stats(arguments.top)
    stats.sort_stats("tottime").print_stats(arguments.top)


if __name__ == "__main__":
    main()
