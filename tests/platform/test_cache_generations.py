"""The generation counters behind the response and credential caches."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from agentplatform.plumbing.cache_generations import RESPONSES, generation_bump, generation_get, generation_key

pytestmark = pytest.mark.django_db


def test_a_missing_generation_starts_from_the_redis_clock_so_values_never_repeat():
    redis = cache._cache.get_client()
    seconds, _microseconds = redis.time()

    first = int(generation_get(RESPONSES))
    redis.delete(generation_key(RESPONSES))  # a flushed or restarted Redis
    again = int(generation_get(RESPONSES))

    assert seconds * 10**6 <= first < again < (seconds + 60) * 10**6


def test_a_bump_counts_once_at_once_and_once_more_when_the_transaction_commits(
    django_capture_on_commit_callbacks,
):
    start = int(generation_get(RESPONSES))

    with django_capture_on_commit_callbacks(execute=True):
        generation_bump(RESPONSES)
        during = int(generation_get(RESPONSES))
    after = int(generation_get(RESPONSES))

    assert (during - start, after - start) == (1, 2)
