"""Structure-aware chunking: sections, heading trails, sizes and exact line numbers."""

from __future__ import annotations

from groundtruth.ingest.chunking import ChunkDraft, file_chunk, file_lines


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
        (1, 3, ()),
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


def test_long_sections_split_at_blank_lines_keep_code_fences_whole_and_never_cut_lines():
    paragraphs = [f"Paragraph {n} " + "word " * 40 for n in range(6)]
    fence = "```\n" + "\n\n".join(f"code line {n}" for n in range(5)) + "\n```"
    long_line = "x" * 900
    text = "# Title\n\n" + "\n\n".join(paragraphs[:3]) + "\n\n" + fence + "\n\n" + "\n\n".join(paragraphs[3:])
    text += "\n\n" + long_line + "\n"
    drafts = chunk("big.md", text, max_chars=500)
    assert all(d.heading == ("Title",) for d in drafts)
    assert all(len(d.text) <= 500 or "\n" not in d.text for d in drafts)
    assert any(d.text == long_line for d in drafts)
    assert sum(fence in d.text for d in drafts) == 1
    covered = set()
    for draft in drafts:
        assert draft.text == cited(text, draft)
        assert not draft.text.startswith("\n") and not draft.text.endswith("\n")
        covered.update(range(draft.start_line, draft.end_line + 1))
    non_blank = {number for number, line in enumerate(file_lines(text), start=1) if line.strip()}
    assert non_blank <= covered


def test_crlf_files_cite_the_same_lines_without_carriage_returns():
    text = "# A\r\n\r\nline one\r\nline two\r\n"
    [draft] = chunk("w.md", text)
    assert (draft.start_line, draft.end_line, draft.text) == (1, 4, "# A\n\nline one\nline two")


def test_embedding_text_and_hash_depend_on_heading_and_text_only():
    one = ChunkDraft(start_line=1, end_line=2, heading=("A", "B"), text="body")
    moved = ChunkDraft(start_line=10, end_line=11, heading=("A", "B"), text="body")
    other = ChunkDraft(start_line=1, end_line=2, heading=("A",), text="body")
    assert one.embedding_text == "A > B\nbody"
    assert one.content_hash == moved.content_hash
    assert one.content_hash != other.content_hash
    assert chunk("empty.md", "") == []
    assert chunk("blank.md", "\n\n  \n") == []
