"""The legs of the hybrid search: BM25 scores, identifiers, OR semantics, filtered HNSW scans,
fusion with trust tiers."""

from __future__ import annotations

import math

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from groundtruth.models import Chunk
from groundtruth.search.dense_search import (
    DenseHit,
    dense_candidates,
    dense_search_sql,
    dense_session_statements,
    vector_literal,
)
from groundtruth.search.fusion import dense_ranking, dense_score, reciprocal_rank_fusion
from groundtruth.search.hybrid_search import chunk_search
from groundtruth.search.lexical_index import query_lexemes
from groundtruth.search.lexical_search import candidate_lexemes, lexical_candidates, lexical_query_build
from groundtruth.search.query_embedding import query_embed, query_embedding_cache
from groundtruth.search.snippets import snippets_narrow
from tests.groundtruth.factories import RepositoryFactory
from tests.groundtruth.search_fixtures import COMMUNITY, HANDBOOK, Section, chunks_index

pytestmark = pytest.mark.django_db


def _bm25(*, tf: int, df: int, length: int, n: int, average: float, k1: float = 1.2, b: float = 0.75) -> float:
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    return idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / average))


def test_lexical_leg_scores_are_bm25_with_idf_saturation_and_length_normalisation(settings):
    settings.SEARCH_BM25_K1, settings.SEARCH_BM25_B = 1.2, 0.75
    repository = RepositoryFactory(name="acme/docs")  # every chunk also holds the label "docs"
    short, long_, other = chunks_index(
        repository,
        [
            Section(path="a.md", heading=(), text="alpha alpha beta", start_line=1),
            Section(path="b.md", heading=(), text="alpha gamma delta zeta epsilon kappa", start_line=1),
            Section(path="c.md", heading=(), text="beta gamma", start_line=1),
        ],
    )
    lengths = dict(Chunk.objects.values_list("pk", "lexeme_count"))
    assert [lengths[short.pk], lengths[long_.pk], lengths[other.pk]] == [4, 7, 3]
    average = 14 / 3

    hits = lexical_candidates(query=lexical_query_build(text="alpha beta"), repository_ids=[repository.pk], depth=10)

    expected = {
        short.pk: _bm25(tf=2, df=2, length=4, n=3, average=average) + _bm25(tf=1, df=2, length=4, n=3, average=average),
        other.pk: _bm25(tf=1, df=2, length=3, n=3, average=average),
        long_.pk: _bm25(tf=1, df=2, length=7, n=3, average=average),
    }
    assert [hit.chunk_id for hit in hits] == [short.pk, other.pk, long_.pk]
    assert [round(hit.score, 9) for hit in hits] == [round(expected[hit.chunk_id], 9) for hit in hits]
    assert [hit.matched_lexemes for hit in hits] == [("alpha", "beta"), ("beta",), ("alpha",)]


def test_a_question_matches_chunks_that_lack_some_of_its_words(settings):
    repository = RepositoryFactory()
    chunks_index(repository, HANDBOOK)

    hits = lexical_candidates(
        query=lexical_query_build(text="How long is the wait between webhook retries, and why?"),
        repository_ids=[repository.pk],
        depth=3,
    )

    assert Chunk.objects.get(pk=hits[0].chunk_id).path == "docs/retries.md"


@pytest.mark.parametrize(
    ("query", "path"),
    [("CELERY_BROKER_URL", "docs/celery.md"), ("what does select_for_update do here", "docs/locking.md")],
)
def test_exact_identifiers_find_the_chunk_that_contains_them(query, path):
    repository = RepositoryFactory()
    chunks_index(repository, HANDBOOK)

    outcome = chunk_search(query=query, repositories=[repository], limit=5)

    assert outcome.hits[0].chunk.path == path
    assert outcome.hits[0].lexical_rank == 1


