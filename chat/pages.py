"""The live chat page at `/chat/`: the newest messages of the feed, server-rendered, and then each
new one as it is posted, appended by a few lines of JavaScript reading `GET /api/chat/stream`
with an `EventSource` (which resumes by `Last-Event-ID` itself when it reconnects)."""

from __future__ import annotations

import json
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from chat.selectors import chat_feed
from chat.views import chat_stream_url

# Messages rendered with the page; the page also keeps at most SHOWN_MAX once new ones arrive.
PAGE_MESSAGES = 50
SHOWN_MAX = 200


def chat_live_page(request: HttpRequest) -> HttpResponse:
    # The feed's own messages (its JSON, as GET /api/chat sends it), shown oldest first.
    messages = json.loads(chat_feed(limit=PAGE_MESSAGES).body.text)[::-1]
    # The stream starts after the newest message shown, so one posted between this render and the
    # stream's connection is replayed rather than lost; with none shown, 0 replays every visible one.
    last_shown_id = messages[-1]["id"] if messages else "0"
    context = {
        "messages": messages,
        "last_shown_id": last_shown_id,
        "stream_url": chat_stream_url(request, query=urlencode({"last_event_id": last_shown_id})),
        "shown_max": SHOWN_MAX,
        "page_messages": PAGE_MESSAGES,
        # A message of an earlier day shows its date too (a backlog can span days); times are UTC.
        "today": timezone.now().date().isoformat(),
    }
    return render(request, "chat/live.html", context)
