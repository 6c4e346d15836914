"""Structure-aware chunking: sections, heading trails, sizes and exact line numbers."""

from __future__ import annotations

import pytest

from groundtruth.ingest.chunking import (
    ChunkDraft,
    file_chunk,
    file_line_count,
    file_lines,
    file_lines_range,
    line_roles,
)
from groundtruth.ingest.index_text import content_hash, heading_text, lexical_body, passage_text, repository_label


def chunk(path: str, text: str, max_chars: int = 1500, whole: int = 3000) -> list[ChunkDraft]:
    return file_chunk(path=path, text=text, max_chars=max_chars, config_whole_max_chars=whole)


def cited(text: str, draft: ChunkDraft) -> str:
    return "\n".join(file_lines(text)[draft.start_line - 1 : draft.end_line])


def test_markdown_sections_follow_headings_not_hashes_in_code_fences():
    text = (
        "---\ntitle: Guide\n---\nIntro.\n\n# Guide\n\n## Install\n\n```sh\n# comment, not a heading\nmake\n```\n\n"
        "## Configure\nSet FOO.\n\nSetext title\n------------\nBody.\n"
    )
    drafts = chunk("docs/guide.md", text)
    assert [(d.start_line, d.end_line, d.heading) for d in drafts] == [
        # Front matter is in no chunk; the page has a `# Guide` of its own, so its title is unused.
        (4, 4, ()),
        (6, 13, ("Guide", "Install")),
        (15, 16, ("Guide", "Configure")),
        (18, 20, ("Guide", "Setext title")),
    ]
    for draft in drafts:
        assert draft.text == cited(text, draft)


def test_markdown_heading_without_body_folds_into_its_first_subsection_only():
    text = "# A\n\n## B\nb text\n## C\n\n# D\n"
    drafts = chunk("x.md", text)
    assert [(d.start_line, d.end_line, d.heading, d.text) for d in drafts] == [
        (1, 4, ("A", "B"), "# A\n\n## B\nb text"),
        (5, 5, ("A", "C"), "## C"),
        (7, 7, ("D",), "# D"),
    ]


def test_rst_titles_with_overlines_and_underlines_set_levels_in_order_of_appearance():
    text = (
        "=====\nTitle\n=====\n\nIntro.\n\nSection A\n---------\n\nText a.\n\n"
        "Sub\n~~~\nText sub.\n\nSection B\n---------\nText b.\n\n    indented\n    --------\n"
    )
    drafts = chunk("docs/index.rst", text)
    assert [(d.start_line, d.end_line, d.heading) for d in drafts] == [
        (1, 5, ("Title",)),
        (7, 10, ("Title", "Section A")),
        (12, 14, ("Title", "Section A", "Sub")),
        (16, 21, ("Title", "Section B")),
    ]


def test_small_config_files_are_one_chunk_and_large_ones_split_at_top_level_keys():
    small = "# settings\nservice:\n  port: 8000\n"
    assert [(d.start_line, d.end_line, d.heading) for d in chunk("a.yml", small)] == [(1, 3, ())]

    yaml_text = "# about a\na:\n  x: 1\n  y: 2\n# about b\nb:\n  - 1\n'c d': 3\n"
    drafts = chunk("a.yaml", yaml_text, whole=10)
    assert [(d.start_line, d.end_line, d.heading) for d in drafts] == [(1, 4, ("a",)), (5, 7, ("b",)), (8, 8, ("c d",))]

    toml_text = 'name = "x"\n\n[tool.ruff]\nline-length = 120\n\n[[bin]]\nname = "y"\n'
    drafts = chunk("pyproject.toml", toml_text, whole=10)
    assert [(d.start_line, d.end_line, d.heading) for d in drafts] == [
        (1, 1, ()),
        (3, 4, ("tool.ruff",)),
        (6, 7, ("bin",)),
    ]

    json_text = '{\n  "a": {"k": "v:{"},\n  "b": [\n    1\n  ]\n}\n'
    drafts = chunk("limits.json", json_text, whole=10)
    assert [(d.start_line, d.end_line, d.heading, d.text) for d in drafts] == [
        (1, 2, ("a",), '{\n  "a": {"k": "v:{"},'),
        (3, 6, ("b",), '  "b": [\n    1\n  ]\n}'),
    ]


def test_long_sections_split_at_blank_lines_keep_code_fences_whole_and_cut_only_lines_longer_than_a_chunk():
    paragraphs = [f"Paragraph {n} " + "word " * 40 for n in range(6)]
    fence = "```\n" + "\n\n".join(f"code line {n}" for n in range(5)) + "\n```"
    long_line = "x" * 900
    text = "# Title\n\n" + "\n\n".join(paragraphs[:3]) + "\n\n" + fence + "\n\n" + "\n\n".join(paragraphs[3:])
    text += "\n\n" + long_line + "\n"
    drafts = chunk("big.md", text, max_chars=500)
    assert all(d.heading == ("Title",) for d in drafts)
    assert all(len(d.text) <= 500 for d in drafts)
    assert [d.text for d in drafts if "x" in d.text] == ["x" * 500, "x" * 400]
    assert sum(fence in d.text for d in drafts) == 1
    covered = set()
    for draft in drafts:
        if "x" in draft.text:  # a piece of the long line: part of the line it cites
            assert draft.text in cited(text, draft)
        else:
            assert draft.text == cited(text, draft)
        assert not draft.text.startswith("\n") and not draft.text.endswith("\n")
        covered.update(range(draft.start_line, draft.end_line + 1))
    non_blank = {number for number, line in enumerate(file_lines(text), start=1) if line.strip()}
    assert non_blank <= covered


