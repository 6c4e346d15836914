"""The sources-missing decision of /ask: the model's configuration, its fit, the evidence
features on hand-made passages, and the decision they lead to."""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
from dataclasses import replace

import pytest
from django.conf import settings as django_settings
from django.core.management import CommandError, call_command

from groundtruth.models import Chunk, CorpusStatistic, LexemeStatistic
from groundtruth.search import lexical_index
from groundtruth.search.abstention import (
    abstention_assess,
    evidence_features,
    first_passage_vector,
    question_names,
    repositories_named,
    spelled_words,
)
from groundtruth.search.abstention_fit import (
    AbstentionRates,
    LabelledEvidence,
    abstention_model_fit,
    abstention_rates,
    abstention_threshold_choose,
    balanced_logistic_fit,
    question_prior_fit,
    question_prior_out_of_fold,
    sources_missing_fit,
)
from groundtruth.search.abstention_model import (
    FEATURES,
    AbstentionModel,
    AbstentionModelInvalid,
    QuestionPrior,
    WithoutPrior,
    abstention_model_parse,
    prior_inputs,
)
from groundtruth.search.everyday_words import (
    EVERYDAY_SHARE_FULL,
    everyday_lexemes,
    lexeme_pieces,
    missing_weight,
    vocabulary_scaled_known,
    word_pieces,
)
from groundtruth.search.fitted_parameters import abstention_fit_read
from groundtruth.search.hybrid_search import chunk_search
from groundtruth.search.lexical_index import phrases_present, spelling_pattern, spellings_present
from groundtruth.search.lexical_search import chunks_phrases_matched, chunks_spellings_matched
from tests.groundtruth.factories import RepositoryFactory
from tests.groundtruth.fits import abstention_fit_use
from tests.groundtruth.search_fixtures import COMMUNITY, HANDBOOK, chunks_index


def sigmoid(value: float) -> float:
    """The logistic function, rounded like every probability these tests compare."""
    return round(1 / (1 + math.exp(-value)), 12)


def rounded(value: float) -> float:
    return round(value, 12)


def test_a_model_reads_its_configuration_and_writes_it_back():
    model = abstention_model_parse({"intercept": "-1.5", "similarity": "3", "known": "0.5"})

    assert model == AbstentionModel(intercept=-1.5, weights={"similarity": 3.0, "known": 0.5})
    assert model.probability({"similarity": 0.5, "known": 0.0}) == 0.5
    assert rounded(model.probability({"similarity": 1.0, "known": 1.0, "peak": 9.0})) == sigmoid(2.0)
    assert rounded(model.probability({})) == sigmoid(-1.5)  # a missing feature counts as 0
    assert model.configuration() == "intercept=-1.5,similarity=3,known=0.5"
    assert abstention_model_parse({"intercept": "-1.5", "similarity": "3", "known": "0.5"}) == abstention_model_parse(
        dict(part.split("=") for part in model.configuration().split(","))
    )


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"intercept": "1", "bogus": "2"}, "unknown feature bogus; known: intercept, " + ", ".join(FEATURES)),
        ({"similarity": "high"}, "every value must be a number"),
        ({"similarity": "nan"}, "every value must be a finite number"),
    ],
)
def test_a_bad_model_configuration_is_refused(values, message):
    with pytest.raises(AbstentionModelInvalid) as raised:
        abstention_model_parse(values)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        # A fit file that cannot be read (groundtruth/search/fitted_parameters.py; GroundTruthConfig.ready).
        (
            "ASK_ABSTENTION_FIT_FILE",
            "/nonexistent/abstention.json",
            "ASK_ABSTENTION_FIT_FILE: /nonexistent/abstention.json: cannot be read (No such file or directory)",
        ),
        (
            "SEARCH_RERANK_FIT_FILE",
            "/nonexistent/reranking.json",
            "SEARCH_RERANK_FIT_FILE: /nonexistent/reranking.json: cannot be read (No such file or directory)",
        ),
        (
            "SEARCH_TRUST_WEIGHTS",
            "canonical=1.0,reviewed=0.9,community=0.75,transcript=0.5",
            "SEARCH_TRUST_WEIGHTS must give canonical, reviewed, community and transcript each a weight from 0.9 to 1",
        ),
    ],
)
def test_a_bad_search_setting_stops_start_up_naming_the_variable(variable, value, message):
    env = {**os.environ, variable: value, "DATABASE_URL": "sqlite:///:memory:"}
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import django, os; os.environ['DJANGO_SETTINGS_MODULE']='agentplatform.settings'; django.setup()",
        ],
        cwd=django_settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 1
    assert f"ImproperlyConfigured: {message}" in result.stderr


