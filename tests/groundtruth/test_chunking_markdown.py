"""Markdown read as documents: each form of heading, front matter, navigation, containers and
component lines, on hand-made files, with the exact chunks (lines, plain-text heading trail, text)."""

from __future__ import annotations

from groundtruth.ingest.chunking import file_chunk, file_lines, line_roles
from groundtruth.ingest.markdown_structure import plain_text


def chunks(path: str, text: str, max_chars: int = 1500) -> list[tuple[int, int, tuple[str, ...], str]]:
    drafts = file_chunk(path=path, text=text, max_chars=max_chars, config_whole_max_chars=3000)
    lines = file_lines(text)
    for draft in drafts:  # a citation of the draft's lines shows exactly its text
        assert draft.text == "\n".join(lines[draft.start_line - 1 : draft.end_line])
    return [(draft.start_line, draft.end_line, draft.heading, draft.text) for draft in drafts]


HTML_FAQ = """\
# FAQ

* [How do I update?](#update)
* [Why is it slow?](#slow).

### <a name='update'></a>How do I **update** `tool`?

Run `tool update`.

<a name="slow"></a>
### Why is it slow?

Because.

<h3 name="faq-colors" class="q">How do I change <em>colors</em>?</h3>
Set COLOR.
"""


def test_html_headings_and_anchors_inside_or_before_a_heading_give_plain_titles_and_the_toc_no_chunk():
    assert chunks("README.md", HTML_FAQ) == [
        # `# FAQ` has only the table of contents for a body: neither is a chunk.
        (
            6,
            8,
            ("FAQ", "How do I update tool?"),
            "### <a name='update'></a>How do I **update** `tool`?\n\nRun `tool update`.",
        ),
        # The anchor on the line before its heading opens that heading's section.
        (10, 13, ("FAQ", "Why is it slow?"), '<a name="slow"></a>\n### Why is it slow?\n\nBecause.'),
        (15, 16, ("FAQ", "How do I change colors?"), HTML_FAQ.splitlines()[14] + "\nSet COLOR."),
    ]
    roles = line_roles(path="README.md", lines=file_lines(HTML_FAQ))
    assert [(number, role) for number, role in enumerate(roles, start=1) if role != "blank"] == [
        (1, "heading"),
        (3, "markup"),
        (4, "markup"),
        (6, "heading"),
        (8, "text"),
        (10, "heading"),
        (11, "heading"),
        (13, "text"),
        (15, "heading"),
        (16, "text"),
    ]


def test_front_matter_is_in_no_chunk_and_its_title_opens_the_trail_of_a_page_without_a_title():
    yaml_page = (
        '---\ntitle: "Configuring: the *tool*"\nid: config\n---\n\nIntro text.\n\n'
        "* Table of Contents\n{:toc}\n\n## Options {#options}\n\nSet them.\n"
    )
    assert chunks("docs/Configuration.md", yaml_page) == [
        (6, 6, ("Configuring: the tool",), "Intro text."),
        (11, 13, ("Configuring: the tool", "Options"), "## Options {#options}\n\nSet them."),
    ]
    toml_page = '+++\ntitle = "Hugo page"\n+++\n\n## A\ntext\n'
    assert chunks("content/a.md", toml_page) == [(5, 6, ("Hugo page", "A"), "## A\ntext")]
    # A page with a `# title` of its own names itself; the front matter's title is not repeated.
    titled = "---\ntitle: FAQ\n---\n# Frequently Asked Questions\n\n### Does it sync?\n\nYes.\n"
    assert chunks("content/faq.md", titled) == [
        (4, 8, ("Frequently Asked Questions", "Does it sync?"), titled.split("---\n")[2].rstrip("\n")),
    ]
    # Front matter that is not YAML gives no title and is still left out.
    assert chunks("bad.md", "---\n: [\n---\nBody.\n") == [(4, 4, (), "Body.")]


