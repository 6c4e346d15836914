"""The fitted relevance judge at query time: which one is in use, and its scores.

`judge_in_use()` is the newest RelevanceJudge row, loaded once per process (again when a newer
row appears); with JUDGE_ENABLED off, or no judge fitted, it is None and search and /ask behave
as before. A judge whose artifact fails to load is logged once as a warning and skipped (today's
model decides); `judge_state()` says which for /health.

`passages_judge` is the one inference call: the question's and the passages' token vectors from
the embedding model's ONNX graph (`LocalSentenceTransformer.token_vectors`; no torch), compared
by the late-interaction judge. A passage's projected token vectors are kept per process (by chunk
and content hash): /search and /ask of one question, and questions about the same section,
read them once.
"""

from __future__ import annotations

import functools
import logging
import sys
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
from django.conf import settings
from threadpoolctl import ThreadpoolController

from groundtruth.embeddings import EmbeddingError, embedding_backend
from groundtruth.judge.late_interaction import LateInteractionJudge
from groundtruth.judge.pair_mining import judge_passage
from groundtruth.models import Chunk, RelevanceJudge

logger = logging.getLogger(__name__)

# Projected token vectors of this many passages are kept per process (about 2,000 chunks of
# 200 tokens x 384 float32 would be 600 MB; float16 halves it, and 512 passages cost ~80 MB).
PASSAGE_CACHE_SIZE = 512


@functools.lru_cache(maxsize=1)
def _scanned_controller(modules_imported: int) -> ThreadpoolController:
    return ThreadpoolController()


def _blas_controller() -> ThreadpoolController:
    """The scan of the loaded libraries (~20 ms), made again only after an import.

    A BLAS library arrives with the extension module that links it (scipy brings its own
    OpenBLAS beside numpy's): a scan kept from before that import would leave it unlimited.
    """
    return _scanned_controller(len(sys.modules))


@contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Every loaded BLAS (numpy's among them) on one thread inside the block, its own setting again after.

    A judge's MaxSim is a (question tokens x 384) by (384 x 128) product per passage: too small
    to share between threads, and OpenBLAS's threads handing it over cost 50 times the product
    on a loaded 2-core machine (8 scores: 57 ms of wall and 13 ms of CPU against 2 ms and 0.4 ms,
    docs/ground-truth-judge.md). Each thread computes whole dot products either way, so the
    scores are the same.
    """
    with _blas_controller().limit(limits=1, user_api="blas"):
        yield


@dataclass
class ActiveJudge:
    row: RelevanceJudge
    model: LateInteractionJudge
    passages_cache: OrderedDict[tuple[int, str], np.ndarray] = field(default_factory=OrderedDict)

    def threshold_for(self, repository_name: str) -> float:
        return float(self.row.thresholds.get(repository_name, self.row.default_threshold))


@dataclass(frozen=True)
class JudgeState:
    """What /health says of the judge: `status` ok | error | disabled, and why."""

    status: str
    detail: str


_lock = threading.Lock()
_state: dict[str, object] = {"judge": None, "failed": None, "failed_pk": None}


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
    if _state["failed"] is not None and _state["failed_pk"] == newest.pk:
        return None
    with _lock:
        try:
            model = LateInteractionJudge.load(newest.artifact)
        except Exception as exc:  # any failure to load falls back to today's model
            message = f"relevance judge #{newest.pk} at {newest.artifact} failed to load: {exc}"
            logger.warning("%s; search and /ask use the fitted relevance and abstention model", message)
            _state.update(failed=message, failed_pk=newest.pk)
            return None
        active = ActiveJudge(row=newest, model=model)
        _state.update(judge=active, failed=None, failed_pk=None)
        return active


def judge_state() -> JudgeState:
    """The judge as /health reports it: in use (ok), failed to load (error: today's model
    decides), or not in use (disabled: off, or none fitted)."""
    if not settings.JUDGE_ENABLED:
        return JudgeState("disabled", "JUDGE_ENABLED=false: today's relevance and abstention model decide")
    active = judge_in_use()
    if active is not None:
        row = active.row
        return JudgeState(
            "ok",
            f"relevance judge #{row.pk} in use (fitted {row.fitted_at:%Y-%m-%d %H:%M} UTC on {row.pair_count} pairs,"
            f" held-out accuracy {row.held_out_accuracy:.3f})",
        )
    failure = judge_load_failure()
    if failure is not None:
        return JudgeState("error", f"{failure}; today's relevance and abstention model decide")
    return JudgeState("disabled", "no relevance judge fitted yet (manage.py judge_fit): today's model decides")


def passages_judge(judge: ActiveJudge, *, query: str, chunks: Sequence[Chunk]) -> dict[int, float]:
    """The judge's score of each chunk for `query`. Raises EmbeddingError when the embedding
    model cannot run (the caller then searches without the judge)."""
    backend = embedding_backend()
    token_vectors = getattr(backend, "token_vectors", None)
    token_ids = getattr(backend, "token_ids", None)
    if token_vectors is None or token_ids is None:
        raise EmbeddingError(f"the relevance judge needs the local embedding model, not {backend.describe()}")
    missing = [chunk for chunk in chunks if (chunk.pk, chunk.content_hash) not in judge.passages_cache]
    texts = [query] + [judge_passage(path=chunk.path, text=chunk.text) for chunk in missing]
    # One call: the question and the passages not yet seen share the model's batches.
    vectors = token_vectors(texts, max_tokens=judge.model.passage_tokens)
    weights = (
        judge.model.query_weights(token_ids([query], max_tokens=judge.model.passage_tokens)[0])
        if judge.model.piece_weights is not None
        else None
    )
    scores = {}
    with single_threaded_blas():
        question = judge.model.project(vectors[0])
        for chunk, passage in zip(missing, vectors[1:], strict=True):
            judge.passages_cache[(chunk.pk, chunk.content_hash)] = judge.model.project(passage).astype(np.float16)
        for chunk in chunks:
            key = (chunk.pk, chunk.content_hash)
            judge.passages_cache.move_to_end(key)
            passage = judge.passages_cache[key].astype(np.float32)
            scores[chunk.pk] = round(judge.model.score(question, passage, weights), 6)
    while len(judge.passages_cache) > PASSAGE_CACHE_SIZE:
        judge.passages_cache.popitem(last=False)
    return scores