def _samples(pairs: list[tuple[float, bool]]) -> list[LabelledEvidence]:
    """`peak` runs against the evidence here: an unconstrained fit would give it a negative weight."""
    return [
        LabelledEvidence(
            features={**dict.fromkeys(FEATURES, 0.5), "similarity": value, "peak": 1 - value}, answerable=kind
        )
        for value, kind in pairs
    ]


def test_the_fit_weighs_the_evidence_that_separates_and_the_threshold_bounds_wrong_abstentions():
    samples = _samples([(0.9, True), (0.8, True), (0.7, True), (0.35, True), (0.3, False), (0.2, False), (0.1, False)])

    model = abstention_model_fit(samples, features=["similarity", "known", "peak"], regularisation=10.0)

    assert model.weights["similarity"] > 0
    assert model.weights["known"] == 0.0  # the same for every sample: it tells nothing
    assert model.weights["peak"] == 0.0  # never below zero, even where it would fit the sample
    probabilities = sorted(model.probability(sample.features) for sample in samples if sample.answerable)
    # At most a quarter of the 4 answerable samples may be declared missing: the one at 0.35.
    threshold = abstention_threshold_choose(model, samples, answerable_missing=0.25)
    assert threshold == math.floor(probabilities[1] * 1000) / 1000
    assert abstention_rates(model, threshold, samples).answerable_missing == 0.25
    assert abstention_rates(model, threshold, samples).unanswerable_missing == 1.0
    strict = abstention_threshold_choose(model, samples, answerable_missing=0.0)
    assert strict == math.floor(probabilities[0] * 1000) / 1000
    assert abstention_rates(model, strict, samples).answerable_missing == 0.0


def test_the_logistic_fit_may_weigh_against_and_leaves_nearly_constant_columns_out():
    # Column 0 separates, column 1 runs against the labels, column 2 varies by float noise only.
    rows = [[0.9, 0.1, 0.5], [0.8, 0.3, 0.5 + 1e-9], [0.7, 0.2, 0.5], [0.3, 0.8, 0.5], [0.2, 0.9, 0.5 - 1e-9]]
    labels = [True, True, True, False, False]

    free_intercept, free = balanced_logistic_fit(
        rows, labels, regularisation=1.0, non_negative=False, constant_scale=1e-6
    )
    _, bounded = balanced_logistic_fit(rows, labels, regularisation=1.0, non_negative=True)

    assert [round(weight, 3) for weight in free] == [2.876, -2.507, 0.0]  # noise is no evidence
    assert round(free_intercept, 3) == -0.183
    assert bounded[0] > 0
    assert bounded[1] == 0.0  # kept at zero where it would fit the sample
    # Without constant_scale, a variation of 1e-9 that happens to follow the labels is standardised
    # into a column like any other, and the fit leans on it with an enormous weight.
    assert bounded[2] > 1e6


def test_fitting_needs_both_kinds_of_question():
    with pytest.raises(ValueError, match="both answerable and unanswerable"):
        abstention_model_fit(_samples([(0.9, True), (0.8, True)]))


# --- the prior over questions: what the question's own vector says ---------------------------------
def test_the_prior_reads_only_vectors_of_its_own_encoder():
    prior = QuestionPrior(encoder="mini", intercept=-1.0, weights=(2.0, -1.0), inputs=("question",))

    # It reads unit vectors: (0.5, 1) as (0.447, 0.894), (2, 0) as (1, 0).
    assert rounded(prior.probability([0.5, 1.0], encoder="mini")) == sigmoid(-1.0)
    assert rounded(prior.probability([2.0, 0.0], encoder="mini")) == sigmoid(1.0)
    # Another encoder's vectors (or another length) are not what it learnt: it never refuses them.
    assert prior.probability([0.5, 1.0], encoder="adapted") == 1.0
    assert prior.probability([0.5, 1.0, 0.0], encoder="mini") == 1.0


