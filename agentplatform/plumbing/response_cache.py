"""A cache of rendered responses for the busiest public reads (agent list, chat feed, price
history), valid while nothing they show has changed.

An action opts in with `@cached_response`. Each web worker keeps the rendered answers in its own
memory, keyed by the request's absolute URL and Accept header (the chat feed's `Link` header holds
the absolute URL, and `Accept` can ask JSON for an indent), each under the RESPONSES generation
current when it was built. Every write to an agent, a chat message or a price point bumps that
generation in Redis (agentplatform/plumbing/cache_generations.py), which RateLimitedViewMixin reads beside
the rate-limit count, in the same Redis call: an entry from an older generation is never served,
so a hit costs that one Redis round trip, no SQL and no serialization, and writes show at once in
every worker. An anonymous hit is answered before DRF wraps the request (RateLimitedViewMixin.dispatch).

Entries also expire after API_RESPONSE_CACHE_SECONDS, which bounds how long a write that bypasses
the ORM (raw SQL, another program on the database) or one made while Redis was unreachable stays
unseen; 0 turns the cache off. Without Redis nothing is cached (the generation is unknown). Only
200 answers are cached, never the rate-limit headers. A request with `Cache-Control: no-cache`
is answered from the database (and refreshes the entry).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from rest_framework.request import Request
from rest_framework.response import Response

from agentplatform.plumbing.bounded_cache import BoundedCache

# Headers an entry keeps besides the body; anything else DRF or the view set is not cached.
_KEPT_HEADERS = ("Link",)


class RenderedResponses:
    """This process's cached answers: key -> (generation, content type, headers, body)."""

    def __init__(self) -> None:
        self._entries: BoundedCache[str, tuple[str, str, dict[str, str], bytes]] = BoundedCache(max_entries=512)

    def get(self, key: str, generation: str) -> HttpResponse | None:
        entry = self._entries.get(key)
        if entry is None or entry[0] != generation:
            return None
        response = HttpResponse(entry[3], content_type=entry[1])
        for name, value in entry[2].items():
            response[name] = value
        return response

    def put(self, key: str, generation: str, response: HttpResponse) -> None:
        headers = {name: response[name] for name in _KEPT_HEADERS if response.has_header(name)}
        entry = (generation, response["Content-Type"], headers, response.content)
        self._entries.put(key, entry, ttl_seconds=settings.API_RESPONSE_CACHE_SECONDS)

    def clear(self) -> None:
        self._entries.clear()


rendered_responses = RenderedResponses()


class ResponseLookup:
    """One request's cache key and, after the Redis round trip, the generation and answer found."""

    def __init__(self, key: str, *, use_entry: bool) -> None:
        self.key = key
        self.use_entry = use_entry
        self.generation: str | None = None
        self.cached: HttpResponse | None = None

    def found(self, *, generation: str) -> None:
        self.generation = generation
        if self.use_entry:
            self.cached = rendered_responses.get(self.key, generation)


def lookup_for(view: Any, request: HttpRequest | Request) -> ResponseLookup | None:
    """The lookup for this request, or None when its action is not cached or caching is off."""
    action = getattr(view, getattr(view, "action", None) or "", None)
    if not getattr(action, "response_cacheable", False) or request.method not in ("GET", "HEAD"):
        return None
    if settings.API_RESPONSE_CACHE_SECONDS <= 0:
        return None
    key = f"{request.build_absolute_uri()}\n{request.META.get('HTTP_ACCEPT', '')}"
    use_entry = "no-cache" not in request.META.get("HTTP_CACHE_CONTROL", "").lower()
    return ResponseLookup(key, use_entry=use_entry)


def cached_response(action: Callable[..., Response]) -> Callable[..., HttpResponse]:
    """Serves a viewset action's 200 answers from the response cache (see the module docstring).

    The action still validates its input on a miss; a hit was a valid request when it was stored,
    as its key is the whole URL.
    """

    @functools.wraps(action)
    def serve(view: Any, request: Request, *args: Any, **kwargs: Any) -> HttpResponse:
        # Set by RateLimitedViewMixin once the request's count has read the generation.
        lookup: ResponseLookup | None = getattr(view, "response_lookup", None)
        if lookup is not None and lookup.cached is not None:
            return lookup.cached
        response = action(view, request, *args, **kwargs)
        if lookup is None or lookup.generation is None or response.status_code != 200:
            return response
        # Rendered here, as DRF would, so that the bytes stored are the bytes sent.
        renderer = request.accepted_renderer
        body = renderer.render(response.data, request.accepted_media_type, view.get_renderer_context())
        content_type = renderer.media_type
        if renderer.charset:
            content_type += f"; charset={renderer.charset}"
        rendered = HttpResponse(body, content_type=content_type)
        for name in _KEPT_HEADERS:
            if response.has_header(name):
                rendered[name] = response[name]
        rendered_responses.put(lookup.key, lookup.generation, rendered)
        return rendered

    serve.response_cacheable = True  # type: ignore[attr-defined]
    return serve
