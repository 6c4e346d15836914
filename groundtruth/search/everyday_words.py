"""Everyday words: how large a corpus's vocabulary is, and which question words are jargon.

A question word that a repository never uses is evidence that the question asks about something
its documentation lacks (`abstention.py`'s `named_known`). How telling that is depends on the
corpus: a repository of a few dozen pages lacks many everyday words a user writes ("colourful",
"garbled", "company") that a large one has, and there a missing everyday word says little; a
missing piece of jargon ("Cryptomator", "zellij", "websockets") says as much in any corpus. On a
transfer check of three small repositories nobody tuned for (docs/benchmarks.md), `named_known`
refused 0.237 of answerable questions against 0.057 on the development set.

Both halves come from the packaged MiniLM's WordPiece vocabulary, the word list a general English
corpus gave it:
- everyday words are its single-piece words of three lowercase letters or more that make one
  lexeme (about 13,700); a repository's **everyday share** is the share of them its chunks use,
  recounted after its lexical statistics by each ingest (`everyday_shares_refresh`);
- a question word is **jargon** when the vocabulary splits it into two pieces or more.
"""

from __future__ import annotations

import json
import re
from functools import cache

from django.db import connection
from tokenizers import Tokenizer

from groundtruth.embeddings import packaged_model_path
from groundtruth.search.lexical_index import texts_lexemes

# The everyday share at which a repository's missing everyday word counts in full; below it, in
# proportion. The development set's repositories use 0.067-0.148 of the everyday words, the
# transfer check's three small ones 0.043-0.058; a round value inside the first range.
EVERYDAY_SHARE_FULL = 0.10

_VOCABULARY_WORD = re.compile(r"[a-z]{3,}")
_QUESTION_WORD = re.compile(r"[A-Za-z][A-Za-z0-9'./+#_-]*")


@cache
def _tokenizer() -> Tokenizer:
    tokenizer = Tokenizer.from_file(str(packaged_model_path() / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


@cache
def everyday_lexemes() -> tuple[str, ...]:
    """The lexemes of the vocabulary's everyday words (one SQL round trip, once per process)."""
    vocabulary = json.loads((packaged_model_path() / "tokenizer.json").read_text())["model"]["vocab"]
    words = sorted(word for word in vocabulary if _VOCABULARY_WORD.fullmatch(word))
    return tuple(sorted({next(iter(found)) for found in texts_lexemes(words) if len(found) == 1}))


def word_pieces(question: str) -> list[tuple[str, int]]:
    """The question's words ("'s" and edge dots dropped) and how many WordPiece pieces each is."""
    words = [re.sub(r"'s$", "", word.strip(".'")) for word in _QUESTION_WORD.findall(question)]
    tokenizer = _tokenizer()
    return [(word, len(tokenizer.encode(word.lower(), add_special_tokens=False).tokens)) for word in words if word]


def everyday_shares_refresh(*, repository_ids: list[int]) -> None:
    """Recounts the repositories' everyday shares from their lexical statistics: call it right
    after `lexical_index.lexical_statistics_refresh`, in the same transaction."""
    everyday = list(everyday_lexemes())
    with connection.cursor() as cursor:
        cursor.execute(
            """
            UPDATE groundtruth_corpus_statistic AS corpus
            SET everyday_share = (
                -- One index lookup per everyday lexeme: 4-5 times faster than `lexeme = ANY(...)`.
                SELECT count(*)::float8 / %s
                FROM unnest(%s::text[]) AS everyday(lexeme)
                JOIN groundtruth_lexeme_statistic AS statistic
                  ON statistic.lexeme = everyday.lexeme AND statistic.repository_id = corpus.repository_id
            )
            WHERE corpus.repository_id = ANY(%s)
            """,
            [len(everyday), everyday, sorted(set(repository_ids))],
        )


def lexeme_pieces(question: str) -> dict[str, int]:
    """Per lexeme of the question's words, the fewest WordPiece pieces a word carrying it is."""
    words = word_pieces(question)
    return pieces_per_lexeme(words, texts_lexemes([word for word, _ in words]))


def pieces_per_lexeme(words: list[tuple[str, int]], words_lexemes: list[set[str]]) -> dict[str, int]:
    """`lexeme_pieces` of `word_pieces` whose lexemes the caller looked up (`/ask` looks them up in
    the round trip that finds the question's names' lexemes)."""
    pieces: dict[str, int] = {}
    for (_, count), lexemes in zip(words, words_lexemes, strict=True):
        for lexeme in lexemes:
            pieces[lexeme] = min(pieces.get(lexeme, count), count)
    return pieces


def missing_weight(shares: list[float | None]) -> float:
    """How much a missing everyday word counts in a scope whose repositories have these everyday
    shares (the largest counts; a repository not yet measured counts in full)."""
    if not shares or any(share is None for share in shares):
        return 1.0
    return min(1.0, max(share for share in shares if share is not None) / EVERYDAY_SHARE_FULL)


def vocabulary_scaled_known(
    *, idf: dict[str, float], present: set[str], pieces: dict[str, int], weight: float
) -> float:
    """`named_known` with each absent everyday word weighed by `weight`: the share of the
    question's IDF mass that is present, or absent but everyday. A lexeme no word of the question
    carries whole (an identifier's part) counts as jargon."""
    total = sum(idf.values())
    if total <= 0:
        return 0.0
    absent = [lexeme for lexeme in idf if lexeme not in present]
    jargon = sum(idf[lexeme] for lexeme in absent if pieces.get(lexeme, 2) >= 2)
    everyday = sum(idf[lexeme] for lexeme in absent if pieces.get(lexeme, 2) < 2)
    return 1 - (jargon + weight * everyday) / total