def test_the_prior_reads_the_question_and_its_product_with_the_first_passage():
    # Weights on (question, question x first passage): only how the passage meets the question counts.
    prior = QuestionPrior(encoder="mini", intercept=-1.0, weights=(0.0, 0.0, 4.0, -2.0))

    assert prior.inputs == ("question", "question_times_first_passage")
    assert prior_inputs([3.0, 4.0], [0.0, 2.0], inputs=prior.inputs) == [0.6, 0.8, 0.0, 0.8]
    assert rounded(prior.probability([3.0, 4.0], encoder="mini", passage=[1.0, 0.0])) == sigmoid(-1.0 + 4.0 * 0.6)
    assert rounded(prior.probability([3.0, 4.0], encoder="mini", passage=[0.0, 2.0])) == sigmoid(-1.0 - 2.0 * 0.8)
    # Nothing found (or a passage vector of another length): the product reads as zeros.
    assert rounded(prior.probability([3.0, 4.0], encoder="mini")) == sigmoid(-1.0)
    assert rounded(prior.probability([3.0, 4.0], encoder="mini", passage=[1.0, 0.0, 0.0])) == sigmoid(-1.0)
    # Four weights read two-dimensional vectors only.
    assert prior.probability([3.0, 4.0, 0.0, 0.0], encoder="mini", passage=[1.0, 0.0, 0.0, 0.0]) == 1.0
    with pytest.raises(ValueError, match="unknown prior input 'title'"):
        prior_inputs([1.0], [1.0], inputs=("title",))


# Three repositories' questions: an answerable question points along the first dimension, except
# in `odd`, whose questions are written the other way round.
PRIOR_SAMPLES = [
    LabelledEvidence(features={"peak": peak}, answerable=answerable, question_vector=vector, group=group)
    for group, vector, answerable, peak in [
        ("alpha", (0.9, 0.1), True, 0.8),
        ("alpha", (0.8, -0.2), True, 0.7),
        ("alpha", (-0.7, 0.3), False, 0.3),
        ("beta", (0.7, 0.0), True, 0.6),
        ("beta", (-0.9, -0.1), False, 0.2),
        ("beta", (-0.6, 0.2), False, 0.4),
        ("odd", (-0.8, 0.1), True, 0.9),
        ("odd", (0.6, -0.3), False, 0.1),
    ]
]


def _priors(samples: list[LabelledEvidence]) -> list[float]:
    return [round(sample.features["question_prior"], 4) for sample in samples]


def test_each_questions_prior_comes_from_the_other_repositories_questions():
    scored = question_prior_out_of_fold(PRIOR_SAMPLES, encoder="mini", regularisation=10.0)

    assert _priors(scored) == [0.8543, 0.5208, 0.7557, 0.6844, 0.233, 0.4308, 0.0451, 0.9787]
    # `odd`'s own labels never reach its priors: fitted on the others, they come out wrong way round.
    assert scored[6].features["question_prior"] < 0.5 < scored[7].features["question_prior"]
    without_odd = question_prior_fit(PRIOR_SAMPLES[:6], encoder="mini", regularisation=10.0)
    assert scored[6].features["question_prior"] == without_odd.probability((-0.8, 0.1), encoder="mini")
    assert [sample.features["peak"] for sample in scored] == [sample.features["peak"] for sample in PRIOR_SAMPLES]


def test_a_prior_learns_from_how_the_first_passage_meets_the_question():
    # Every question points the same way; an answerable one's first passage points along it, an
    # unanswerable one's across it (partly, in `gamma`). Only the product can tell them apart.
    samples = [
        LabelledEvidence(
            features={}, answerable=answerable, question_vector=(1.0, 0.0), passage_vector=passage, group=group
        )
        for group, passage, answerable in [
            ("alpha", (1.0, 0.0), True),
            ("alpha", (0.0, 1.0), False),
            ("beta", (0.9, 0.1), True),
            ("beta", (0.1, 0.9), False),
            ("gamma", (1.0, 0.2), True),
            ("gamma", (0.3, 0.95), False),
        ]
    ]

    scored = question_prior_out_of_fold(samples, encoder="mini", regularisation=10.0)

    assert _priors(scored) == [0.9331, 0.0162, 0.922, 0.0458, 0.9263, 0.217]
    assert all(
        answerable.features["question_prior"] > 0.5 > unanswerable.features["question_prior"]
        for answerable, unanswerable in zip(scored[::2], scored[1::2], strict=True)
    )
    prior = question_prior_fit(samples, encoder="mini", regularisation=10.0)
    # The question's own dimensions, and the product's second, never vary here: they get no weight.
    assert prior.inputs == ("question", "question_times_first_passage")
    assert [round(weight, 4) for weight in prior.weights] == [0.0, 0.0, 6.9157, 0.0]


def test_the_prior_needs_vectors_from_two_repositories_or_more():
    with pytest.raises(ValueError, match="at least two repositories"):
        question_prior_out_of_fold([replace(sample, group="alpha") for sample in PRIOR_SAMPLES], encoder="mini")


