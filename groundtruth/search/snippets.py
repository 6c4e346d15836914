"""Narrowing a cited chunk to the lines that answer.

A chunk is a whole section (up to CHUNK_MAX_CHARS); a citation should point at the passage that
answers, and that passage is prose, not the section's title. So:

- lines are read with their roles (`chunking.line_roles`): titles, markup (reStructuredText
  targets, directives, transitions; Markdown link definitions), blank, text. Only text lines
  are cited; a snippet is never a title alone.
- The text lines form blocks (paragraphs, list items, code), each scored by the IDF of the
  question's lexemes it contains (the same stemming and identifier rules as the index). The
  words of a title count for the first block under it: a question that matches a FAQ heading
  ("How do I use a proxy?") is answered by the paragraph below it.
- A paragraph that asks (its last line ends with "?") right under a title, with more text after
  it in the same section, is part of the question, as FAQs write it ("When using nvprof ...
  what is going on?"): it is treated as the title's continuation, its words count for the next
  block, and it is not cited itself.
- The snippet is the best block (the first one when no block holds a question word, as for a
  passage the dense leg found by meaning alone), followed by the next blocks of the same
  section while the snippet stays within ASK_SNIPPET_MAX_LINES lines. A block longer than that
  is cut to its best window of that many lines.
- A snippet also stays within ASK_SNIPPET_MAX_CHARS characters, whatever its lines' lengths: it
  keeps its first lines that fit, or the first characters of its first line when that line alone
  is longer (the citation's lines then are that one line).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from django.conf import settings

from groundtruth.ingest.chunking import line_roles
from groundtruth.models import Chunk
from groundtruth.search.lexical_index import texts_lexemes
from groundtruth.search.lexical_search import LexicalQuery


@dataclass(frozen=True)
class Snippet:
    text: str
    start_line: int
    end_line: int


def _text_blocks(roles: list[str]) -> list[tuple[int, int]]:
    """[start, end) of each run of consecutive text lines."""
    blocks: list[tuple[int, int]] = []
    start: int | None = None
    for index, role in enumerate([*roles, "blank"]):
        if role == "text" and start is None:
            start = index
        elif role != "text" and start is not None:
            blocks.append((start, index))
            start = None
    return blocks


def _best_window(weights: list[set[str]], idf: dict[str, float], start: int, end: int, size: int) -> tuple[int, int]:
    """The window of `size` lines within [start, end) whose distinct lexemes weigh most (the
    first such window on ties)."""
    best = (start, min(end, start + size))
    best_weight = -1.0
    for window_start in range(start, max(end - size, start) + 1):
        window_end = min(end, window_start + size)
        seen = set().union(*weights[window_start:window_end])
        weight = sum(idf.get(lexeme, 0.0) for lexeme in seen)
        if weight > best_weight + 1e-9:
            best, best_weight = (window_start, window_end), weight
    return best


def _questions_as_titles(lines: list[str], roles: list[str]) -> list[str]:
    """`roles` with each asking paragraph marked as a title: a paragraph right under a title
    (blank and markup lines between), ending with "?", followed by more text in its section."""
    roles = list(roles)
    blocks = _text_blocks(roles)
    for (start, end), (next_start, _) in itertools.pairwise(blocks):
        before = [role for role in roles[:start] if role not in ("blank", "markup")]
        under_title = bool(before) and before[-1] == "heading"
        same_section = "heading" not in roles[end:next_start]
        if under_title and same_section and lines[end - 1].rstrip().endswith("?"):
            roles[start:end] = ["heading"] * (end - start)
    return roles


def _narrow(lines: list[str], roles: list[str], lexemes: list[set[str]], idf: dict[str, float], max_lines: int):
    roles = _questions_as_titles(lines, roles)
    blocks = _text_blocks(roles)
    if not blocks:  # a chunk of titles or markup only: cite it whole, within the limit
        return 0, min(len(lines), max_lines)
    # Each line's lexemes, with a title's lexemes moved to the first text line under it.
    weights = [set(found) if role == "text" else set() for found, role in zip(lexemes, roles, strict=True)]
    carried: set[str] = set()
    for index, role in enumerate(roles):
        if role == "heading":
            carried |= lexemes[index]
        elif role == "text" and carried:
            weights[index] |= carried
            carried = set()

    def block_weight(block: tuple[int, int]) -> float:
        return sum(idf.get(lexeme, 0.0) for lexeme in set().union(*weights[block[0] : block[1]]))

    scored = [block_weight(block) for block in blocks]
    chosen = max(range(len(blocks)), key=lambda position: (scored[position], -position))
    start, end = blocks[chosen]
    if end - start > max_lines:
        return _best_window(weights, idf, start, end, max_lines)
    # Following blocks of the same section while they fit (a title ends the section).
    for next_start, next_end in blocks[chosen + 1 :]:
        if any(role == "heading" for role in roles[end:next_start]) or next_end - start > max_lines:
            break
        end = next_end
    return start, end


def _characters_fit(lines: list[str], start: int, end: int, max_chars: int) -> tuple[int, int, str]:
    """The lines start..end cut to at most `max_chars` characters: (start, end, text)."""
    text = "\n".join(lines[start:end])
    if len(text) <= max_chars:
        return start, end, text
    while end - start > 1 and len(text) > max_chars:
        end -= 1
        text = "\n".join(lines[start:end])
    return start, end, text[:max_chars]


def snippets_narrow(
    *, chunks: list[Chunk], query: LexicalQuery, max_lines: int, max_chars: int | None = None
) -> list[Snippet]:
    """One snippet per chunk, in order, each with its own line range in the file, of at most
    `max_lines` lines and `max_chars` characters (default ASK_SNIPPET_MAX_CHARS)."""
    if max_chars is None:
        max_chars = settings.ASK_SNIPPET_MAX_CHARS
    idf = {term.lexeme: term.idf for term in query.terms if term.idf > 0}
    chunk_lines = [chunk.text.split("\n") for chunk in chunks]
    flat = [line for lines in chunk_lines for line in lines]
    flat_lexemes = texts_lexemes(flat) if idf else [set() for _ in flat]
    snippets = []
    offset = 0
    for chunk, lines in zip(chunks, chunk_lines, strict=True):
        lexemes = flat_lexemes[offset : offset + len(lines)]
        offset += len(lines)
        roles = line_roles(path=chunk.path, lines=lines)
        start, end = _narrow(lines, roles, lexemes, idf, max_lines)
        start, end, text = _characters_fit(lines, start, end, max_chars)
        snippets.append(
            Snippet(
                text=text,
                start_line=chunk.start_line + start,
                end_line=chunk.start_line + end - 1,
            )
        )
    return snippets
