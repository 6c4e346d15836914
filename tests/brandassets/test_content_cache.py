from __future__ import annotations

from brandassets.content_cache import blob_contents


def test_process_cache_follows_the_configured_size(settings):
    settings.ASSET_CONTENT_CACHE_BYTES = 1234
    assert blob_contents.max_size == 1234

    settings.ASSET_CONTENT_CACHE_BYTES = 0
    blob_contents.put("a", b"1")

    assert (blob_contents.max_size, blob_contents.get("a")) == (0, None)