def test_the_model_weighs_the_prior_out_of_fold_and_ships_the_prior_fitted_on_every_question():
    fitted = sources_missing_fit(
        PRIOR_SAMPLES,
        features=["peak"],
        question_prior_encoder="mini",
        answerable_missing=0.25,
        regularisation=10.0,
        prior_regularisation=10.0,
    )

    assert fitted.model.question_prior == question_prior_fit(PRIOR_SAMPLES, encoder="mini", regularisation=10.0)
    assert list(fitted.model.weights) == ["peak", "question_prior"]
    assert [round(fitted.model.weights[name], 3) for name in ("peak", "question_prior")] == [12.541, 1.871]
    assert fitted.threshold == 0.916
    assert fitted.samples == question_prior_out_of_fold(PRIOR_SAMPLES, encoder="mini", regularisation=10.0)
    assert fitted.threshold == abstention_threshold_choose(fitted.model, fitted.samples, answerable_missing=0.25)
    assert abstention_rates(fitted.model, fitted.threshold, fitted.samples) == AbstentionRates(
        answerable_missing=0.25, unanswerable_missing=1.0
    )
    without = sources_missing_fit(PRIOR_SAMPLES, features=["peak"], answerable_missing=0.25, regularisation=10.0)
    assert (without.model.question_prior, list(without.model.weights), without.without_prior) == (None, ["peak"], None)
    assert fitted.without_prior == WithoutPrior(model=without.model, threshold=without.threshold)


@pytest.fixture
def indexed(db):
    handbook = RepositoryFactory(name="acme/handbook", trust="canonical")
    community = RepositoryFactory(name="acme/community", trust="community")
    chunks_index(handbook, HANDBOOK)
    chunks_index(community, COMMUNITY)
    return [community, handbook]


def _features(question: str, repositories) -> dict[str, float]:
    outcome = chunk_search(query=question, repositories=repositories, limit=5)
    features, _ = evidence_features(outcome, question=question)
    return features


def test_a_question_the_passages_answer_has_full_lexical_evidence(indexed):
    features = _features("Which ca_bundle adds an internal certificate authority?", indexed)

    assert {name: features[name] for name in ("known", "coverage", "rare_together", "agreement")} == {
        "known": 1.0,
        "coverage": 1.0,
        "rare_together": 1.0,
        "agreement": 1.0,
    }
    # No repository is named: the named evidence is the evidence of everything searched.
    assert [features[f"named_{name}"] for name in ("similarity", "coverage", "known", "rare_together")] == [
        features["similarity"],
        features["coverage"],
        features["known"],
        features["rare_together"],
    ]
    assert features["similarity"] > 0.5
    assert 0 < features["lexical"] <= 1


def test_a_question_about_something_absent_has_no_lexical_evidence(indexed):
    features = _features("How do I bake sourdough bread at home?", indexed)

    assert {name: features[name] for name in ("known", "coverage", "rare_together", "agreement", "lexical")} == {
        "known": 0.0,
        "coverage": 0.0,
        "rare_together": 0.0,
        "agreement": 0.0,
        "lexical": 0.0,
    }
    assert features["similarity"] < 0.3


def test_named_evidence_looks_only_at_the_repositories_the_question_names(indexed):
    question = "How do I set ca_bundle in the community FAQ?"
    outcome = chunk_search(query=question, repositories=indexed, limit=5)
    features, named = evidence_features(outcome, question=question)

    assert [repository.name for repository in named] == ["acme/community"]
    assert features["known"] == 1.0  # the handbook has ca_bundle
    assert round(features["named_known"], 9) == round(
        1 - _idf_share(outcome, {"ca_bundle", "ca", "bundl"}), 9
    )  # the community repository does not


def _idf_share(outcome, lexemes: set[str]) -> float:
    """The share of the question's IDF mass (capped like the features cap it) held by `lexemes`."""
    ceiling = math.log(1 + (outcome.lexical_query.document_count - 1 + 0.5) / 1.5)
    idf = {term.lexeme: min(term.idf, ceiling) for term in outcome.lexical_query.terms}
    return sum(value for lexeme, value in idf.items() if lexeme in lexemes) / sum(idf.values())


def test_repositories_are_named_by_their_label_as_a_word(indexed):
    community, handbook = indexed

    assert repositories_named(question="What does the handbook say?", repositories=indexed) == [handbook]
    assert repositories_named(question="community or handbook?", repositories=indexed) == [community, handbook]
    assert repositories_named(question="the handbooks", repositories=indexed) == []
    assert repositories_named(question="acme-community", repositories=indexed) == []
    jinja = RepositoryFactory.build(name="pallets/jinja")
    assert repositories_named(question="Is Jinja2 sandboxed?", repositories=[jinja]) == [jinja]


