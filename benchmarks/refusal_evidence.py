"""Refusal evidence that might transfer across documentation styles (issue 23, item 3).

    python benchmarks/retrieval.py --eval-set DIR --no-ferrite --refusal-evidence

`/ask` says `sources_missing` when today's logistic model over evidence features
(`groundtruth/search/abstention.py`) falls below one global threshold. On other repositories it
refused many answerable questions with the right passage ranked first, and its largest weight is
on `heading_similarity`, whose distribution shifts with the documentation's title style (FAQ
titles asked as questions in reStructuredText, symptoms or error messages in Markdown). This
measures candidate evidence meant to be independent of that style, each computed beside today's
features on the same search (shipped configuration, re-ranking as shipped, no judge):

- `known_scope`: the share of the question's lexeme IDF mass that the searched scope contains,
  the scope being the repositories the question names, else the repository of the best dense
  passage, and the IDF the scope's own (its chunk counts, a lexeme no chunk has capped at the
  IDF of a lexeme one chunk has). Today's `named_known` uses every searched repository when
  none is named, so a word of one product counts as known in all the others;
- `heading_corpus_quantile`: `heading_similarity` as a quantile among the similarities the best
  dense passage's repository's own section titles have with their own passages (each corpus's
  title style sets its own scale);
- `sentence_similarity`: the best similarity of a sentence of the first result to the question
  (an answer is often one sentence of a longer passage; a passage vector averages it away).
  Costs one embedding per sentence of the first result: ~0.3 s per question on 2 CPU cores;
- `word_drop`: minus the largest gain of the first result's passage similarity when one word of
  the question is left out (each word with a lexeme, the rest of the question embedded again).
  A question about something the passage lacks fits it better without that word ("deploy
  spiders as an AWS Lambda function" against "Deploying spiders").

- `kernel_0.9`, `kernel_0.7`, `kernel_0.5`: K-NRM kernel pooling of the question's word pieces
  against the first result's tokens (MiniLM's frozen contextual token vectors): how much of the
  question the passage matches near-exactly, closely and loosely. The same for each of the first
  five results (`kernel_0.7@3`) feeds a relevance model learned from users' questions
  (`learned_relevance_measure`): logistic over a result's kernels, fitted on the other
  repositories' questions (the result holding the answer against the rest), in a nested rotation.

- `top_stability`, `first_kept`: query-perturbation robustness (a query-performance predictor
  of the information-retrieval literature). The question is embedded again with one word left
  out at a time (the `word_drop` variants) and the dense leg's best 30 passages re-ordered for
  each: the share of variants whose first passage is the whole question's, and the mean of
  1 / the rank of /ask's first result. A question one passage answers keeps its passage
  whichever word goes; one no passage answers whole is answered in parts by different ones.

- `absent_shift`, `shift_known`, `shift_idf_known` (and `_scope`: the named repositories or the
  best dense passage's), `shift_coverage`, `shift_coverage_first`: absent words, and the words the
  best passages hold, weighed by how far the question's own vector moves without them (the
  `word_drop` variants) instead of by IDF (`essential_absence`).

- `question_prior` (`question_prior.py`, measured after the variants): the question's vector alone,
  a logistic model learned from the other repositories' labelled questions (nested rotation).

- `jargon_known`: today's `vocabulary_scaled_known` (groundtruth/search/everyday_words.py) with a
  missing everyday word weighing nothing: only words MiniLM's WordPiece vocabulary splits into
  pieces ("Cryptomator", "zellij", "websockets") count as missing.

Every variant is measured with `refusal_calibration.variant_measure`: model and threshold (at
most 5% of the training answerable questions refused) fitted on eleven repositories and measured
on the one left out, in-sample beside it; and, as a stricter test of transfer across styles,
fitted on one format's six repositories and measured on the other format's six.

With `--written` (benchmarks/written_questions), every variant is fitted on the other repositories'
questions of both collections; the development set's figures and the written questions' are
printed apart, and beside them the same variant fitted on the development set's questions alone.

Documentation nobody tuned for: `--assessed-out FILE` writes every question's features as JSON
lines; `--transfer-check FILE` (such a file written on another set, in its own benchmark
database) adds each variant fitted on every question of this set and measured on that one. A set
cut from this one (`shrunk_set.py`: the same questions on small corpora) shares its repositories:
each of them is measured by the variant fitted without it.

    python benchmarks/retrieval.py --eval-set OTHER --no-ferrite --database gt_bench_other \
        --refusal-evidence --assessed-out var/other-assessed.jsonl
    python benchmarks/retrieval.py --eval-set DIR --no-ferrite --refusal-evidence \
        --transfer-check var/other-assessed.jsonl

Unanswerable questions made from answerable ones: `retrieval.py --answer-removed-out FILE` asks
each answerable question of the fitted collections again with its answer's chunks removed
(`answer_removed_assess`, in a transaction rolled back after each) and writes the same rows;
`refusal_thresholds.py --answer-removed FILE` fits on them.
"""

from __future__ import annotations

import bisect
import json
import re
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from benchmarks.evaluation_sets import (
    ANSWER_REMOVED,
    TOP,
    WRITTEN_COLLECTION,
    EvaluationSet,
    is_written,
    repository_format,
    repository_format_record,
)
from benchmarks.question_prior import VECTOR_DECIMALS, question_prior_measure
from benchmarks.refusal_calibration import (
    ANSWERABLE_MISSING_TARGET,
    REPOSITORY_REFUSED_LIMIT,
    Assessed,
    Decisions,
    Variant,
    _cell,
    _decide,
    _rates,
    auc,
    dense_first_repository,
    refused_to_catch,
    variant_measure,
)

