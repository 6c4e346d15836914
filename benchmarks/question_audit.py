"""What the audit of questions costs /search: GET /search through the whole Django stack with the
audit left out (baseline), written by the request's thread after the response (inline, as before
the writer thread), and queued for the writer thread (background, the default), interleaved; then
the audit call alone each way, and how fast the writer thread drains a queue (rows per second in
its batched INSERTs), over an audit table already holding --rows records (its indexes are what an
INSERT pays for).

    python benchmarks/question_audit.py [--rounds 400] [--rows 200000]

GET /search is served as a WSGI server serves it (the body, then close(), which writes or queues
the audit) and timed until close() returns: what holds the server's thread. A database of its own
(gt_bench_audit); the small handbook and community corpora of the search tests, embedded by the
configured backend. Printed: p50 and p95 in milliseconds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.benchmark_database import benchmark_database_use


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", default="gt_bench_audit")
    parser.add_argument("--rounds", type=int, default=400)
    parser.add_argument("--rows", type=int, default=200_000)
    arguments = parser.parse_args()
    benchmark_database_use(arguments.database)

    from django.conf import settings
    from django.core.wsgi import get_wsgi_application
    from django.db import connection
    from django.test import RequestFactory

    from agents.models import ApiKey, ApiKeyKind
    from agents.services import api_key_create
    from groundtruth import search_views
    from groundtruth.models import AskedQuestion, Repository
    from groundtruth.question_audit import BATCH_ROWS, asked_question_record, question_audit_writer
    from tests.groundtruth.search_fixtures import COMMUNITY, HANDBOOK, chunks_index

    settings.ALLOWED_HOSTS = ["*"]
    settings.RATE_LIMIT_AUTHENTICATED = "1000000/m"
    Repository.objects.all().delete()
    ApiKey.objects.filter(name="bench audit").delete()
    AskedQuestion.objects.all().delete()
    chunks_index(Repository.objects.create(name="acme/handbook", url="/srv/handbook", trust="canonical"), HANDBOOK)
    chunks_index(Repository.objects.create(name="acme/community", url="/srv/community"), COMMUNITY)
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO groundtruth_askedquestion (asked_at, key_prefix, via, question, repositories, sources_missing)
            SELECT now() - (n %% 90) * interval '1 day', 'sk_' || lpad((n %% 50)::text, 12, '0'), 'search',
                   'question number ' || n, ARRAY['acme/handbook', 'acme/community'], n %% 7 = 0
            FROM generate_series(1, %s) AS n
            """,
            [arguments.rows],
        )
        cursor.execute("ANALYZE groundtruth_askedquestion")
    _, secret = api_key_create(kind=ApiKeyKind.SERVICE, name="bench audit", scopes=["read"])
    # Served as a WSGI server serves it: the body is sent, then the response closed. Timed until
    # the body is complete (what the client waits for); close() runs after, untimed.
    application = get_wsgi_application()
    factory = RequestFactory()
    queries = ["broker", "CELERY_BROKER_URL", "how are jobs retried", "forum rules", "gas fees"]

    statuses: list[str] = []

    def start_response(
        status: str, headers: list[tuple[str, str]], exc_info: Any = None, /
    ) -> Callable[[bytes], object]:
        statuses.append(status)
        return lambda data: None

    def search_timings() -> list[float]:
        timings = []
        for round_number in range(arguments.rounds):
            environ = factory.get(
                "/search", {"q": queries[round_number % len(queries)]}, HTTP_AUTHORIZATION=f"Bearer {secret}"
            ).environ
            statuses.clear()
            started = time.perf_counter()
            body = application(environ, start_response)
            b"".join(body)
            body.close()
            timings.append((time.perf_counter() - started) * 1000)
            assert statuses == ["200 OK"], statuses
        return timings

    search_timings()  # warm: model, caches, connections
    recorded = search_views.asked_question_record_when_sent

    def not_recorded(response: object, **kwargs: object) -> None:
        return None

    baseline = "GET /search, no audit (baseline)"
    inline = "GET /search, INSERT by the request's thread (inline)"
    background = "GET /search, queued for the writer thread (default)"
    results: dict[str, list[float]] = {baseline: [], inline: [], background: []}
    for _ in range(6):  # interleaved, so that drift hits all alike
        search_views.asked_question_record_when_sent = not_recorded
        results[baseline] += search_timings()
        search_views.asked_question_record_when_sent = recorded
        settings.QUESTION_AUDIT_BACKGROUND = False
        results[inline] += search_timings()
        settings.QUESTION_AUDIT_BACKGROUND = True
        results[background] += search_timings()
        question_audit_writer.flush(timeout=60)

    def record_timings() -> list[float]:
        timings = []
        for round_number in range(arguments.rounds):
            started = time.perf_counter()
            asked_question_record(
                caller=None,
                via="search",
                question=f"bench {round_number}",
                repository_names=["acme/handbook", "acme/community"],
                sources_missing=False,
            )
            timings.append((time.perf_counter() - started) * 1000)
        return timings

    settings.QUESTION_AUDIT_BACKGROUND = False
    results["asked_question_record() alone, inline (one INSERT)"] = record_timings()
    settings.QUESTION_AUDIT_BACKGROUND = True
    results["asked_question_record() alone, queued"] = record_timings()
    question_audit_writer.flush(timeout=60)
    # The writer's own pace: a queue of 5,000 records drained in its batched INSERTs.
    settings.QUESTION_AUDIT_FLUSH_SECONDS = 3600  # nothing written before the flush
    for round_number in range(5000):
        asked_question_record(
            caller=None,
            via="search",
            question=f"drain {round_number}",
            repository_names=["acme/handbook"],
            sources_missing=True,
        )
    started = time.perf_counter()
    question_audit_writer.flush(timeout=120)
    drain_rate = 5000 / (time.perf_counter() - started)
    inline_rate = 1000 / statistics.median(results["asked_question_record() alone, inline (one INSERT)"])

    print(f"audit table: {AskedQuestion.objects.count()} rows; {arguments.rounds * 6} searches per variant")
    for label, timings in results.items():
        print(f"{label:55s} p50 {statistics.median(timings):7.2f} ms   p95 {percentile(timings, 0.95):7.2f} ms")
    print(
        f"records written per second: writer thread, batches of up to {BATCH_ROWS}: {drain_rate:,.0f}; "
        f"one INSERT each (inline, p50): {inline_rate:,.0f}"
    )


if __name__ == "__main__":
    main()
