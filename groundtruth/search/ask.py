"""/ask: retrieval, the sources-missing decision, cited snippets, and (with a language model
configured) a generative answer whose citation markers are checked."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from groundtruth.models import Repository
from groundtruth.search.answer_composition import answer_is_refusal, answer_markers_check, answer_messages
from groundtruth.search.citations import citation_for
from groundtruth.search.hybrid_search import chunk_search, search_scope_resolve
from groundtruth.search.llm_client import ChatModel, LanguageModelError, chat_completion_create
from groundtruth.search.snippets import snippets_narrow
from groundtruth.search.source_support import support_assess

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
    support: dict[str, float | None] = field(default_factory=dict)


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


def question_answer(*, question: str, repository_names: list[str] | None) -> AskResult:
    """Answers `question` from the indexed chunks of the named (default: all enabled)
    repositories.

    - The passages do not support an answer (support below ASK_SUPPORT_THRESHOLD, or the model
      says so): sources_missing, no answer, no citations, a message naming what was searched.
    - No LLM_BASE_URL: extractive, answer None, the best passages as narrowed cited snippets.
    - LLM_BASE_URL: generative, the model's answer with every [n] checked against the returned
      citations; a model failure falls back to extractive with a warning.
    """
    repositories = search_scope_resolve(names=repository_names)
    outcome = chunk_search(query=question, repositories=repositories, limit=settings.ASK_CITATION_COUNT)
    assessment = support_assess(outcome)
    support = {
        "score": assessment.score,
        "similarity": assessment.similarity,
        "coverage": assessment.coverage,
        "known": assessment.known,
    }
    model = _chat_model()
    if not assessment.supported:
        return AskResult(
            question=question,
            mode=GENERATIVE if model else EXTRACTIVE,
            answer=None,
            sources_missing=True,
            citations=[],
            searched=_searched(repositories),
            message=_missing_message(question, repositories),
            support=support,
        )

    chunks = [hit.chunk for hit in outcome.hits]
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
        support=support,
    )
    if model is None:
        return result

    try:
        reply = chat_completion_create(model=model, messages=answer_messages(question=question, chunks=chunks))
    except LanguageModelError as exc:
        logger.warning("Language model failed, answering extractively: %s", exc)
        result.warning = f"The language model failed ({exc}); extractive snippets are returned instead."
        return result
    if answer_is_refusal(reply):
        result.mode = GENERATIVE
        result.sources_missing = True
        result.citations = []
        result.message = _missing_message(question, repositories)
        return result
    checked = answer_markers_check(text=reply, citation_numbers={citation["n"] for citation in citations})
    if checked.removed_markers:
        logger.info("Removed citation markers that match no returned citation: %s", checked.removed_markers)
    result.mode = GENERATIVE
    result.answer = checked.text
    return result