def test_identifiers_are_indexed_whole_and_split():
    assert query_lexemes("Is CELERY_BROKER_URL read by django.db.models or maxRetryCount?") == [
        "celeri",
        "broker",
        "url",
        "read",
        "django.db.models",
        "maxretrycount",
        "django",
        "db",
        "model",
        "max",
        "retri",
        "count",
        "celery_broker_url",
    ]
    repository = RepositoryFactory(name="acme/docs")
    (chunk,) = chunks_index(
        repository, [Section(path="x.md", heading=(), text="CELERY_BROKER_URL and CELERY_BROKER_URL", start_line=1)]
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT search_vector::text FROM groundtruth_chunk WHERE id = %s", [chunk.pk])
        # The label comes first; the stop word `and` takes position 5; the whole identifier keeps
        # its frequency of 2.
        assert cursor.fetchone()[0] == "'broker':3,7 'celeri':2,6 'celery_broker_url':9,10 'doc':1 'url':4,8"
    assert Chunk.objects.get(pk=chunk.pk).lexeme_count == 9


def test_candidate_lexemes_take_the_rarest_first_within_the_budget():
    repository = RepositoryFactory()
    chunks_index(
        repository,
        [
            Section(path=f"{n}.md", heading=(), text=f"common words here{' rare' if n == 0 else ''}", start_line=1)
            for n in range(4)
        ],
    )
    query = lexical_query_build(text="rare common")

    assert candidate_lexemes(query, max_candidates=2) == ["rare"]
    assert candidate_lexemes(query, max_candidates=5) == ["rare", "common"]


def test_dense_leg_filtered_to_a_small_repository_is_not_starved(settings):
    settings.SEARCH_HNSW_EF_SEARCH = 1
    big = RepositoryFactory(name="acme/big")
    small = RepositoryFactory(name="acme/small")
    chunks_index(
        big,
        [
            Section(path=f"docs/{n}.md", heading=("Broker",), text=f"Redis broker settings, part {n}.", start_line=1)
            for n in range(40)
        ],
    )
    small_chunks = chunks_index(
        small,
        [
            Section(path="docs/a.md", heading=("Broker",), text="Redis broker URL for workers.", start_line=1),
            Section(path="docs/b.md", heading=("TLS",), text="Certificates of receivers.", start_line=1),
        ],
    )
    embedding = query_embed(text="Which Redis broker do workers use?")

    with transaction.atomic():
        with connection.cursor() as cursor:
            # Make the planner take the HNSW index even on this small table.
            cursor.execute("SELECT set_config('enable_seqscan', 'off', true)")
        hits = dense_candidates(
            embedding=embedding.vector, model_name=embedding.model_name, repository_ids=[small.pk], depth=2
        )

    assert sorted(hit.chunk_id for hit in hits) == sorted(chunk.pk for chunk in small_chunks)
    assert hits[0].chunk_id == small_chunks[0].pk


def test_the_dense_leg_takes_its_two_hnsw_indexes_even_on_a_small_table():
    """The planner would read every chunk of a small or mid-sized index and sort by distance: by a
    sequential scan (61 ms against 9 ms by the HNSW indexes at 3,000 chunks: docs/inference.md),
    or, with that disabled, by the repository_id btree or a bitmap scan, depending on the table's
    statistics (43 ms against 3 ms). enable_seqscan and enable_sort off leave the HNSW scans the
    only plan without a disabled node."""
    repository = RepositoryFactory(name="acme/handbook")
    chunks_index(repository, HANDBOOK)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE groundtruth_chunk")  # statistics that made the btree path win
    embedding = query_embed(text="Which Redis broker do workers use?")

    with transaction.atomic(), connection.cursor() as cursor:
        for statement in dense_session_statements():
            cursor.execute(statement)
        cursor.execute(
            "EXPLAIN (COSTS OFF) " + dense_search_sql(dimension=len(embedding.vector)),
            {
                "embedding": vector_literal(embedding.vector),
                "repository_ids": [repository.pk],
                "model": embedding.model_name,
                "depth": 5,
            },
        )
        plan = [row[0].strip() for row in cursor.fetchall()]
        cursor.execute("SELECT current_setting('enable_seqscan'), current_setting('enable_sort')")
        settings_in_force = cursor.fetchone()

    assert settings_in_force == ("off", "off")
    scans = [line.removeprefix("->  ").split(" on groundtruth_chunk ")[0] for line in plan if "Scan" in line]
    # The two CTEs by their HNSW indexes; the outer query fetches their ids by primary key (an
    # index or a bitmap scan, as the statistics say).
    assert [scan.split("_384_")[0] for scan in scans[:2]] == [
        "Index Scan using chunk_embedding_hnsw",
        "Index Scan using chunk_heading_hnsw",
    ], plan
    assert sorted(scans[2:]) in (
        ["CTE Scan on heading", "CTE Scan on passage", "Index Scan using groundtruth_chunk_pkey"],
        [
            "Bitmap Heap Scan",
            "Bitmap Index Scan on groundtruth_chunk_pkey",
            "CTE Scan on heading",
            "CTE Scan on passage",
        ],
    ), plan


def test_the_dense_legs_planner_settings_hold_for_its_own_query_only():
    """Under enable_seqscan and enable_sort off the lexical leg's BM25 query ran 86 ms p50 against
    14 ms (100,000 chunks): the dense leg sets them in a savepoint it rolls back, so the search's
    other queries, before it and after it, plan as PostgreSQL would. What the settings were
    while the dense query ran is read back by the query itself."""
    repository = RepositoryFactory(name="acme/handbook")
    chunks_index(repository, HANDBOOK)
    embedding = query_embed(text="Which Redis broker do workers use?")

    def in_force() -> tuple[str, str, str]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT current_setting('enable_seqscan'), current_setting('enable_sort'), "
                "current_setting('hnsw.iterative_scan')"
            )
            return cursor.fetchone()

    with transaction.atomic():
        before = in_force()
        with CaptureQueriesContext(connection) as queries:
            hits = dense_candidates(
                embedding=embedding.vector, model_name=embedding.model_name, repository_ids=[repository.pk], depth=5
            )
        after = in_force()

    assert before == after == ("on", "on", "off")
    assert len(hits) == 5
    assert [query["sql"].split()[0] for query in queries.captured_queries] == [
        "SAVEPOINT",
        "SELECT",
        "WITH",
        "ROLLBACK",
    ]
    assert "set_config('enable_seqscan', 'off', true)" in queries.captured_queries[1]["sql"]

    # The whole search leaves them as it found them too, inside a caller's transaction.
    with transaction.atomic():
        outcome = chunk_search(query="Which Redis broker do workers use?", repositories=[repository], limit=3)
        assert in_force() == ("on", "on", "off")
    assert len(outcome.hits) == 3


