"""The cache lock of one-at-a-time work (agentplatform/plumbing/cache_locks.py), on the real Redis."""

from __future__ import annotations

import pickle
import time

from django.core.cache import cache

from agentplatform.plumbing.cache_locks import cache_lock

KEY = "test:cache-lock"


def _in_redis() -> tuple[bytes | None, int]:
    """The lock's key as Redis holds it (the bytes the release compares) and its time to live in ms
    (-2: no such key)."""
    client = cache._cache.get_client()  # the redis-py client behind Django's RedisCache
    full_key = cache.make_and_validate_key(KEY)
    return client.get(full_key), client.pttl(full_key)


def test_a_free_lock_is_taken_and_released_and_a_held_one_is_not_taken():
    with cache_lock(KEY, timeout=60) as first:
        token = cache.get(KEY)
        stored, ttl = _in_redis()
        with cache_lock(KEY, timeout=60) as second:
            assert (first, second) == (True, False)
        assert cache.get(KEY) == token  # the refused one released nothing
    assert isinstance(token, str) and len(token) == 32 and int(token, 16) >= 0
    # Pickled by Django's RedisCache under the prefixed, versioned key: what the release compares.
    assert stored == pickle.dumps(token, pickle.HIGHEST_PROTOCOL)
    assert 59_000 < ttl <= 60_000
    assert (cache.get(KEY), _in_redis()) == (None, (None, -2))


def test_a_holder_past_its_expiry_leaves_the_next_holders_lock_alone():
    with cache_lock(KEY, timeout=1) as taken:
        time.sleep(1.5)  # expired
        assert cache.add(KEY, "another holder", timeout=60)  # as another process takes it
    assert (taken, cache.get(KEY)) == (True, "another holder")
    stored, ttl = _in_redis()
    assert stored == pickle.dumps("another holder", pickle.HIGHEST_PROTOCOL)
    assert 58_000 < ttl <= 60_000  # untouched: its own expiry


def test_a_holder_whose_key_was_taken_by_another_token_deletes_nothing():
    with cache_lock(KEY, timeout=60) as taken:
        own = cache.get(KEY)
        # As if it expired and another holder took it: a token of the same shape, not the same.
        other = "0" * 32
        assert cache.delete(KEY) and cache.add(KEY, other, timeout=60)
    assert (taken, own != other, cache.get(KEY)) == (True, True, other)
    assert _in_redis()[0] == pickle.dumps(other, pickle.HIGHEST_PROTOCOL)


def test_the_release_is_one_script_call_on_the_redis_server():
    """Compared and deleted in one step on the server (not a GET then a DEL from here, between which
    the lock could expire and be taken by another): the commands Redis runs on the lock's key, as
    MONITOR shows them."""
    client = cache._cache.get_client()
    full_key = cache.make_and_validate_key(KEY)
    end_of_test = cache.make_and_validate_key("test:cache-lock-observed")
    with cache_lock(KEY, timeout=60):
        pass  # once before, so that Redis has the script and EVALSHA runs it at the first try
    with client.monitor() as monitor:
        with cache_lock(KEY, timeout=60):
            pass
        client.get(end_of_test)  # the last command to wait for; other clients' commands are skipped
        seen = []
        while (command := monitor.next_command())["command"] != f"GET {end_of_test}":
            if full_key in command["command"]:
                seen.append((command["client_type"], command["command"].split(" ")[0]))
    assert seen == [("tcp", "SET"), ("tcp", "EVALSHA"), ("lua", "get"), ("lua", "del")]