# K-NRM's kernels over a question piece's cosines with a passage's tokens: near-exact, close, loose.
KERNEL_CENTRES = (0.9, 0.7, 0.5)
KERNEL_WIDTH = 0.1
KERNEL_NAMES = tuple(f"kernel_{centre}" for centre in KERNEL_CENTRES)
# How many of the first results carry kernel features (`kernel_0.9@2` is the second result's).
KERNEL_RESULTS = 5
# How many of the first results' passage vectors the features file keeps (a pair prior's input).
PASSAGE_VECTORS = 3
ESSENTIAL_NAMES = (
    *(f"{name}{suffix}" for suffix in ("", "_scope") for name in ("absent_shift", "shift_known", "shift_idf_known")),
    "shift_coverage",
    "shift_coverage_first",
)
CANDIDATES = (
    "known_scope",
    "heading_corpus_quantile",
    "sentence_similarity",
    "word_drop",
    "word_matched",
    "jargon_known",
    *KERNEL_NAMES,
    "top_stability",
    "first_kept",
    *ESSENTIAL_NAMES,
)
# How many of the first results `word_matched` reads, and up to how many tokens each.
UNMATCHED_RESULTS = 3
UNMATCHED_TOKENS = 256
# A sentence needs this many words of two letters or more to be compared (not a code line or a
# lone link).
SENTENCE_WORDS_MIN = 3
SENTENCE_CHARACTERS_MAX = 400
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|\n\s*\n|\n(?=\s*(?:[-*+]|\d+\.)\s)")
_LETTERS = re.compile(r"[A-Za-z]{2,}")


def _cosine(left: Sequence[float], right: Sequence[float]) -> float:
    import numpy as np

    a, b = np.asarray(left, dtype=float), np.asarray(right, dtype=float)
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b) / norm if norm else 0.0


def sentences(text: str) -> list[str]:
    found = []
    for part in _SENTENCE_BREAK.split(text):
        sentence = " ".join(part.split())
        if len(_LETTERS.findall(sentence)) >= SENTENCE_WORDS_MIN:
            found.append(sentence[:SENTENCE_CHARACTERS_MAX])
    return found


def title_scales() -> dict[int, list[float]]:
    """Per repository id, the sorted similarities of its section titles to their own passages."""
    from django.db import connection

    scales: dict[int, list[float]] = {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT repository_id, 1 - (embedding::vector <=> heading_embedding::vector) FROM groundtruth_chunk"
            " WHERE embedding IS NOT NULL AND heading_embedding IS NOT NULL"
        )
        for repository_id, similarity in cursor.fetchall():
            scales.setdefault(repository_id, []).append(float(similarity))
    return {repository_id: sorted(values) for repository_id, values in scales.items()}


def known_in_scope(lexemes: Sequence[str], repository_ids: Sequence[int]) -> float:
    """The share of the IDF mass of `lexemes` (the scope's own IDF) that the scope contains."""
    from django.db import connection

    from groundtruth.search.lexical_search import bm25_idf

    if not lexemes:
        return 0.0
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT lexeme, sum(document_count) FROM groundtruth_lexeme_statistic"
            " WHERE lexeme = ANY(%s) AND repository_id = ANY(%s) GROUP BY lexeme",
            [list(lexemes), list(repository_ids)],
        )
        counts = {lexeme: int(count) for lexeme, count in cursor.fetchall()}
        cursor.execute(
            "SELECT coalesce(sum(document_count), 0) FROM groundtruth_corpus_statistic WHERE repository_id = ANY(%s)",
            [list(repository_ids)],
        )
        documents = int(cursor.fetchone()[0])
    ceiling = bm25_idf(document_frequency=1, document_count=max(documents, 1))
    idf = {
        lexeme: min(bm25_idf(document_frequency=counts.get(lexeme, 0), document_count=documents), ceiling)
        for lexeme in lexemes
    }
    total = sum(idf.values())
    return sum(value for lexeme, value in idf.items() if counts.get(lexeme, 0) > 0) / total if total else 0.0


def jargon_known(outcome, *, question: str, named_ids: list[int]) -> float:
    """`vocabulary_scaled_known` with a missing everyday word weighing nothing, over its scope."""
    from groundtruth.search.everyday_words import lexeme_pieces, vocabulary_scaled_known
    from groundtruth.search.lexical_index import lexemes_present

    idf = outcome.lexical_query.capped_idf()
    scope = named_ids or [repository.pk for repository in outcome.repositories]
    present = lexemes_present(lexemes=sorted(idf), repository_ids=scope)
    return vocabulary_scaled_known(idf=idf, present=present, pieces=lexeme_pieces(question), weight=0.0)