def test_a_strongly_matching_community_passage_outranks_a_weakly_matching_canonical_one(settings):
    handbook = RepositoryFactory(name="acme/handbook", trust="canonical")
    community = RepositoryFactory(name="acme/community", trust="community")
    [canonical_retries] = chunks_index(handbook, [HANDBOOK[3]])  # retries: about deliveries, not the broker
    [community_broker] = chunks_index(community, COMMUNITY)

    outcome = chunk_search(
        query="Which Redis URL goes in CELERY_BROKER_URL for the workers?", repositories=[handbook, community], limit=2
    )

    assert [hit.chunk.pk for hit in outcome.hits] == [community_broker.pk, canonical_retries.pk]


def test_reciprocal_rank_fusion_weights_legs_and_tiers():
    fused = reciprocal_rank_fusion(
        lexical_ids=[1, 2],
        dense_ids=[2, 3],
        trust_by_chunk={1: "canonical", 2: "community", 3: "canonical"},
        lexical_weight=2.0,
        dense_weight=1.0,
        rank_constant=10,
        trust_weights={"canonical": 1.0, "community": 0.95},
    )

    assert [(hit.chunk_id, round(hit.score, 9), hit.lexical_rank, hit.dense_rank) for hit in fused] == [
        (2, round((2 / 12 + 1 / 11) * 0.95, 9), 2, 1),
        (1, round(2 / 11, 9), 1, None),
        (3, round(1 / 12, 9), None, 2),
    ]