def test_names_are_the_words_written_like_names():
    repositories = [RepositoryFactory.build(name="scrapy/scrapy")]

    assert question_names(
        "Is there an official Docker image for Scrapy, or a .pyi stub, on HTTP/2 with allowed_domains?",
        repositories=repositories,
    ) == ["Docker", ".pyi", "HTTP/2", "allowed_domains"]
    assert question_names("Does ClientSession leak? I think so.", repositories=[]) == ["ClientSession"]
    assert question_names("how do I set up rate limiting in nginx?", repositories=[]) == []


def test_names_written_next_to_each_other_are_one_name():
    assert question_names("how do I deploy my spiders as an AWS Lambda function?", repositories=[]) == ["AWS Lambda"]
    assert question_names("Is Django REST Framework paginated?", repositories=[]) == ["Django REST Framework"]
    # Only a space joins: a comma, a possessive or a marked word (HTTP/2) keeps names apart.
    assert question_names("Use Flask, Django or HTTP/2 Push?", repositories=[]) == ["Flask", "Django", "HTTP/2", "Push"]
    assert question_names("Does Django's DATABASES setting take PostgreSQL?", repositories=[]) == [
        "Django",
        "DATABASES",
        "PostgreSQL",
    ]
    # More than three capitalised words in a row is a title in capitals: its words are names apart.
    assert question_names("How To Configure The Proxy", repositories=[]) == ["To", "Configure", "The", "Proxy"]
    scrapy = RepositoryFactory.build(name="scrapy/scrapy")
    assert question_names("Can Scrapy Cloud run it?", repositories=[scrapy]) == ["Cloud"]


def test_names_the_documentation_lacks_are_evidence_that_sources_are_missing(indexed):
    absent = _features("Can I deploy the workers on Kubernetes with Helm?", indexed)
    present = _features("Where do I put CELERY_BROKER_URL for the Redis broker?", indexed)
    apart = _features("Does ca_bundle change the CELERY_BROKER_URL?", indexed)

    assert (absent["names_known"], absent["names_together"]) == (0.0, 0.0)
    assert (present["names_known"], present["names_together"]) == (1.0, 1.0)
    # Both names are documented, never in one passage: ca_bundle (TLS) and the broker URL (jobs).
    assert (apart["names_known"], apart["names_together"]) == (1.0, 0.5)
    assert _features("how do workers take jobs?", indexed)["names_known"] == 1.0  # no names: no evidence against


def test_a_name_of_several_words_is_documented_only_as_those_words_in_a_row(indexed):
    # The broker passage has "jobs from Redis" and "the Redis URL": both words of "Redis Jobs",
    # never next to each other.
    in_a_row = _features("Where do I set the Redis URL?", indexed)
    apart = _features("Can Redis Jobs be scheduled?", indexed)

    assert (in_a_row["names_known"], in_a_row["names_together"]) == (1.0, 1.0)
    assert (apart["names_known"], apart["names_together"]) == (0.0, 0.0)


def test_phrases_are_found_as_adjacent_words(indexed, monkeypatch):
    community, handbook = indexed
    broker = Chunk.objects.get(repository=handbook, path="docs/celery.md")
    tls = Chunk.objects.get(repository=handbook, path="docs/tls.md")

    assert phrases_present(
        phrases=["Redis URL", "Redis jobs", "certificate authority", "the of"], repository_ids=[handbook.pk]
    ) == {"Redis URL", "certificate authority", "the of"}  # stop words alone are nothing to look for
    assert phrases_present(phrases=["certificate authority"], repository_ids=[community.pk]) == set()
    assert chunks_phrases_matched(chunk_ids=[broker.pk, tls.pk], phrases=["Redis URL", "certificate authority"]) == {
        broker.pk: {"Redis URL"},
        tls.pk: {"certificate authority"},
    }

    # Only so many chunks holding the words are read for their order.
    monkeypatch.setattr(lexical_index, "PHRASE_CANDIDATES_MAX", 0)
    assert phrases_present(phrases=["Redis URL", "the of"], repository_ids=[handbook.pk]) == {"the of"}


def test_a_word_with_two_capitals_or_more_is_documented_only_spelled_so(indexed):
    assert spelled_words("AWS Lambda") == ["AWS"]
    assert spelled_words("PostgreSQL") == ["PostgreSQL"]
    assert spelled_words("Django") == []
    # The handbook has "Database pool" and "connection pool", never Django's DATABASES setting.
    setting = _features("Does the DATABASES setting size the pool?", indexed)
    spelled = _features("Does CELERY_BROKER_URL take the Redis URL?", indexed)

    assert (setting["names_known"], setting["names_together"]) == (0.0, 0.0)
    assert (spelled["names_known"], spelled["names_together"]) == (1.0, 1.0)


