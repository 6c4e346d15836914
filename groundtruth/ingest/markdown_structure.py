"""Markdown read as a document: its sections, their plain-text heading trail, and the lines that
are navigation or markup rather than prose.

`markdown_document(lines)` parses a file's lines (`chunking.file_lines`) once. Line numbers are
the file's own (0-based here), so the chunks cut from the sections cite exact lines.

What counts as a heading (each opens a section; the trail holds plain text only: no emphasis,
code backticks, links, HTML tags, `<a name>` anchors or `{#id}` attributes):
- ATX and setext headings, found by markdown-it (so `#` lines in code are not headings);
- HTML `<h1>`-`<h6>` lines, with any attributes (`<h3 name="faq">`);
- `<details><summary>Question</summary>`: the summary, one level below the enclosing heading,
  until `</details>`, where the enclosing section resumes (VitePress `::: details Question`
  containers alike);
- a paragraph that is a bold question alone on its line (`**How do I ...?**`), one level below
  the enclosing heading, until the next heading or bold question.
An anchor alone on the line(s) just above a heading (`<a name="x"></a>`) belongs to that heading,
not to the end of the previous section.

Front matter (YAML `---` or TOML `+++`) is not document text: it is in no section. Its `title`
opens every heading trail when the document has no level-1 heading of its own (Docusaurus and
Hugo pages: the title is the page's only `<h1>`); a document with one already names itself.

Navigation is not indexed: a list whose every item is only a link, most of them into the page
(`- [Q?](#q)`), its HTML form (an HTML block of links alone, mostly into the page:
`<ul><li><a href="#q">Q?</a></li>...</ul>`, `<p><a href="#a">A</a> · <a href="#b">B</a></p>`),
the short label that introduces it (`*FAQ:*`), a paragraph of a label and in-page
links alone (`*Related*: [Q?](#q)`), kramdown's `{:toc}` (with its
`* Table of Contents` item), `[[toc]]`, `[TOC]` and `<TOCInline />`. Such a block repeats, in a
few words each, the titles of the sections it links to; as a passage it matches every question
those sections answer by their own wording and outranks the answers (Powerlevel10k's FAQ: its
TOC chunk ranked first for most of its questions). Dropping it rather than down-weighting it
keeps ranking free of a special case; what a reader finds there, the linked sections hold. A
section whose body is only navigation becomes no chunk (its title still opens its subsections'
trails).

Markup lines (kept in the chunks, so citations stay contiguous, but not prose for `/ask`'s
narrowing): MDX `import`/`export` lines, JSX/Vue component lines (`<Note />`, `<script setup>`
blocks), HTML comments, Hugo shortcodes, anchors, thematic breaks (`---`), container and
admonition markers (`:::tip`, `:::`, `!!! note`, `> [!NOTE]`). A section of markup alone becomes
no chunk.
"""

from __future__ import annotations

import html
import re
import tomllib
from dataclasses import dataclass

import yaml
from markdown_it import MarkdownIt
from markdown_it.token import Token

_markdown = MarkdownIt("commonmark")