def test_trust_ranks_canonical_first_in_a_near_tie_but_not_a_rank_behind_in_both_legs():
    tiers = {"canonical": 1.0, "community": 0.96}
    near_tie = reciprocal_rank_fusion(
        lexical_ids=[1, 2],
        dense_ids=[2, 1],
        trust_by_chunk={1: "community", 2: "canonical"},
        lexical_weight=1.0,
        dense_weight=1.0,
        rank_constant=10,
        trust_weights=tiers,
    )
    ahead = reciprocal_rank_fusion(
        lexical_ids=[1, 2],
        dense_ids=[1, 2],
        trust_by_chunk={1: "community", 2: "canonical"},
        lexical_weight=1.0,
        dense_weight=1.0,
        rank_constant=10,
        trust_weights=tiers,
    )

    assert [hit.chunk_id for hit in near_tie] == [2, 1]
    assert [hit.chunk_id for hit in ahead] == [1, 2]


def test_a_title_that_matches_better_lifts_its_passage_and_one_that_matches_worse_does_not_sink_it():
    hits = [
        DenseHit(chunk_id=1, similarity=0.70, heading_similarity=0.30),
        DenseHit(chunk_id=2, similarity=0.60, heading_similarity=0.90),
        DenseHit(chunk_id=3, similarity=0.65, heading_similarity=None),
    ]

    assert [hit.chunk_id for hit in dense_ranking(hits, heading_weight=0.0)] == [1, 3, 2]
    assert [hit.chunk_id for hit in dense_ranking(hits, heading_weight=0.5)] == [2, 1, 3]
    assert dense_score(hits[1], heading_weight=0.5) == 0.5 * 0.60 + 0.5 * 0.90
    assert dense_score(hits[0], heading_weight=0.5) == 0.70
    assert dense_score(hits[2], heading_weight=0.5) == 0.65


def test_the_repository_label_lets_a_question_name_its_project(settings):
    flask = RepositoryFactory(name="pallets/flask")
    django = RepositoryFactory(name="django/django")
    same = "Sessions are signed cookies; set SECRET_KEY before you use them."
    [flask_chunk] = chunks_index(
        flask, [Section(path="docs/sessions.rst", heading=("Sessions",), text=same, start_line=1)]
    )
    [django_chunk] = chunks_index(
        django, [Section(path="docs/sessions.rst", heading=("Sessions",), text=same, start_line=1)]
    )

    in_flask = chunk_search(query="How do sessions work in flask?", repositories=[flask, django], limit=2)
    in_django = chunk_search(query="How do sessions work in django?", repositories=[flask, django], limit=2)

    assert [hit.chunk.pk for hit in in_flask.hits] == [flask_chunk.pk, django_chunk.pk]
    assert [hit.chunk.pk for hit in in_django.hits] == [django_chunk.pk, flask_chunk.pk]
    assert in_flask.hits[0].lexical_rank == 1 and in_flask.hits[0].dense_rank == 1


def test_hits_carry_the_searched_repositories_without_joining_them_per_candidate(settings):
    flask = RepositoryFactory(name="pallets/flask")
    django = RepositoryFactory(name="django/django")
    text = "Sessions are signed cookies; set SECRET_KEY before you use them."
    chunks_index(flask, [Section(path="docs/sessions.rst", heading=("Sessions",), text=text, start_line=1)])
    chunks_index(django, [Section(path="docs/sessions.rst", heading=("Sessions",), text=text, start_line=1)])

    with CaptureQueriesContext(connection) as queries:
        outcome = chunk_search(query="How do sessions work?", repositories=[flask, django], limit=2)

    assert sorted(hit.chunk.repository.name for hit in outcome.hits) == ["django/django", "pallets/flask"]
    # The very objects searched, so reading them costs no query, and no query joins the table.
    assert all(hit.chunk.repository in (flask, django) for hit in outcome.hits)
    assert {id(hit.chunk.repository) for hit in outcome.hits} == {id(flask), id(django)}
    assert [query["sql"] for query in queries.captured_queries if '"groundtruth_repository"' in query["sql"]] == []


