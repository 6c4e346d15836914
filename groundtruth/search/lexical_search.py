"""The lexical leg: BM25 inside PostgreSQL.

How it ranks. Okapi BM25 with the usual k1 and b (SEARCH_BM25_K1, SEARCH_BM25_B):

    score(d, q) = sum over query lexemes t found in d of
                  idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))
    idf(t)      = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))

tf comes from the positions of the lexeme in the chunk's tsvector, |d| is `lexeme_count`, and
N, avgdl and df come from the statistics kept at ingest (`lexical_index.py`), summed over the
repositories.

How it finds candidates. A GIN index scan with an OR tsquery of the query's lexemes: a chunk
needs one of the words, not all of them (natural-language questions rarely share every word
with their answer). Only the candidates are rescored, by unnesting their tsvectors: the cost
is proportional to the candidate count, so the statistics bound it. (Each candidate's vector is
cut down to the query's lexemes with setweight + ts_filter before it is unnested: C functions
over the vector, three to five times faster than unnesting every lexeme and joining.) Lexemes are added to the
OR query rarest first while the sum of their document frequencies stays under
SEARCH_LEXICAL_MAX_CANDIDATES (the rarest always goes in); more frequent lexemes that did not
fit still count in the score of every candidate that contains them. Frequent lexemes have the
lowest IDF, so this is the classic "common terms" pruning of inverted-index engines: exact on
a small corpus, bounded work on a large one.

Why not the alternatives. `ts_rank` has no IDF and its length normalisation is not BM25's;
`websearch_to_tsquery` ANDs the words. A pgvector `sparsevec` of BM25 weights would freeze
avgdl into every stored vector and its HNSW index is approximate for sparse queries; the
tsvector route keeps the index exact and the statistics current.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection

from groundtruth.search.lexical_index import (
    QUERY_LEXEMES_SQL,
    TEXT_SEARCH_CONFIG,
    query_lexeme_sources,
    spelling_pattern,
)


@dataclass(frozen=True)
class QueryTerm:
    lexeme: str
    document_frequency: int
    idf: float


@dataclass(frozen=True)
class LexicalQuery:
    """A query's lexemes with their corpus statistics; `terms` includes lexemes no chunk has."""

    terms: list[QueryTerm]
    document_count: int

    @property
    def idf(self) -> dict[str, float]:
        return {term.lexeme: term.idf for term in self.terms}

    @property
    def idf_ceiling(self) -> float:
        """The IDF of a lexeme that a single chunk has: the largest a present lexeme can have."""
        return bm25_idf(document_frequency=1, document_count=max(self.document_count, 1))

    def capped_idf(self) -> dict[str, float]:
        """Each lexeme's IDF, a lexeme no chunk has capped at `idf_ceiling`: on a small corpus the
        IDF of unseen words (often plain English such as "happens") would otherwise outweigh
        everything the corpus does contain."""
        ceiling = self.idf_ceiling
        return {term.lexeme: min(term.idf, ceiling) for term in self.terms}


@dataclass(frozen=True)
class LexicalHit:
    chunk_id: int
    score: float
    matched_lexemes: tuple[str, ...]


def bm25_idf(*, document_frequency: int, document_count: int) -> float:
    return math.log(1 + (document_count - document_frequency + 0.5) / (document_frequency + 0.5))


def lexical_query_build(*, text: str) -> LexicalQuery:
    """The lexemes of `text` with their document frequencies and IDF under current statistics
    (one round trip: the query's lexemes are parsed by the statement that counts them)."""
    body, whole = query_lexeme_sources(text)
    with connection.cursor() as cursor:
        # Corpus-wide figures are the sums of the per-repository statistics (lexical_index.py).
        cursor.execute(
            f"""
            SELECT term.lexeme,
                   coalesce((SELECT sum(statistic.document_count) FROM groundtruth_lexeme_statistic AS statistic
                             WHERE statistic.lexeme = term.lexeme), 0),
                   (SELECT coalesce(sum(corpus.document_count), 0) FROM groundtruth_corpus_statistic AS corpus)
            FROM ({QUERY_LEXEMES_SQL}) AS term
            ORDER BY term.part, term.position
            """,
            {"body": body, "whole": whole},
        )
        rows = cursor.fetchall()
    if not rows:
        return LexicalQuery(terms=[], document_count=0)
    document_count = int(rows[0][2] or 0)
    frequencies: dict[str, int] = {}
    for lexeme, frequency, _ in rows:
        frequencies.setdefault(lexeme, int(frequency))  # a lexeme both parsed and whole: once
    terms = [
        QueryTerm(
            lexeme=lexeme,
            document_frequency=frequency,
            idf=bm25_idf(document_frequency=min(frequency, document_count), document_count=document_count),
        )
        for lexeme, frequency in frequencies.items()
    ]
    return LexicalQuery(terms=terms, document_count=document_count)