CONTAINERS = """\
# Guide

:::note

Keep it JSON.

:::

!!! warning "Careful"
    Do not run as root.

> [!NOTE]
> Needs Node 18.

::: details What hosts are safe?
Only yours.
:::

After the details.
"""


def test_admonitions_and_containers_stay_text_of_their_section_and_a_details_container_is_a_question():
    assert chunks("guide.md", CONTAINERS) == [
        (1, 13, ("Guide",), "\n".join(CONTAINERS.splitlines()[0:13])),
        (15, 17, ("Guide", "What hosts are safe?"), "::: details What hosts are safe?\nOnly yours.\n:::"),
        (19, 19, ("Guide",), "After the details."),
    ]
    roles = line_roles(path="guide.md", lines=file_lines(CONTAINERS))
    assert [number for number, role in enumerate(roles, start=1) if role == "markup"] == [3, 7, 9, 12, 17]
    assert [number for number, role in enumerate(roles, start=1) if role == "heading"] == [1, 15]


QUESTIONS = """\
# FAQ

<details>
  <summary><strong>Can I use it offline?</strong></summary>

Yes, after the first run.
</details>

**Dependencies are cached**
Text after.

**How do I reset it?**
Delete the cache.

**Why two steps?**

Because of caching.

## Other
Done.
"""


def test_details_summaries_and_bold_questions_alone_on_a_line_are_headings_one_level_down():
    assert chunks("faq.md", QUESTIONS) == [
        # `# FAQ` has no body of its own: it folds into its first subsection, the summary.
        (
            1,
            7,
            ("FAQ", "Can I use it offline?"),
            "# FAQ\n\n<details>\n  <summary><strong>Can I use it offline?</strong></summary>\n\n"
            "Yes, after the first run.\n</details>",
        ),
        # After </details> the enclosing section goes on; a bold line that asks nothing is text.
        (9, 10, ("FAQ",), "**Dependencies are cached**\nText after."),
        (12, 13, ("FAQ", "How do I reset it?"), "**How do I reset it?**\nDelete the cache."),
        (15, 17, ("FAQ", "Why two steps?"), "**Why two steps?**\n\nBecause of caching."),
        (19, 20, ("FAQ", "Other"), "## Other\nDone."),
    ]


MDX = """\
---
title: Globals
---

import Note from './_Note.md';

<Note />

## Methods

import TOCInline from '@theme/TOCInline';

<TOCInline toc={toc} />

---

## Reference

### `afterAll(fn)`

Runs after all tests.
"""


def test_mdx_import_and_component_lines_are_not_prose_and_alone_make_no_chunk():
    assert chunks("docs/GlobalAPI.mdx", MDX) == [
        # Imports and components alone (the intro) and a TOC component under a title make no chunk.
        (
            17,
            21,
            ("Globals", "Reference", "afterAll(fn)"),
            "## Reference\n\n### `afterAll(fn)`\n\nRuns after all tests.",
        ),
    ]
    page = "# Page\n\nimport Tabs from '@theme/Tabs';\n\n<Tabs>\n\nProse here.\n\n</Tabs>\n"
    assert chunks("page.md", page) == [(1, 9, ("Page",), page.rstrip("\n"))]
    roles = line_roles(path="page.md", lines=file_lines(page))
    assert [(number, role) for number, role in enumerate(roles, start=1) if role != "blank"] == [
        (1, "heading"),
        (3, "markup"),
        (5, "markup"),
        (7, "text"),
        (9, "markup"),
    ]


def test_a_list_of_links_mostly_into_the_page_is_navigation_but_links_with_prose_are_not():
    text = (
        "# Tool\n\nIntro.\n\n- [About](#about)\n- [Features](#features)\n- [Download](/downloads/)\n\n"
        "## About\n\n- [`quit:`](#quit) - bundle IDs to quit\n- [`kext:`](#kext) - kexts to unload\n\n"
        "*Related:*\n  - [Other page](other.md)\n  - [Another](another.md)\n"
    )
    assert chunks("index.md", text) == [
        (1, 3, ("Tool",), "# Tool\n\nIntro."),
        # Items with prose after the link are content; a list of links to other pages is an index.
        (9, 16, ("Tool", "About"), "\n".join(text.splitlines()[8:16])),
    ]