def candidates_compute(outcome, *, question: str, named_ids: list[int], scales: dict[int, list[float]]) -> dict:
    from groundtruth.embeddings import embedding_backend
    from groundtruth.models import Chunk
    from groundtruth.search.lexical_index import query_lexemes

    features: dict[str, float] = {}
    dense_first = outcome.dense_hits[0] if outcome.dense_hits else None
    dense_repository = outcome.candidates[dense_first.chunk_id].repository_id if dense_first else None
    scope = named_ids or ([dense_repository] if dense_repository is not None else [])
    features["known_scope"] = known_in_scope(list(outcome.lexical_query.idf), scope)
    scale = scales.get(dense_repository, []) if dense_repository is not None else []
    heading = max((hit.heading_similarity or 0.0 for hit in outcome.dense_hits[:10]), default=0.0)
    features["heading_corpus_quantile"] = bisect.bisect_left(scale, heading) / len(scale) if scale else 0.0

    features["sentence_similarity"] = 0.0
    features["word_drop"] = 0.0
    features["top_stability"] = 0.0
    features["first_kept"] = 0.0
    features["word_matched"] = 0.0
    features.update(dict.fromkeys(KERNEL_NAMES, 0.0))
    features.update(dict.fromkeys(ESSENTIAL_NAMES, 0.0))
    if not outcome.hits or outcome.embedding is None:
        return features
    firsts = Chunk.objects.in_bulk([hit.chunk.pk for hit in outcome.hits[:KERNEL_RESULTS]])
    texts = [firsts[hit.chunk.pk].text for hit in outcome.hits[:KERNEL_RESULTS]]
    question_tokens, *passage_tokens = _token_vectors([question, *texts])
    rows = question_word_rows(question, question_tokens.shape[0]) if question_tokens.shape[0] else {}
    features["word_matched"] = word_matched(question_tokens, passage_tokens[:UNMATCHED_RESULTS], rows)
    for rank, matches in enumerate(kernel_matches(question_tokens, passage_tokens, rows), start=1):
        features.update({f"{name}@{rank}": value for name, value in matches.items()})
        if rank == 1:
            features.update(matches)
    question_vector = outcome.embedding.vector
    first = Chunk.objects.only("text", "embedding").get(pk=outcome.hits[0].chunk.pk)
    backend = embedding_backend()
    found = sentences(first.text)
    if found:
        features["sentence_similarity"] = max(_cosine(vector, question_vector) for vector in backend.embed(found))
    words = question.split()
    # Only words that carry a lexeme: leaving out "the" or "how" changes nothing worth measuring.
    kept = [index for index, word in enumerate(words) if query_lexemes(word)]
    if kept and first.embedding is not None:
        variants = [" ".join(words[:index] + words[index + 1 :]) for index in kept]
        base = _cosine(question_vector, first.embedding)
        variant_vectors = backend.embed(variants)
        features["word_drop"] = -max(_cosine(vector, first.embedding) - base for vector in variant_vectors)
        features.update(stability(outcome, question_vector, variant_vectors))
        shifts = [1.0 - _cosine(vector, question_vector) for vector in variant_vectors]
        features.update(
            essential_absence(
                outcome,
                words=[words[index] for index in kept],
                shifts=shifts,
                scopes={"": named_ids or [repository.pk for repository in outcome.repositories], "_scope": scope},
            )
        )
    return features


def essential_absence(outcome, *, words: list[str], shifts: list[float], scopes: dict[str, list[int]]) -> dict:
    """How much of the question's meaning rests on words the documentation never uses. A word's
    weight is how far the question's own vector moves when it is left out (`shifts`, 1 - cosine):
    the thing a question asks about moves it far ("does requests support HTTP/2 connections?"),
    an incidental detail little ("... although the site opens fine in Chrome"), where IDF weighs
    both as rare words. A word is absent when one of its lexemes is absent from the scope.
    `absent_shift`: minus the largest weight of an absent word (higher is answerable, as for
    every feature); `shift_known`: the share of the weights the scope's words carry;
    `shift_idf_known`: the same with each weight times the word's IDF. `scopes` maps a suffix to
    repository ids (named or searched; named or the best dense passage's repository)."""
    from groundtruth.search.lexical_index import lexemes_present, texts_lexemes
    from groundtruth.search.lexical_search import chunks_lexemes_matched

    idf = outcome.lexical_query.capped_idf()
    ceiling = outcome.lexical_query.idf_ceiling
    lexemes = texts_lexemes(words)
    asked = sorted(set().union(*lexemes)) if lexemes else []
    features: dict[str, float] = {}
    for suffix, repository_ids in scopes.items():
        present = lexemes_present(lexemes=asked, repository_ids=repository_ids)
        absent = [bool(found - present) for found in lexemes]
        weights = [max(shift, 0.0) for shift in shifts]
        idf_weights = [
            weight * max((idf.get(lexeme, ceiling) for lexeme in found), default=0.0)
            for weight, found in zip(weights, lexemes, strict=True)
        ]
        total, idf_total = sum(weights), sum(idf_weights)
        features[f"absent_shift{suffix}"] = -max(
            (weight for weight, gone in zip(weights, absent, strict=True) if gone), default=0.0
        )
        features[f"shift_known{suffix}"] = (
            1.0 - sum(weight for weight, gone in zip(weights, absent, strict=True) if gone) / total if total else 1.0
        )
        features[f"shift_idf_known{suffix}"] = (
            1.0 - sum(weight for weight, gone in zip(idf_weights, absent, strict=True) if gone) / idf_total
            if idf_total
            else 1.0
        )
    # The same weights over the words one of the best passages holds (today's `coverage` weighs
    # them by IDF): an answer holds what the question asks about, not only its incidental words.
    weights = [max(shift, 0.0) for shift in shifts]
    total = sum(weights)
    top = [hit.chunk.pk for hit in outcome.hits[:5]]
    matched = chunks_lexemes_matched(chunk_ids=top, lexemes=asked)

    def held(chunk_id: int) -> float:
        inside = matched.get(chunk_id, set())
        return sum(w for w, found in zip(weights, lexemes, strict=True) if found and found <= inside) / total

    features["shift_coverage"] = max((held(chunk_id) for chunk_id in top), default=0.0) if total else 1.0
    features["shift_coverage_first"] = held(top[0]) if total and top else 1.0
    return features


# How many of the best dense passages `stability` re-orders for each variant of the question.
STABILITY_POOL = 30


