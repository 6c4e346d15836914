"""The fitted relevance judge at query time: which one is in use, and its scores.

`judge_in_use()` is the newest RelevanceJudge row, loaded once per process (again when a newer
row appears); with JUDGE_ENABLED off, or no judge fitted, it is None and search and /ask behave
as before. A judge whose artifact fails to load is logged once as a warning and skipped (today's
model decides); `judge_load_failure()` says so for /health.

`passages_judge` is the one inference call: it can move onto the project's ONNX Runtime module
without its callers changing.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.conf import settings

from groundtruth.judge.pair_mining import judge_passage
from groundtruth.judge.training import CrossEncoder
from groundtruth.models import Chunk, RelevanceJudge

logger = logging.getLogger(__name__)

SCORE_CACHE_SIZE = 4096  # (question, chunk) scores kept per process: /ask and /search share them


@dataclass
class ActiveJudge:
    row: RelevanceJudge
    model: CrossEncoder
    scores_cache: OrderedDict[tuple[str, int, str], float] = field(default_factory=OrderedDict)

    def threshold_for(self, repository_name: str) -> float:
        return float(self.row.thresholds.get(repository_name, self.row.default_threshold))


_lock = threading.Lock()
_state: dict[str, object] = {"judge": None, "failed": None}


def judge_load_failure() -> str | None:
    """Why the newest judge could not be loaded (None: loaded, or none fitted)."""
    failed = _state["failed"]
    return failed if isinstance(failed, str) else None


def judge_in_use() -> ActiveJudge | None:
    if not settings.JUDGE_ENABLED:
        return None
    newest = RelevanceJudge.objects.order_by("-fitted_at", "-id").first()
    if newest is None:
        return None
    loaded = _state["judge"]
    if isinstance(loaded, ActiveJudge) and loaded.row.pk == newest.pk:
        return loaded
    if _state["failed"] is not None and _state.get("failed_pk") == newest.pk:
        return None
    with _lock:
        try:
            model = CrossEncoder.load(newest.artifact)
        except Exception as exc:  # any failure to load falls back to today's model
            message = f"relevance judge #{newest.pk} at {newest.artifact} failed to load: {exc}"
            logger.warning("%s; search and /ask use the fitted relevance and abstention model", message)
            _state.update(failed=message, failed_pk=newest.pk)
            return None
        active = ActiveJudge(row=newest, model=model)
        _state.update(judge=active, failed=None, failed_pk=None)
        return active


def passages_judge(judge: ActiveJudge, *, query: str, chunks: Sequence[Chunk]) -> dict[int, float]:
    """The judge's score of each chunk for `query` (cached per process by question and chunk)."""
    scores: dict[int, float] = {}
    missing = []
    for chunk in chunks:
        key = (query, chunk.pk, chunk.content_hash)
        if key in judge.scores_cache:
            judge.scores_cache.move_to_end(key)
            scores[chunk.pk] = judge.scores_cache[key]
        else:
            missing.append(chunk)
    if missing:
        values = judge.model.scores(query, [judge_passage(path=chunk.path, text=chunk.text) for chunk in missing])
        for chunk, value in zip(missing, values, strict=True):
            scores[chunk.pk] = value
            judge.scores_cache[(query, chunk.pk, chunk.content_hash)] = value
        while len(judge.scores_cache) > SCORE_CACHE_SIZE:
            judge.scores_cache.popitem(last=False)
    return scores
