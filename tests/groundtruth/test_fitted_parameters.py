"""The fitted parameters of search and /ask are read from files that record their fit
(groundtruth/search/fitted/), checked, and a bad file stops start-up naming the variable."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from groundtruth.search.abstention_model import QuestionPrior, WithoutPrior, abstention_model_parse
from groundtruth.search.fitted_parameters import (
    FitInvalid,
    abstention_fit_current,
    abstention_fit_document,
    abstention_fit_read,
    rerank_fit_current,
    rerank_fit_document,
    rerank_fit_read,
)

PROVENANCE = {"command": "manage.py abstention_fit questions.jsonl", "date": "2026-11-26", "data": "questions.jsonl"}


def test_the_shipped_fits_are_the_ones_search_and_ask_use(settings):
    settings.ASK_ABSTENTION_FIT_FILE = ""
    settings.SEARCH_RERANK_FIT_FILE = ""

    abstention = abstention_fit_current()
    rerank = rerank_fit_current()

    prior = abstention.model.question_prior
    assert replace(abstention.model, question_prior=None) == abstention_model_parse(
        {
            "intercept": -11.4537,
            "heading_similarity": 0.803,
            "peak": 6.6775,
            "coverage": 1.9673,
            "agreement": 1.1686,
            "vocabulary_scaled_known": 5.3589,
            "names_together": 1.4975,
            "question_prior": 6.0915,
        }
    )
    assert abstention.threshold == 0.277
    assert abstention.without_prior == WithoutPrior(
        model=abstention_model_parse(
            {
                "intercept": -9.7496,
                "heading_similarity": 1.836,
                "peak": 11.0909,
                "coverage": 2.0653,
                "agreement": 1.0842,
                "vocabulary_scaled_known": 6.2683,
                "names_together": 1.6955,
            }
        ),
        threshold=0.224,
    )
    assert prior is not None
    # The question's 384 dimensions, then their products with the first passage's.
    assert (prior.encoder, prior.inputs, len(prior.weights), prior.intercept) == (
        "all-MiniLM-L6-v2",
        ("question", "question_times_first_passage"),
        768,
        -1.2078,
    )
    assert (prior.weights[0], prior.weights[384], prior.weights[-1]) == (0.478181, -4.36081, 15.129)
    # Three of MiniLM's 384 dimensions are constant (so are their products): the prior leaves them out.
    assert prior.weights.count(0.0) == 6
    assert rerank.weights == {"dense": 1.0, "question_title": 0.3696, "lexical": 0.0, "coverage": 0.2137}
    assert (abstention.provenance["date"], sorted(abstention.provenance)) == (
        "2026-11-28",
        ["command", "commit", "data", "date", "measured"],
    )
    assert (rerank.provenance["date"], sorted(rerank.provenance)) == (
        "2026-11-27",
        ["command", "commit", "data", "date", "measured"],
    )


def test_a_written_fit_reads_back_as_written(tmp_path):
    model = abstention_model_parse({"intercept": -4, "known": 4, "coverage": 4})
    abstention = tmp_path / "abstention.json"
    abstention.write_text(abstention_fit_document(model=model, threshold=0.5, provenance=PROVENANCE))
    rerank = tmp_path / "reranking.json"
    rerank.write_text(rerank_fit_document(weights={"dense": 1.0, "lexical": 0.25}, provenance=PROVENANCE))

    assert json.loads(abstention.read_text()) == {
        "fit": PROVENANCE,
        "intercept": -4.0,
        "weights": {"known": 4.0, "coverage": 4.0},
        "threshold": 0.5,
    }
    read = abstention_fit_read(abstention)
    assert (read.model, read.threshold, read.provenance) == (model, 0.5, PROVENANCE)
    assert rerank_fit_read(rerank).weights == {"dense": 1.0, "lexical": 0.25}


def test_a_fit_with_a_prior_over_questions_keeps_its_weights_on_one_line_and_reads_back(tmp_path):
    prior = QuestionPrior(encoder="all-MiniLM-L6-v2", intercept=-0.1234567891, weights=(0.5, -2.000000049, 3.25e-7))
    model = replace(abstention_model_parse({"intercept": -4, "known": 4, "question_prior": 2}), question_prior=prior)
    without = WithoutPrior(model=abstention_model_parse({"intercept": -3, "known": 5}), threshold=0.25)
    path = tmp_path / "abstention.json"
    path.write_text(abstention_fit_document(model=model, threshold=0.5, provenance=PROVENANCE, without_prior=without))

    assert '\n    "weights": [0.5, -2.0, 3.25e-07]\n' in path.read_text()
    assert json.loads(path.read_text())["question_prior"] == {
        "encoder": "all-MiniLM-L6-v2",
        "inputs": ["question", "question_times_first_passage"],
        "intercept": -0.123457,
        "weights": [0.5, -2.0, 3.25e-07],
    }
    read = abstention_fit_read(path)
    assert read.model.question_prior == QuestionPrior(
        encoder="all-MiniLM-L6-v2", intercept=-0.123457, weights=(0.5, -2.0, 3.25e-07)
    )
    assert read.model.weights == {"known": 4.0, "question_prior": 2.0}
    assert read.without_prior == without
    assert json.loads(path.read_text())["without_prior"] == {
        "intercept": -3.0,
        "weights": {"known": 5.0},
        "threshold": 0.25,
    }


def test_a_prior_written_without_its_inputs_reads_the_question_alone(tmp_path):
    # Fit files written before the prior read first passages have no `inputs`.
    path = tmp_path / "abstention.json"
    path.write_text(json.dumps(WITH_PRIOR))

    assert abstention_fit_read(path).model.question_prior == QuestionPrior(
        encoder="m", intercept=0.0, weights=(1.0, 2.0), inputs=("question",)
    )


def test_the_setting_points_at_another_fit(settings, tmp_path):
    path = tmp_path / "ours.json"
    path.write_text(rerank_fit_document(weights={"dense": 1.0, "coverage": 0.5}, provenance=PROVENANCE))
    settings.SEARCH_RERANK_FIT_FILE = str(path)

    assert rerank_fit_current().weights == {"dense": 1.0, "coverage": 0.5}


ABSTENTION = {"fit": PROVENANCE, "intercept": -4, "weights": {"known": 4}, "threshold": 0.5}
WITHOUT = {"intercept": -3, "weights": {"known": 5}, "threshold": 0.25}
WITH_PRIOR = {
    **ABSTENTION,
    "weights": {"known": 4, "question_prior": 1},
    "question_prior": {"encoder": "m", "intercept": 0, "weights": [1, 2]},
    "without_prior": WITHOUT,
}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("{", "not JSON (Expecting property name enclosed in double quotes, line 1)"),
        (
            {**ABSTENTION, "extra": 1},
            "must be an object with exactly fit, intercept, threshold, weights "
            "(and optionally question_prior, without_prior)",
        ),
        (
            {**ABSTENTION, "fit": {"command": "x", "date": "2026-11-26"}},
            "`fit` must record the command, date, data of the fit, as text",
        ),
        (
            {**ABSTENTION, "fit": {**PROVENANCE, "date": "yesterday"}},
            "`fit.date` must be a date such as 2026-11-23, got 'yesterday'",
        ),
        ({**ABSTENTION, "weights": {"known": "4"}}, "`weights` must map names to finite numbers"),
        ({**ABSTENTION, "weights": {"bogus": 1}}, "unknown feature bogus; known: intercept, similarity"),
        ({**ABSTENTION, "threshold": 1.5}, "`threshold` must be a probability from 0 to 1, got 1.5"),
        (
            {**ABSTENTION, "weights": {"known": 4, "question_prior": 1}, "without_prior": WITHOUT},
            "weighs `question_prior`, so it must hold the `question_prior` that computes it and the model fitted "
            "`without_prior` (for questions the prior cannot read)",
        ),
        (
            {**WITH_PRIOR, "without_prior": None},
            "`without_prior` must be an object with exactly intercept, threshold, weights",
        ),
        (
            {**WITH_PRIOR, "question_prior": {"encoder": "m", "intercept": 0, "weights": [1, None]}},
            "`question_prior` must hold the `encoder` it reads (a name), the `inputs` its weights read (distinct, "
            "of question, question_times_first_passage; absent: question), its `intercept` and its `weights`",
        ),
        (
            {**WITH_PRIOR, "question_prior": {"encoder": "m", "inputs": ["title"], "intercept": 0, "weights": [1]}},
            "`question_prior` must hold the `encoder` it reads (a name), the `inputs` its weights read (distinct",
        ),
        (
            {
                **WITH_PRIOR,
                "question_prior": {"encoder": "m", "inputs": ["question", "question"], "intercept": 0, "weights": [1]},
            },
            "`question_prior` must hold the `encoder` it reads (a name), the `inputs` its weights read (distinct",
        ),
        (
            {**WITH_PRIOR, "question_prior": {"encoder": "m", "inputs": [], "intercept": 0, "weights": [1]}},
            "`question_prior` must hold the `encoder` it reads (a name), the `inputs` its weights read (distinct",
        ),
        (
            {**WITH_PRIOR, "question_prior": {"encoder": "", "intercept": 0, "weights": [1]}},
            "`question_prior` must hold the `encoder` it reads (a name)",
        ),
        (
            {**WITH_PRIOR, "without_prior": {**WITHOUT, "weights": {"question_prior": 1}}},
            "`without_prior` must not weigh `question_prior`",
        ),
        (
            {**WITH_PRIOR, "without_prior": {**WITHOUT, "threshold": 2}},
            "`without_prior.threshold` must be a probability from 0 to 1, got 2",
        ),
        (
            {**ABSTENTION, "without_prior": WITHOUT},
            "`question_prior` and `without_prior` go together, got only `without_prior`",
        ),
    ],
)
def test_a_bad_abstention_fit_is_refused_saying_what_is_wrong(tmp_path, document, message):
    path = tmp_path / "abstention.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document))

    with pytest.raises(FitInvalid) as raised:
        abstention_fit_read(path)

    assert str(raised.value).startswith(f"{path}: {message}")


def test_a_rerank_fit_takes_only_known_evidence_of_at_least_zero(tmp_path):
    path = tmp_path / "reranking.json"
    path.write_text(json.dumps({"fit": PROVENANCE, "weights": {"dense": 1, "lexical": -0.1}}))

    with pytest.raises(FitInvalid) as raised:
        rerank_fit_read(path)

    assert str(raised.value) == (
        f"{path}: `weights` takes dense, question_title, lexical, coverage, each a number of at least 0, "
        "got {'dense': 1.0, 'lexical': -0.1}"
    )


@pytest.mark.django_db
def test_while_an_adapted_encoder_is_active_search_and_ask_use_the_fits_of_its_evidence(settings):
    from groundtruth.adaptation.active import active_encoder_forget
    from groundtruth.ingest.index_text import INDEX_VERSION
    from groundtruth.models import AdaptationStatus, AdaptedEncoder

    settings.ASK_ABSTENTION_FIT_FILE = ""
    settings.SEARCH_RERANK_FIT_FILE = ""
    AdaptedEncoder.objects.create(
        status=AdaptationStatus.ACTIVE,
        index_version=INDEX_VERSION,
        base_model="all-MiniLM-L6-v2",
        model_name="minilm-adapted@ae88c37f4516",
        directory="/models/adapted/ae88c37f451645ba/minilm-adapted",
        query_count=1536,
        held_out_accuracy_before=0.582,
        held_out_accuracy=0.652,
    )
    active_encoder_forget()
    try:
        abstention = abstention_fit_current()
        rerank = rerank_fit_current()
    finally:
        active_encoder_forget()

    assert rerank.weights == {"dense": 1.0, "question_title": 0.5349, "lexical": 0.0, "coverage": 0.1994}
    assert abstention.model == abstention_model_parse(
        {
            "intercept": -9.9935,
            "heading_similarity": 1.7946,
            "peak": 11.7313,
            "coverage": 1.3699,
            "agreement": 1.2448,
            "vocabulary_scaled_known": 6.8042,
            "names_together": 1.6777,
        }
    )
    assert abstention.threshold == 0.235
    assert "minilm-adapted@68d4ccbf8dbd" in abstention.provenance["data"]
    # Once no encoder is active (retired), the packaged model's fits are in use again.
    AdaptedEncoder.objects.update(status=AdaptationStatus.RETIRED)
    active_encoder_forget()
    assert rerank_fit_current().weights == {"dense": 1.0, "question_title": 0.3696, "lexical": 0.0, "coverage": 0.2137}
