"""The lexical index: each chunk's `search_vector` and `lexeme_count`, and the corpus term
statistics that BM25 needs.

Why this design (see also `lexical_search.py`):
PostgreSQL's `ts_rank` knows nothing about the corpus (no IDF) and `websearch_to_tsquery` ANDs
every word, so a question phrased in natural language misses chunks that do not contain all of
its words. We keep PostgreSQL's full-text machinery for what it does well (the English
stemmer, the GIN index that finds every chunk containing any query lexeme) and add what BM25
needs on top:

- per chunk: the term frequencies (the positions stored in the tsvector: a lexeme seen 3 times
  has 3 positions) and the document length in tokens (`lexeme_count`);
- per repository: for every lexeme the number of its chunks that contain it (document
  frequency) in `groundtruth_lexeme_statistic`, and its chunk count and total length in
  `groundtruth_corpus_statistic`, recounted by `lexical_statistics_refresh()` in the ingest's
  swap transaction. BM25 uses their sums over the corpus; `/ask` also asks which words one
  repository contains, and how large its vocabulary is (`everyday_share`, recounted next by
  `everyday_words.everyday_shares_refresh`).

Each chunk is indexed with its repository's label and heading trail before its lines
(`groundtruth.ingest.index_text.lexical_body`).

Identifiers. The default parser splits `CELERY_BROKER_URL` into `celeri`, `broker`, `url` and
keeps `django.db.models` or `maxRetryCount` whole without their parts. Exact lookups of
identifiers are common in documentation questions, so each chunk is indexed both ways:
underscore identifiers are added whole (lower-cased, not stemmed, with their real term
frequency) next to the parser's parts, and the parts of dotted and camelCase names are added
next to the parser's whole token. The query side (`query_lexemes`) applies the same rules, so
`select_for_update` in a question matches the lexeme `select_for_update` of the chunk, which
is rare and therefore weighs heavily under BM25.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

from django.db import connection, transaction

from groundtruth.ingest.index_text import lexical_body
from groundtruth.models import Chunk

# The text-search configuration used for chunks and queries alike. Changing it needs a re-index
# (`lexical_index_refresh` over every chunk), so it is a constant, not an environment setting.
TEXT_SEARCH_CONFIG = "english"

# Chunks are updated in batches of this many: one round trip each, bounded memory.
_REFRESH_BATCH = 1000

_WORDLIKE = re.compile(r"[A-Za-z0-9_]+(?:[./:][A-Za-z0-9_]+)*")
_CAMEL_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def identifier_terms(text: str) -> tuple[Counter[str], list[str]]:
    """The extra terms of `text` that the PostgreSQL parser misses.

    Returns (whole underscore identifiers lower-cased with their counts, extra words to run
    through the parser: the parts of dotted and camelCase names). Tokens that the parser
    already handles (plain words, hyphenated words) add nothing.
    """
    whole: Counter[str] = Counter()
    parts: list[str] = []
    for match in _WORDLIKE.finditer(text):
        token = match.group(0)
        # Underscore identifiers, also inside dotted names (`settings.CELERY_BROKER_URL`).
        for piece in re.split(r"[./:]", token):
            if "_" in piece.strip("_"):
                whole[piece.lower()] += 1
        if re.search(r"[./:]", token):
            parts.extend(piece for piece in re.split(r"[./:_]", token) if piece)
        elif "_" not in token and re.search(r"[a-z][A-Z]", token):
            parts.extend(_CAMEL_PART.findall(token))
    return whole, parts


def _document_source(*, repository_name: str, heading: Sequence[str], text: str) -> tuple[str, str]:
    """(body for to_tsvector, tsvector literal of whole identifiers) for one chunk.

    The label and heading trail are indexed with the text: a chunk under "Configuration >
    Database" is about databases even when its lines do not say so.
    """
    body = lexical_body(repository_name=repository_name, heading=heading, text=text)
    whole, parts = identifier_terms(body)
    if parts:
        body = f"{body}\n{' '.join(parts)}"
    return body, _identifier_vector_literal(whole)


def _identifier_vector_literal(counts: Counter[str]) -> str:
    # Positions only carry the term frequency here (BM25 counts them); the values are arbitrary.
    # Identifiers are [a-z0-9_] only, so quoting them cannot break the literal.
    return " ".join(
        f"'{term}':{','.join(str(position) for position in range(1, min(count, 256) + 1))}"
        for term, count in sorted(counts.items())
    )


def lexical_index_refresh(*, chunk_ids: Iterable[int]) -> None:
    """Fills `search_vector` and `lexeme_count` of the given chunks from their heading and text.

    Called by the ingest inside its swap transaction for every chunk it adds or changes. The
    corpus statistics are refreshed separately (`lexical_statistics_refresh`), once per ingest.
    """
    ids = sorted(set(chunk_ids))
    for start in range(0, len(ids), _REFRESH_BATCH):
        batch = ids[start : start + _REFRESH_BATCH]
        rows = Chunk.objects.filter(id__in=batch).values_list("id", "repository__name", "heading", "text")
        chunk_ids_batch: list[int] = []
        bodies: list[str] = []
        identifier_vectors: list[str] = []
        for chunk_id, repository_name, heading, text in rows:
            body, identifiers = _document_source(
                repository_name=repository_name, heading=[str(h) for h in heading or []], text=text
            )
            chunk_ids_batch.append(chunk_id)
            bodies.append(body)
            identifier_vectors.append(identifiers)
        if not chunk_ids_batch:
            continue
        with connection.cursor() as cursor:
            cursor.execute(
                f"""
                UPDATE groundtruth_chunk AS chunk
                SET search_vector = built.vector,
                    lexeme_count = (
                        SELECT coalesce(sum(coalesce(array_length(entry.positions, 1), 1)), 0)
                        FROM unnest(built.vector) AS entry
                    )
                FROM (
                    SELECT source.id,
                           to_tsvector('{TEXT_SEARCH_CONFIG}', source.body) || source.identifiers::tsvector AS vector
                    FROM unnest(%s::bigint[], %s::text[], %s::text[]) AS source(id, body, identifiers)
                ) AS built
                WHERE chunk.id = built.id
                """,
                [chunk_ids_batch, bodies, identifier_vectors],
            )


def lexical_statistics_refresh(*, repository_ids: Iterable[int]) -> None:
    """Recounts the document frequency of every lexeme, the chunk count and the total length of
    the given repositories (a repository without chunks keeps no rows).

    Call it after an ingest changed a repository's chunks, inside its swap transaction: readers
    then see the new chunks and their statistics together. It scans the repository's tsvectors
    (`ts_stat`), about a second per 100,000 chunks; the ingest's index lock of the repository
    (`groundtruth.ingest.index_lock`) serialises two recounts of one repository.
    """
    ids = sorted(set(repository_ids))
    if not ids:
        return
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM groundtruth_lexeme_statistic WHERE repository_id = ANY(%s)", [ids])
        cursor.execute("DELETE FROM groundtruth_corpus_statistic WHERE repository_id = ANY(%s)", [ids])
        cursor.execute(
            """
            INSERT INTO groundtruth_lexeme_statistic (repository_id, lexeme, document_count)
            SELECT repository.id, statistic.word, statistic.ndoc
            FROM unnest(%s::bigint[]) AS repository(id)
            CROSS JOIN LATERAL ts_stat(format(
                'SELECT search_vector FROM groundtruth_chunk WHERE repository_id = %%s AND search_vector IS NOT NULL',
                repository.id
            )) AS statistic
            """,
            [ids],
        )
        cursor.execute(
            """
            INSERT INTO groundtruth_corpus_statistic (repository_id, document_count, total_length, refreshed_at)
            SELECT repository_id, count(*), coalesce(sum(lexeme_count), 0), now()
            FROM groundtruth_chunk
            WHERE repository_id = ANY(%s) AND search_vector IS NOT NULL
            GROUP BY repository_id
            """,
            [ids],
        )


def lexemes_present(*, lexemes: Sequence[str], repository_ids: Sequence[int]) -> set[str]:
    """Which of `lexemes` some chunk of the given repositories contains (one index lookup)."""
    if not lexemes or not repository_ids:
        return set()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT lexeme FROM groundtruth_lexeme_statistic "
            "WHERE lexeme = ANY(%s) AND repository_id = ANY(%s) AND document_count > 0",
            [list(lexemes), list(repository_ids)],
        )
        return {row[0] for row in cursor.fetchall()}


# How many chunks holding all of a phrase's words phrases_present reads to find them in a row
# (and spellings_present to find a word spelled exactly so). The GIN index finds the chunks with
# the words; their order is checked on each chunk's tsvector (5-10 us a chunk), so two common
# words never written together would otherwise cost a scan of every chunk that has both. Among
# the first thousand, a name written that way would show.
PHRASE_CANDIDATES_MAX = 1000


def phrases_present(*, phrases: Sequence[str], repository_ids: Sequence[int]) -> set[str]:
    """Which of `phrases` (words, `AWS Lambda`) some chunk of the given repositories contains as
    adjacent words, looking at PHRASE_CANDIDATES_MAX chunks with all its words at most. A phrase
    of stop words alone matches nothing to look for and counts as present."""
    if not phrases or not repository_ids:
        return set()
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT wanted.phrase
            FROM unnest(%s::text[]) AS wanted(phrase)
            CROSS JOIN LATERAL phraseto_tsquery('{TEXT_SEARCH_CONFIG}', wanted.phrase) AS query
            WHERE numnode(query) = 0 OR EXISTS (
                SELECT 1
                FROM (
                    SELECT search_vector FROM groundtruth_chunk
                    WHERE repository_id = ANY(%s)
                      AND search_vector @@ plainto_tsquery('{TEXT_SEARCH_CONFIG}', wanted.phrase)
                    LIMIT %s
                ) AS candidate
                WHERE candidate.search_vector @@ query
            )
            """,
            [list(phrases), list(repository_ids), PHRASE_CANDIDATES_MAX],
        )
        return {row[0] for row in cursor.fetchall()}


