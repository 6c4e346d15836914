"""/ask: retrieval, the sources-missing decision, cited snippets, and (with a language model
configured) a generative answer whose citation markers are checked."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db.models import QuerySet

from groundtruth.models import Repository
from groundtruth.search.abstention import AbstentionAssessment, abstention_assess
from groundtruth.search.abstention_model import AbstentionModel
from groundtruth.search.answer_composition import answer_is_refusal, answer_markers_check, answer_messages
from groundtruth.search.citations import citation_for
from groundtruth.search.fusion import FusionParameters
from groundtruth.search.hybrid_search import SearchHit, SearchOutcome, chunk_search, search_scope_resolve
from groundtruth.search.lexical_search import idf_share
from groundtruth.search.llm_client import ChatModel, LanguageModelError, chat_completion_create
from groundtruth.search.snippets import snippets_narrow

logger = logging.getLogger(__name__)

EXTRACTIVE = "extractive"
GENERATIVE = "generative"


@dataclass
class AskResult:
    question: str
    mode: str
    answer: str | None
    sources_missing: bool
    citations: list[dict[str, Any]]
    searched: list[dict[str, str]]
    message: str | None = None
    warning: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)


def _searched(repositories: list[Repository]) -> list[dict[str, str]]:
    return [{"repo": repository.name, "commit": repository.last_commit} for repository in repositories]


def _missing_message(question: str, repositories: list[Repository]) -> str:
    if repositories:
        names = ", ".join(
            f"{repository.name} at {repository.last_commit[:12]}" if repository.last_commit else repository.name
            for repository in repositories
        )
        where = f"the indexed documentation of {names}"
    else:
        where = "the indexed documentation (no repository is indexed)"
    return (
        f"Sources missing: searched {where} for {question!r} and found no passage that answers it. "
        "No answer is given rather than one the sources do not support."
    )


def _chat_model() -> ChatModel | None:
    if not settings.LLM_BASE_URL:
        return None
    return ChatModel(
        base_url=settings.LLM_BASE_URL,
        model=settings.LLM_MODEL,
        api_key=settings.LLM_API_KEY,
        timeout_seconds=settings.LLM_TIMEOUT_SECONDS,
    )


def _evidence(assessment: AbstentionAssessment) -> dict[str, Any]:
    return {
        "probability": round(assessment.probability, 4),
        "threshold": assessment.threshold,
        "decided_by": assessment.decided_by,
        "named_repositories": assessment.named_repositories,
        "features": {name: round(value, 4) for name, value in assessment.features.items()},
    }


def _word_share(hit: SearchHit, outcome: SearchOutcome) -> float:
    """The share of the question's IDF mass that a passage contains."""
    return idf_share(hit.matched_lexemes, idf=outcome.lexical_query.idf)


def citations_select(outcome: SearchOutcome, *, count: int, margin: float) -> list[SearchHit]:
    """The passages that earn a citation: the best fused one, then, in fused order, each whose
    relevance is within `margin` of the best relevance among the first `count`. Relevance is
    the dense score (a passage outside the dense leg's candidates has none and is not cited
    after the first); with no dense leg (EMBEDDING_BACKEND=none), the share of the question's
    IDF mass the passage contains. A passage much weaker than the best is filler, whatever its
    rank."""
    hits = outcome.hits[:count]
    if not hits:
        return []
    if any(hit.dense_score is not None for hit in hits):
        best = max(hit.dense_score for hit in hits if hit.dense_score is not None)
        close = [hit for hit in hits[1:] if hit.dense_score is not None and hit.dense_score >= best - margin]
    else:
        best = max(_word_share(hit, outcome) for hit in hits)
        close = [hit for hit in hits[1:] if _word_share(hit, outcome) >= best - margin]
    return [hits[0], *close]


@dataclass
class AskExplanation:
    """An /ask answer with what it was decided from (the staff console shows it): the search
    behind it, the sources-missing assessment, and the passages behind `result.citations`."""

    result: AskResult
    outcome: SearchOutcome
    assessment: AbstentionAssessment
    cited: list[SearchHit]  # one per citation, in citation order; empty when sources are missing
    language_model_refused: bool = False  # sources missing because the model said so


