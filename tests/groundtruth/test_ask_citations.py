"""Which passages /ask cites: the best one, then only those about as relevant."""

from __future__ import annotations

from groundtruth.models import Chunk
from groundtruth.search.ask import citations_select
from groundtruth.search.hybrid_search import SearchHit, SearchOutcome
from groundtruth.search.lexical_search import LexicalQuery, QueryTerm


def _hit(chunk_id: int, dense: float | None, matched: tuple[str, ...] = ()) -> SearchHit:
    return SearchHit(
        chunk=Chunk(pk=chunk_id),
        score=1.0 / chunk_id,
        lexical_rank=None,
        dense_rank=None,
        similarity=dense,
        heading_similarity=None,
        dense_score=dense,
        matched_lexemes=matched,
    )


def _outcome(hits: list[SearchHit], terms: list[QueryTerm] | None = None) -> SearchOutcome:
    return SearchOutcome(
        query="q",
        repositories=[],
        hits=hits,
        lexical_query=LexicalQuery(terms=terms or [], document_count=10),
    )


def test_passages_much_weaker_than_the_best_are_not_cited():
    outcome = _outcome([_hit(1, 0.80), _hit(2, 0.62), _hit(3, 0.78), _hit(4, 0.75), _hit(5, 0.749)])

    assert [hit.chunk.pk for hit in citations_select(outcome, count=5, margin=0.05)] == [1, 3, 4]
    assert [hit.chunk.pk for hit in citations_select(outcome, count=2, margin=0.05)] == [1]
    assert [hit.chunk.pk for hit in citations_select(outcome, count=5, margin=0.5)] == [1, 2, 3, 4, 5]


def test_the_best_fused_passage_is_cited_and_lexical_only_ones_after_it_are_not():
    # Passages found by the lexical leg alone (no dense score) at ranks 1 and 4.
    outcome = _outcome([_hit(1, None), _hit(2, 0.70), _hit(3, 0.69), _hit(4, None), _hit(5, 0.60)])

    assert [hit.chunk.pk for hit in citations_select(outcome, count=5, margin=0.05)] == [1, 2, 3]


def test_without_a_dense_leg_relevance_is_the_share_of_the_question_words():
    terms = [QueryTerm("redi", 1, 2.0), QueryTerm("broker", 1, 1.0), QueryTerm("url", 5, 1.0)]
    outcome = _outcome(
        [_hit(1, None, ("broker", "redi", "url")), _hit(2, None, ("redi", "url")), _hit(3, None, ("url",))], terms
    )

    # Shares of the IDF mass (4.0): 1.0, 0.75 and 0.25.
    assert [hit.chunk.pk for hit in citations_select(outcome, count=5, margin=0.3)] == [1, 2]
    assert [hit.chunk.pk for hit in citations_select(outcome, count=5, margin=0.2)] == [1]


def test_no_passage_no_citation():
    assert citations_select(_outcome([]), count=5, margin=0.05) == []
