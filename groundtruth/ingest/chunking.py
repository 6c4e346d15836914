"""Structure-aware chunking with exact line citations.

`file_chunk(path=..., text=..., max_chars=..., config_whole_max_chars=...)` returns ChunkDrafts.
Every draft's `text` is exactly lines `start_line..end_line` (1-based, inclusive) of the file as
git stores it (line breaks are `\\n`; a trailing `\\r` of CRLF files is dropped), so a citation
`path:start_line-end_line` at the indexed commit shows the chunk's text.

How files are cut, by extension:
- Markdown (.md .markdown .mdx): read as a document (`markdown_structure`): one section per
  heading in any form (ATX, setext, HTML `<hN>`, `<details><summary>`, a bold question alone on
  its line); the heading trail is the stack of enclosing headings' plain text, outermost first,
  under the front matter's `title` when the page has no `# title` of its own. Front matter and
  navigation (tables of contents, `{:toc}`) are in no chunk. A heading with no body of its own
  is folded into its first subsection instead of becoming a chunk.
- reStructuredText (.rst .rest): sections from underlined (and optionally overlined) titles;
  levels follow the order in which adornment styles first appear, as docutils does.
- YAML, TOML, JSON: the whole file when it has at most CONFIG_WHOLE_FILE_MAX_CHARS characters;
  else one section per top-level key (YAML, JSON) or table (TOML), with comments just above a
  key kept with it; the trail is the key or table name.
- anything else: one section.
A section longer than CHUNK_MAX_CHARS is split at blank lines outside code fences, then between
lines; a piece still longer (a line longer than the maximum) is cut by characters, at a line break
or a space in its second half where there is one (`_characters_split`): no chunk exceeds
CHUNK_MAX_CHARS characters, whatever the file's line structure. A piece cut inside a line cites
that line (its text is then part of the cited lines, not all of them). Leading and trailing blank
lines are not part of a chunk. A title in the heading trail is cut to HEADING_TITLE_MAX_CHARS.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from groundtruth.ingest.markdown_structure import markdown_document

MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdx")
RST_SUFFIXES = (".rst", ".rest")
YAML_SUFFIXES = (".yml", ".yaml")
TOML_SUFFIXES = (".toml",)
JSON_SUFFIXES = (".json",)

_RST_ADORNMENT = re.compile(r"^([=\-`:'\"~^_*+#<>.!$%&,;/?@\\|])\1+\s*$")
_YAML_TOP_KEY = re.compile(r"""^(?:"(?P<dq>[^"]+)"|'(?P<sq>[^']+)'|(?P<plain>[^\s#\-?:][^:#]*?))\s*:(?:\s|$)""")
_TOML_TABLE = re.compile(r"^\[\[?\s*(?P<name>[^\]]+?)\s*\]\]?\s*(?:#.*)?$")
# A fence opens at any indentation (fences in list items are indented) and is closed only by a
# line of the same character at least as long, so a ```` fence may show ``` lines inside it.
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_RST_MARKUP = re.compile(r"^\s*\.\.(\s|$)|^__ ")  # targets, comments, directives, anonymous targets
_MARKDOWN_MARKUP = re.compile(r"^\s{0,3}\[[^\]]+\]:\s")  # link reference definitions
# A title longer than this is cut (ending with "…"): the trail is repeated in every chunk of the
# section, in every search result and in the text embedded, and a real title is a line, not a
# page (a 200 KB "heading" once made every chunk of its section 200 KB).
HEADING_TITLE_MAX_CHARS = 200


@dataclass(frozen=True)
class ChunkDraft:
    start_line: int
    end_line: int
    heading: tuple[str, ...]
    text: str


@dataclass(frozen=True)
class _Section:
    start: int  # 0-based index of the first line
    end: int  # 0-based index one past the last line
    heading: tuple[str, ...]


