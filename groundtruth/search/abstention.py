"""Do the retrieved passages answer the question? The "sources missing" decision of /ask.

Fused scores are ranks, not evidence: the best chunk of an unrelated corpus still comes first.
The decision is a small logistic model (`abstention_model.py`, coefficients in
groundtruth/search/fitted/abstention.json, fitted by `manage.py abstention_fit` on questions with known answers and
questions the documentation cannot answer) over evidence features, each in [0, 1]:

- similarity: the best dense score (passage and title similarity mixed, fusion.dense_score);
- heading_similarity: the best similarity of a section title to the question;
- peak: how far the best dense score stands above the mean of the next nine (an answer stands
  out; a question about something absent finds many equally vague neighbours);
- coverage: the largest share of the question's IDF mass that one of the top fused passages
  contains. IDF weighs the words that carry the question (`PgBouncer`, `SIGHUP`) above filler;
- known: the share of the question's IDF mass carried by words the searched repositories
  contain at all. A question about something the documentation never mentions (a product, a
  protocol, a feature it lacks) names it with words no chunk has;
- rare_together: the share of the question's rare words (IDF above half the largest possible)
  that one passage among the best of either leg contains together;
- agreement: 1 / the lexical rank of the best dense passage (0 beyond the tenth): both legs
  pointing at one passage is evidence;
- lexical: the best BM25 score over the largest score the question's words could reach;
- vocabulary_scaled_known: named_known with each absent everyday word weighed by how large the
  scope's vocabulary is (`everyday_words.py`): a small corpus lacks everyday words a user writes;
  absent jargon counts in full everywhere;
- named_*: similarity, coverage, known and rare_together again, within the repositories the
  question names by their label ("... in aiohttp?"). A question about a feature one project
  lacks is often answered by another project's documentation ("download over FTP" is in
  Scrapy's, not in Requests'); naming no repository, they equal the unnamed ones.
- names_known, names_together: the question's names (`question_names`: `Docker`, `HTTP/2`,
  `.pyi`, `allowed_domains`, `AWS Lambda`): the share of them the named repositories mention at
  all, and the largest share of them one of the best passages there mentions together (a name
  of several words only as those words in a row; a word with two capitals or more only spelled
  so: `DATABASES`, not "databases"). A question about
  something the documentation lacks usually names it; a user rewording a question keeps the
  names and changes the other words. Without names both are 1.
- question_prior: the model's prior over questions (abstention_model.QuestionPrior): how likely a
  question like this one, with a first passage like this one, is answerable, from the question's
  vector and its product with the first result's passage vector alone; 1 without a prior or for a
  vector it cannot read (then the fit's model without the prior decides: AbstentionFit.for_question).

IDF here is `LexicalQuery.capped_idf`: a word no chunk has counts as much as a word one chunk has.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.conf import settings

from groundtruth.ingest.index_text import repository_label
from groundtruth.models import Chunk, CorpusStatistic, Repository
from groundtruth.search.abstention_model import (
    FEATURES,
    PASSAGE_INPUT,
    PRIOR_FEATURE,
    AbstentionModel,
    QuestionPrior,
)
from groundtruth.search.everyday_words import (
    missing_weight,
    pieces_per_lexeme,
    vocabulary_scaled_known,
    word_pieces,
)
from groundtruth.search.fitted_parameters import abstention_fit_current
from groundtruth.search.fusion import dense_score
from groundtruth.search.hybrid_search import SearchOutcome
from groundtruth.search.lexical_index import lexemes_present, phrases_present, spellings_present, texts_lexemes
from groundtruth.search.lexical_search import (
    bm25_share,
    chunks_lexemes_matched,
    chunks_phrases_matched,
    chunks_spellings_matched,
    idf_share,
)

# How many of the best passages the evidence looks at.
COVERAGE_TOP = 5
NEIGHBOURS = 10


@dataclass(frozen=True)
class AbstentionAssessment:
    features: dict[str, float]
    probability: float
    threshold: float
    named_repositories: list[str]
    model: AbstentionModel  # the one that weighed the features (the staff console shows its weights)
    # "model": `probability` is the logistic model's; "judge": it is the relevance judge's best
    # score among the judged passages and `threshold` the one it calibrated for that passage's
    # repository on its own mined pairs (no constant fitted to labelled questions).
    decided_by: str = "model"

    @property
    def supported(self) -> bool:
        return self.probability >= self.threshold


def repositories_named(*, question: str, repositories: list[Repository]) -> list[Repository]:
    """The repositories whose label the question uses as a word (`aiohttp`, `jinja2` for jinja)."""
    lowered = question.lower()
    return [
        repository
        for repository in repositories
        if re.search(rf"(?<![\w-]){re.escape(repository_label(repository.name).lower())}\d*(?![\w-])", lowered)
    ]


_WORD = re.compile(r"[A-Za-z_.][\w./+#-]*")
_PLAIN_WORD = re.compile(r"[A-Za-z][A-Za-z0-9-]*")
# Names written next to each other are one name (`AWS Lambda`, `Django REST`), up to this many
# words; a longer run of capitals is a title written in capitals, whose words are names apart.
NAME_WORDS_MAX = 3


def question_names(question: str, *, repositories: list[Repository]) -> list[str]:
    """The words of `question` that name a thing: written with a capital (past the question's
    first word, or inside a word: `ClientSession`), or with a digit, `/`, `_` or a leading dot
    (`HTTP/2`, `allowed_domains`, `.pyi`). "I" and the repositories' labels are not names.

    Plain words written as names next to each other, with only a space between them, are one
    name of several words (`AWS Lambda`): documentation that has `AWS` and a Python `lambda`
    does not have AWS Lambda."""
    labels = {repository_label(repository.name).lower() for repository in repositories}
    runs: list[list[str]] = []
    previous_end = -1
    for position, match in enumerate(_WORD.finditer(question)):
        word = match.group().rstrip(".,;:!?")
        if not word.strip("._") or word == "I" or word.lower() in labels:
            previous_end = -1
            continue
        capitalised = (position > 0 and word[0].isupper()) or any(char.isupper() for char in word[1:])
        marked = bool(re.search(r"[\d/_]", word)) or word.startswith(".")
        if not (capitalised or marked):
            previous_end = -1
            continue
        joins = (
            previous_end >= 0
            and question[previous_end : match.start()] == " "
            and _PLAIN_WORD.fullmatch(word)
            and _PLAIN_WORD.fullmatch(runs[-1][-1])
        )
        if joins:
            runs[-1].append(word)
        else:
            runs.append([word])
        previous_end = match.start() + len(word)
    names = []
    for run in runs:
        if len(run) <= NAME_WORDS_MAX:
            names.append(" ".join(run))
        else:
            names.extend(run)
    return names


def spelled_words(name: str) -> list[str]:
    """The words of a name written with two capitals or more (`PostgreSQL`, `DATABASES`, the
    `AWS` of `AWS Lambda`), which documentation that has them has spelled so: Django's
    `DATABASES` setting is not the word "databases" in prose, nor is `PostgreSQL` the scheme of a
    `postgresql://` address."""
    return [word for word in name.split(" ") if sum(char.isupper() for char in word) >= 2]


def evidence_features(
    outcome: SearchOutcome, *, question: str, prior: QuestionPrior | None = None
) -> tuple[dict[str, float], list[Repository]]:
    """The features of FEATURES for `outcome`, and the repositories the question names.
    `question_prior` is `prior`'s probability for the question's vector (1 without one)."""
    idf = outcome.lexical_query.capped_idf()
    rare = {lexeme for lexeme, value in idf.items() if value > 0.5 * outcome.lexical_query.idf_ceiling}
    named = repositories_named(question=question, repositories=outcome.repositories)
    searched_ids = {repository.pk for repository in outcome.repositories}
    named_ids = {repository.pk for repository in named} or searched_ids
    names = question_names(question, repositories=outcome.repositories)
    words = word_pieces(question)
    # One round trip for the names' lexemes and the words' (vocabulary_scaled_known).
    looked_up = texts_lexemes(names + [word for word, _ in words])
    name_lexemes = {name: found for name, found in zip(names, looked_up[: len(names)], strict=True) if found}
    every_name_lexeme = set().union(*name_lexemes.values())
    phrases = [name for name in name_lexemes if " " in name]
    name_spellings = {name: set(spelled_words(name)) for name in name_lexemes}
    spellings = sorted(set().union(*name_spellings.values()))

    heading_weight = outcome.fusion.heading_weight if outcome.fusion else settings.SEARCH_HEADING_WEIGHT
    repository_of = {chunk_id: candidate.repository_id for chunk_id, candidate in outcome.candidates.items()}
    dense = outcome.dense_hits  # best dense score first
    lexical = outcome.lexical_hits
    named_dense = [hit for hit in dense if repository_of.get(hit.chunk_id) in named_ids]
    named_lexical = [hit for hit in lexical if repository_of.get(hit.chunk_id) in named_ids]
    top_fused = [hit.chunk.pk for hit in outcome.hits[:COVERAGE_TOP]]
    looked_at = [hit.chunk_id for hit in dense[:NEIGHBOURS]] + [hit.chunk_id for hit in lexical[:NEIGHBOURS]]
    named_looked_at = [hit.chunk_id for hit in named_dense[:NEIGHBOURS]] + [
        hit.chunk_id for hit in named_lexical[:NEIGHBOURS]
    ]
    named_top = [chunk_id for chunk_id in top_fused if repository_of.get(chunk_id) in named_ids] or [
        hit.chunk_id for hit in named_dense[:COVERAGE_TOP]
    ]
    asked = sorted(set(idf) | every_name_lexeme)
    matched = chunks_lexemes_matched(chunk_ids=looked_at + named_looked_at + top_fused + named_top, lexemes=asked)
    lexical_rank = {hit.chunk_id: rank for rank, hit in enumerate(lexical[:NEIGHBOURS], start=1)}

    def share(lexemes: set[str]) -> float:
        return idf_share(lexemes, idf=idf)

    def rare_share(chunk_ids: list[int]) -> float:
        if not rare:
            return 1.0 if idf else 0.0
        return max((len(matched.get(chunk_id, set()) & rare) / len(rare) for chunk_id in chunk_ids), default=0.0)

    present = {
        scope: lexemes_present(lexemes=asked, repository_ids=sorted(scope))
        for scope in {frozenset(searched_ids), frozenset(named_ids)}
    }
    named_present = present[frozenset(named_ids)]
    # No query when the question has no name of several words.
    named_phrases = phrases_present(phrases=phrases, repository_ids=sorted(named_ids))
    phrases_matched = chunks_phrases_matched(chunk_ids=named_looked_at, phrases=phrases)
    # No query when no name has two capitals.
    named_spellings = spellings_present(words=spellings, repository_ids=sorted(named_ids))
    spellings_matched = chunks_spellings_matched(chunk_ids=named_looked_at, words=spellings)

    def name_in(name: str, lexemes: set[str], found_phrases: set[str], found_spellings: set[str]) -> bool:
        return (
            name_lexemes[name] <= lexemes
            and (" " not in name or name in found_phrases)
            and name_spellings[name] <= found_spellings
        )

    scores = [dense_score(hit, heading_weight=heading_weight) for hit in dense[:NEIGHBOURS]]
    everyday_shares = list(
        CorpusStatistic.objects.filter(repository_id__in=sorted(named_ids)).values_list("everyday_share", flat=True)
    )

    features = {
        "similarity": scores[0] if scores else 0.0,
        "heading_similarity": max((hit.heading_similarity or 0.0 for hit in dense[:NEIGHBOURS]), default=0.0),
        "peak": scores[0] - sum(scores[1:]) / len(scores[1:]) if len(scores) > 1 else 0.0,
        "coverage": max((share(matched.get(chunk_id, set())) for chunk_id in top_fused), default=0.0),
        "known": share(present[frozenset(searched_ids)]),
        "rare_together": rare_share(looked_at),
        "agreement": 1.0 / lexical_rank[dense[0].chunk_id] if dense and dense[0].chunk_id in lexical_rank else 0.0,
        "lexical": bm25_share(lexical[0].score, idf=idf) if lexical else 0.0,
        "named_similarity": dense_score(named_dense[0], heading_weight=heading_weight) if named_dense else 0.0,
        "named_coverage": max((share(matched.get(chunk_id, set())) for chunk_id in named_top), default=0.0),
        "named_known": share(named_present),
        "vocabulary_scaled_known": vocabulary_scaled_known(
            idf=idf,
            present=named_present,
            pieces=pieces_per_lexeme(words, looked_up[len(names) :]),
            weight=missing_weight(everyday_shares),
        ),
        "named_rare_together": rare_share(named_looked_at),
        "names_known": (
            sum(name_in(name, named_present, named_phrases, named_spellings) for name in name_lexemes)
            / len(name_lexemes)
            if name_lexemes
            else 1.0
        ),
        "names_together": (
            max(
                (
                    sum(
                        name_in(
                            name,
                            matched.get(chunk_id, set()),
                            phrases_matched.get(chunk_id, set()),
                            spellings_matched.get(chunk_id, set()),
                        )
                        for name in name_lexemes
                    )
                    for chunk_id in named_looked_at
                ),
                default=0,
            )
            / len(name_lexemes)
            if name_lexemes
            else 1.0
        ),
    }
    embedding = outcome.embedding
    features[PRIOR_FEATURE] = (
        prior.probability(
            embedding.vector,
            encoder=embedding.model_name,
            passage=first_passage_vector(outcome) if PASSAGE_INPUT in prior.inputs else (),
        )
        if prior and embedding
        else 1.0
    )
    assert set(features) == set(FEATURES)
    return features, named


def first_passage_vector(outcome: SearchOutcome) -> tuple[float, ...]:
    """The passage vector of the first result (what the prior over questions reads beside the
    question); empty when nothing was found or the passage has no vector."""
    if not outcome.hits:
        return ()
    vector = Chunk.objects.filter(pk=outcome.hits[0].chunk.pk).values_list("embedding", flat=True).first()
    return tuple(float(value) for value in vector) if vector is not None else ()


def abstention_assess(
    outcome: SearchOutcome,
    *,
    question: str,
    model: AbstentionModel | None = None,
    threshold: float | None = None,
    judge_decides: bool = True,
) -> AbstentionAssessment:
    """Assesses `outcome` with the configured (or the given) model and threshold; when a relevance
    judge scored the passages (and `judge_decides`), the judge decides: supported when its best
    score reaches the refusal threshold of that passage's repository. Nothing found at all is
    never supported."""
    embedding = outcome.embedding
    fitted_model, fitted_threshold = abstention_fit_current().for_question(
        embedding.vector if embedding else None, encoder=embedding.model_name if embedding else ""
    )
    model = fitted_model if model is None else model
    threshold = fitted_threshold if threshold is None else threshold
    features, named = evidence_features(outcome, question=question, prior=model.question_prior)
    probability = model.probability(features) if outcome.hits else 0.0
    decided_by = "model"
    if judge_decides and outcome.judge is not None and outcome.judge_scores:
        best = max(outcome.judge_scores, key=lambda chunk_id: (outcome.judge_scores[chunk_id], -chunk_id))
        probability = outcome.judge_scores[best]
        threshold = outcome.judge.threshold_for(outcome.chunks[best].repository.name)
        decided_by = "judge"
    return AbstentionAssessment(
        features=features,
        probability=probability,
        threshold=threshold,
        named_repositories=[repository.name for repository in named],
        model=model,
        decided_by=decided_by,
    )
