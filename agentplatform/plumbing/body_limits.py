"""How large a request body may be: MAX_REQUEST_BODY_BYTES (DATA_UPLOAD_MAX_MEMORY_SIZE), unless
the view at the path takes larger ones and names the setting that bounds them in its class
attribute `body_limit_setting` (POST /hooks/git: INGEST_WEBHOOK_MAX_BYTES; git hosts send
pushes larger than any other body of the API). Such a view reads its body from the stream itself:
Django's `request.body` keeps refusing anything over DATA_UPLOAD_MAX_MEMORY_SIZE.

The view is looked up only for a body over the general limit, so other requests pay nothing.
"""

from __future__ import annotations

from django.conf import settings
from django.urls import Resolver404, resolve


def body_limit(path_info: str) -> int:
    """The largest body the view at `path_info` takes, in bytes."""
    try:
        match = resolve(path_info)
    except Resolver404:
        return settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    setting = getattr(getattr(match.func, "cls", None), "body_limit_setting", None)
    return int(getattr(settings, setting)) if setting else settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def body_limit_exceeded(path_info: str, length: int) -> int | None:
    """The limit a body of `length` bytes sent to `path_info` is over, or None when it is within."""
    if length <= settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
        return None
    limit = body_limit(path_info)
    return limit if length > limit else None