_HTML_HEADING_OPEN = re.compile(r"^\s{0,3}<h([1-6])(?:\s[^>]*)?>", re.IGNORECASE)
_DETAILS_OPEN = re.compile(r"^\s*<details\b", re.IGNORECASE)
_DETAILS_CLOSE = re.compile(r"</details\s*>", re.IGNORECASE)
_SUMMARY = re.compile(r"<summary\b[^>]*>(?P<inner>.*?)</summary\s*>", re.IGNORECASE | re.DOTALL)
_CONTAINER_OPEN = re.compile(r"^\s*(?P<colons>:{3,})\s*(?P<kind>[\w-]+)(?P<title>.*)$")
_CONTAINER_CLOSE = re.compile(r"^\s*(?P<colons>:{3,})\s*$")
_ADMONITION = re.compile(r"^\s*(?:!!!|\?\?\?\+?)\s*\w")  # MkDocs `!!! note "Title"`, `??? tip`
_ALERT = re.compile(r"^\s*>\s*\[!\w+\]\s*$")  # GitHub `> [!NOTE]`
_ANCHOR_LINE = re.compile(
    r"^\s*(?:<a\s[^>]*>\s*</a>|<a\s[^>]*/>|<(?:span|div)\s[^>]*\bid=[^>]*>\s*</(?:span|div)>)\s*$", re.IGNORECASE
)
_MODULE_LINE = re.compile(
    r"^(?:import\s.*\sfrom\s+['\"][^'\"]+['\"]|import\s+['\"][^'\"]+['\"]|export\s+(?:const|default|function|let|var|\{)).*$"
)
_COMPONENT_LINE = re.compile(r"^\s*</?[A-Z][\w.]*(?:\s[^<>]*)?/?>\s*$")
_SHORTCODE_LINE = re.compile(r"^\s*\{\{[<%].*[>%]\}\}\s*$")  # Hugo `{{< img ... >}}`
_TOC_COMPONENT = re.compile(r"^\s*<TOC\w*\b")
_TOC_MARKER = re.compile(r"^\s*(?:\{:\s*toc\s*\}|\[\[toc\]\]|\[toc\])\s*$", re.IGNORECASE)
_LIST_ITEM = re.compile(r"^\s*(?:[*+-]|\d+[.)])\s+\S")
_BOLD_LINE = re.compile(r"^\s{0,3}(\*\*|__)(?P<inner>(?:(?!\1).)+)\1\s*$")
_NAVIGATION_LABEL = re.compile(r"^[\w\s*_-]{1,40}:[*_]*$")
_HEADING_ATTRIBUTES = re.compile(r"\s*\{[#:.][^}]*\}\s*$")  # `## Title {#id}`, kramdown `{: .class}`
_LINK_TRAILER = re.compile(r"^[\s.,;:]*$")
_LINK_SEPARATOR = re.compile(r"^[\s.,;:()]*(?:(?:and|or)[\s.,;:()]*)?$")
_HTML_LINK = re.compile(r"<a\s[^>]*?\bhref\s*=\s*[\"']?(?P<href>[^\"'\s>]*)[^>]*>.*?</a\s*>", re.IGNORECASE | re.DOTALL)
_HTML_TAG = re.compile(r"<[^>]*>")
_HTML_HEADING_ANYWHERE = re.compile(r"<h[1-6]\b", re.IGNORECASE)
# Between the links of an HTML table of contents or navigation bar (`A · B | C`): no words.
_HTML_LINK_SEPARATORS = re.compile(r"^[\s.,;:()|/\u2022\u00b7\u2013\u2014-]*$")


@dataclass(frozen=True)
class MarkdownSection:
    start: int  # 0-based index of the first line
    end: int  # 0-based index one past the last line
    heading: tuple[str, ...]


@dataclass(frozen=True)
class MarkdownDocument:
    sections: list[MarkdownSection]
    heading_lines: frozenset[int]
    markup_lines: frozenset[int]  # navigation included: it is no prose either


@dataclass(frozen=True)
class _Heading:
    first: int
    body: int
    level: int | None  # None: one below the enclosing heading (summaries, bold questions)
    title: str
    kind: str  # "heading", "summary" or "bold"


@dataclass(frozen=True)
class _Resume:
    line: int  # where a <details> block ended: the enclosing section goes on


def plain_text(markdown: str) -> str:
    """Inline Markdown or HTML as a reader sees it: text and code, no markup, tags or anchors."""
    tokens = _markdown.parseInline(markdown)
    parts: list[str] = []
    for token in tokens:
        for child in token.children or []:
            if child.type in {"text", "code_inline"}:
                parts.append(child.content)
            elif child.type in {"softbreak", "hardbreak"}:
                parts.append(" ")
            elif child.type == "image":
                parts.append(child.content)
    text = html.unescape(" ".join("".join(parts).split()))
    return _HEADING_ATTRIBUTES.sub("", text).strip()


def _front_matter(lines: list[str]) -> tuple[int, str | None]:
    """(index one past the closing fence, title) of YAML `---` or TOML `+++` front matter."""
    if not lines or lines[0].strip() not in {"---", "+++"}:
        return 0, None
    fence = lines[0].strip()
    closers = {"---", "..."} if fence == "---" else {"+++"}
    for index in range(1, len(lines)):
        if lines[index].strip() in closers:
            source = "\n".join(lines[1:index])
            try:
                data = yaml.safe_load(source) if fence == "---" else tomllib.loads(source)
            except (yaml.YAMLError, tomllib.TOMLDecodeError):
                data = None
            title = data.get("title") if isinstance(data, dict) else None
            return index + 1, plain_text(title) if isinstance(title, str) and title.strip() else None
    return 0, None


