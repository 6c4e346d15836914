"""Do the retrieved passages support an answer? The "sources missing" decision of /ask.

Fused RRF scores are ranks, not evidence: the best chunk of an unrelated corpus still comes
first. Three signals that do measure evidence are combined:

- similarity: the cosine similarity of the nearest chunk to the question (dense leg);
- coverage: the largest share of the question's IDF mass that one of the cited chunks contains.
  IDF weighs the words that carry the question (`PgBouncer`, `SIGHUP`) above filler (`how`,
  `default`);
- known: the share of the question's IDF mass carried by lexemes that occur anywhere in the
  corpus. A question about something the documentation never mentions (a product, a protocol,
  a feature it does not have) names it with words no chunk contains.

    support = w_similarity * similarity + w_coverage * coverage + w_known * known

with the weights of ASK_SUPPORT_WEIGHTS (they add up to 1); the sources are missing when
support < ASK_SUPPORT_THRESHOLD. Weights and threshold are calibrated on the evaluation set:
`python benchmarks/retrieval.py --calibrate` tries every weighting on a 0.1 grid and keeps the
one whose best threshold is right on the largest share of the weaker kind of question
(answerable or not), then on the most questions; it prints both. With EMBEDDING_BACKEND=none the
similarity is unknown and the other two weights are scaled up to add up to 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from groundtruth.search.hybrid_search import SearchOutcome
from groundtruth.search.lexical_search import bm25_idf


@dataclass(frozen=True)
class SupportAssessment:
    similarity: float | None
    coverage: float
    known: float
    score: float
    supported: bool


def support_score(*, similarity: float | None, coverage: float, known: float, weights: dict[str, float]) -> float:
    parts = {"coverage": coverage, "known": known}
    if similarity is not None:
        parts["similarity"] = similarity
    total = sum(weights.get(name, 0.0) for name in parts)
    if total <= 0:
        return 0.0
    return sum(weights.get(name, 0.0) * value for name, value in parts.items()) / total


def _support_idf(outcome: SearchOutcome) -> dict[str, float]:
    """IDF of each question lexeme, a lexeme no chunk has counted like one that a single chunk
    has: on a small corpus the IDF of unseen words (often plain English such as "happens")
    would otherwise outweigh everything the corpus does contain."""
    query = outcome.lexical_query
    ceiling = bm25_idf(document_frequency=1, document_count=max(query.document_count, 1))
    return {term.lexeme: min(term.idf, ceiling) for term in query.terms}


def lexical_coverage(outcome: SearchOutcome, *, top: int) -> float:
    """The best share of the question's IDF mass found in one of the `top` fused results."""
    idf = _support_idf(outcome)
    total = sum(idf.values())
    if total <= 0:
        return 0.0
    best = 0.0
    for hit in outcome.hits[:top]:
        best = max(best, sum(idf.get(lexeme, 0.0) for lexeme in hit.matched_lexemes) / total)
    return best


def known_share(outcome: SearchOutcome) -> float:
    """The share of the question's IDF mass carried by lexemes that some chunk contains."""
    idf = _support_idf(outcome)
    total = sum(idf.values())
    if total <= 0:
        return 0.0
    return sum(idf[term.lexeme] for term in outcome.lexical_query.terms if term.document_frequency > 0) / total


def support_assess(
    outcome: SearchOutcome,
    *,
    top: int | None = None,
    weights: dict[str, float] | None = None,
    threshold: float | None = None,
) -> SupportAssessment:
    """Assesses `outcome` with the configured (or the given, for calibration) weights and threshold."""
    top = top or settings.ASK_CITATION_COUNT
    weights = settings.ASK_SUPPORT_WEIGHTS if weights is None else weights
    threshold = settings.ASK_SUPPORT_THRESHOLD if threshold is None else threshold
    similarity = max((hit.similarity for hit in outcome.dense_hits), default=None) if outcome.embedding else None
    coverage = lexical_coverage(outcome, top=top)
    known = known_share(outcome)
    score = support_score(similarity=similarity, coverage=coverage, known=known, weights=weights)
    return SupportAssessment(
        similarity=similarity,
        coverage=coverage,
        known=known,
        score=score,
        supported=bool(outcome.hits) and score >= threshold,
    )