def stability(outcome, question_vector, variant_vectors) -> dict[str, float]:
    """Query-perturbation robustness: with one word of the question left out at a time, does the
    same passage still come first among the dense leg's best (passage and title similarity
    mixed as the dense leg does)? A question one passage answers keeps its passage whichever
    word goes; a question no passage answers whole is answered in parts by different passages.
    `top_stability`: the share of variants whose first passage is the whole question's;
    `first_kept`: the mean over variants of 1 / the rank of /ask's first result among them."""
    import numpy as np

    from groundtruth.models import Chunk
    from groundtruth.search.dense_search import DenseHit
    from groundtruth.search.fusion import dense_ranking

    heading_weight = outcome.fusion.heading_weight if outcome.fusion else 0.0
    first_id = outcome.hits[0].chunk.pk
    pool = list(dict.fromkeys([hit.chunk_id for hit in outcome.dense_hits[:STABILITY_POOL]] + [first_id]))
    rows = Chunk.objects.in_bulk(pool)
    pool = [chunk_id for chunk_id in pool if rows[chunk_id].embedding is not None]
    with_title = [chunk_id for chunk_id in pool if rows[chunk_id].heading_embedding is not None]

    def unit(vectors) -> np.ndarray:
        matrix = np.array(vectors, dtype=float).reshape(-1, len(question_vector))
        return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)

    passages = unit([rows[chunk_id].embedding for chunk_id in pool])
    titles = unit([rows[chunk_id].heading_embedding for chunk_id in with_title])

    def ranked(vector) -> list[int]:
        """The pool's chunk ids as the dense leg orders them for `vector` (fusion.dense_ranking)."""
        query = unit([vector])[0]
        title_similarity = dict(zip(with_title, (titles @ query).tolist(), strict=True))
        hits = [
            DenseHit(chunk_id=chunk_id, similarity=similarity, heading_similarity=title_similarity.get(chunk_id))
            for chunk_id, similarity in zip(pool, (passages @ query).tolist(), strict=True)
        ]
        return [hit.chunk_id for hit in dense_ranking(hits, heading_weight=heading_weight)]

    whole_first = ranked(question_vector)[0]
    kept, reciprocal = [], []
    for vector in variant_vectors:
        order = ranked(vector)
        kept.append(float(order[0] == whole_first))
        reciprocal.append(1.0 / (order.index(first_id) + 1) if first_id in order else 0.0)
    return {"top_stability": sum(kept) / len(kept), "first_kept": sum(reciprocal) / len(reciprocal)}


def question_word_rows(question: str, token_count: int) -> dict[str, list[int]]:
    """The rows of the question's `token_vectors` that belong to each of its words carrying a
    lexeme (a word split into pieces has several), keyed by the word's text."""
    from tokenizers import Tokenizer

    from groundtruth.embeddings import LocalSentenceTransformer, embedding_backend
    from groundtruth.search.lexical_index import texts_lexemes

    backend = embedding_backend()
    assert isinstance(backend, LocalSentenceTransformer)  # its tokenizer file
    encoding = Tokenizer.from_file(str(Path(backend.model_path) / "tokenizer.json")).encode(question)
    # The rows of `token_vectors` are the encoding's pieces without [CLS] (and [SEP]).
    words: dict[int, list[int]] = {}
    for row, word in enumerate(encoding.word_ids[1 : 1 + token_count]):
        if word is not None:
            words.setdefault(word, []).append(row)
    # Offsets of the word's first and last pieces (one sequence: no pair to choose from).
    texts = {
        word: question[encoding.offsets[rows[0] + 1][0] : encoding.offsets[rows[-1] + 1][1]]
        for word, rows in words.items()
    }
    carrying = [word for word, lexemes in zip(texts, texts_lexemes(list(texts.values())), strict=True) if lexemes]
    return {texts[word]: words[word] for word in carrying}


def _token_vectors(texts: list[str]) -> list:
    from groundtruth.embeddings import LocalSentenceTransformer, embedding_backend

    backend = embedding_backend()
    assert isinstance(backend, LocalSentenceTransformer)  # token vectors: the local model on ONNX Runtime
    return backend.token_vectors(texts, max_tokens=UNMATCHED_TOKENS)


def word_matched(question_tokens, passage_tokens: list, rows: dict[str, list[int]]) -> float:
    """The weakest match of one of the question's words in the passages: each word that
    carries a lexeme scores the mean, over its word pieces, of each piece's best cosine with a
    token of the passages (MiniLM's contextual token vectors), and the lowest word score counts.
    A question about something the passages lack names it with a word nothing there resembles
    ("AWS Lambda", "websockets", "emacs"); a paraphrase's own words ("hangs forever" for "stuck")
    still find a neighbour in MiniLM's space, which a lexical test would miss."""
    import numpy as np

    if not passage_tokens or not rows:
        return 0.0
    best = (question_tokens @ np.concatenate(passage_tokens).T).max(axis=1)
    return min(float(best[word_rows].mean()) for word_rows in rows.values())


def kernel_matches(question_tokens, passage_tokens: list, rows: dict[str, list[int]]) -> list[dict[str, float]]:
    """Per passage, kernel pooling of the question's word pieces against the passage's tokens
    (K-NRM, Xiong et al. 2017, on MiniLM's frozen contextual token vectors): for each kernel, the
    mean over the pieces of the question's lexeme-carrying words of log(1 + the soft count of
    passage tokens whose cosine with the piece lies near the kernel's centre). Where
    `word_matched` keeps one number (the weakest word's best match), these keep how much of
    the question the passage matches closely, loosely and barely."""
    import numpy as np

    pieces = sorted({row for word_rows in rows.values() for row in word_rows})
    found = []
    for tokens in passage_tokens:
        features = dict.fromkeys(KERNEL_NAMES, 0.0)
        if pieces and tokens.shape[0]:
            similarity = question_tokens[pieces] @ tokens.T
            for name, centre in zip(KERNEL_NAMES, KERNEL_CENTRES, strict=True):
                soft_count = np.exp(-((similarity - centre) ** 2) / (2 * KERNEL_WIDTH**2)).sum(axis=1)
                features[name] = float(np.log1p(soft_count).mean())
        found.append(features)
    return found


def questions_assess(evaluation: EvaluationSet) -> list[Assessed]:
    from groundtruth.search.hybrid_search import search_scope_resolve

    repositories = search_scope_resolve(names=None)
    scales = title_scales()
    return [question_assess(question, repositories=repositories, scales=scales) for question in evaluation.questions]