def _is_navigation_list(tokens: list[Token], start: int, end: int) -> bool:
    """True when every item of the list tokens[start:end] is only a link, mostly into the page."""
    inlines = [token for token in tokens[start:end] if token.type == "inline"]
    if not inlines:
        return False
    in_page = 0
    for inline in inlines:
        children = [child for child in inline.children or [] if child.type not in {"softbreak", "hardbreak"}]
        if not children or children[0].type != "link_open":
            return False
        in_page += str(children[0].attrGet("href") or "").startswith("#")
        closing = next((index for index, child in enumerate(children) if child.type == "link_close"), None)
        if closing is None:
            return False
        trailer = children[closing + 1 :]
        if not all(child.type == "text" and _LINK_TRAILER.match(child.content) for child in trailer):
            return False
    # Mostly into the page: a list of links to other pages is a reader's index, kept as text.
    return in_page * 2 >= len(inlines)


def _is_html_navigation(source: str) -> bool:
    """True when an HTML block is links alone (`<ul><li><a href="#q">Q?</a></li>...`), at least
    two, mostly into the page: the HTML form of a table of contents. A heading in the block, or
    any text outside the links, makes it content."""
    if _HTML_HEADING_ANYWHERE.search(source):
        return False
    hrefs = [match.group("href") for match in _HTML_LINK.finditer(source)]
    if len(hrefs) < 2:
        return False
    outside = html.unescape(_HTML_TAG.sub(" ", _HTML_LINK.sub(" ", source)))
    if not _HTML_LINK_SEPARATORS.match(outside):
        return False
    return sum(href.startswith("#") for href in hrefs) * 2 >= len(hrefs)


def _is_navigation_paragraph(inline: Token) -> bool:
    """A label and in-page links alone (`*Related*: [Q?](#q), [R?](#r)`): a pointer to sections
    elsewhere in the page, which holds their titles and nothing of their answers."""
    outside: list[str] = [""]  # the text before the first link, then between and after links
    in_link = False
    for child in inline.children or []:
        if child.type == "link_open":
            if not str(child.attrGet("href") or "").startswith("#"):
                return False
            in_link = True
        elif child.type == "link_close":
            in_link = False
            outside.append("")
        elif not in_link and child.type in {"text", "code_inline"}:
            outside[-1] += child.content
    return (
        len(outside) > 1
        and bool(_NAVIGATION_LABEL.match(outside[0].strip()))
        and all(_LINK_SEPARATOR.match(gap) for gap in outside[1:])
    )


def _matching_close(tokens: list[Token], start: int) -> int:
    depth = 0
    for index in range(start, len(tokens)):
        depth += tokens[index].nesting
        if depth == 0:
            return index
    return len(tokens) - 1


def markdown_document(lines: list[str]) -> MarkdownDocument:
    front_end, front_title = _front_matter(lines)
    # Front matter lines are blanked for the parser so its line numbers stay those of the file.
    tokens = _markdown.parse("\n".join([""] * front_end + lines[front_end:]))

    code: set[int] = set()
    markup: set[int] = set()
    navigation: set[int] = set()
    events: list[_Heading | _Resume] = []
    has_level_one = False

    index = 0
    while index < len(tokens):
        token = tokens[index]
        span = range(token.map[0], token.map[1]) if token.map else range(0)
        if token.type in {"fence", "code_block"}:
            code.update(span)
        elif token.type == "hr":
            markup.update(span)
        elif token.type == "heading_open" and token.map:
            title = plain_text(tokens[index + 1].content) if index + 1 < len(tokens) else ""
            level = int(token.tag[1])
            has_level_one = has_level_one or level == 1
            events.append(_Heading(token.map[0], token.map[1], level, title, "heading"))
        elif token.type == "html_block" and token.map:
            if token.content.lstrip().lower().startswith(("<script", "<style", "<!--")):
                markup.update(span)
            elif _is_html_navigation(token.content):
                navigation.update(span)
            else:
                for heading in _html_headings(lines, token.map[0], token.map[1]):
                    has_level_one = has_level_one or heading.level == 1
                    events.append(heading)
        elif token.type in {"bullet_list_open", "ordered_list_open"} and token.level == 0 and token.map:
            # Top-level lists only: a few links nested in a list item are part of its prose.
            if _is_navigation_list(tokens, index, _matching_close(tokens, index)):
                navigation.update(span)
                label = _navigation_label(lines, tokens, index)
                if label is not None:
                    navigation.add(label)
        elif token.type == "paragraph_open" and token.level == 0 and token.map:
            if _is_navigation_paragraph(tokens[index + 1]):
                navigation.update(span)
            match = _BOLD_LINE.match(lines[token.map[0]])
            if match and "*" not in match.group("inner"):
                title = plain_text(match.group("inner"))
                if title.endswith("?"):
                    events.append(_Heading(token.map[0], token.map[0] + 1, None, title, "bold"))
        index += 1

    events.extend(_line_scan(lines, front_end, code, markup, navigation))
    # A block that ends where a heading starts ends first, so the heading opens the next section.
    events.sort(key=lambda event: (event.first, 1) if isinstance(event, _Heading) else (event.line, 0))
    events = _anchors_attach(lines, events, markup)

    root = (front_title,) if front_title and not has_level_one else ()
    sections = _sections(lines, events, root=root, start=front_end, markup=markup, navigation=navigation)
    heading_lines = {line for event in events if isinstance(event, _Heading) for line in range(event.first, event.body)}
    return MarkdownDocument(
        sections=sections,
        heading_lines=frozenset(heading_lines),
        markup_lines=frozenset((markup | navigation) - heading_lines),
    )


