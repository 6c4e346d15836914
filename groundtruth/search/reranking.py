"""The final order of the best fused candidates: their relevance, a weighted sum of evidence.

Reciprocal rank fusion (`fusion.py`) picks the candidates; it sees ranks only, so it cannot tell
a passage that answers the question from one that merely sits near it in both legs. The first
SEARCH_RERANK_DEPTH fused candidates that the dense leg scored are ordered again by their
relevance:

    relevance = trust weight * (dense * dense score + question_title * question-title similarity
                                + lexical * BM25 share + coverage * word coverage)

- dense score: the passage similarity lifted by a better-matching title (`fusion.dense_score`);
- question-title similarity: the similarity of the passage's own section title to the question
  when that title is itself a question ("Does Scrapy work with HTTP proxies?", "How do I declare
  a global variable?") or an entry of a FAQ or troubleshooting part, whatever its phrasing
  ("Requests are stalled forever", "[oh-my-zsh] theme 'powerlevel10k/powerlevel10k' not found"),
  else 0. Such a section is an answer its maintainers wrote to a question;
  comparing a question with a question is what a sentence-embedding model does best (its
  training pairs are largely question paraphrases), and the title says nothing of the sort for
  other sections. Measured on real FAQs it is the strongest single signal after the dense score,
  and it counts in proportion to how well the title matches, so a weakly matching FAQ entry
  does not lift above a strongly matching reference passage;
- BM25 share: the passage's BM25 score over the largest score the question's words could reach
  (0 outside the lexical leg's candidates);
- word coverage: the share of the question's IDF mass whose words the passage contains (words
  carry weight by their rarity: `PgBouncer` above `use`).

The weights (SEARCH_RERANK_WEIGHTS) are fitted by `benchmarks/retrieval.py` (listwise logistic
regression: each question's answer against the other candidates at once; `rerank_fit.py`) and
reported cross-validated by repository. The trust weight multiplies as in fusion: a near-tie breaker.
Without a dense leg (EMBEDDING_BACKEND=none) nothing is re-ranked.

A query that repeats a re-ranked candidate's own section title word for word
(`titles_repeated`) asks for that section by its name: such candidates come first, in order of
relevance, whatever the weights say. Similarities cannot promise it: a neighbouring title one word
apart, over a shorter passage, can score higher ("How do I declare a global variable?" above "How
do I assign to a global variable?" for the second title itself, in Cython's FAQ).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# The evidence a relevance weighs, in the order of SEARCH_RERANK_WEIGHTS.
RERANK_FEATURES = ("dense", "question_title", "lexical", "coverage")

# A title asks a question when it ends with a question mark or opens with a question word
# ("How to split an item into multiple items", "Can I use Basic HTTP Authentication in my spiders?").
_QUESTION_OPENING = re.compile(
    r"^(how|what|why|can|could|does|do|is|are|should|where|which|when|who|will|may|did)\b", re.IGNORECASE
)


# A part of the documentation whose entries are answers to readers' questions, however their
# titles are phrased: FAQs and troubleshooting pages title many entries by the symptom or the
# error message a reader meets ("Requests are stalled forever", "Incorrect git status in prompt").
_ANSWERS_PART = re.compile(
    r"\b(?:faqs?|frequently asked|troubleshoot(?:ing)?|common (?:problems|issues|errors|pitfalls)"
    r"|known (?:issues|problems)|gotchas)\b",
    re.IGNORECASE,
)


def title_is_question(heading: Sequence[str]) -> bool:
    """Whether the passage's own section title (the last of its heading trail) is a question."""
    title = heading[-1].strip() if heading else ""
    return title.endswith("?") or bool(_QUESTION_OPENING.match(title))


def title_answers_question(heading: Sequence[str]) -> bool:
    """Whether the passage's own section title names a question its section answers: the title
    is a question, or an entry of a FAQ or troubleshooting part (an enclosing title, the
    document's included, names one). On the development set's Markdown half, 13 of its 22
    paraphrased recall@1 misses were such entries titled by their symptom, which the question
    title's evidence ignored while it lifted every neighbouring entry titled as a question."""
    if title_is_question(heading):
        return True
    return len(heading) > 1 and any(_ANSWERS_PART.search(title) for title in heading[:-1])


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.casefold())


def titles_repeated(query: str, headings: Mapping[int, Sequence[str]]) -> set[int]:
    """The keys of `headings` whose own section title (the last of the heading trail) `query` is,
    word for word: case, punctuation and spacing aside. The query is read once for them all."""
    words = _words(query)
    if not words:
        return set()
    return {key for key, heading in headings.items() if heading and _words(heading[-1]) == words}


@dataclass(frozen=True)
class RerankEvidence:
    """One candidate's evidence, each in [0, 1] (a similarity may dip below 0)."""

    dense: float
    question_title: float
    lexical: float
    coverage: float

    def as_dict(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in RERANK_FEATURES}


def rerank_evidence(
    *,
    dense_score: float,
    heading_similarity: float | None,
    heading: Sequence[str],
    lexical_share: float,
    coverage: float,
) -> RerankEvidence:
    """The evidence of one candidate; `lexical_share` and `coverage` as `lexical_search.bm25_share`
    and `idf_share` measure them."""
    question_title = heading_similarity if heading_similarity is not None and title_answers_question(heading) else 0.0
    return RerankEvidence(dense=dense_score, question_title=question_title, lexical=lexical_share, coverage=coverage)


def relevance(evidence: RerankEvidence, *, weights: Mapping[str, float], trust_weight: float) -> float:
    return trust_weight * sum(weight * getattr(evidence, name) for name, weight in weights.items())
