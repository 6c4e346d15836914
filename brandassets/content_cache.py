"""In-process caches of the content endpoint (agentplatform/plumbing/bounded_cache.py): asset bytes keyed
by git blob SHA, bounded by total size, and the short-lived resolution of a URL to its asset row.

A blob SHA names its bytes forever, so those entries never go stale and need no invalidation: a
registry change that points an asset at new bytes points it at a new SHA. The cache lives in
each web worker's memory (no network round trip, which is what lets the content endpoint keep
up with a static file view) and evicts least recently used blobs once the total passes
ASSET_CONTENT_CACHE_BYTES. A blob larger than the whole budget is never cached.

Resolving a URL to its row (product, kind, assetIndex) is a database query that costs more than
handing out the cached bytes; the answer is kept for ASSET_RECORD_CACHE_SECONDS. A sync clears
that cache in the process that ran it at once; other web workers follow within the TTL, serving
the previous (still consistent: bytes and ETag from the same blob) answer until then. Only
found, served assets are kept; misses always ask the database.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from agentplatform.plumbing.bounded_cache import BoundedCache

blob_contents: BoundedCache[str, bytes] = BoundedCache(
    max_size=lambda: int(settings.ASSET_CONTENT_CACHE_BYTES), size_of=len
)
asset_record_cache: BoundedCache[tuple[str, str, int], Any] = BoundedCache(max_entries=4096)
