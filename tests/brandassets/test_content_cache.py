from __future__ import annotations

from brandassets.content_cache import BlobContentCache, blob_content_cache


def test_cache_evicts_least_recently_used_blobs_past_its_byte_budget():
    cache = BlobContentCache(max_bytes=10)
    cache.put("a", b"1234")
    cache.put("b", b"5678")
    assert cache.get("a") == b"1234"  # a is now the most recently used

    cache.put("c", b"90ab")

    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (b"1234", None, b"90ab")
    assert (len(cache), cache.size_bytes) == (2, 8)


def test_a_blob_larger_than_the_budget_is_not_cached_and_evicts_nothing():
    cache = BlobContentCache(max_bytes=10)
    cache.put("a", b"12345")

    cache.put("big", b"x" * 11)

    assert (cache.get("big"), cache.get("a"), cache.size_bytes) == (None, b"12345", 5)


def test_putting_the_same_blob_twice_counts_it_once():
    cache = BlobContentCache(max_bytes=10)
    cache.put("a", b"12345")
    cache.put("a", b"12345")

    assert (len(cache), cache.size_bytes) == (1, 5)


def test_process_cache_follows_the_configured_size(settings):
    settings.ASSET_CONTENT_CACHE_BYTES = 1234
    assert blob_content_cache().max_bytes == 1234
    settings.ASSET_CONTENT_CACHE_BYTES = 0
    cache = blob_content_cache()
    cache.put("a", b"1")
    assert (cache.max_bytes, cache.get("a")) == (0, None)
