"""Training pairs for the relevance judge, mined from the indexed documentation itself.

No question with a known answer goes in: a section's own title is the query, and its text is the
passage that answers it (a maintainer wrote that title to say what the text answers). Each query:

- query: the section's title; a title that is not itself a question gets its parent's title in
  front (`Proxies: Configuration`), since "Configuration" alone names no section;
- positive: the first chunk of that section, WITH ITS HEADING LINES REMOVED. The chunk's first
  line is the title the query is made of: left in, the judge would learn to match a title
  against itself and nothing about whether a passage answers;
- hard negatives: the neighbouring section of the same file, then the other passages that
  today's dense leg ranks highest for the section's title (its stored title vector, within the
  section's repository: no model inference while mining), heading lines removed too. Chunks of
  the same section are not negatives. (The whole hybrid search per query cost seconds on two
  busy cores; the dense leg on a stored vector costs one index scan.)

Queries are taken in a seeded order (a hash of the seed and the section), so a fit is
reproducible and a budget keeps a fair sample of every repository.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from django.db import transaction

from groundtruth.ingest.chunking import line_roles
from groundtruth.models import Chunk, Repository
from groundtruth.search.reranking import title_is_question

# A positive passage shorter than this (heading lines removed) answers nothing.
POSITIVE_MIN_CHARS = 80
# Titles that name no subject even with their parent's in front are still queries; titles with
# no letters at all (`---`, `1.2`) are not.
_LETTER = re.compile(r"[A-Za-z]")


@dataclass(frozen=True)
class MinedQuery:
    repository: str
    chunk_id: int  # the positive passage's chunk
    query: str
    positive: str
    negatives: tuple[str, ...]
    negative_chunk_ids: tuple[int, ...]


def judge_passage(*, path: str, text: str) -> str:
    """The text the judge reads for a chunk: its lines without heading and markup lines (titles,
    adornment, link targets), blank runs collapsed. Used for training and for scoring alike."""
    lines = text.splitlines()
    roles = line_roles(path=path, lines=lines)
    kept: list[str] = []
    for line, role in zip(lines, roles, strict=True):
        if role in ("heading", "markup"):
            continue
        if role == "blank" and (not kept or not kept[-1].strip()):
            continue
        kept.append(line)
    return "\n".join(kept).strip()


def section_query(heading: Sequence[str]) -> str | None:
    """The pseudo-query of a section by its heading trail (None: a title that cannot ask)."""
    if not heading or not _LETTER.search(heading[-1]):
        return None
    title = heading[-1].strip()
    if title_is_question(heading) or len(heading) < 2:
        return title
    return f"{heading[-2].strip()}: {title}"


def _order_key(seed: int, *parts: object) -> str:
    return hashlib.sha256(repr((seed, *parts)).encode()).hexdigest()


class _PassageTexts:
    """The judge's text of each of a repository's chunks (`judge_passage`), made on first use:
    a fit reads a few hundred of them, not the whole corpus."""

    def __init__(self, chunks: Sequence[Chunk]) -> None:
        self._chunks = {chunk.pk: chunk for chunk in chunks}
        self._texts: dict[int, str] = {}

    def __call__(self, chunk_id: int) -> str:
        if chunk_id not in self._texts:
            chunk = self._chunks[chunk_id]
            self._texts[chunk_id] = judge_passage(path=chunk.path, text=chunk.text)
        return self._texts[chunk_id]


# The chunk ids ranked for a section's first chunk, best first.
Ranker = Callable[[Chunk, Repository], list[int]]


def _title_vector_ranker(limit: int) -> Ranker:
    from groundtruth.search.dense_search import dense_candidates
    from groundtruth.search.fusion import dense_ranking, fusion_parameters_configured

    heading_weight = fusion_parameters_configured().heading_weight

    def rank(chunk: Chunk, repository: Repository) -> list[int]:
        # Read for this chunk alone: the miner does not load every chunk's vector.
        heading_embedding = Chunk.objects.filter(pk=chunk.pk).values_list("heading_embedding", flat=True).first()
        if heading_embedding is None:
            return []
        with transaction.atomic():  # the HNSW settings are transaction-local
            hits = dense_candidates(
                embedding=list(heading_embedding),
                model_name=chunk.embedding_model,
                repository_ids=[repository.pk],
                depth=limit,
            )
        return [hit.chunk_id for hit in dense_ranking(hits, heading_weight=heading_weight)]

    return rank


def pairs_mine(
    *,
    repositories: Sequence[Repository],
    negatives: int = 3,
    queries_per_repository: int | None = None,
    seed: int = 0,
    ranker: Ranker | None = None,
) -> list[MinedQuery]:
    """Mined queries of `repositories` (each with `negatives` negatives: the neighbouring section
    first, then the best-ranked other passages), at most `queries_per_repository` each, in a
    seeded order. A query with fewer negatives than asked is dropped."""
    rank = ranker or _title_vector_ranker(limit=negatives + 8)
    mined: list[MinedQuery] = []
    for repository in repositories:
        # Every chunk's place (file, section, order) but not its title vector: loading and
        # parsing the 384 numbers of 100,000 chunks took most of a fit's memory (2.5 GB) to use
        # the vectors of the 60 queries taken. Texts are read into passages only when a query,
        # its positive or a negative needs one.
        chunks = list(
            Chunk.objects.filter(repository=repository)
            .order_by("path", "ordinal", "start_line")
            .only("pk", "path", "heading", "text", "ordinal", "start_line", "embedding_model")
        )
        passage = _PassageTexts(chunks)
        section_of = {chunk.pk: (chunk.path, tuple(chunk.heading)) for chunk in chunks}
        firsts: dict[tuple[str, tuple[str, ...]], Chunk] = {}
        for chunk in chunks:
            firsts.setdefault(section_of[chunk.pk], chunk)
        by_file: dict[str, list[Chunk]] = {}
        for chunk in chunks:
            by_file.setdefault(chunk.path, []).append(chunk)
        candidates = []
        for section, chunk in firsts.items():
            query = section_query(section[1])
            if query is not None:
                candidates.append((_order_key(seed, repository.name, chunk.path, section[1]), query, chunk))
        candidates.sort(key=lambda item: item[0])
        taken = 0
        for _, query, chunk in candidates:
            if queries_per_repository is not None and taken >= queries_per_repository:
                break
            if len(passage(chunk.pk)) < POSITIVE_MIN_CHARS:
                continue
            section = section_of[chunk.pk]
            chosen: list[int] = []
            siblings = by_file[chunk.path]
            position = siblings.index(chunk)
            for neighbour in (siblings[position - 1] if position else None, *siblings[position + 1 : position + 2]):
                if neighbour is not None and section_of[neighbour.pk] != section and passage(neighbour.pk):
                    chosen.append(neighbour.pk)
                    break
            for chunk_id in rank(chunk, repository):
                if len(chosen) >= negatives:
                    break
                if chunk_id in section_of and section_of[chunk_id] != section and chunk_id not in chosen:
                    if passage(chunk_id) and passage(chunk_id) != passage(chunk.pk):
                        chosen.append(chunk_id)
            if len(chosen) < negatives:
                continue
            mined.append(
                MinedQuery(
                    repository=repository.name,
                    chunk_id=chunk.pk,
                    query=query,
                    positive=passage(chunk.pk),
                    negatives=tuple(passage(chunk_id) for chunk_id in chosen),
                    negative_chunk_ids=tuple(chosen),
                )
            )
            taken += 1
    return mined