def test_crlf_files_cite_the_same_lines_without_carriage_returns():
    text = "# A\r\n\r\nline one\r\nline two\r\n"
    [draft] = chunk("w.md", text)
    assert (draft.start_line, draft.end_line, draft.text) == (1, 4, "# A\n\nline one\nline two")


def test_empty_and_blank_files_have_no_chunks():
    assert chunk("empty.md", "") == []
    assert chunk("blank.md", "\n\n  \n") == []


def test_the_embedded_text_carries_the_repository_label_and_heading_trail():
    assert passage_text(repository_name="aio-libs/aiohttp", heading=("FAQ", "Why?"), text="body") == (
        "aiohttp: FAQ > Why?\nbody"
    )
    assert passage_text(repository_name="aio-libs/aiohttp", heading=(), text="body") == "aiohttp:\nbody"
    assert heading_text(("FAQ", "Why?")) == "Why?"
    assert heading_text(()) is None
    assert lexical_body(repository_name="pallets/jinja", heading=("Templates", "Loops"), text="{% for %}") == (
        "jinja\nTemplates\nLoops\n{% for %}"
    )
    assert repository_label("acme/handbook") == "handbook"


def test_content_hash_depends_on_repository_heading_and_text_only():
    one = content_hash(repository_name="acme/a", heading=("A", "B"), text="body")
    assert one == content_hash(repository_name="acme/a", heading=("A", "B"), text="body")
    assert one != content_hash(repository_name="acme/a", heading=("A",), text="body")
    assert one != content_hash(repository_name="acme/b", heading=("A", "B"), text="body")
    assert one != content_hash(repository_name="acme/a", heading=("A", "B"), text="body.")


FAQ_RST = """\
.. _faq:

Frequently Asked Questions
==========================

How does it compare to lxml?
----------------------------

lxml is a parsing library.
This is a framework.

.. _lxml: https://lxml.de/

Can I use it with a proxy?
--------------------------

Yes: set the ``proxy`` meta key.

----------

Does it run on Windows?
-----------------------

**Answer**: Yes.
"""


def test_each_faq_entry_is_one_chunk_with_its_question_as_heading():
    drafts = chunk("docs/faq.rst", FAQ_RST)
    assert [(d.start_line, d.end_line, d.heading) for d in drafts] == [
        # The target before the first title opens the first section; a title without a body of its
        # own folds into its first subsection.
        (1, 12, ("Frequently Asked Questions", "How does it compare to lxml?")),
        (14, 19, ("Frequently Asked Questions", "Can I use it with a proxy?")),
        (21, 24, ("Frequently Asked Questions", "Does it run on Windows?")),
    ]
    for draft in drafts:
        assert draft.text == cited(FAQ_RST, draft)


def test_line_roles_tell_titles_and_markup_from_text():
    lines = file_lines(FAQ_RST)
    roles = line_roles(path="docs/faq.rst", lines=lines)
    assert [(number, role) for number, role in enumerate(roles, start=1) if role != "blank"] == [
        (1, "markup"),
        (3, "heading"),
        (4, "heading"),
        (6, "heading"),
        (7, "heading"),
        (9, "text"),
        (10, "text"),
        (12, "markup"),
        (14, "heading"),
        (15, "heading"),
        (17, "text"),
        (19, "markup"),
        (21, "heading"),
        (22, "heading"),
        (24, "text"),
    ]
    markdown = [
        "# Guide",
        "",
        "Setext",
        "------",
        "Body.",
        "",
        "[docs]: https://example.com",
        "```",
        "# not a title",
        "```",
    ]
    assert line_roles(path="guide.md", lines=markdown) == [
        "heading",
        "blank",
        "heading",
        "heading",
        "text",
        "blank",
        "markup",
        "text",
        "text",
        "text",
    ]
    assert line_roles(path="settings.yml", lines=["# comment", "a: 1"]) == ["text", "text"]


@pytest.mark.parametrize(
    "text",
    ["", "\n", "a", "a\n", "a\nb", "a\nb\n", "a\r\nb\r\n", "a\r\n\r\nb", "\n\n\n", "x\ny\nz\n\n", "x\r", "é\r\nü"],
)
def test_a_range_of_lines_is_numbered_and_counted_as_file_lines_numbers_them(text):
    lines = file_lines(text)

    assert file_line_count(text) == len(lines)
    for start in range(1, len(lines) + 2):
        for end in range(start, len(lines) + 3):
            assert file_lines_range(text, start=start, end=end) == lines[start - 1 : end]