def idf_share(lexemes: Iterable[str], *, idf: Mapping[str, float]) -> float:
    """The share of a question's IDF mass (`idf`: its lexemes and their IDF) that `lexemes`
    carry: how much of the question a passage holds, rare words weighing most."""
    mass = sum(idf.values())
    return sum(idf.get(lexeme, 0.0) for lexeme in set(lexemes)) / mass if mass > 0 else 0.0


def bm25_share(score: float, *, idf: Mapping[str, float]) -> float:
    """A BM25 score over the largest score a passage could reach for the question's lexemes
    (every one present, its term frequency saturated), at most 1."""
    attainable = sum(idf.values()) * (settings.SEARCH_BM25_K1 + 1)
    return min(score / attainable, 1.0) if attainable > 0 else 0.0


def _tsquery_literal(lexemes: list[str]) -> str:
    """An OR tsquery of already-normalised lexemes (quoted, so they are not parsed again)."""
    quoted = ("'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'" for lexeme in lexemes)
    return " | ".join(quoted)


def candidate_lexemes(query: LexicalQuery, *, max_candidates: int) -> list[str]:
    """The lexemes that go into the OR query: rarest first while their document frequencies
    add up to at most `max_candidates` (the rarest one always). Lexemes no chunk has are left
    out: they cannot match."""
    present = sorted((term for term in query.terms if term.document_frequency > 0), key=lambda t: t.document_frequency)
    chosen: list[str] = []
    budget = 0
    for term in present:
        if chosen and budget + term.document_frequency > max_candidates:
            break
        chosen.append(term.lexeme)
        budget += term.document_frequency
    return chosen


LEXICAL_SQL = """
    WITH corpus AS (
        SELECT greatest(sum(total_length)::float8 / nullif(sum(document_count), 0), 1.0) AS average_length
        FROM groundtruth_corpus_statistic
    )
    SELECT chunk.id,
           sum(term.idf * entry.frequency * (%(k1)s + 1)
               / (entry.frequency + %(k1)s * (1 - %(b)s + %(b)s * chunk.lexeme_count / corpus.average_length)))
               AS score,
           array_agg(term.lexeme ORDER BY term.lexeme) AS matched
    FROM groundtruth_chunk AS chunk
    CROSS JOIN corpus
    CROSS JOIN LATERAL (
        -- Only the query's lexemes: setweight marks them A (every indexed lexeme is D) and
        -- ts_filter keeps the A ones, so a chunk yields a row per matched lexeme, not per lexeme.
        SELECT kept.lexeme, coalesce(array_length(kept.positions, 1), 1) AS frequency
        FROM unnest(ts_filter(setweight(chunk.search_vector, 'A', %(lexemes)s::text[]), '{a}')) AS kept
    ) AS entry
    JOIN unnest(%(lexemes)s::text[], %(idfs)s::float8[]) AS term(lexeme, idf) ON term.lexeme = entry.lexeme
    WHERE chunk.search_vector @@ %(tsquery)s::tsquery
      AND chunk.repository_id = ANY(%(repository_ids)s)
    GROUP BY chunk.id
    ORDER BY score DESC, chunk.id
    LIMIT %(depth)s
"""