def question_assess(question, *, repositories: list, scales: dict[int, list[float]]) -> Assessed:
    """The question's paraphrase searched across `repositories`, and its evidence."""
    from groundtruth.search.abstention import evidence_features
    from groundtruth.search.hybrid_search import chunk_search

    text = question.texts["paraphrase"]
    outcome = chunk_search(query=text, repositories=repositories, limit=TOP, judge=False)
    features, named = evidence_features(outcome, question=text)
    named_ids = [repository.pk for repository in named]
    features.update(candidates_compute(outcome, question=text, named_ids=named_ids, scales=scales))
    features["jargon_known"] = jargon_known(outcome, question=text, named_ids=named_ids)
    return Assessed(
        question=question,
        features=features,
        dense_repository=dense_first_repository(
            outcome, names={repository.pk: repository.name for repository in repositories}
        ),
        judge_repository=None,
        answer_ranks=answer_ranks(question, outcome.hits[:KERNEL_RESULTS]),
        question_vector=(
            tuple(round(float(value), VECTOR_DECIMALS) for value in outcome.embedding.vector)
            if outcome.embedding is not None
            else ()
        ),
        passage_vectors=passage_vectors(outcome),
    )


# The collections the service's sources-missing model is fitted on (the third batch is in no fit).
ANSWER_REMOVED_COLLECTIONS = ("eval-dev", WRITTEN_COLLECTION, "written-2")


def answer_removed_assess(evaluation: EvaluationSet, collections: Sequence[str]) -> list[Assessed]:
    """Every answerable question of `collections` asked again with its answer removed from the
    index: in a transaction that is rolled back, the chunks overlapping its answer lines are
    deleted and their repository's lexical statistics recounted, as an ingest that dropped them
    would, and the question is searched across every repository. What is left is documentation
    on the question's subject without its answer: an unanswerable question as hard as the set's
    (`refusal_thresholds.py --answer-removed` fits on them, never measures them). Its id is the
    question's with ANSWER_REMOVED, its answerable flag false."""
    from django.db import transaction

    from benchmarks.retrieval import Location, overlaps
    from groundtruth.models import Chunk
    from groundtruth.search.everyday_words import everyday_shares_refresh
    from groundtruth.search.hybrid_search import search_scope_resolve
    from groundtruth.search.lexical_index import lexical_statistics_refresh

    repositories = search_scope_resolve(names=None)
    scales = title_scales()
    assessed = []
    for question in evaluation.questions:
        if not (question.answerable and question.lines and question.collection in collections):
            continue
        answer = [
            chunk
            for chunk in Chunk.objects.filter(path=question.path, repository__name=question.fold).only(
                "pk", "path", "start_line", "end_line", "repository_id"
            )
            if overlaps(question, Location(chunk.path, chunk.start_line, chunk.end_line))
        ]
        if not answer:
            continue
        with transaction.atomic():
            Chunk.objects.filter(pk__in=[chunk.pk for chunk in answer]).delete()
            lexical_statistics_refresh(repository_ids=[answer[0].repository_id])
            everyday_shares_refresh(repository_ids=[answer[0].repository_id])
            removed = replace(question, id=question.id + ANSWER_REMOVED, answerable=False, lines=None)
            assessed.append(question_assess(removed, repositories=repositories, scales=scales))
            transaction.set_rollback(True)  # the answer is back for the next question
    return assessed


def passage_vectors(outcome) -> tuple[tuple[float, ...], ...]:
    """The vectors of the first results' passages, best first, rounded as the question's is."""
    from groundtruth.models import Chunk

    ids = [hit.chunk.pk for hit in outcome.hits[:PASSAGE_VECTORS]]
    chunks = Chunk.objects.only("embedding").in_bulk(ids)
    return tuple(
        tuple(round(float(value), VECTOR_DECIMALS) for value in chunks[pk].embedding)
        for pk in ids
        if chunks[pk].embedding is not None
    )


def answer_ranks(question, hits) -> tuple[int, ...]:
    """The ranks of the hits whose lines overlap the question's answer."""
    from benchmarks.retrieval import Location, overlaps

    if not question.answerable or question.lines is None:
        return ()
    return tuple(
        rank
        for rank, hit in enumerate(hits, start=1)
        if overlaps(question, Location(hit.chunk.path, hit.chunk.start_line, hit.chunk.end_line))
    )


def variants() -> list[Variant]:
    from groundtruth.search.abstention_fit import DEFAULT_FEATURES as today

    def replaced(old: str, new: str, features: tuple[str, ...] = today) -> tuple[str, ...]:
        return tuple(new if name == old else name for name in features)

    # Today's vocabulary evidence (`vocabulary_scaled_known`, since 2026-11-26 in `named_known`'s
    # place); the variants that swap it swap that one.
    known = "vocabulary_scaled_known"
    return [
        Variant("today", today),
        Variant("+ similarity", (*today, "similarity")),
        Variant("+ known_scope", (*today, "known_scope")),
        Variant(f"{known} -> known_scope", replaced(known, "known_scope")),
        Variant("+ sentence_similarity", (*today, "sentence_similarity")),
        Variant("heading_similarity -> sentence_similarity", replaced("heading_similarity", "sentence_similarity")),
        Variant(
            "heading_similarity -> heading_corpus_quantile", replaced("heading_similarity", "heading_corpus_quantile")
        ),
        Variant("+ heading_corpus_quantile", (*today, "heading_corpus_quantile")),
        Variant("+ word_drop", (*today, "word_drop")),
        Variant("without heading_similarity", tuple(name for name in today if name != "heading_similarity")),
        Variant(
            f"heading -> sentence, {known} -> known_scope",
            replaced(known, "known_scope", replaced("heading_similarity", "sentence_similarity")),
        ),
        Variant("+ word_matched", (*today, "word_matched")),
        Variant("+ word_matched, sentence_similarity", (*today, "word_matched", "sentence_similarity")),
        Variant("+ all five candidates", (*today, *CANDIDATES[:5])),
        Variant(f"{known} -> named_known (before 2026-11-26)", replaced(known, "named_known")),
        Variant(f"without {known}", tuple(name for name in today if name != known)),
        Variant(f"{known} -> jargon_known", replaced(known, "jargon_known")),
        Variant("+ kernels", (*today, *KERNEL_NAMES)),
        *[Variant(f"+ {name}", (*today, name)) for name in KERNEL_NAMES],
        Variant("+ kernels, sentence_similarity", (*today, *KERNEL_NAMES, "sentence_similarity")),
        Variant("+ top_stability", (*today, "top_stability")),
        Variant("+ first_kept", (*today, "first_kept")),
        Variant("+ top_stability, first_kept", (*today, "top_stability", "first_kept")),
        *[Variant(f"+ {name}", (*today, name)) for name in ESSENTIAL_NAMES],
        Variant("vocabulary_scaled_known -> shift_idf_known", replaced(known, "shift_idf_known")),
        Variant("vocabulary_scaled_known -> shift_known", replaced(known, "shift_known")),
        Variant("coverage -> shift_coverage", replaced("coverage", "shift_coverage")),
        Variant("+ shift_idf_known, shift_coverage", (*today, "shift_idf_known", "shift_coverage")),
    ]