def _html_headings(lines: list[str], start: int, end: int) -> list[_Heading]:
    """`<h1>`-`<h6>` headings that open a line of an HTML block (possibly closing lines below)."""
    headings = []
    index = start
    while index < end:
        match = _HTML_HEADING_OPEN.match(lines[index])
        if match is None:
            index += 1
            continue
        closing = re.compile(rf"</h{match.group(1)}\s*>", re.IGNORECASE)
        last = next((line for line in range(index, end) if closing.search(lines[line])), index)
        source = "\n".join(lines[index : last + 1])
        inner = closing.split(source[match.end() :], maxsplit=1)[0]
        headings.append(_Heading(index, last + 1, int(match.group(1)), plain_text(inner), "heading"))
        index = last + 1
    return headings


def _navigation_label(lines: list[str], tokens: list[Token], list_open: int) -> int | None:
    """The line of a short label paragraph (`*FAQ:*`) just before a navigation list."""
    if list_open < 3 or tokens[list_open - 1].type != "paragraph_close":
        return None
    paragraph = tokens[list_open - 3]
    if paragraph.type != "paragraph_open" or not paragraph.map or paragraph.map[1] - paragraph.map[0] != 1:
        return None
    line = paragraph.map[0]
    return line if _NAVIGATION_LABEL.match(lines[line].strip()) else None


def _line_scan(
    lines: list[str], front_end: int, code: set[int], markup: set[int], navigation: set[int]
) -> list[_Heading | _Resume]:
    """Line patterns markdown-it does not know (it reads them as paragraphs or HTML): details and
    containers, admonition markers, TOC markers, component and module lines, anchors."""
    events: list[_Heading | _Resume] = []
    details: list[bool] = []  # per open <details>: whether it has a summary heading
    containers: list[tuple[int, bool]] = []  # per open ::: container: colons, whether it is a heading
    for index in range(front_end, len(lines)):
        if index in code:
            continue
        line = lines[index]
        if _DETAILS_OPEN.match(line):
            source = "\n".join(lines[index : index + 6])
            summary = _SUMMARY.search(source)
            if summary:
                body = index + source[: summary.end()].count("\n") + 1
                events.append(_Heading(index, body, None, plain_text(summary.group("inner")), "summary"))
            details.append(summary is not None)
        if _DETAILS_CLOSE.search(line) and details:
            if details.pop() and index + 1 < len(lines):
                events.append(_Resume(index + 1))
        if container := _CONTAINER_OPEN.match(line):
            title = plain_text(container.group("title"))
            is_heading = container.group("kind").lower() == "details" and bool(title)
            if is_heading:
                events.append(_Heading(index, index + 1, None, title, "summary"))
            containers.append((len(container.group("colons")), is_heading))
            markup.add(index)
        elif closing := _CONTAINER_CLOSE.match(line):
            markup.add(index)
            if containers and containers[-1][0] == len(closing.group("colons")):
                if containers.pop()[1] and index + 1 < len(lines):
                    events.append(_Resume(index + 1))
        if _TOC_MARKER.match(line) or _TOC_COMPONENT.match(line):
            navigation.add(index)
            previous = index - 1
            if _TOC_MARKER.match(line) and previous >= 0 and _LIST_ITEM.match(lines[previous]):
                navigation.add(previous)  # kramdown: `* Table of Contents` then `{:toc}`
        elif (
            _ADMONITION.match(line)
            or _ALERT.match(line)
            or _ANCHOR_LINE.match(line)
            or _MODULE_LINE.match(line)
            or _COMPONENT_LINE.match(line)
            or _SHORTCODE_LINE.match(line)
        ):
            markup.add(index)
    return events


