"""What the service answers to a question, and why: the staff console's "Ask the docs" page.

One call runs the two pipelines exactly as the API runs them (/ask: `question_answer_explained`;
/search: `chunk_search`), so the console shows what a client would get, and adds what the
responses leave out: each passage's lexical and dense rank, its fused score, relevance and dense
similarity, the cited lines inside their surrounding lines read from the source store, and the
sources-missing decision with the evidence it was made from (each feature's value, weight and
share of the logit, the probability and the threshold).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from django.http import HttpRequest

from agentplatform.plumbing.errors import ApplicationError
from groundtruth.models import Repository
from groundtruth.search.abstention_model import FEATURES
from groundtruth.search.ask import AskExplanation, AskResult, question_answer_explained
from groundtruth.search.citations import citation_for
from groundtruth.search.hybrid_search import SearchHit, chunk_search, search_scope_resolve
from groundtruth.source_lines import read_source_lines, source_lines_url

# Lines shown above and below the cited ones.
CONTEXT_LINES = 3


@dataclass(frozen=True)
class SourceLine:
    number: int
    text: str
    cited: bool


@dataclass(frozen=True)
class InspectedPassage:
    """A /search hit or an /ask citation, with its ranks and its lines in context."""

    chunk_id: int
    repo: str
    path: str
    commit: str
    line: int  # the cited lines (a citation's snippet, or the whole chunk of a hit)
    end_line: int
    url: str | None
    heading: list[str]
    trust: str
    fused_score: float  # as /search reports it
    relevance: float | None  # as /search reports it: what ordered the re-ranked passages
    lexical_rank: int | None  # None: the lexical leg did not find it
    dense_rank: int | None  # None: the dense leg did not find it (or there is no dense leg)
    similarity: float | None  # the dense score (passage similarity lifted by the title's)
    matched_lexemes: tuple[str, ...]
    lines: list[SourceLine]  # the cited lines and CONTEXT_LINES around them; [] when unreadable
    lines_error: str  # why `lines` is empty
    number: int | None = None  # the citation's n
    source_url: str | None = None  # GET /sources/... of exactly the cited lines (`passages_with_source_urls`)


@dataclass(frozen=True)
class FeatureEvidence:
    name: str
    value: float
    weight: float
    contribution: float  # weight * value: its share of the logit


@dataclass(frozen=True)
class SourcesMissingEvidence:
    """The sources-missing decision and what it was made from."""

    sources_missing: bool
    reason: str  # in words: which rule decided
    probability: float
    threshold: float
    intercept: float
    logit: float
    features: list[FeatureEvidence]  # in FEATURES order
    named_repositories: list[str]
    language_model_refused: bool


@dataclass(frozen=True)
class QuestionInspection:
    question: str
    repositories: list[str]  # searched, by name
    ask: AskResult  # exactly what POST /ask answers (through groundtruth.search_serializers.AskResponseSerializer)
    citations: list[InspectedPassage]  # one per ask citation
    hits: list[InspectedPassage]  # exactly the hits of GET /search, best first
    evidence: SourcesMissingEvidence


def question_inspect(*, question: str, repository_names: list[str] | None, search_limit: int) -> QuestionInspection:
    """Answers `question` as POST /ask does and searches it as GET /search does (`search_limit`
    results), within the named (default: all enabled) repositories, and says why.

    Raises InvalidInput (as the API does) when a named repository is not an enabled one.
    """
    repositories = search_scope_resolve(names=repository_names)
    names = [repository.name for repository in repositories]
    explanation = question_answer_explained(question=question, repository_names=repository_names)
    outcome = chunk_search(query=question, repositories=repositories, limit=search_limit)
    citations = [
        _passage(
            hit,
            line=citation["line"],
            end_line=citation["end_line"],
            number=citation["n"],
        )
        for hit, citation in zip(explanation.cited, explanation.result.citations, strict=True)
    ]
    hits = [_passage(hit, line=hit.chunk.start_line, end_line=hit.chunk.end_line) for hit in outcome.hits]
    return QuestionInspection(
        question=question,
        repositories=names,
        ask=explanation.result,
        citations=citations,
        hits=hits,
        evidence=_evidence(explanation),
    )


def _passage(hit: SearchHit, *, line: int, end_line: int, number: int | None = None) -> InspectedPassage:
    chunk = hit.chunk
    citation = citation_for(chunk, start_line=line, end_line=end_line)
    lines: list[SourceLine] = []
    error = ""
    try:
        # To the file's end (at most SOURCE_LINES_MAX lines): a chunk at the end of its file has
        # fewer than CONTEXT_LINES after it, and a range past the end is refused.
        source = read_source_lines(
            repository_name=chunk.repository.name,
            path=chunk.path,
            commit=chunk.commit,
            start=max(1, line - CONTEXT_LINES),
        )
    except ApplicationError as exc:  # the cache lost the commit, the file left the registry's globs...
        error = exc.detail
    else:
        shown = source.lines[: end_line + CONTEXT_LINES - source.start + 1]
        lines = [
            SourceLine(number=number, text=text, cited=line <= number <= end_line)
            for number, text in enumerate(shown, start=source.start)
        ]
    return InspectedPassage(
        chunk_id=chunk.pk,
        repo=citation["repo"],
        path=citation["path"],
        commit=citation["commit"],
        line=line,
        end_line=end_line,
        url=citation["url"],
        heading=list(chunk.heading or []),
        trust=chunk.trust,
        fused_score=round(hit.score, 6),
        relevance=None if hit.relevance is None else round(hit.relevance, 6),
        lexical_rank=hit.lexical_rank,
        dense_rank=hit.dense_rank,
        similarity=None if hit.dense_score is None else round(hit.dense_score, 4),
        matched_lexemes=hit.matched_lexemes,
        lines=lines,
        lines_error=error,
        number=number,
    )


def _evidence(explanation: AskExplanation) -> SourcesMissingEvidence:
    assessment = explanation.assessment
    model = assessment.model
    features = [
        FeatureEvidence(
            name=name,
            value=round(assessment.features[name], 4),
            weight=model.weights.get(name, 0.0),
            contribution=round(model.weights.get(name, 0.0) * assessment.features[name], 4),
        )
        for name in FEATURES
    ]
    logit = model.intercept + sum(model.weights.get(name, 0.0) * assessment.features[name] for name in FEATURES)
    if not explanation.outcome.hits:
        reason = "No passage was found at all: the sources are missing whatever the model says."
    elif not assessment.supported:
        reason = (
            f"The model's probability that the passages answer, {assessment.probability:.4f}, "
            f"is below the threshold {assessment.threshold}."
        )
    elif explanation.language_model_refused:
        reason = "The model's probability passed the threshold, but the language model said the passages do not answer."
    else:
        reason = (
            f"The model's probability that the passages answer, {assessment.probability:.4f}, "
            f"reaches the threshold {assessment.threshold}."
        )
    return SourcesMissingEvidence(
        sources_missing=explanation.result.sources_missing,
        reason=reason,
        probability=round(assessment.probability, 4),
        threshold=assessment.threshold,
        intercept=model.intercept,
        logit=round(logit, 4),
        features=features,
        named_repositories=assessment.named_repositories,
        language_model_refused=explanation.language_model_refused,
    )


def passages_with_source_urls(inspection: QuestionInspection, *, request: HttpRequest) -> QuestionInspection:
    """`inspection` with each passage's `source_url` on the host the request came in by, as the
    API's citations carry it."""

    def linked(passage: InspectedPassage) -> InspectedPassage:
        url = source_lines_url(
            request=request,
            repo=passage.repo,
            path=passage.path,
            commit=passage.commit,
            start=passage.line,
            end=passage.end_line,
        )
        return replace(passage, source_url=url)

    return replace(
        inspection,
        citations=[linked(passage) for passage in inspection.citations],
        hits=[linked(passage) for passage in inspection.hits],
    )


def repository_choices() -> list[str]:
    """The names the console's repository filter offers: the enabled repositories, as /search
    and /ask accept them."""
    return list(Repository.objects.filter(enabled=True).order_by("name").values_list("name", flat=True))