def in_sample_limit(variant: Variant, assessed: list[Assessed]) -> str:
    """What the variant's model, fitted on every question, refuses of the answerable questions
    at the threshold that catches 0.85 (0.90) of the unanswerable ones. Fitted and measured on the
    same questions, this is an optimistic figure for the feature set, not a bound: the fit
    minimises the log loss, not this trade, so adding a feature can make it worse."""
    from groundtruth.search.abstention_fit import LabelledEvidence, abstention_model_fit

    model = abstention_model_fit(
        [LabelledEvidence(features=item.features, answerable=item.question.answerable) for item in assessed],
        features=variant.features,
    )
    measured = _measured(assessed)
    return ", ".join(
        f"{refused_to_catch(model, measured, caught):.3f} refused to catch {caught:.2f}" for caught in (0.85, 0.90)
    )


def format_transfer(variant: Variant, assessed: list[Assessed]) -> str:
    """Fitted on one format's repositories, measured on the other's: caught/refused, the largest
    share of one repository's answerable questions refused, and how many exceed the limit."""
    from groundtruth.search.abstention_fit import LabelledEvidence, abstention_model_fit, abstention_threshold_choose

    cells = []
    for trained, measured_format in (("rst", "Markdown"), ("Markdown", "rst")):
        training = [item for item in assessed if repository_format(item.question.fold) == trained]
        measured = [item for item in _measured(assessed) if repository_format(item.question.fold) == measured_format]
        if not training or not any(not item.question.answerable for item in measured):
            cells.append("n/a")  # a set of one format
            continue
        samples = [LabelledEvidence(features=item.features, answerable=item.question.answerable) for item in training]
        model = abstention_model_fit(samples, features=variant.features)
        threshold = abstention_threshold_choose(model, samples, answerable_missing=ANSWERABLE_MISSING_TARGET)
        refused = {item.question.id: model.probability(item.features) < threshold for item in measured}
        answerable = [item for item in measured if item.question.answerable]
        unanswerable = [item for item in measured if not item.question.answerable]
        per_repository = {}
        for fold in {item.question.fold for item in answerable}:
            of_fold = [refused[item.question.id] for item in answerable if item.question.fold == fold]
            per_repository[fold] = sum(of_fold) / len(of_fold)
        cells.append(
            f"{sum(refused[item.question.id] for item in unanswerable) / len(unanswerable):.3f}/"
            f"{sum(refused[item.question.id] for item in answerable) / len(answerable):.3f}"
            f" max {max(per_repository.values()):.3f}"
            f" ({sum(share > REPOSITORY_REFUSED_LIMIT for share in per_repository.values())})"
        )
    return "  ".join(cells)


def _measured(assessed: list[Assessed]) -> list[Assessed]:
    """The set's own questions, which the figures are of: the questions written to fit on
    (`evaluation_sets.written_load`) join the fits of the folds they are not held out with and are
    reported apart."""
    return [item for item in assessed if not is_written(item.question.collection)]


def rotated_decisions(variant: Variant, training: list[Assessed], measured: list[Assessed]) -> Decisions:
    """`measured`'s decisions by `variant` fitted, for each repository, on `training`'s questions of
    the other repositories."""
    refused: dict[str, bool] = {}
    for fold in sorted({item.question.fold for item in measured}):
        held_out = [item for item in measured if item.question.fold == fold]
        refused.update(_decide(variant, [item for item in training if item.question.fold != fold], held_out, [])[0])
    return Decisions(refused, [])


def _cells_print(label: str, cross: Decisions, inside: Decisions, items: list[Assessed], folds: list[str]) -> None:
    """Caught/refused per format and pooled, left-one-repository-out (in-sample), and the
    repositories refusing the most."""
    cells = [
        f"{name} {_cell(cross, inside, [item for item in items if repository_format(item.question.fold) == name])}"
        for name in ("rst", "Markdown")
    ]
    (largest, over), (largest_in, over_in) = _worst(cross, items, folds), _worst(inside, items, folds)
    print(
        f"    {label + ': ' if label else ''}{', '.join(cells)}, pooled {_cell(cross, inside, items)};"
        f" per repository max {largest:.3f} ({over} above) ({largest_in:.3f}, {over_in} above)"
    )