def spelling_pattern(word: str) -> str:
    """A PostgreSQL regular expression for `word` as a whole word, spelled exactly (case
    included), in the singular or with a plural `s` (`APIs` matches `API`, `URL` matches `URLs`):
    every character but a letter or digit escaped, no letter, digit or underscore on either side."""
    singular = word[:-1] if word.endswith("s") and len(word) > 1 else word
    escaped = "".join(char if char.isalnum() else f"\\{char}" for char in singular)
    return f"(?<![[:alnum:]_]){escaped}s?(?![[:alnum:]_])"


def spellings_present(*, words: Sequence[str], repository_ids: Sequence[int]) -> set[str]:
    """Which of `words` (`PostgreSQL`, `DATABASES`) some chunk of the given repositories has
    spelled exactly so, looking at PHRASE_CANDIDATES_MAX chunks with the word's lexemes at most
    (the regular expression is checked on each one's text). A word of stop words alone matches
    nothing to look for and counts as present."""
    if not words or not repository_ids:
        return set()
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT wanted.word
            FROM unnest(%s::text[], %s::text[]) AS wanted(word, pattern)
            CROSS JOIN LATERAL plainto_tsquery('{TEXT_SEARCH_CONFIG}', wanted.word) AS query
            WHERE numnode(query) = 0 OR EXISTS (
                SELECT 1
                FROM (
                    SELECT text FROM groundtruth_chunk
                    WHERE repository_id = ANY(%s) AND search_vector @@ query
                    LIMIT %s
                ) AS candidate
                WHERE candidate.text ~ wanted.pattern
            )
            """,
            [list(words), [spelling_pattern(word) for word in words], list(repository_ids), PHRASE_CANDIDATES_MAX],
        )
        return {row[0] for row in cursor.fetchall()}


def query_lexeme_sources(text: str) -> tuple[str, list[str]]:
    """What a query's lexemes come from: the text to parse (the query, and the parts of its
    dotted and camelCase names) and its whole underscore identifiers, sorted."""
    whole, parts = identifier_terms(text)
    return (f"{text}\n{' '.join(parts)}" if parts else text), sorted(whole)


# The lexemes of QUERY_LEXEMES_SQL's %(body)s in first-seen order, then its %(whole)s
# identifiers; a lexeme may come twice (callers keep the first). A subquery of a statement that
# needs them (lexical_search.lexical_query_build) as well as a statement of its own.
QUERY_LEXEMES_SQL = f"""
    SELECT entry.lexeme, 0 AS part, entry.positions[1] AS position
    FROM unnest(to_tsvector('{TEXT_SEARCH_CONFIG}', %(body)s)) AS entry
    UNION ALL
    SELECT whole.lexeme, 1, whole.position
    FROM unnest(%(whole)s::text[]) WITH ORDINALITY AS whole(lexeme, position)