def test_candidates_are_read_as_ranking_needs_them_and_full_rows_only_for_the_results(settings):
    settings.JUDGE_ENABLED = False
    repository = RepositoryFactory(name="acme/handbook")
    sections = [
        Section(path=f"docs/s{n}.md", heading=("Sessions", f"Part {n}"), text=f"Sessions part {n} cookie", start_line=1)
        for n in range(5)
    ]
    indexed = chunks_index(repository, sections)

    with CaptureQueriesContext(connection) as queries:
        outcome = chunk_search(query="sessions cookie", repositories=[repository], limit=2)

    assert sorted(outcome.candidates) == sorted(chunk.pk for chunk in indexed)
    assert {candidate.heading[-1] for candidate in outcome.candidates.values()} == {f"Part {n}" for n in range(5)}
    assert {candidate.trust for candidate in outcome.candidates.values()} == {indexed[0].trust}
    assert {candidate.repository_id for candidate in outcome.candidates.values()} == {repository.pk}
    assert len(outcome.hits) == 2
    assert sorted(outcome.chunks) == sorted(hit.chunk.pk for hit in outcome.hits)
    assert [hit.chunk.text for hit in outcome.hits] == [Chunk.objects.get(pk=hit.chunk.pk).text for hit in outcome.hits]
    sqls = [query["sql"] for query in queries.captured_queries]
    candidate_reads = [
        sql for sql in sqls if sql.startswith("SELECT id, repository_id, trust, heading FROM groundtruth_chunk")
    ]
    chunk_reads = [sql for sql in sqls if 'FROM "groundtruth_chunk"' in sql]
    assert (len(candidate_reads), len(chunk_reads)) == (1, 1)
    # One array of ids, not a placeholder per id.
    ids = ",".join(str(pk) for pk in sorted(outcome.candidates))
    assert candidate_reads[0].endswith(f"WHERE id = ANY('{{{ids}}}'::int2[])")
    (results_read,) = chunk_reads
    assert '"groundtruth_chunk"."text"' in results_read and '"groundtruth_chunk"."embedding"' not in results_read
    assert sorted(int(number) for number in results_read.split(" IN (")[1].split(")")[0].split(", ")) == sorted(
        outcome.chunks
    )


def test_repeated_queries_are_served_from_the_embedding_cache():
    cache = query_embedding_cache()
    cache.clear()

    first = query_embed(text="how are   retries scheduled")
    second = query_embed(text="how are retries scheduled")

    assert (first.cached, second.cached) == (False, True)
    assert first.vector == second.vector
    assert (cache.hits, cache.misses, len(cache)) == (1, 1, 1)


def test_embedding_cache_is_bounded(settings):
    settings.SEARCH_EMBEDDING_CACHE_SIZE = 2
    cache = query_embedding_cache()
    for text in ("one", "two", "three"):
        query_embed(text=text)

    assert len(cache) == 2
    assert query_embed(text="one").cached is False


def test_snippets_are_the_block_that_carries_the_question():
    repository = RepositoryFactory()
    (chunk,) = chunks_index(
        repository,
        [
            Section(
                path="docs/redis.md",
                heading=("Redis", "Memory"),
                text=(
                    "## Memory\n"
                    "Each queued delivery takes about 200 bytes in Redis.\n"
                    "Set `maxmemory-policy noeviction`: an eviction policy such as\n"
                    "`allkeys-lru` would silently drop queued deliveries.\n"
                    "\n"
                    "Keys start with the configured prefix."
                ),
                start_line=40,
            )
        ],
    )

    (snippet,) = snippets_narrow(
        chunks=[chunk], query=lexical_query_build(text="Which eviction policy should Redis use?"), max_lines=3
    )

    assert (snippet.start_line, snippet.end_line) == (41, 43)
    assert snippet.text == (
        "Each queued delivery takes about 200 bytes in Redis.\n"
        "Set `maxmemory-policy noeviction`: an eviction policy such as\n"
        "`allkeys-lru` would silently drop queued deliveries."
    )


