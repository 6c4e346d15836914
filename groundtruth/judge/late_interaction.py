"""The late-interaction relevance judge: the question's token vectors against the passage's.

Both texts go through the packaged MiniLM once each (ONNX Runtime, the export's `tokens` output:
no torch in the processes that judge). Every token of the question finds its most similar token
of the passage (cosine), and the judge's score is the mean of those maxima (ColBERT's MaxSim,
averaged so that a score means the same for a short and a long question). A question whose words
or synonyms all occur, in context, in the passage scores near 1; a passage about something else
matches only the filler words.

A learned square projection (`projection`, fitted on the corpus's own mined pairs by
`late_interaction_fit`, seconds on two cores) may map the token vectors first; without one (the
identity) the judge is MiniLM's own token space. The fit keeps the projection only when it scores
the held-out mined queries better than the identity does (`fitting.py`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

CONFIG_FILE = "judge.json"
PROJECTION_FILE = "projection.npy"
PIECE_WEIGHTS_FILE = "piece_idf.npy"
KIND = "late_interaction"


def _unit_rows(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)


@dataclass(frozen=True)
class LateInteractionJudge:
    passage_tokens: int  # a passage is read up to this many tokens
    projection: np.ndarray | None = None  # dimension x dimension; None: MiniLM's own token space
    # A weight per word piece of the vocabulary (the corpus's IDF, `piece_idf`): a question's
    # filler pieces ("how", "the", "?") find a partner in any passage, so they weigh little in
    # the mean. None: every piece weighs the same.
    piece_weights: np.ndarray | None = None

    def query_weights(self, piece_ids: np.ndarray) -> np.ndarray | None:
        """The weights of a question's pieces (None: unweighted)."""
        if self.piece_weights is None:
            return None
        return self.piece_weights[np.clip(piece_ids, 0, len(self.piece_weights) - 1)]

    def project(self, vectors: np.ndarray) -> np.ndarray:
        """Token vectors (unit rows) in the judge's space (unit rows again)."""
        if self.projection is None or not len(vectors):
            return vectors
        return _unit_rows(vectors @ self.projection)

    def score(self, query: np.ndarray, passage: np.ndarray, weights: np.ndarray | None = None) -> float:
        """MaxSim of projected token vectors: the mean, over the query's tokens (weighted by
        `weights`, one per query token, when given), of each one's best cosine with a passage
        token (0 for an empty side)."""
        if not len(query) or not len(passage):
            return 0.0
        best = (query @ passage.T).max(axis=1)
        if weights is None or not float(weights.sum()) > 0:
            return float(best.mean())
        return float((best * weights).sum() / weights.sum())

    def save(self, directory: str | Path, **described: object) -> None:
        target = Path(directory)
        target.mkdir(parents=True, exist_ok=True)
        if self.projection is not None:
            np.save(target / PROJECTION_FILE, self.projection.astype(np.float32))
        if self.piece_weights is not None:
            np.save(target / PIECE_WEIGHTS_FILE, self.piece_weights.astype(np.float32))
        config = {
            "kind": KIND,
            "passage_tokens": self.passage_tokens,
            "projection": self.projection is not None,
            "piece_weights": self.piece_weights is not None,
        }
        (target / CONFIG_FILE).write_text(json.dumps({**config, **described}, indent=2))

    @classmethod
    def load(cls, directory: str | Path) -> LateInteractionJudge:
        """Raises (OSError, ValueError, KeyError) when the artifact is missing or unreadable."""
        config = json.loads((Path(directory) / CONFIG_FILE).read_text())
        if config.get("kind") != KIND:
            raise ValueError(f"{directory} holds a judge of kind {config.get('kind')!r}, not {KIND!r}")
        projection = np.load(Path(directory) / PROJECTION_FILE) if config["projection"] else None
        if projection is not None and (projection.ndim != 2 or projection.shape[0] != projection.shape[1]):
            raise ValueError(f"{directory}: the projection is {projection.shape}, not square")
        # Judges saved before piece weights existed weigh every piece the same.
        weights = np.load(Path(directory) / PIECE_WEIGHTS_FILE) if config.get("piece_weights") else None
        if weights is not None and weights.ndim != 1:
            raise ValueError(f"{directory}: the piece weights are {weights.shape}, not a vector")
        return cls(passage_tokens=int(config["passage_tokens"]), projection=projection, piece_weights=weights)