def _worst(decisions: Decisions, assessed: list[Assessed], folds: list[str]) -> tuple[float, int]:
    """The largest share of one repository's answerable questions refused, and how many
    repositories refuse more than the limit."""
    shares = [_rates(decisions, [item for item in assessed if item.question.fold == fold])[0] for fold in folds]
    return max(shares), sum(share > REPOSITORY_REFUSED_LIMIT for share in shares)


def assessed_write(assessed: list[Assessed], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "".join(
            json.dumps(
                {
                    "id": item.question.id,
                    "fold": item.question.fold,
                    "written": is_written(item.question.collection),
                    "answerable": item.question.answerable,
                    "format": repository_format(item.question.fold),
                    "features": item.features,
                    "answer_ranks": list(item.answer_ranks),
                    "question_vector": list(item.question_vector),
                    "passage_vectors": [list(vector) for vector in item.passage_vectors],
                }
            )
            + "\n"
            for item in assessed
        )
    )


def assessed_read(path: Path) -> list[Assessed]:
    from benchmarks.evaluation_sets import Question

    items = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if "format" in row:  # files written before 2026-11-27 have none
            repository_format_record(row["fold"], row["format"])
        question = Question(
            id=row["id"],
            collection=WRITTEN_COLLECTION if row.get("written") else path.name,
            fold=row["fold"],
            texts={},
            answerable=row["answerable"],
        )
        items.append(
            Assessed(
                question=question,
                features=row["features"],
                dense_repository=None,
                judge_repository=None,
                answer_ranks=tuple(row.get("answer_ranks", ())),
                question_vector=tuple(row.get("question_vector", ())),
                passage_vectors=tuple(tuple(vector) for vector in row.get("passage_vectors", ())),
            )
        )
    return items


def transfer_check(variant: Variant, assessed: list[Assessed], transfer: list[Assessed]) -> str:
    """Fitted on every question of `assessed`, measured on `transfer` (another set): caught/refused,
    the largest share of one repository's answerable questions refused, how many exceed the limit.

    A repository of both sets (a set cut from this one by `shrunk_set.py` asks the same questions
    of the same repositories) is measured by a model fitted without that repository."""
    from groundtruth.search.abstention_fit import LabelledEvidence, abstention_model_fit, abstention_threshold_choose

    shared = {item.question.fold for item in transfer} & {item.question.fold for item in assessed}
    groups = [
        (
            [item for item in assessed if item.question.fold != fold],
            [item for item in transfer if item.question.fold == fold],
        )
        for fold in sorted(shared)
    ]
    groups.append((assessed, [item for item in transfer if item.question.fold not in shared]))
    refused: dict[str, bool] = {}
    thresholds = []
    for training, measured in groups:
        if not measured:
            continue
        samples = [LabelledEvidence(features=item.features, answerable=item.question.answerable) for item in training]
        model = abstention_model_fit(samples, features=variant.features)
        threshold = abstention_threshold_choose(model, samples, answerable_missing=ANSWERABLE_MISSING_TARGET)
        refused.update({item.question.id: model.probability(item.features) < threshold for item in measured})
        thresholds.append(threshold)
    decisions = Decisions(refused, thresholds)
    cells = []
    for name in ("rst", "Markdown"):
        items = [item for item in transfer if repository_format(item.question.fold) == name]
        if any(item.question.answerable for item in items) and any(not item.question.answerable for item in items):
            answerable, unanswerable = _rates(decisions, items)
            cells.append(f"{name} {unanswerable:.3f}/{answerable:.3f}")
    answerable, unanswerable = _rates(decisions, transfer)
    cells.append(f"pooled {unanswerable:.3f}/{answerable:.3f}")
    largest, over = _worst(decisions, transfer, sorted({item.question.fold for item in transfer}))
    return f"{', '.join(cells)}; max {largest:.3f} ({over} above)"


def format_aucs(assessed: list[Assessed], feature: str) -> str:
    """How well `feature` alone separates answerable from unanswerable questions (AUC): pooled,
    rst, Markdown."""
    cells = []
    for kind in (None, "rst", "Markdown"):
        items = [item for item in assessed if kind is None or repository_format(item.question.fold) == kind]
        cells.append(
            auc(
                [item.features[feature] for item in items if item.question.answerable],
                [item.features[feature] for item in items if not item.question.answerable],
            )
        )
    return " ".join(f"{value:.3f}" for value in cells)


def _relevance_samples(items: list[Assessed]) -> list:
    """One sample per result among the first few of each question: its kernel features, and
    whether it holds the answer."""
    from groundtruth.search.abstention_fit import LabelledEvidence

    return [
        LabelledEvidence(
            features={name: item.features[f"{name}@{rank}"] for name in KERNEL_NAMES},
            answerable=rank in item.answer_ranks,
        )
        for item in items
        for rank in range(1, KERNEL_RESULTS + 1)
        if f"{KERNEL_NAMES[0]}@{rank}" in item.features
    ]


def _with_relevance(items: list[Assessed], fitted_on: list[Assessed]) -> list[Assessed]:
    """`items` with `relevance_first` and `relevance_best`: the probability that a result holds
    the answer, by a logistic model of its kernel features fitted on `fitted_on`'s results."""
    from groundtruth.search.abstention_fit import abstention_model_fit

    model = abstention_model_fit(_relevance_samples(fitted_on), features=KERNEL_NAMES)
    found = []
    for item in items:
        scores = [
            model.probability({name: item.features[f"{name}@{rank}"] for name in KERNEL_NAMES})
            for rank in range(1, KERNEL_RESULTS + 1)
            if f"{KERNEL_NAMES[0]}@{rank}" in item.features
        ] or [0.0]
        learned = {"relevance_first": scores[0], "relevance_best": max(scores)}
        found.append(replace(item, features={**item.features, **learned}))
    return found