def lexical_parameters(
    *, query: LexicalQuery, lexemes: list[str], repository_ids: list[int], depth: int
) -> dict[str, Any]:
    """Parameters of LEXICAL_SQL: every lexeme some chunk has is scored; `lexemes` find candidates."""
    scored = [term for term in query.terms if term.document_frequency > 0]
    return {
        "k1": settings.SEARCH_BM25_K1,
        "b": settings.SEARCH_BM25_B,
        "lexemes": [term.lexeme for term in scored],
        "idfs": [term.idf for term in scored],
        "tsquery": _tsquery_literal(lexemes),
        "repository_ids": repository_ids,
        "depth": depth,
    }


def lexical_candidates(*, query: LexicalQuery, repository_ids: list[int], depth: int) -> list[LexicalHit]:
    """The `depth` best chunks of the given repositories by BM25, best first."""
    lexemes = candidate_lexemes(query, max_candidates=settings.SEARCH_LEXICAL_MAX_CANDIDATES)
    if not lexemes or not repository_ids:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            LEXICAL_SQL,
            lexical_parameters(query=query, lexemes=lexemes, repository_ids=repository_ids, depth=depth),
        )
        return [
            LexicalHit(chunk_id=chunk_id, score=float(score), matched_lexemes=tuple(matched))
            for chunk_id, score, matched in cursor.fetchall()
        ]


def chunks_lexemes_matched(*, chunk_ids: list[int], lexemes: list[str]) -> dict[int, set[str]]:
    """Which of `lexemes` each chunk contains (chunks that contain none are left out)."""
    if not lexemes:
        return {}
    return _chunks_matched(
        """
        SELECT chunk.id, array_agg(kept.lexeme)
        FROM groundtruth_chunk AS chunk
        CROSS JOIN LATERAL unnest(ts_filter(setweight(chunk.search_vector, 'A', %(wanted)s::text[]), '{a}')) AS kept
        WHERE chunk.id = ANY(%(ids)s)
        GROUP BY chunk.id
        """,
        chunk_ids=chunk_ids,
        wanted=lexemes,
    )


def chunks_phrases_matched(*, chunk_ids: list[int], phrases: list[str]) -> dict[int, set[str]]:
    """Which of `phrases` each chunk contains as adjacent words (chunks with none are left out;
    a phrase of stop words alone is in every chunk)."""
    if not phrases:
        return {}
    return _chunks_matched(
        f"""
        SELECT chunk.id, array_agg(wanted.phrase)
        FROM groundtruth_chunk AS chunk
        CROSS JOIN unnest(%(wanted)s::text[]) AS wanted(phrase)
        CROSS JOIN LATERAL phraseto_tsquery('{TEXT_SEARCH_CONFIG}', wanted.phrase) AS query
        WHERE chunk.id = ANY(%(ids)s) AND (numnode(query) = 0 OR chunk.search_vector @@ query)
        GROUP BY chunk.id
        """,
        chunk_ids=chunk_ids,
        wanted=phrases,
    )


def chunks_spellings_matched(*, chunk_ids: list[int], words: list[str]) -> dict[int, set[str]]:
    """Which of `words` each chunk has spelled exactly so, as a whole word (chunks with none are
    left out)."""
    if not words:
        return {}
    return _chunks_matched(
        """
        SELECT chunk.id, array_agg(wanted.word)
        FROM groundtruth_chunk AS chunk
        CROSS JOIN unnest(%(wanted)s::text[], %(patterns)s::text[]) AS wanted(word, pattern)
        WHERE chunk.id = ANY(%(ids)s) AND chunk.text ~ wanted.pattern
        GROUP BY chunk.id
        """,
        chunk_ids=chunk_ids,
        wanted=words,
        patterns=[spelling_pattern(word) for word in words],
    )


def _chunks_matched(sql: str, *, chunk_ids: list[int], wanted: list[str], **parameters: Any) -> dict[int, set[str]]:
    """Runs one of the queries above, which select (chunk id, the wanted values it holds) for
    the chunks `%(ids)s`, and returns them as a dict."""
    ids = sorted(set(chunk_ids))
    if not ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(sql, {"ids": ids, "wanted": list(wanted), **parameters})
        return {chunk_id: set(matched) for chunk_id, matched in cursor.fetchall()}