def test_a_code_fence_with_blank_lines_is_never_split_unless_it_alone_is_too_long():
    fence = "    ````md\n    ```js\n\n    a = 1\n\n    ```\n\n    b = 2\n    ````"
    text = "# Install\n\n1. Write this:\n\n" + fence + "\n\n2. " + "Then run it. " * 5 + "\n"
    drafts = file_chunk(path="install.md", text=text, max_chars=80, config_whole_max_chars=3000)
    assert [(draft.start_line, draft.end_line) for draft in drafts] == [(1, 3), (5, 13), (15, 15)]
    assert drafts[1].text == fence


def test_plain_text_of_titles_drops_markup_html_anchors_and_attributes():
    assert plain_text("<a name='x'></a>How do I use **`brew`** [here](#here)?") == "How do I use brew here?"
    assert plain_text("About rclone {#about}") == "About rclone"
    assert plain_text("Tom &amp; Jerry's `<formula>` <em>note</em>") == "Tom & Jerry's <formula> note"


def test_a_heading_right_after_a_details_container_opens_its_own_section():
    text = "# A\n\nIntro.\n\n::: details Why?\nBecause.\n:::\n### B\nb text\n"
    assert chunks("a.md", text) == [
        (1, 3, ("A",), "# A\n\nIntro."),
        (5, 7, ("A", "Why?"), "::: details Why?\nBecause.\n:::"),
        (8, 9, ("A", "B"), "### B\nb text"),
    ]


def test_a_label_with_in_page_links_alone_is_navigation_but_a_sentence_with_a_link_is_not():
    text = (
        "## Why grey?\n\nBecause it is computing.\n\n*Related*: [How do I change colors?](#colors) and\n"
        "[Why slow?](#slow).\n\n*FAQ*: [Is it fast?](#fast)\n\nSee [colors](#colors) for more.\n"
    )
    assert chunks("README.md", text) == [
        (1, 3, ("Why grey?",), "## Why grey?\n\nBecause it is computing."),
        (10, 10, ("Why grey?",), "See [colors](#colors) for more."),
    ]


HTML_TOC_FAQ = """\
# Tool

<p align="center"><a href="#install">Install</a> · <a href="#faq">FAQ</a> | <a href="/docs/">Docs</a></p>

## FAQ

<ul>
  <li><a href="#update">How do I update it?</a></li>
  <li><a href="#slow">Why is it <em>slow</em>?</a>
    <ul><li><a href="https://example.org/perf">Performance notes</a></li></ul></li>
</ul>

<h3 name="update">How do I update it?</h3>

Run the updater.

<h3 name="slow">Why is it slow?</h3>

<p>See <a href="#update">updating</a> first: old versions are slow.</p>
"""


def test_an_html_block_of_in_page_links_alone_is_navigation_but_html_prose_with_a_link_is_not():
    assert chunks("README.md", HTML_TOC_FAQ) == [
        # The navigation bar and the HTML table of contents are in no chunk, nor are `# Tool` and
        # `## FAQ`, whose bodies were only that.
        (
            13,
            15,
            ("Tool", "FAQ", "How do I update it?"),
            '<h3 name="update">How do I update it?</h3>\n\nRun the updater.',
        ),
        # A paragraph with a link in it is prose, HTML or not.
        (17, 19, ("Tool", "FAQ", "Why is it slow?"), "\n".join(HTML_TOC_FAQ.splitlines()[16:19])),
    ]
    roles = line_roles(path="README.md", lines=file_lines(HTML_TOC_FAQ))
    assert [number for number, role in enumerate(roles, start=1) if role == "markup"] == [3, 7, 8, 9, 10, 11]
    assert [number for number, role in enumerate(roles, start=1) if role == "text"] == [15, 19]