def learned_relevance_measure(assessed: list[Assessed]) -> None:
    """A relevance model learned from users' questions rather than the corpus: logistic over a
    result's kernel features, fitted on the other repositories' questions (the result holding the
    answer against the rest of the first few), its score of the first result (or the best of
    them) added to today's abstention model. Nested rotation: the feature of a training question
    of repository g, when f is left out, comes from a model fitted without f and g, so no label of
    f reaches f's decisions."""
    from groundtruth.search.abstention_fit import DEFAULT_FEATURES

    folds = sorted({item.question.fold for item in assessed})
    of = {fold: [item for item in assessed if item.question.fold == fold] for fold in folds}
    measured = [
        item
        for fold in folds
        for item in _with_relevance(of[fold], [item for item in assessed if item.question.fold != fold])
    ]
    print("\na relevance model of the kernel features learned from the other repositories' questions:")
    for name in ("relevance_first", "relevance_best"):
        print(f"  {name:<26} AUC {format_aucs(_measured(measured), name)}")
    for variant in (
        Variant("today", DEFAULT_FEATURES),
        Variant("+ relevance_first", (*DEFAULT_FEATURES, "relevance_first")),
        Variant("+ relevance_best", (*DEFAULT_FEATURES, "relevance_best")),
    ):
        refused: dict[str, bool] = {}
        for fold in folds:
            training = [
                item
                for other in folds
                if other != fold
                for item in _with_relevance(
                    of[other], [item for item in assessed if item.question.fold not in (fold, other)]
                )
            ]
            held_out = _with_relevance(of[fold], [item for item in assessed if item.question.fold != fold])
            refused.update(_decide(variant, training, held_out, [])[0])
        decisions = Decisions(refused, [])
        rates = []
        for kind in ("rst", "Markdown", None):
            answerable, unanswerable = _rates(
                decisions,
                [item for item in _measured(assessed) if kind is None or repository_format(item.question.fold) == kind],
            )
            rates.append(f"{kind or 'pooled'} {unanswerable:.3f}/{answerable:.3f}")
        largest, over = _worst(decisions, _measured(assessed), folds)
        print(f"  {variant.name:<26} {', '.join(rates)}; max {largest:.3f} ({over} above)")


def answer_removed_write(evaluation: EvaluationSet, path: Path) -> None:
    """`answer_removed_assess` on the collections the service fits on, written as `assessed_write` does."""
    started = time.monotonic()
    paraphrased = replace(
        evaluation, questions=[question for question in evaluation.questions if "paraphrase" in question.texts]
    )
    assessed = answer_removed_assess(paraphrased, ANSWER_REMOVED_COLLECTIONS)
    assessed_write(assessed, path)
    print(f"{len(assessed)} questions asked with their answer removed in {time.monotonic() - started:.0f} s: {path}")


def refusal_evidence_measure(
    evaluation: EvaluationSet, *, assessed_out: Path | None = None, transfer_from: Path | None = None
) -> None:
    paraphrased = replace(
        evaluation, questions=[question for question in evaluation.questions if "paraphrase" in question.texts]
    )
    started = time.monotonic()
    assessed = questions_assess(paraphrased)
    print(f"\n{len(assessed)} paraphrased and unanswerable questions searched in {time.monotonic() - started:.0f} s")
    if assessed_out is not None:
        assessed_write(assessed, assessed_out)
        print(f"every question's features written to {assessed_out}")
    transfer = assessed_read(transfer_from) if transfer_from is not None else []
    refusal_evidence_report(assessed, transfer=transfer, transfer_from=transfer_from)


def refusal_evidence_report(
    assessed: list[Assessed], *, transfer: list[Assessed], transfer_from: Path | None = None
) -> None:
    """Every figure of the measure from the questions' features: apart from the search, so that a
    features file (`--assessed-out`, `assessed_read`) can be studied again without searching."""
    measured = _measured(assessed)
    written = [item for item in assessed if is_written(item.question.collection)]
    if written:
        print(
            f"{len(written)} of them written to fit on (benchmarks/written_questions): each joins the fits of the"
            " folds it is not held out with; the development set's figures are its questions' alone, the written"
            " questions' figures are printed apart"
        )
    print("\nseparation of answerable from unanswerable questions by one feature alone (AUC): pooled, rst, Markdown")
    from groundtruth.search.abstention_fit import DEFAULT_FEATURES

    for name in (*DEFAULT_FEATURES, "named_known", "similarity", *CANDIDATES):
        beside = f"   written {format_aucs(written, name)}" if written else ""
        print(f"  {name:<26} {format_aucs(measured, name)}{beside}")

    folds = sorted({item.question.fold for item in measured})
    print(
        "\nsources_missing on unanswerable/answerable questions, left-one-repository-out (in-sample); the largest"
        f" share of one repository's answerable questions refused and how many exceed {REPOSITORY_REFUSED_LIMIT};"
        " then fitted on one format, measured on the other (rst -> Markdown, Markdown -> rst)"
    )
    for variant in variants():
        cross, inside = variant_measure(variant, assessed, [])
        print(f"\n  {variant.name}: {', '.join(variant.features)}")
        _cells_print("", cross, inside, measured, folds)
        if written:
            _cells_print("written", cross, inside, written, folds)
            # The same variant fitted on the development set's questions alone, in the same run.
            alone = rotated_decisions(variant, measured, assessed)
            alone_inside = Decisions(_decide(variant, measured, assessed, [])[0], [])
            _cells_print("fitted without the written questions", alone, alone_inside, measured, folds)
            _cells_print("fitted without them, on the written", alone, alone_inside, written, folds)
        print(f"    across formats: {format_transfer(variant, assessed)}")
        print(f"    in-sample limit: {in_sample_limit(variant, assessed)}")
        if transfer:
            print(f"    fitted on this set, measured on {transfer_from}: {transfer_check(variant, assessed, transfer)}")
    learned_relevance_measure(assessed)
    question_prior_measure(assessed, transfer, DEFAULT_FEATURES)