def file_lines(text: str) -> list[str]:
    """The file's lines as git numbers them: split on \\n only, CR of CRLF dropped."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def file_line_count(text: str) -> int:
    """len(file_lines(text)), without splitting the file."""
    return text.count("\n") + (0 if not text or text.endswith("\n") else 1)


def file_lines_range(text: str, *, start: int, end: int) -> list[str]:
    """file_lines(text)[start - 1 : end]: the lines start..end (1-based, inclusive), numbered
    alike, while splitting only up to line `end` and dropping the CR of those lines only (a whole
    1 MB file costs milliseconds more, read on every GET /sources)."""
    # Up to the last line: the piece after a final line break is no line.
    lines = text.split("\n", end)[start - 1 : min(end, file_line_count(text))]
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def file_chunk(*, path: str, text: str, max_chars: int, config_whole_max_chars: int) -> list[ChunkDraft]:
    lines = file_lines(text)
    if not lines:
        return []
    lowered = path.lower()
    if lowered.endswith(MARKDOWN_SUFFIXES):
        sections = _markdown_sections(lines)
    elif lowered.endswith(RST_SUFFIXES):
        sections = _rst_sections(lines)
    elif lowered.endswith(YAML_SUFFIXES + TOML_SUFFIXES + JSON_SUFFIXES):
        if len("\n".join(lines)) <= config_whole_max_chars:
            sections = [_Section(0, len(lines), ())]
        elif lowered.endswith(YAML_SUFFIXES):
            sections = _yaml_sections(lines)
        elif lowered.endswith(TOML_SUFFIXES):
            sections = _toml_sections(lines)
        else:
            sections = _json_sections(lines)
    else:
        sections = [_Section(0, len(lines), ())]
    drafts: list[ChunkDraft] = []
    for section in sections:
        drafts.extend(_section_split(lines, section, max_chars))
    return [piece for draft in drafts for piece in _characters_split(draft, max_chars)]


def _title_cut(title: str) -> str:
    if len(title) <= HEADING_TITLE_MAX_CHARS:
        return title
    return title[: HEADING_TITLE_MAX_CHARS - 1] + "…"


def _characters_split(draft: ChunkDraft, max_chars: int) -> list[ChunkDraft]:
    """`draft` cut into pieces of at most `max_chars` characters (only a draft longer than that
    is: a single line longer than the maximum), each citing the lines it holds part of; titles in
    the heading trail are cut to HEADING_TITLE_MAX_CHARS. A cut is made at the last line break in
    the window's second half, else at its last space there, else at `max_chars`; the whitespace
    at a cut belongs to no piece."""
    heading = tuple(_title_cut(title) for title in draft.heading)
    text = draft.text
    if len(text) <= max_chars:
        return [draft if heading == draft.heading else ChunkDraft(draft.start_line, draft.end_line, heading, text)]
    pieces: list[ChunkDraft] = []
    offset = 0
    while offset < len(text):
        end = offset + max_chars
        if end < len(text):
            # One character past the window: a separator right after it allows a full-size piece.
            window = text[offset : end + 1]
            cut = window.rfind("\n")
            if cut < max_chars // 2:
                cut = window.rfind(" ")
            if cut >= max_chars // 2:
                end = offset + cut
        piece = text[offset:end].rstrip()
        if piece:
            start_line = draft.start_line + text.count("\n", 0, offset)
            pieces.append(ChunkDraft(start_line, start_line + piece.count("\n"), heading, piece))
        offset = end
        while offset < len(text) and text[offset].isspace():
            offset += 1
    return pieces


def line_roles(*, path: str, lines: list[str]) -> list[str]:
    """The role of each line by the rules of the chunking: "heading" (a section title with its
    adornment), "markup" (reStructuredText targets, comments and directive lines, Markdown link
    reference definitions, transitions), "blank" or "text". `/ask` narrows a citation to text
    lines, so a snippet is the answer under a title, not the title alone."""
    roles = ["text" if line.strip() else "blank" for line in lines]
    lowered = path.lower()
    if lowered.endswith(MARKDOWN_SUFFIXES):
        document = markdown_document(lines)
        for index in document.heading_lines:
            if roles[index] == "text":
                roles[index] = "heading"
        for index in document.markup_lines:
            if roles[index] == "text":
                roles[index] = "markup"
        spans = []
        markup = _MARKDOWN_MARKUP
    elif lowered.endswith(RST_SUFFIXES):
        spans = [(first, body) for first, body, _, _ in _rst_titles(lines)]
        markup = _RST_MARKUP
    else:
        return roles
    for first, body in spans:
        for index in range(first, min(body, len(lines))):
            if roles[index] == "text":
                roles[index] = "heading"
    for index, line in enumerate(lines):
        if roles[index] == "text" and (markup.match(line) or _is_transition(lines, index)):
            roles[index] = "markup"
    return roles


def _is_transition(lines: list[str], index: int) -> bool:
    """A line of adornment characters alone between blank lines (`----------`)."""
    return (
        bool(_RST_ADORNMENT.match(lines[index].rstrip()))
        and (index == 0 or not lines[index - 1].strip())
        and (index + 1 == len(lines) or not lines[index + 1].strip())
    )


# --- sizing ----------------------------------------------------------------------------------
def _trim(lines: list[str], start: int, end: int) -> tuple[int, int]:
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return start, end


def _blocks(lines: list[str], start: int, end: int) -> list[tuple[int, int]]:
    """Paragraph-like blocks: runs of lines between blank lines; a code fence is one block."""
    blocks: list[tuple[int, int]] = []
    block_start: int | None = None
    fence: str | None = None
    for index in range(start, end):
        line = lines[index]
        match = _FENCE.match(line)
        if match and (fence is None or _fence_closes(line, fence)):
            if block_start is None:
                block_start = index
            fence = match.group(1) if fence is None else None
            continue
        if not line.strip() and fence is None:
            if block_start is not None:
                blocks.append((block_start, index))
                block_start = None
            continue
        if block_start is None:
            block_start = index
    if block_start is not None:
        blocks.append((block_start, end))
    return blocks


def _fence_closes(line: str, fence: str) -> bool:
    marker = line.strip()
    return marker[0] == fence[0] and len(marker) >= len(fence) and marker == marker[0] * len(marker)


def _span_chars(lines: list[str], start: int, end: int) -> int:
    return sum(len(line) for line in lines[start:end]) + max(end - start - 1, 0)


def _section_split(lines: list[str], section: _Section, max_chars: int) -> list[ChunkDraft]:
    start, end = _trim(lines, section.start, section.end)
    if start >= end:
        return []
    if _span_chars(lines, start, end) <= max_chars:
        return [_draft(lines, start, end, section.heading)]
    # Greedy packing of whole blocks; a block too big alone is packed line by line.
    pieces: list[tuple[int, int]] = []
    units: list[tuple[int, int]] = []
    for block_start, block_end in _blocks(lines, start, end):
        if _span_chars(lines, block_start, block_end) <= max_chars:
            units.append((block_start, block_end))
        else:
            units.extend((index, index + 1) for index in range(block_start, block_end))
    piece_start, piece_end = units[0]
    for unit_start, unit_end in units[1:]:
        if _span_chars(lines, piece_start, unit_end) <= max_chars:
            piece_end = unit_end
        else:
            pieces.append((piece_start, piece_end))
            piece_start, piece_end = unit_start, unit_end
    pieces.append((piece_start, piece_end))
    drafts = []
    for piece_start, piece_end in pieces:
        trimmed_start, trimmed_end = _trim(lines, piece_start, piece_end)
        if trimmed_start < trimmed_end:
            drafts.append(_draft(lines, trimmed_start, trimmed_end, section.heading))
    return drafts


def _draft(lines: list[str], start: int, end: int, heading: tuple[str, ...]) -> ChunkDraft:
    return ChunkDraft(start_line=start + 1, end_line=end, heading=heading, text="\n".join(lines[start:end]))


# --- Markdown --------------------------------------------------------------------------------
def _markdown_sections(lines: list[str]) -> list[_Section]:
    return [_Section(section.start, section.end, section.heading) for section in markdown_document(lines).sections]


# --- reStructuredText ------------------------------------------------------------------------
def _heading_sections(
    lines: list[str], headings: list[tuple[int, int, int, str]], *, pending_start: int | None
) -> list[_Section]:
    """One section per heading (first line, body start, level, title), from the heading to the
    next one, with the titles of its enclosing headings. A heading without a body is folded into
    its first subsection; `pending_start`, where lines before the first heading belong to it, is
    where the first section starts."""
    sections: list[_Section] = []
    stack: list[tuple[int, str]] = []
    for position, (line, body_start, level, title) in enumerate(headings):
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        end = headings[position + 1][0] if position + 1 < len(headings) else len(lines)
        start = pending_start if pending_start is not None else line
        pending_start = None
        body_empty = all(not text.strip() for text in lines[body_start:end])
        next_is_child = position + 1 < len(headings) and headings[position + 1][2] > level
        if body_empty and next_is_child:
            pending_start = start
            continue
        sections.append(_Section(start, end, tuple(title for _, title in stack)))
    return sections


def _rst_titles(lines: list[str]) -> list[tuple[int, int, int, str]]:
    """(first line, body start, level, title) of every section title; levels follow the order in
    which adornment styles first appear, as docutils does."""
    styles: list[tuple[str, bool]] = []
    titles: list[tuple[int, int, int, str]] = []
    index = 0
    while index < len(lines) - 1:
        line = lines[index]
        text = line.rstrip()
        overline = _RST_ADORNMENT.match(text)
        # Overlined title: adornment, title, matching adornment.
        if overline and index + 2 < len(lines):
            title = lines[index + 1].strip()
            under = _RST_ADORNMENT.match(lines[index + 2].rstrip())
            if (
                title
                and under
                and under.group(1) == overline.group(1)
                and len(lines[index + 2].rstrip()) == len(text)
                and len(title) <= len(text)
                and (index == 0 or not lines[index - 1].strip())
            ):
                style = (overline.group(1), True)
                if style not in styles:
                    styles.append(style)
                titles.append((index, index + 3, styles.index(style) + 1, title))
                index += 3
                continue
        under = _RST_ADORNMENT.match(lines[index + 1].rstrip())
        if (
            text
            and not line[0].isspace()
            and not overline
            and under
            and len(lines[index + 1].rstrip()) >= len(text)
            and len(lines[index + 1].rstrip()) >= 2
            and (index == 0 or not lines[index - 1].strip())
        ):
            style = (under.group(1), False)
            if style not in styles:
                styles.append(style)
            titles.append((index, index + 2, styles.index(style) + 1, text.strip()))
            index += 2
            continue
        index += 1
    return titles


def _rst_sections(lines: list[str]) -> list[_Section]:
    titles = _rst_titles(lines)
    sections: list[_Section] = []
    first = titles[0][0] if titles else len(lines)
    pending_start: int | None = None
    # Targets and comments alone before the first title (`.. _faq:`) open the first section
    # rather than being a chunk that says nothing.
    if first > 0 and titles and all(not line.strip() or _RST_MARKUP.match(line) for line in lines[:first]):
        pending_start = 0
    elif first > 0:
        sections.append(_Section(0, first, ()))
    return sections + _heading_sections(lines, titles, pending_start=pending_start)


# --- configuration files ---------------------------------------------------------------------
def _keyed_sections(lines: list[str], starts: list[tuple[int, str]]) -> list[_Section]:
    """Sections from (line index, name) starts; comment lines just above a start belong to it."""
    if not starts:
        return [_Section(0, len(lines), ())]
    adjusted: list[tuple[int, str]] = []
    for line, name in starts:
        start = line
        while start > 0 and lines[start - 1].lstrip().startswith("#"):
            start -= 1
        adjusted.append((start, name))
    sections: list[_Section] = []
    if adjusted[0][0] > 0:
        sections.append(_Section(0, adjusted[0][0], ()))
    for position, (start, name) in enumerate(adjusted):
        end = adjusted[position + 1][0] if position + 1 < len(adjusted) else len(lines)
        sections.append(_Section(start, end, (name,) if name else ()))
    return sections


def _yaml_sections(lines: list[str]) -> list[_Section]:
    starts: list[tuple[int, str]] = []
    for index, line in enumerate(lines):
        if line.startswith("---"):
            starts.append((index, ""))
            continue
        match = _YAML_TOP_KEY.match(line)
        if match:
            starts.append((index, (match.group("dq") or match.group("sq") or match.group("plain")).strip()))
    return _keyed_sections(lines, starts)


def _toml_sections(lines: list[str]) -> list[_Section]:
    starts = [(index, match.group("name")) for index, line in enumerate(lines) if (match := _TOML_TABLE.match(line))]
    return _keyed_sections(lines, starts)


def _json_sections(lines: list[str]) -> list[_Section]:
    """Top-level keys of a JSON object, found by a scanner that tracks strings and depth."""
    starts: list[tuple[int, str]] = []
    depth = 0
    for index, line in enumerate(lines):
        position = 0
        while position < len(line):
            char = line[position]
            if char == '"':
                end = position + 1
                while end < len(line) and line[end] != '"':
                    end += 2 if line[end] == "\\" else 1
                key = line[position + 1 : end]
                rest = line[end + 1 :].lstrip()
                if depth == 1 and rest.startswith(":"):
                    starts.append((index, key))
                position = end + 1
                continue
            if char in "{[":
                depth += 1
            elif char in "}]":
                depth -= 1
            position += 1
    if not starts:
        return [_Section(0, len(lines), ())]
    # The opening brace belongs to the first key's section rather than being a chunk of its own.
    starts[0] = (0, starts[0][1])
    return _keyed_sections(lines, starts)
