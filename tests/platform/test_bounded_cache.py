"""agentplatform/plumbing/bounded_cache.py: the one in-process cache every per-worker memory uses."""

from __future__ import annotations

import threading

import pytest

from agentplatform.plumbing.bounded_cache import BoundedCache


def test_entries_past_the_count_evict_the_least_recently_used():
    cache: BoundedCache[str, int] = BoundedCache(max_entries=2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # a is now the most recently used

    cache.put("c", 3)

    assert (cache.get("a"), cache.get("b"), cache.get("c"), len(cache)) == (1, None, 3, 2)


def test_entries_past_the_size_budget_evict_the_least_recently_used():
    cache: BoundedCache[str, bytes] = BoundedCache(max_size=10, size_of=len)
    cache.put("a", b"1234")
    cache.put("b", b"5678")
    assert cache.get("a") == b"1234"

    cache.put("c", b"90ab")

    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (b"1234", None, b"90ab")
    assert (len(cache), cache.size) == (2, 8)


def test_an_entry_larger_than_the_budget_is_not_stored_and_evicts_nothing():
    cache: BoundedCache[str, bytes] = BoundedCache(max_size=10, size_of=len)
    cache.put("a", b"12345")

    cache.put("big", b"x" * 11)

    assert (cache.get("big"), cache.get("a"), cache.size) == (None, b"12345", 5)


def test_putting_a_key_again_replaces_it_and_counts_it_once():
    cache: BoundedCache[str, bytes] = BoundedCache(max_size=10, size_of=len)
    cache.put("a", b"12345")
    cache.put("a", b"123")

    assert (cache.get("a"), len(cache), cache.size) == (b"123", 1, 3)


def test_an_expired_entry_is_a_miss_and_is_dropped():
    cache: BoundedCache[str, int] = BoundedCache(max_entries=10)
    cache.put("gone", 1, ttl_seconds=0)
    cache.put("kept", 2, ttl_seconds=3600)
    cache.put("forever", 3)

    assert (cache.get("gone"), cache.get("kept"), cache.get("forever")) == (None, 2, 3)
    assert (len(cache), cache.hits, cache.misses) == (2, 2, 1)


def test_a_callable_bound_follows_its_setting_and_zero_stores_nothing(settings):
    settings.SEARCH_EMBEDDING_CACHE_SIZE = 3
    cache: BoundedCache[int, int] = BoundedCache(max_entries=lambda: settings.SEARCH_EMBEDDING_CACHE_SIZE)
    for key in range(5):
        cache.put(key, key)
    assert (len(cache), cache.max_entries) == (3, 3)

    settings.SEARCH_EMBEDDING_CACHE_SIZE = 1
    cache.put(9, 9)
    assert (len(cache), cache.get(9), cache.get(4)) == (1, 9, None)

    settings.SEARCH_EMBEDDING_CACHE_SIZE = 0
    cache.put(10, 10)
    assert (cache.get(10), cache.get(9)) == (None, 9)


def test_clear_empties_the_cache_and_its_counts():
    cache: BoundedCache[str, bytes] = BoundedCache(max_entries=5, max_size=100, size_of=len)
    cache.put("a", b"12")
    cache.get("a")
    cache.get("b")

    cache.clear()

    assert (len(cache), cache.size, cache.hits, cache.misses) == (0, 0, 0, 0)


def test_a_size_budget_needs_a_size_function():
    with pytest.raises(ValueError, match="max_size needs size_of"):
        BoundedCache(max_size=10)


def test_threads_writing_at_once_keep_the_bounds():
    cache: BoundedCache[tuple[int, int], bytes] = BoundedCache(max_entries=50, max_size=400, size_of=len)

    def write(thread: int) -> None:
        for index in range(2000):
            cache.put((thread, index), b"x" * (index % 16))
            cache.get((thread, index - 1))

    threads = [threading.Thread(target=write, args=(number,)) for number in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(cache) <= 50
    assert cache.size <= 400
    assert cache.size == sum(len(cache.get(key) or b"") for key in list(cache._entries))