def question_answer(
    *,
    question: str,
    repository_names: list[str] | None,
    visible: QuerySet[Repository] | None = None,
    fusion: FusionParameters | None = None,
    abstention_model: AbstentionModel | None = None,
    abstention_threshold: float | None = None,
) -> AskResult:
    """The answer of `question_answer_explained`, which says what it does."""
    return question_answer_explained(
        question=question,
        repository_names=repository_names,
        visible=visible,
        fusion=fusion,
        abstention_model=abstention_model,
        abstention_threshold=abstention_threshold,
    ).result


def question_answer_explained(
    *,
    question: str,
    repository_names: list[str] | None,
    visible: QuerySet[Repository] | None = None,
    fusion: FusionParameters | None = None,
    abstention_model: AbstentionModel | None = None,
    abstention_threshold: float | None = None,
) -> AskExplanation:
    """Answers `question` from the indexed chunks of the named (default: all enabled)
    repositories of `visible` (default: all; see search_scope_resolve).

    - The passages do not answer it (the abstention model's probability is below
      ASK_ABSTENTION_THRESHOLD, or the language model says so): sources_missing, no answer, no
      citations, a message naming what was searched.
    - No LLM_BASE_URL: extractive, answer None, the passages that earn a citation
      (`citations_select`) as snippets narrowed to the lines that answer.
    - LLM_BASE_URL: generative, the model's answer from those passages with every [n] checked
      against the returned citations; a model failure falls back to extractive with a warning.

    `fusion` and the abstention model and threshold default to the configured ones (benchmarks
    pass their own).
    """
    repositories = search_scope_resolve(names=repository_names, visible=visible)
    outcome = chunk_search(query=question, repositories=repositories, limit=settings.ASK_CITATION_COUNT, fusion=fusion)
    assessment = abstention_assess(outcome, question=question, model=abstention_model, threshold=abstention_threshold)
    evidence = _evidence(assessment)
    model = _chat_model()
    if not assessment.supported:
        missing = AskResult(
            question=question,
            mode=GENERATIVE if model else EXTRACTIVE,
            answer=None,
            sources_missing=True,
            citations=[],
            searched=_searched(repositories),
            message=_missing_message(question, repositories),
            evidence=evidence,
        )
        return AskExplanation(result=missing, outcome=outcome, assessment=assessment, cited=[])

    cited = citations_select(outcome, count=settings.ASK_CITATION_COUNT, margin=settings.ASK_CITATION_MARGIN)
    chunks = [hit.chunk for hit in cited]
    snippets = snippets_narrow(chunks=chunks, query=outcome.lexical_query, max_lines=settings.ASK_SNIPPET_MAX_LINES)
    citations = [
        {
            "n": number,
            "snippet": snippet.text,
            **citation_for(chunk, start_line=snippet.start_line, end_line=snippet.end_line),
        }
        for number, (chunk, snippet) in enumerate(zip(chunks, snippets, strict=True), start=1)
    ]
    result = AskResult(
        question=question,
        mode=EXTRACTIVE,
        answer=None,
        sources_missing=False,
        citations=citations,
        searched=_searched(repositories),
        evidence=evidence,
    )
    explanation = AskExplanation(result=result, outcome=outcome, assessment=assessment, cited=cited)
    if model is None:
        return explanation
    try:
        reply = chat_completion_create(model=model, messages=answer_messages(question=question, chunks=chunks))
    except LanguageModelError as exc:
        logger.warning("Language model failed, answering extractively: %s", exc)
        result.warning = f"The language model failed ({exc}); extractive snippets are returned instead."
        return explanation
    if answer_is_refusal(reply):
        result.mode = GENERATIVE
        result.sources_missing = True
        result.citations = []
        result.message = _missing_message(question, repositories)
        explanation.cited = []
        explanation.language_model_refused = True
        return explanation
    checked = answer_markers_check(text=reply, citation_numbers={citation["n"] for citation in citations})
    if checked.removed_markers:
        logger.info("Removed citation markers that match no returned citation: %s", checked.removed_markers)
    result.mode = GENERATIVE
    result.answer = checked.text
    return explanation
