"""Which embedding model the index is in: the active adapted encoder's directory, or None for the
configured one (EMBEDDING_MODEL, else the packaged MiniLM).

Every process embeds queries and chunks with `embedding_backend()`, which asks this module. The
answer is read from the database at most every ENCODER_ACTIVE_CHECK_SECONDS per process (one
small indexed query: the active row and whether its files are stored), so a switch reaches every
process within that time; until then a process still on the previous model finds no vector of
its space and answers lexically. Writers that must not mix spaces (an ingest inside its index
lock) ask with `fresh=True`. When the database cannot answer, the last answer stays (the packaged
model before any).
"""

from __future__ import annotations

import logging
import threading
import time

from django.conf import settings

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_state: dict[str, float | str | None] = {"checked_at": float("-inf"), "directory": None}


def active_encoder_directory(*, fresh: bool = False) -> str | None:
    """The active adapted encoder's model directory on this host (model_files.py), or None."""
    if settings.EMBEDDING_BACKEND != "local" or settings.EMBEDDING_MODEL:
        return None  # a model the operator chose is never replaced
    now = time.monotonic()
    checked_at = _state["checked_at"]
    assert isinstance(checked_at, float)
    if fresh or now - checked_at >= settings.ENCODER_ACTIVE_CHECK_SECONDS:
        with _lock:
            try:
                from groundtruth.adaptation.model_files import active_encoder_model_directory

                # This host's directory of it, restored or not: the backend restores it before it
                # loads the model (in the background in a serving process).
                active = active_encoder_model_directory()
                _state["directory"] = str(active) if active is not None else None
            except Exception as exc:  # the database is down or not reachable here: keep the last answer
                logger.debug("Active encoder not read (%s); keeping %s", exc, _state["directory"])
            _state["checked_at"] = now
    directory = _state["directory"]
    return directory if isinstance(directory, str) else None


def active_encoder_forget() -> None:
    """Makes the next call read the database (after a switch in this process, and in tests)."""
    with _lock:
        _state["checked_at"] = float("-inf")
        _state["directory"] = None
