"""Training pairs for the adapted encoder, mined from the indexed documentation itself.

The relevance judge's mining (`groundtruth/judge/pair_mining.py`: a section's heading path
against its own first chunk, hard negatives from its neighbours and from what the dense leg puts
nearest its title) with two changes for a bi-encoder:

- users ask questions, not titles: beside the heading path, two questions are made of the title
  by a template (`How do I use {title} in {label}?`); a title that is a question is asked as
  written. The trainer draws one form per row (seeded);
- passages take the form the index embeds (`<label>: <trail>` then the text), with the section's
  own title out of the trail and the heading lines out of the text: left in, the model would
  learn to match a title against itself.

Every fifth mined query (in the seeded mining order) is held out: the trainer measures the base
and the adapted model on it and never trains on it. The records are JSON-ready: the trainer runs
in a process of its own and reads them from a file.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from groundtruth.ingest.index_text import passage_text, repository_label
from groundtruth.judge.pair_mining import pairs_mine
from groundtruth.models import Chunk, Repository
from groundtruth.search.reranking import title_is_question

HELD_OUT_EVERY = 5


def question_forms(*, query: str, title: str, label: str, is_question: bool) -> list[str]:
    """The query forms of one section; a title that is a question is asked as it is."""
    if is_question:
        return [query]
    return [query, f"How do I use {title} in {label}?", f"What is {title} in {label}?"]


def adaptation_pairs_collect(
    *, repositories: Sequence[Repository], seed: int, negatives: int = 3
) -> list[dict[str, Any]]:
    """Every titled section of the repositories as a training record: {"repository", "held_out",
    "queries", "positive", "negatives"}."""
    mined = pairs_mine(repositories=repositories, negatives=negatives, queries_per_repository=None, seed=seed)
    chunk_ids = {query.chunk_id for query in mined} | {cid for query in mined for cid in query.negative_chunk_ids}
    chunks = {chunk.pk: chunk for chunk in Chunk.objects.filter(pk__in=chunk_ids).select_related("repository")}

    def indexed_form(chunk_id: int, judged_text: str) -> str:
        chunk = chunks[chunk_id]
        heading = [str(part) for part in chunk.heading or []]
        return passage_text(repository_name=chunk.repository.name, heading=heading[:-1], text=judged_text)

    records = []
    for position, query in enumerate(mined):
        heading = [str(part) for part in chunks[query.chunk_id].heading or []]
        records.append(
            {
                "repository": query.repository,
                "held_out": position % HELD_OUT_EVERY == HELD_OUT_EVERY - 1,
                "queries": question_forms(
                    query=query.query,
                    title=heading[-1].strip(),
                    label=repository_label(query.repository),
                    is_question=title_is_question(heading),
                ),
                "positive": indexed_form(query.chunk_id, query.positive),
                "negatives": [
                    indexed_form(cid, text) for cid, text in zip(query.negative_chunk_ids, query.negatives, strict=True)
                ],
            }
        )
    return records
