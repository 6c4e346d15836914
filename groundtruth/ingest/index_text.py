"""What the index reads of a chunk besides its cited lines: the passage text that is embedded,
the heading that gets a vector of its own, and the text the lexical index parses.

Why each part (measured on the real documentation of six projects, `benchmarks/retrieval.py`):
- The repository's short name (`aiohttp` for `aio-libs/aiohttp`) opens the embedded and the
  lexical text. Users name the project in their questions ("... in aiohttp?"); in an index of
  several projects it is what tells their sections on the same topic apart. With one repository
  it is on every chunk and changes no ranking.
- The heading trail, document title first, gives a section the context its lines lack.
- The section's own heading is embedded alone as well. A heading often is the question a
  reader asks ("How do I use a proxy?"); inside the passage vector it is diluted by the body,
  and the model reads only the first 256 word pieces of a long section.

INDEX_VERSION names this recipe (and the chunking). Change it whenever what is stored for a
chunk changes shape: an ingest rebuilds every repository indexed under another version, and
`manage.py reindex` rebuilds them all at once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

# 3: Markdown read as documents (markdown_structure.py); no chunk longer than CHUNK_MAX_CHARS and
# titles cut (chunking.py). 4: an HTML block of in-page links alone (a table of contents) is
# navigation, in no chunk.
INDEX_VERSION = 4


def repository_label(repository_name: str) -> str:
    """The name users call a repository by: the part after the owner."""
    return repository_name.rsplit("/", 1)[-1]


def passage_text(*, repository_name: str, heading: Sequence[str], text: str) -> str:
    """The embedded text: `<label>: <heading trail>` then the chunk's lines."""
    trail = " > ".join(heading)
    return (
        f"{repository_label(repository_name)}: {trail}\n{text}"
        if trail
        else f"{repository_label(repository_name)}:\n{text}"
    )


def heading_text(heading: Sequence[str]) -> str | None:
    """The text of the heading vector: the chunk's own section title, or None without one."""
    return heading[-1] if heading and heading[-1].strip() else None


def lexical_body(*, repository_name: str, heading: Sequence[str], text: str) -> str:
    """What the lexical index parses: the label, the heading trail and the lines."""
    return "\n".join([repository_label(repository_name), *heading, text])


def content_hash(*, repository_name: str, heading: Sequence[str], text: str) -> str:
    """Identifies everything that is embedded for a chunk (the passage text holds the heading),
    so equal hashes can share both vectors."""
    passage = passage_text(repository_name=repository_name, heading=heading, text=text)
    return hashlib.sha256(passage.encode("utf-8", errors="surrogatepass")).hexdigest()