def piece_idf(documents: Iterable[np.ndarray], *, vocabulary_size: int) -> np.ndarray:
    """Each word piece's inverse document frequency over `documents` (their piece ids), BM25's
    form log(1 + (N - df + 0.5) / (df + 0.5)): positive for every piece, highest for a piece no
    document holds, near 0 for one every document holds."""
    frequency = np.zeros(vocabulary_size, dtype=np.float64)
    count = 0
    for ids in documents:
        frequency[np.unique(ids)] += 1
        count += 1
    return np.log1p((count - frequency + 0.5) / (frequency + 0.5)).astype(np.float32)


@dataclass(frozen=True)
class TokenisedQuery:
    """A mined query's token vectors, its positive's, and its negatives' (unit rows, unprojected)."""

    repository: str
    query: np.ndarray
    positive: np.ndarray
    negatives: tuple[np.ndarray, ...]
    query_piece_ids: np.ndarray | None = None  # the query's word pieces, one per row of `query`


def late_interaction_fit(
    queries: Sequence[TokenisedQuery], *, seed: int, epochs: int = 30, temperature: float = 0.05
) -> np.ndarray:
    """A square projection (starting at the identity) that puts each mined query's own passage
    above its negatives: softmax cross-entropy over the MaxSim scores of each group, divided by
    `temperature`, full-batch gradient steps with a pull back towards the identity. numpy only,
    seeded (the order of nothing matters: every step sees every query)."""
    dimension = queries[0].query.shape[1]
    projection = np.eye(dimension, dtype=np.float64)
    rng = np.random.default_rng(seed)
    # Adam on the projection: a few dozen full-batch steps converge on a few hundred groups.
    moment, velocity = np.zeros_like(projection), np.zeros_like(projection)
    rate, beta1, beta2, decay = 2e-3, 0.9, 0.999, 1e-2
    order = rng.permutation(len(queries))
    for step in range(1, epochs + 1):
        gradient = np.zeros_like(projection)
        for index in order:
            gradient += _group_gradient(queries[index], projection, temperature)
        gradient = gradient / len(queries) + decay * (projection - np.eye(dimension))
        moment = beta1 * moment + (1 - beta1) * gradient
        velocity = beta2 * velocity + (1 - beta2) * gradient**2
        projection -= rate * (moment / (1 - beta1**step)) / (np.sqrt(velocity / (1 - beta2**step)) + 1e-8)
    return projection.astype(np.float32)


def _group_gradient(group: TokenisedQuery, projection: np.ndarray, temperature: float) -> np.ndarray:
    """d(loss)/d(projection) of one mined query's group (positive first). Each MaxSim is
    differentiated through its chosen passage tokens (the max is piecewise linear) and through the
    normalisation of every projected token."""
    query_raw = group.query @ projection
    query_norm = np.maximum(np.linalg.norm(query_raw, axis=1, keepdims=True), 1e-9)
    query = query_raw / query_norm
    passages = [group.positive, *group.negatives]
    scores, grads_query, grads_projection = [], [], []
    for passage_tokens in passages:
        passage_raw = passage_tokens @ projection
        passage_norm = np.maximum(np.linalg.norm(passage_raw, axis=1, keepdims=True), 1e-9)
        passage = passage_raw / passage_norm
        similarity = query @ passage.T
        best = similarity.argmax(axis=1)
        scores.append(similarity[np.arange(len(query)), best].mean())
        chosen = passage[best]  # the best passage token of each query token
        count = len(query)
        # d score / d query (unit) and / d chosen passage tokens (unit), each divided by count.
        d_query_unit = chosen / count
        d_chosen_unit = query / count
        d_query_raw = (d_query_unit - query * (d_query_unit * query).sum(1, keepdims=True)) / query_norm
        chosen_norm = passage_norm[best]
        d_chosen_raw = (d_chosen_unit - chosen * (d_chosen_unit * chosen).sum(1, keepdims=True)) / chosen_norm
        grads_query.append(d_query_raw)
        grads_projection.append(passage_tokens[best].T @ d_chosen_raw)
    logits = np.array(scores) / temperature
    weights = np.exp(logits - logits.max())
    weights /= weights.sum()
    coefficients = weights.copy()
    coefficients[0] -= 1.0  # d(-log softmax_0) / d logit_i
    coefficients /= temperature
    gradient = np.zeros_like(projection)
    for coefficient, d_query_raw, d_projection in zip(coefficients, grads_query, grads_projection, strict=True):
        gradient += coefficient * (group.query.T @ d_query_raw + d_projection)
    return gradient
