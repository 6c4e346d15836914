"""The cache lock of one-at-a-time work (agentplatform/plumbing/cache_locks.py), on the real Redis."""

from __future__ import annotations

import json
import os
import pickle
import socket
import time
from datetime import UTC, datetime

from django.core.cache import cache

from agentplatform.plumbing.cache_locks import LockHolder, cache_lock, cache_lock_break, cache_lock_holder

KEY = "test:cache-lock"


def _in_redis() -> tuple[bytes | None, int]:
    """The lock's key as Redis holds it (the bytes the release compares) and its time to live in ms
    (-2: no such key)."""
    client = cache._cache.get_client()  # the redis-py client behind Django's RedisCache
    full_key = cache.make_and_validate_key(KEY)
    return client.get(full_key), client.pttl(full_key)


def test_a_free_lock_is_taken_and_released_and_a_held_one_is_not_taken():
    before = datetime.now(UTC).replace(microsecond=0)
    with cache_lock(KEY, timeout=60) as first:
        value = cache.get(KEY)
        stored, ttl = _in_redis()
        with cache_lock(KEY, timeout=60) as second:
            assert (first, second) == (True, False)
        assert cache.get(KEY) == value  # the refused one released nothing
    after = datetime.now(UTC)
    # The value names the holder: this host and process, when, and a random token of its own.
    fields = json.loads(value)
    assert list(fields) == ["host", "pid", "taken_at", "token"]
    assert (fields["host"], fields["pid"]) == (socket.gethostname(), os.getpid())
    assert before <= datetime.fromisoformat(fields["taken_at"]) <= after
    assert len(fields["token"]) == 32 and int(fields["token"], 16) >= 0
    # Pickled by Django's RedisCache under the prefixed, versioned key: what the release compares.
    assert stored == pickle.dumps(value, pickle.HIGHEST_PROTOCOL)
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
        # As if it expired and another holder took it: the same host, process and moment could be
        # named (a lock taken again in one process); the token differs.
        other = LockHolder(
            host=socket.gethostname(), pid=os.getpid(), taken_at=datetime.now(UTC), token="0" * 32
        ).value()
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


DEAD_HOLDER = LockHolder(
    host="worker-2", pid=4242, taken_at=datetime(2026, 11, 27, 9, 30, 5, tzinfo=UTC), token="ab" * 16
)


def test_the_holder_is_read_and_a_broken_lock_says_whose_it_was_and_is_free():
    assert (cache_lock_holder(KEY), cache_lock_break(KEY)) == (None, None)  # free: nothing to say, nothing deleted
    assert cache.add(KEY, DEAD_HOLDER.value(), timeout=60)  # as a process on another host took it

    named = f"worker-2 pid 4242 since 2026-11-27 09:30:05 UTC, token {'ab' * 16}"
    assert cache_lock_holder(KEY) == named
    assert cache_lock_break(KEY) == named

    assert (cache_lock_holder(KEY), _in_redis()) == (None, (None, -2))
    with cache_lock(KEY, timeout=60) as taken:  # the next one takes it at once
        assert taken is True


def test_a_holder_whose_lock_was_broken_leaves_the_next_holders_alone():
    with cache_lock(KEY, timeout=60) as first:
        own = LockHolder.parse(cache.get(KEY))
        broken = cache_lock_break(KEY)  # as an operator would, wrongly thinking this holder dead
        assert cache.add(KEY, DEAD_HOLDER.value(), timeout=60)  # the next holder, elsewhere
    assert own is not None and (own.host, own.pid) == (socket.gethostname(), os.getpid())
    assert (first, broken) == (True, str(own))
    assert cache.get(KEY) == DEAD_HOLDER.value()


def test_a_value_that_names_no_holder_is_shown_as_it_is():
    # A bare token, as a process from before holders were named wrote it (a deploy while it runs).
    assert cache.add(KEY, "0123456789abcdef" * 2, timeout=60)
    assert cache_lock_holder(KEY) == "an unnamed holder ('0123456789abcdef0123456789abcdef')"
    assert cache_lock_break(KEY) == "an unnamed holder ('0123456789abcdef0123456789abcdef')"
    assert cache.get(KEY) is None