def test_spellings_are_found_as_whole_words_with_their_capitals(indexed, monkeypatch):
    community, handbook = indexed
    broker = Chunk.objects.get(repository=handbook, path="docs/celery.md")
    tls = Chunk.objects.get(repository=handbook, path="docs/tls.md")

    assert spelling_pattern("C/C++") == r"(?<![[:alnum:]_])C\/C\+\+s?(?![[:alnum:]_])"
    assert spelling_pattern("APIs") == r"(?<![[:alnum:]_])APIs?(?![[:alnum:]_])"
    # CELERY is only part of CELERY_BROKER_URL; REDIS is written "Redis"; THE is a stop word
    # alone, nothing to look for.
    assert spellings_present(
        words=["CELERY_BROKER_URL", "URLs", "TLS", "CELERY", "REDIS", "DATABASES", "C++", "THE"],
        repository_ids=[handbook.pk],
    ) == {"CELERY_BROKER_URL", "URLs", "TLS", "THE"}  # the handbook has "URL": a plural is the word
    assert spellings_present(words=["TLS"], repository_ids=[community.pk]) == set()
    assert chunks_spellings_matched(chunk_ids=[broker.pk, tls.pk], words=["URL", "TLS", "REDIS", "C++"]) == {
        broker.pk: {"URL"},
        tls.pk: {"TLS"},
    }

    # Only so many chunks holding the word's lexemes are read for its spelling.
    monkeypatch.setattr(lexical_index, "PHRASE_CANDIDATES_MAX", 0)
    assert spellings_present(words=["URL", "THE"], repository_ids=[handbook.pk]) == {"THE"}


def test_the_decision_follows_the_configured_model_and_threshold(indexed, settings, tmp_path):
    model = abstention_model_parse({"intercept": -4, "known": 4, "coverage": 4})
    abstention_fit_use(settings, tmp_path, model=model, threshold=0.5)

    answered = abstention_assess(
        chunk_search(query="Which ca_bundle adds an internal certificate authority?", repositories=indexed, limit=5),
        question="Which ca_bundle adds an internal certificate authority?",
    )
    missing = abstention_assess(
        chunk_search(query="How do I bake sourdough bread at home?", repositories=indexed, limit=5),
        question="How do I bake sourdough bread at home?",
    )

    assert (rounded(answered.probability), answered.supported) == (sigmoid(4.0), True)
    assert (rounded(missing.probability), missing.supported) == (sigmoid(-4.0), False)
    abstention_fit_use(settings, tmp_path, model=model, threshold=0.99)
    assert (
        abstention_assess(
            chunk_search(
                query="Which ca_bundle adds an internal certificate authority?", repositories=indexed, limit=5
            ),
            question="Which ca_bundle adds an internal certificate authority?",
        ).supported
        is False
    )


def test_the_question_prior_reads_the_questions_vector_with_the_models_prior(indexed):
    question = "How do I bake sourdough bread at home?"
    outcome = chunk_search(query=question, repositories=indexed, limit=5)
    vector, encoder = outcome.embedding.vector, outcome.embedding.model_name
    passage = Chunk.objects.get(pk=outcome.hits[0].chunk.pk).embedding
    # One weight on the question's first dimension, one on the product's first dimension.
    leaning = QuestionPrior(encoder=encoder, intercept=0.0, weights=(3.0, *[0.0] * (len(vector) - 1)) * 2)

    features, _ = evidence_features(outcome, question=question, prior=leaning)

    assert (encoder, len(vector), len(passage)) == ("all-MiniLM-L6-v2", 384, 384)
    # Both read as unit vectors (pgvector keeps single precision: the passage's norm is 1 only to ~1e-7).
    question_first = vector[0] / math.sqrt(sum(value * value for value in vector))
    passage_first = float(passage[0]) / math.sqrt(sum(float(value) ** 2 for value in passage))
    assert rounded(features["question_prior"]) == sigmoid(3.0 * question_first + 3.0 * question_first * passage_first)
    assert first_passage_vector(outcome) == tuple(float(value) for value in passage)
    question_alone = replace(leaning, weights=leaning.weights[: len(vector)], inputs=("question",))
    assert rounded(evidence_features(outcome, question=question, prior=question_alone)[0]["question_prior"]) == (
        sigmoid(3.0 * question_first)
    )
    assert evidence_features(outcome, question=question)[0]["question_prior"] == 1.0
    other = replace(leaning, encoder="adapted")
    assert evidence_features(outcome, question=question, prior=other)[0]["question_prior"] == 1.0


