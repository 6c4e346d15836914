"""Re-ranking the best fused candidates by their relevance (groundtruth/search/reranking.py) and
fitting its weights (rerank_fit.py)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from groundtruth.search.fusion import fusion_parameters_configured
from groundtruth.search.hybrid_search import chunk_search
from groundtruth.search.lexical_search import bm25_share, idf_share
from groundtruth.search.rerank_fit import RankedCandidates, rerank_weights_fit
from groundtruth.search.reranking import (
    RerankEvidence,
    relevance,
    rerank_evidence,
    title_answers_question,
    title_is_question,
    titles_repeated,
)
from tests.groundtruth.factories import RepositoryFactory
from tests.groundtruth.search_fixtures import Section, chunks_index


@pytest.mark.parametrize(
    ("heading", "asks"),
    [
        (["Frequently Asked Questions", "Does Scrapy work with HTTP proxies?"], True),
        (["How do I ...?", "How do I declare a global variable?"], True),
        (["FAQ", "How to split an item into multiple items in an item pipeline"], True),
        (["Programming", "Can I debug a jitted function?  "], True),
        (["Downloader middleware", "HttpProxyMiddleware"], False),
        (["Questions?", "Options"], False),  # the section's own title decides, not its parents'
        (["Howto guides"], False),  # a question word must be a word of its own
        ([], False),
    ],
)
def test_a_title_asks_a_question_when_it_ends_with_a_question_mark_or_opens_with_a_question_word(heading, asks):
    assert title_is_question(heading) is asks


@pytest.mark.parametrize(
    ("heading", "answers"),
    [
        (["Frequently Asked Questions", "Does Scrapy work with HTTP proxies?"], True),
        (["Troubleshooting", "Dev Server", "Requests are stalled forever"], True),
        (["Powerlevel10k", "Troubleshooting", "Incorrect git status in prompt"], True),
        (["FAQ (Frequently Asked Questions)", "Using rclone from multiple locations at the same time"], True),
        (["Jest", "Common problems", "coveragePathIgnorePatterns seems to not have any effect."], True),
        (["Known issues", "Fonts and fallback"], True),
        (["Troubleshooting and tips", "The compiled code is too slow"], True),
        (["Font Related Configuration", "Fallback"], False),
        (["Troubleshooting"], False),  # the page's own introduction is no entry of it
        (["FAQs about deployment"], False),
        (["troubleshootingMode", "Default value"], False),  # a word of its own, not part of a name
        (["Questions?", "Options"], False),
        ([], False),
    ],
)
def test_a_title_answers_a_question_when_it_asks_one_or_is_an_entry_of_a_faq_or_troubleshooting_part(heading, answers):
    assert title_answers_question(heading) is answers


def test_a_symptom_titled_troubleshooting_entry_has_question_title_evidence():
    entry = rerank_evidence(
        dense_score=0.6,
        heading_similarity=0.7,
        heading=["Troubleshooting", "Requests are stalled forever"],
        lexical_share=0.0,
        coverage=0.0,
    )
    reference = rerank_evidence(
        dense_score=0.6,
        heading_similarity=0.7,
        heading=["Server options", "server.warmup"],
        lexical_share=0.0,
        coverage=0.0,
    )

    assert entry == RerankEvidence(dense=0.6, question_title=0.7, lexical=0.0, coverage=0.0)
    assert reference == RerankEvidence(dense=0.6, question_title=0.0, lexical=0.0, coverage=0.0)


def test_the_shares_of_the_question_a_passage_holds(settings):
    settings.SEARCH_BM25_K1 = 1.2
    idf = {"proxi": 2.0, "server": 1.0, "crawl": 1.0}  # mass 4.0

    assert idf_share({"proxi", "crawl"}, idf=idf) == 0.75
    assert idf_share(["server", "server", "absent"], idf=idf) == 0.25
    assert idf_share({"proxi"}, idf={}) == 0.0
    assert bm25_share(2.2, idf=idf) == 2.2 / (4.0 * 2.2)
    assert bm25_share(100.0, idf=idf) == 1.0
    assert bm25_share(1.0, idf={}) == 0.0


def test_evidence_of_a_candidate():
    faq = rerank_evidence(
        dense_score=0.6,
        heading_similarity=0.8,
        heading=["FAQ", "Does Acme work with HTTP proxies?"],
        lexical_share=0.25,
        coverage=0.75,
    )
    reference = rerank_evidence(
        dense_score=0.7,
        heading_similarity=0.9,
        heading=["Middleware", "HttpProxyMiddleware"],
        lexical_share=0.0,
        coverage=0.25,
    )

    assert faq == RerankEvidence(dense=0.6, question_title=0.8, lexical=0.25, coverage=0.75)
    assert reference == RerankEvidence(dense=0.7, question_title=0.0, lexical=0.0, coverage=0.25)
    weights = {"dense": 1.0, "question_title": 0.3, "lexical": 0.1, "coverage": 0.2}
    assert math.isclose(
        relevance(faq, weights=weights, trust_weight=0.96), 0.96 * (0.6 + 0.3 * 0.8 + 0.1 * 0.25 + 0.2 * 0.75)
    )
    assert math.isclose(relevance(reference, weights=weights, trust_weight=1.0), 0.7 + 0.2 * 0.25)


def test_a_passage_without_a_title_has_no_question_title_evidence():
    evidence = rerank_evidence(dense_score=0.5, heading_similarity=None, heading=[], lexical_share=0.0, coverage=0.0)

    assert evidence == RerankEvidence(dense=0.5, question_title=0.0, lexical=0.0, coverage=0.0)


ACME = [
    Section(
        path="docs/topics/downloader-middleware.rst",
        heading=("Downloader middleware", "HttpProxyMiddleware"),
        text=(
            "This middleware sets the HTTP proxy to use for requests, by setting the proxy meta value\n"
            "for Request objects. It obeys the environment variables http_proxy and https_proxy."
        ),
        start_line=40,
    ),
    Section(
        path="docs/faq.rst",
        heading=("Frequently Asked Questions", "Does Acme work with HTTP proxies?"),
        text="Yes. Support for HTTP proxies is provided through the HTTP proxy downloader middleware.",
        start_line=12,
    ),
    Section(
        path="docs/topics/settings.rst",
        heading=("Settings", "CONCURRENT_REQUESTS"),
        text="The maximum number of concurrent requests the downloader performs.",
        start_line=80,
    ),
]


@pytest.mark.django_db
def test_an_faq_entry_that_asks_the_question_is_ranked_first_by_its_title():
    repository = RepositoryFactory(name="acme/crawler", trust="reviewed")
    reference, faq, settings_chunk = chunks_index(repository, ACME)
    question = "how can I route my crawl through a proxy server?"
    configured = fusion_parameters_configured()

    outcome = chunk_search(query=question, repositories=[repository], limit=3)
    without_titles = chunk_search(
        query=question,
        repositories=[repository],
        limit=3,
        fusion=replace(configured, rerank_weights={**configured.rerank_weights, "question_title": 0.0}),
    )

    assert [hit.chunk.pk for hit in outcome.hits] == [faq.pk, reference.pk, settings_chunk.pk]
    assert [hit.chunk.pk for hit in without_titles.hits] == [reference.pk, faq.pk, settings_chunk.pk]
    by_chunk = {hit.chunk.pk: hit for hit in outcome.hits}
    assert outcome.rerank_evidence[faq.pk].question_title == by_chunk[faq.pk].heading_similarity
    assert outcome.rerank_evidence[reference.pk].question_title == 0.0
    for hit in outcome.hits:
        assert hit.relevance == relevance(
            outcome.rerank_evidence[hit.chunk.pk], weights=configured.rerank_weights, trust_weight=0.98
        )
        assert outcome.rerank_evidence[hit.chunk.pk].dense == hit.dense_score


@pytest.mark.parametrize(
    ("query", "heading", "repeats"),
    [
        ("How do I assign to a global variable?", ["FAQ", "How do I assign to a global variable?"], True),
        ("  how do I ASSIGN to a global-variable ", ["FAQ", "How do I assign to a global variable?"], True),
        ("How do I assign to a global variable?", ["FAQ", "How do I declare a global variable?"], False),
        ("How do I assign a global variable?", ["FAQ", "How do I assign to a global variable?"], False),
        ("FAQ", ["FAQ", "How do I assign to a global variable?"], False),  # the section's own title only
        ("?", ["?"], False),  # no words, no name
        ("Installation", [], False),
    ],
)
def test_a_query_repeats_a_title_word_for_word_case_punctuation_and_spacing_aside(query, heading, repeats):
    assert titles_repeated(query, {7: heading, 8: ["FAQ", "Other"]}) == ({7} if repeats else set())


# Cython's FAQ (docs/src/userguide/faq.rst), as its chunks read.
CYTHON_FAQ = [
    Section(
        path="docs/src/userguide/faq.rst",
        heading=("FAQ", "How do I ...?", "How do I declare a global variable?"),
        text=(
            "How do I declare a global variable?\n^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n\n"
            "**Answer**:\n\n::\n\n    global variable\n\n----------"
        ),
        start_line=286,
    ),
    Section(
        path="docs/src/userguide/faq.rst",
        heading=("FAQ", "How do I ...?", "How do I assign to a global variable?"),
        text=(
            "How do I assign to a global variable?\n^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n\n"
            "**Answer**: You need to declare the variable to be global (see above) before\n"
            "trying to assign to it. Often this occurs when one has code like\n\n::\n\n    cdef int *data\n\n"
            "    def foo(n):\n        data = malloc(n * sizeof(int))\n\n"
            "This will result in an error \"Cannot convert ``'int *'`` to Python object.\"\n"
            "This is because, as in Python, assignment declares a local variable. Instead,\n"
            "you must write\n\n::\n\n    cdef int *data\n\n    def foo(n):\n        global data\n"
            "        data = malloc(n * sizeof(int))\n\n"
            "See http://docs.python.org/tutorial/classes.html#python-scopes-and-namespaces\nfor more details.\n\n"
            "----------"
        ),
        start_line=297,
    ),
    Section(
        path="docs/src/userguide/language_basics.rst",
        heading=("Language basics", "Assignment"),
        text=(
            "Assignment\n==========\n\nAssigning a Python object to a C variable converts it; an assignment\n"
            "to a typed variable checks the type. To assign a C value to a Python name, Cython converts it\n"
            "back."
        ),
        start_line=120,
    ),
]


@pytest.mark.django_db
def test_a_query_that_repeats_a_title_finds_that_section_first_whatever_its_relevance():
    repository = RepositoryFactory(name="cython/cython")
    declare, assign, _ = chunks_index(repository, CYTHON_FAQ)

    by_title = chunk_search(query="How do I assign to a global variable?", repositories=[repository], limit=2)
    paraphrased = chunk_search(query="how do I give a global a new value?", repositories=[repository], limit=2)

    assert [hit.chunk.pk for hit in by_title.hits] == [assign.pk, declare.pk]
    # The neighbouring title over a shorter passage is the more relevant by the weights.
    assert by_title.hits[0].relevance < by_title.hits[1].relevance
    # A question that does not repeat a title is ordered by relevance alone.
    relevances = [hit.relevance for hit in paraphrased.hits]
    assert relevances == sorted(relevances, reverse=True)


@pytest.mark.django_db
def test_a_rerank_depth_of_zero_keeps_the_fused_order():
    repository = RepositoryFactory(name="acme/crawler")
    chunks_index(repository, ACME)
    configured = fusion_parameters_configured()

    fused = chunk_search(
        query="how can I route my crawl through a proxy server?",
        repositories=[repository],
        limit=3,
        fusion=replace(configured, rerank_depth=0),
    )

    assert fused.rerank_evidence == {}
    assert [hit.relevance for hit in fused.hits] == [None, None, None]
    scores = [hit.score for hit in fused.hits]
    assert scores == sorted(scores, reverse=True)


def _candidates(rows: list[tuple[float, float, float, float]], answer: int) -> RankedCandidates:
    return RankedCandidates(
        evidence=[dict(zip(("dense", "question_title", "lexical", "coverage"), row, strict=True)) for row in rows],
        answers=[index == answer for index in range(len(rows))],
    )


def test_the_fit_weighs_the_evidence_that_tells_the_answer_apart():
    # The answer has the best question title each time, the best dense score only half the time;
    # the lexical share and the coverage say nothing (the same for every candidate).
    samples = [
        _candidates([(0.70, 0.0, 0.3, 0.5), (0.65, 0.8, 0.3, 0.5), (0.50, 0.0, 0.3, 0.5)], answer=1),
        _candidates([(0.60, 0.0, 0.3, 0.5), (0.66, 0.7, 0.3, 0.5), (0.40, 0.0, 0.3, 0.5)], answer=1),
        _candidates([(0.72, 0.2, 0.3, 0.5), (0.64, 0.9, 0.3, 0.5), (0.55, 0.0, 0.3, 0.5)], answer=1),
        _candidates([(0.58, 0.0, 0.3, 0.5), (0.69, 0.6, 0.3, 0.5), (0.52, 0.1, 0.3, 0.5)], answer=1),
    ]

    weights = rerank_weights_fit(samples)

    assert weights["dense"] == 1.0
    assert weights["question_title"] > 0.2
    assert weights["lexical"] == 0.0 and weights["coverage"] == 0.0
    for sample in samples:
        scores = [sum(weights[name] * row[name] for name in weights) for row in sample.evidence]
        assert scores.index(max(scores)) == sample.answers.index(True)


def test_the_fit_attends_to_the_candidates_that_come_close_to_the_answer():
    # The answer is second on the dense score, 0.1 behind one close competitor that has no
    # question title; eight candidates far behind have a better question title than the answer.
    # Against all nine alike (the pairwise fit used until 2026-11-27: question_title 0.1546), the
    # question title mostly says "not the answer" and the competitor stays first; against the
    # one that matters, it is what puts the answer first.
    far = [(0.30 + step / 1000, 0.9, 0.0, 0.0) for step in range(8)]
    samples = [
        _candidates([(0.80 + shift, 0.0, 0.0, 0.0), (0.70 + shift, 0.5, 0.0, 0.0), *far], answer=1)
        for shift in (0.0, 0.01, 0.02, 0.03)
    ]

    weights = rerank_weights_fit(samples)

    assert weights == {"dense": 1.0, "question_title": 0.4876, "lexical": 0.0, "coverage": 0.0}
    for sample in samples:
        scores = [sum(weights[name] * row[name] for name in weights) for row in sample.evidence]
        assert scores.index(max(scores)) == 1


def test_each_question_counts_by_its_weight():
    # One question's answer is told apart by its question title, the other's by its dense score
    # against a candidate with a question title. Any question_title weight between 0.083 and 0.2
    # puts both answers first; the heavier question gets the wider margin.
    by_title = _candidates([(0.70, 0.0, 0.0, 0.0), (0.65, 0.6, 0.0, 0.0)], answer=1)
    by_dense = _candidates([(0.60, 0.5, 0.0, 0.0), (0.70, 0.0, 0.0, 0.0)], answer=1)

    def weighted(sample: RankedCandidates, weight: float) -> RankedCandidates:
        return RankedCandidates(evidence=sample.evidence, answers=sample.answers, weight=weight)

    title_heavy = rerank_weights_fit([weighted(by_title, 3.0), weighted(by_dense, 1.0)])
    dense_heavy = rerank_weights_fit([weighted(by_title, 1.0), weighted(by_dense, 3.0)])

    assert title_heavy == {"dense": 1.0, "question_title": 0.1445, "lexical": 0.0, "coverage": 0.0}
    assert dense_heavy == {"dense": 1.0, "question_title": 0.1241, "lexical": 0.0, "coverage": 0.0}
    # Equal weights are the same fit as no weights, at any scale.
    assert rerank_weights_fit([weighted(by_title, 0.5), weighted(by_dense, 0.5)]) == rerank_weights_fit(
        [by_title, by_dense]
    )


def test_the_fit_needs_questions_whose_answer_is_among_other_candidates():
    with pytest.raises(ValueError, match="fitting needs questions with an answering candidate among others"):
        rerank_weights_fit([_candidates([(0.7, 0.0, 0.0, 0.0), (0.6, 0.0, 0.0, 0.0)], answer=5)])


def test_the_fit_weighs_the_features_it_is_given():
    # A benchmark weighing candidate evidence adds a feature. In three questions it alone puts the
    # answer first (the dense score ranks it second); in three the bodies tie and the dense score
    # decides. The coverage says nothing.
    def sample(first: tuple[float, float], second: tuple[float, float]) -> RankedCandidates:
        return RankedCandidates(
            evidence=[{"dense": dense, "body": body, "coverage": 0.5} for dense, body in (first, second)],
            answers=[False, True],
        )

    samples = [sample((0.70 + shift, 0.40), (0.65 + shift, 0.60)) for shift in (0.0, 0.01, 0.02)]
    samples += [sample((0.60 + shift, 0.50), (0.70 + shift, 0.50)) for shift in (0.0, 0.01, 0.02)]

    weights = rerank_weights_fit(samples, features=("dense", "body", "coverage"))

    assert list(weights) == ["dense", "body", "coverage"]
    assert weights["dense"] == 1.0 and weights["coverage"] == 0.0
    assert weights["body"] > 0.25  # 0.05 of dense behind, 0.2 of body ahead: above 0.25 to lead
    for each in samples:
        scores = [sum(weights[name] * row[name] for name in weights) for row in each.evidence]
        assert scores.index(max(scores)) == 1