"""


def query_lexemes(text: str) -> list[str]:
    """The distinct lexemes of a query, by the same rules as the chunks (stemmed words, whole
    underscore identifiers, parts of dotted and camelCase names), in first-seen order."""
    body, whole = query_lexeme_sources(text)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT term.lexeme FROM ({QUERY_LEXEMES_SQL}) AS term ORDER BY term.part, term.position",
            {"body": body, "whole": whole},
        )
        return list(dict.fromkeys(row[0] for row in cursor.fetchall()))


def texts_lexemes(texts: list[str]) -> list[set[str]]:
    """The lexemes of each text by the rules of `query_lexemes`, in one round trip (used to find
    the lines of a passage that carry the query's words)."""
    if not texts:
        return []
    bodies = []
    extra: list[set[str]] = []
    for text in texts:
        whole, parts = identifier_terms(text)
        bodies.append(f"{text}\n{' '.join(parts)}" if parts else text)
        extra.append(set(whole))
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT source.position,
                   array(SELECT lexeme FROM unnest(to_tsvector('{TEXT_SEARCH_CONFIG}', source.body)))
            FROM unnest(%s::text[]) WITH ORDINALITY AS source(body, position)
            ORDER BY source.position
            """,
            [bodies],
        )
        return [set(lexemes) | extra[position - 1] for position, lexemes in cursor.fetchall()]