@pytest.mark.parametrize(("prior_intercept", "supported"), [(-10.0, False), (10.0, True)])
def test_the_decision_weighs_the_prior_of_the_configured_model(indexed, settings, tmp_path, prior_intercept, supported):
    question = "Which ca_bundle adds an internal certificate authority?"
    outcome = chunk_search(query=question, repositories=indexed, limit=5)
    prior = QuestionPrior(
        encoder=outcome.embedding.model_name,
        intercept=prior_intercept,
        weights=(0.0,) * 2 * len(outcome.embedding.vector),
    )
    model = replace(abstention_model_parse({"intercept": -1, "question_prior": 4}), question_prior=prior)
    without = WithoutPrior(model=abstention_model_parse({"intercept": 3}), threshold=0.9)
    abstention_fit_use(settings, tmp_path, model=model, threshold=0.5, without_prior=without)

    assessment = abstention_assess(outcome, question=question)

    assert rounded(assessment.probability) == sigmoid(-1 + 4 / (1 + math.exp(-prior_intercept)))
    assert assessment.supported is supported
    assert (assessment.model, assessment.threshold) == (model, 0.5)


def test_a_question_the_prior_cannot_read_is_decided_by_the_model_fitted_without_it(indexed, settings, tmp_path):
    question = "Which ca_bundle adds an internal certificate authority?"
    outcome = chunk_search(query=question, repositories=indexed, limit=5)
    prior = QuestionPrior(encoder="another-encoder", intercept=10.0, weights=(0.0,) * 2 * len(outcome.embedding.vector))
    model = replace(abstention_model_parse({"intercept": -1, "question_prior": 4}), question_prior=prior)
    without = WithoutPrior(model=abstention_model_parse({"intercept": 3}), threshold=0.99)
    abstention_fit_use(settings, tmp_path, model=model, threshold=0.5, without_prior=without)

    assessment = abstention_assess(outcome, question=question)

    # The prior would have said 1 (it cannot read the vector), and the model with it would answer.
    assert assessment.features["question_prior"] == 1.0
    assert (assessment.model, assessment.threshold) == (without.model, 0.99)
    assert (rounded(assessment.probability), assessment.supported) == (sigmoid(3.0), False)


FIT_QUESTIONS = [
    {"question": "Which ca_bundle adds an internal certificate authority?", "answerable": True, "repository": "a"},
    {
        "question": "How long does the first retry of a failed webhook delivery wait?",
        "answerable": True,
        "repository": "a",
    },
    {"question": "Which broker does the background job queue use?", "answerable": True, "repository": "b"},
    {"question": "How do I bake sourdough bread at home?", "answerable": False, "repository": "a"},
    {"question": "How do I rotate Kubernetes secrets?", "answerable": False, "repository": "b"},
]


def test_abstention_fit_writes_the_fit_file_it_prints_with_its_provenance(indexed, tmp_path):
    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps(row) + "\n" for row in FIT_QUESTIONS))
    output = tmp_path / "abstention.json"
    printed, written = io.StringIO(), io.StringIO()

    call_command("abstention_fit", str(questions), "--features", "known,coverage", stdout=printed)
    call_command(
        "abstention_fit", str(questions), "--features", "known,coverage", "--output", str(output), stdout=written
    )

    fit = abstention_fit_read(output)
    assert printed.getvalue().endswith(output.read_text())
    assert written.getvalue().endswith(f"Fit written to {output}.\n")
    assert "In-sample (each question's prior fitted without its repository): sources missing on " in written.getvalue()
    assert (fit.provenance["command"], fit.provenance["data"]) == (
        "manage.py abstention_fit questions.jsonl --answerable-missing 0.05 --features known,coverage "
        "--regularisation 0.3",
        "questions.jsonl: 3 answerable and 2 unanswerable questions (question), searched in the repositories "
        "indexed then: acme/community, acme/handbook",
    )
    assert set(fit.model.weights) <= {"known", "coverage", "question_prior"}
    assert fit.model.question_prior is not None
    assert (fit.model.question_prior.encoder, len(fit.model.question_prior.weights)) == (
        "all-MiniLM-L6-v2",
        2 * 384,
    )
    assert fit.without_prior is not None
    assert set(fit.without_prior.model.weights) <= {"known", "coverage"}
    assert 0 <= fit.threshold <= 1


