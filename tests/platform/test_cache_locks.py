"""The cache lock of one-at-a-time work (agentplatform/plumbing/cache_locks.py), on the real Redis."""

from __future__ import annotations

import time

from django.core.cache import cache

from agentplatform.plumbing.cache_locks import cache_lock

KEY = "test:cache-lock"


def test_a_free_lock_is_taken_and_released_and_a_held_one_is_not_taken():
    with cache_lock(KEY, timeout=60) as first:
        held_by = cache.get(KEY)
        with cache_lock(KEY, timeout=60) as second:
            assert (first, second) == (True, False)
        assert cache.get(KEY) == held_by  # the refused one released nothing
    assert cache.get(KEY) is None


def test_a_holder_past_its_expiry_leaves_the_next_holders_lock_alone():
    with cache_lock(KEY, timeout=1) as taken:
        time.sleep(1.5)  # expired
        assert cache.add(KEY, "another holder", timeout=60)  # as another process takes it
    assert (taken, cache.get(KEY)) == (True, "another holder")