FAQ_ENTRY = Section(
    path="docs/faq.rst",
    heading=("FAQ", "Can I use a SOCKS proxy?"),
    text=(
        "Can I use a SOCKS proxy?\n"
        "------------------------\n"
        "\n"
        "Not out of the box.\n"
        "Run a local HTTP-to-SOCKS bridge and point the proxy setting at it.\n"
        "\n"
        "Tunnelled connections keep their cookies.\n"
        "\n"
        ".. _bridge: https://example.com/bridge"
    ),
    start_line=30,
)


def test_a_match_on_the_title_alone_cites_the_answer_under_it():
    repository = RepositoryFactory()
    (chunk,) = chunks_index(repository, [FAQ_ENTRY])

    (snippet,) = snippets_narrow(chunks=[chunk], query=lexical_query_build(text="socks proxy support?"), max_lines=8)

    # Lines 33-36: the answer and the next paragraph of the entry; not the title (30-31) nor the target (38).
    assert (snippet.start_line, snippet.end_line) == (33, 36)
    assert snippet.text == (
        "Not out of the box.\n"
        "Run a local HTTP-to-SOCKS bridge and point the proxy setting at it.\n"
        "\n"
        "Tunnelled connections keep their cookies."
    )


def test_a_match_deeper_in_the_answer_cites_that_paragraph():
    repository = RepositoryFactory()
    (chunk,) = chunks_index(repository, [FAQ_ENTRY])

    (snippet,) = snippets_narrow(
        chunks=[chunk], query=lexical_query_build(text="do tunnelled connections keep cookies"), max_lines=2
    )

    assert (snippet.text, snippet.start_line, snippet.end_line) == ("Tunnelled connections keep their cookies.", 36, 36)


def test_snippet_of_a_chunk_sharing_no_word_with_the_question_is_its_first_paragraph():
    repository = RepositoryFactory()
    (chunk,) = chunks_index(
        repository,
        [Section(path="a.md", heading=(), text="\nfirst line.\nsecond line.\nthird line.\n\nlast.", start_line=7)],
    )

    (snippet,) = snippets_narrow(chunks=[chunk], query=lexical_query_build(text="zebra"), max_lines=2)

    assert (snippet.text, snippet.start_line, snippet.end_line) == ("first line.\nsecond line.", 8, 9)


def test_a_paragraph_that_asks_under_a_faq_title_is_the_question_not_the_answer():
    repository = RepositoryFactory()
    (chunk,) = chunks_index(
        repository,
        [
            Section(
                path="docs/faq.rst",
                heading=("FAQ", 'nvprof reports "No kernels were profiled"'),
                text=(
                    'nvprof reports "No kernels were profiled"\n'
                    "-----------------------------------------\n"
                    "\n"
                    "When using the ``nvprof`` tool to profile jitted code, the output contains\n"
                    "``No kernels were profiled`` but kernels clearly ran, what is going on?\n"
                    "\n"
                    "The profiling data is not flushed on program exit.\n"
                    "Call ``profile_stop()`` before the program exits.\n"
                    "Kernels then show up in the profile."
                ),
                start_line=10,
            )
        ],
    )

    (snippet,) = snippets_narrow(
        chunks=[chunk],
        query=lexical_query_build(text="nvprof shows no kernels profiled although they ran"),
        max_lines=3,
    )

    # Lines 16-18: the answer; the asking paragraph (13-14) counts as the title's continuation.
    assert (snippet.start_line, snippet.end_line) == (16, 18)
    assert snippet.text == (
        "The profiling data is not flushed on program exit.\n"
        "Call ``profile_stop()`` before the program exits.\n"
        "Kernels then show up in the profile."
    )


def test_an_asking_paragraph_with_nothing_after_it_in_the_chunk_is_still_cited():
    repository = RepositoryFactory()
    (chunk,) = chunks_index(
        repository,
        [
            Section(
                path="docs/faq.rst",
                heading=("FAQ", "Profiling"),
                text="Profiling\n---------\n\nWhy does nvprof report no kernels?",
                start_line=1,
            )
        ],
    )

    (snippet,) = snippets_narrow(chunks=[chunk], query=lexical_query_build(text="nvprof kernels"), max_lines=3)

    assert (snippet.text, snippet.start_line, snippet.end_line) == ("Why does nvprof report no kernels?", 4, 4)