def _anchors_attach(lines: list[str], events: list[_Heading | _Resume], markup: set[int]) -> list[_Heading | _Resume]:
    """An anchor alone on the line(s) just above a heading (blank lines between allowed) opens it."""
    attached: list[_Heading | _Resume] = []
    for event in events:
        if isinstance(event, _Heading):
            first = event.first
            above = first - 1
            while above >= 0 and (not lines[above].strip() or _ANCHOR_LINE.match(lines[above])):
                if lines[above].strip():
                    first = above
                above -= 1
            if first != event.first and all(first > _event_line(other) for other in attached):
                event = _Heading(first, event.body, event.level, event.title, event.kind)
        attached.append(event)
    return attached


def _event_line(event: _Heading | _Resume) -> int:
    return event.first if isinstance(event, _Heading) else event.line


def _sections(
    lines: list[str],
    events: list[_Heading | _Resume],
    *,
    root: tuple[str, ...],
    start: int,
    markup: set[int],
    navigation: set[int],
) -> list[MarkdownSection]:
    # Levels and trails first: summaries and bold questions sit one below what encloses them.
    stack: list[tuple[int, str, str]] = []  # level, title, kind
    resolved: list[tuple[int, int, int | None, tuple[str, ...]]] = []  # first, body, level (None: resume), trail
    for event in events:
        if isinstance(event, _Resume):
            summaries = [position for position, entry in enumerate(stack) if entry[2] == "summary"]
            if summaries:
                del stack[summaries[-1] :]
            resolved.append((event.line, event.line, None, root + tuple(entry[1] for entry in stack)))
            continue
        if event.level is not None:
            level = event.level
        elif event.kind == "bold":
            enclosing = [entry for entry in stack if entry[2] != "bold"]
            level = (enclosing[-1][0] if enclosing else 0) + 1
        else:
            level = (stack[-1][0] if stack else 0) + 1
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, event.title, event.kind))
        resolved.append((event.first, event.body, level, root + tuple(entry[1] for entry in stack)))

    spans: list[MarkdownSection] = []
    first_event = resolved[0][0] if resolved else len(lines)
    if start < first_event:
        spans.append(MarkdownSection(start, first_event, root))
    pending: int | None = None
    for position, (first, body, section_level, trail) in enumerate(resolved):
        end = resolved[position + 1][0] if position + 1 < len(resolved) else len(lines)
        section_start = pending if pending is not None else first
        pending = None
        if section_level is not None and position + 1 < len(resolved):
            next_level = resolved[position + 1][2]
            body_empty = all(not lines[line].strip() or line in markup for line in range(body, end))
            # A heading with no body of its own is folded into its first subsection.
            if body_empty and next_level is not None and next_level > section_level:
                pending = section_start
                continue
        spans.append(MarkdownSection(section_start, end, trail))

    heading_lines = {line for first, body, level, _ in resolved if level is not None for line in range(first, body)}
    return [
        piece
        for span in spans
        for piece in _without_navigation(lines, span, heading_lines=heading_lines, markup=markup, navigation=navigation)
    ]


def _without_navigation(
    lines: list[str], span: MarkdownSection, *, heading_lines: set[int], markup: set[int], navigation: set[int]
) -> list[MarkdownSection]:
    """The runs of a section's lines outside navigation blocks, less those that say nothing: markup
    alone, or a title alone whose body was navigation."""
    runs: list[tuple[int, int]] = []
    run_start: int | None = None
    for line in range(span.start, span.end):
        if line in navigation:
            if run_start is not None:
                runs.append((run_start, line))
                run_start = None
        elif run_start is None:
            run_start = line
    if run_start is not None:
        runs.append((run_start, span.end))
    had_navigation = len(runs) != 1 or runs[0] != (span.start, span.end)
    pieces = []
    for run_start, run_end in runs:
        content = [line for line in range(run_start, run_end) if lines[line].strip()]
        if not content or all(line in markup for line in content):
            continue
        if had_navigation and all(line in markup or line in heading_lines for line in content):
            continue
        pieces.append(MarkdownSection(run_start, run_end, span.heading))
    return pieces