def test_abstention_fit_needs_each_questions_repository_for_the_prior_or_fits_without_it(indexed, tmp_path):
    questions = tmp_path / "questions.jsonl"
    rows = [{name: value for name, value in row.items() if name != "repository"} for row in FIT_QUESTIONS]
    questions.write_text("".join(json.dumps(row) + "\n" for row in rows))
    output = tmp_path / "abstention.json"

    with pytest.raises(CommandError) as raised:
        call_command("abstention_fit", str(questions), stdout=io.StringIO())
    call_command("abstention_fit", str(questions), "--no-question-prior", "--output", str(output), stdout=io.StringIO())

    assert str(raised.value) == (
        "line 1: needs the 'repository' the question is about (the prior over questions is fitted without each "
        "repository's own questions), or fit with --no-question-prior"
    )
    fit = abstention_fit_read(output)
    assert (fit.model.question_prior, fit.without_prior) == (None, None)
    assert "question_prior" not in json.loads(output.read_text())
    assert fit.provenance["command"].endswith("--regularisation 0.3 --no-question-prior")


# --- everyday words: a small corpus lacks everyday words a user writes -----------------------------
def test_question_words_are_jargon_when_the_vocabulary_splits_them():
    assert word_pieces("Can I unlock Cryptomator's vault over websockets, e.g. with ca_bundle?") == [
        ("Can", 1),
        ("I", 1),
        ("unlock", 1),
        ("Cryptomator", 3),
        ("vault", 1),
        ("over", 1),
        ("websockets", 4),
        ("e.g", 3),
        ("with", 1),
        ("ca_bundle", 3),
    ]


@pytest.mark.django_db
def test_each_lexeme_keeps_the_fewest_pieces_of_the_words_that_carry_it():
    # "vaults" and "vault" make one lexeme; ca_bundle is indexed whole and as its parts.
    assert lexeme_pieces("vaults in a vault, ca_bundle") == {"vault": 1, "ca_bundle": 3, "ca": 3, "bundl": 3}


@pytest.mark.django_db
def test_the_everyday_words_are_the_vocabularys_whole_words():
    everyday = everyday_lexemes()

    assert len(everyday) == 13691
    assert {"vault", "certif", "intern", "colour"} <= set(everyday)
    assert not {"cryptomat", "websocket", "ca_bundl"} & set(everyday)


def test_a_missing_everyday_word_counts_by_the_vocabularys_size():
    assert EVERYDAY_SHARE_FULL == 0.10
    assert missing_weight([0.025]) == 0.25
    assert missing_weight([0.025, 0.05]) == 0.5  # the largest vocabulary of the scope
    assert missing_weight([0.2]) == 1.0
    assert missing_weight([None]) == 1.0  # not measured yet: today's named_known
    assert missing_weight([]) == 1.0


def test_vocabulary_scaled_known_weighs_only_the_missing_everyday_words():
    idf = {"vault": 2.0, "cryptomat": 1.0, "unlock": 1.0}
    pieces = {"vault": 1, "cryptomat": 3, "unlock": 1}

    # cryptomat (jargon) is missing in full, vault (everyday) at half: 1 - (1 + 0.5 * 2) / 4.
    assert vocabulary_scaled_known(idf=idf, present={"unlock"}, pieces=pieces, weight=0.5) == 0.5
    assert vocabulary_scaled_known(idf=idf, present={"unlock"}, pieces=pieces, weight=1.0) == 0.25  # named_known
    # A lexeme no whole word carries (an identifier's part) is jargon.
    assert vocabulary_scaled_known(idf={"ca": 1.0, "vault": 1.0}, present={"vault"}, pieces={}, weight=0.0) == 0.5
    assert vocabulary_scaled_known(idf={}, present=set(), pieces={}, weight=1.0) == 0.0


def test_the_everyday_share_is_recounted_with_the_lexical_statistics(indexed):
    everyday = set(everyday_lexemes())

    for repository in indexed:
        lexemes = set(LexemeStatistic.objects.filter(repository=repository).values_list("lexeme", flat=True))
        share = CorpusStatistic.objects.get(repository=repository).everyday_share
        assert share == len(lexemes & everyday) / 13691
        assert 0 < share < 0.01  # a few sections use few of the vocabulary's words


def test_in_a_small_corpus_a_missing_everyday_word_says_less_than_missing_jargon(indexed):
    question = "How do I bake sourdough bread at home?"
    outcome = chunk_search(query=question, repositories=indexed, limit=5)
    features, _ = evidence_features(outcome, question=question)
    shares = [CorpusStatistic.objects.get(repository=repository).everyday_share for repository in indexed]
    idf = outcome.lexical_query.capped_idf()

    assert features["named_known"] == 0.0  # no word of it is in either repository
    assert lexeme_pieces(question) == {"bake": 2, "sourdough": 3, "bread": 1, "home": 1}
    jargon = (idf["bake"] + idf["sourdough"]) / sum(idf.values())
    everyday = 1 - jargon
    assert round(features["vocabulary_scaled_known"], 9) == round(everyday * (1 - max(shares) / EVERYDAY_SHARE_FULL), 9)
