"""Narrowing a cited chunk to the lines that matter for the question.

A chunk is a whole section (up to CHUNK_MAX_CHARS); a citation should point at the few lines
that answer. Each line is scored by the IDF of the question's lexemes it contains (the same
stemming and identifier rules as the index); the snippet is the window of at most
ASK_SNIPPET_MAX_LINES consecutive lines whose distinct lexemes carry the most IDF, the
shortest such window winning ties, grown (within the limit) so that it does not cut a sentence,
and trimmed of blank edge lines. A chunk found by the dense leg alone shares no lexeme with
the question; its snippet is then its opening lines.
"""

from __future__ import annotations

from dataclasses import dataclass

from groundtruth.models import Chunk
from groundtruth.search.lexical_index import texts_lexemes
from groundtruth.search.lexical_search import LexicalQuery


@dataclass(frozen=True)
class Snippet:
    text: str
    start_line: int
    end_line: int


def _trimmed(lines: list[str], start: int, end: int) -> tuple[int, int]:
    """[start, end) without blank lines at either edge (at least one line kept)."""
    while start < end - 1 and not lines[start].strip():
        start += 1
    while end - 1 > start and not lines[end - 1].strip():
        end -= 1
    return start, end


_SENTENCE_END = (".", ":", "!", "?", "`", "|", ")")


def _whole_sentences(lines: list[str], start: int, end: int, max_lines: int) -> tuple[int, int]:
    """Grows [start, end) within max_lines so the snippet neither starts nor ends mid-sentence."""
    while end < len(lines) and end - start < max_lines and lines[end].strip():
        if lines[end - 1].rstrip().endswith(_SENTENCE_END):
            break
        end += 1
    while start > 0 and end - start < max_lines and lines[start - 1].strip() and lines[start][:1].islower():
        start -= 1
    return start, end


def _best_window(line_lexemes: list[set[str]], idf: dict[str, float], max_lines: int) -> tuple[int, int] | None:
    """[start, end) of the best window, or None when no line holds a query lexeme."""
    best_key: tuple[float, int, int] | None = None  # (weight, -length, -start): heaviest, shortest, first
    for start in range(len(line_lexemes)):
        seen: set[str] = set()
        for end in range(start + 1, min(start + max_lines, len(line_lexemes)) + 1):
            seen |= line_lexemes[end - 1].intersection(idf)
            weight = round(sum(idf[lexeme] for lexeme in seen), 9)
            if weight > 0 and (best_key is None or (weight, start - end, -start) > best_key):
                best_key = (weight, start - end, -start)
    if best_key is None:
        return None
    start = -best_key[2]
    return start, start - best_key[1]


def snippets_narrow(*, chunks: list[Chunk], query: LexicalQuery, max_lines: int) -> list[Snippet]:
    """One snippet per chunk, in order, each with its own line range in the file."""
    idf = {term.lexeme: term.idf for term in query.terms if term.idf > 0}
    chunk_lines = [chunk.text.split("\n") for chunk in chunks]
    flat = [line for lines in chunk_lines for line in lines]
    flat_lexemes = texts_lexemes(flat) if idf else [set() for _ in flat]
    snippets = []
    offset = 0
    for chunk, lines in zip(chunks, chunk_lines, strict=True):
        line_lexemes = flat_lexemes[offset : offset + len(lines)]
        offset += len(lines)
        window = _best_window(line_lexemes, idf, max_lines) or (0, min(max_lines, len(lines)))
        start, end = _trimmed(lines, *_whole_sentences(lines, *window, max_lines))
        snippets.append(
            Snippet(
                text="\n".join(lines[start:end]),
                start_line=chunk.start_line + start,
                end_line=chunk.start_line + end - 1,
            )
        )
    return snippets
