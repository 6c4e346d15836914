"""The relevance judge's mechanisms on hand-made corpora: pair mining, training, calibration,
and search as today while no judge is fitted or the fitted one fails to load."""

from __future__ import annotations

import pytest

from agentplatform.plumbing.errors import InvalidInput
from groundtruth.embeddings import packaged_model_path
from groundtruth.judge.calibration import refusal_thresholds, score_quantile
from groundtruth.judge.fitting import judge_fit
from groundtruth.judge.pair_mining import MinedQuery, judge_passage, pairs_mine, section_query
from groundtruth.judge.scoring import judge_in_use, judge_load_failure
from groundtruth.judge.training import HeldOutScores, JudgeHyperparameters, held_out_accuracy, judge_train
from groundtruth.models import RelevanceJudge, Repository
from groundtruth.search.abstention import abstention_assess
from groundtruth.search.hybrid_search import chunk_search
from tests.groundtruth.factories import RepositoryFactory
from tests.groundtruth.search_fixtures import Section, chunks_index

RESET = "Open Settings, choose Security and press Reset. A mail with a one-time link arrives within a minute."
EXPORT = "Yes. Settings, then Export, writes a ZIP archive of every record you own, with one CSV file per table."
REQUIREMENTS = "Python 3.11 and PostgreSQL 16 are needed on the server that runs the service, with 2 GB of memory."
UPGRADE = "Stop the service, install the new wheel and run the migrations before starting the service again."

RESET_TITLE, EXPORT_TITLE = "How do I reset my password?", "Can I export my data?"
HELPDESK = [
    Section(path="faq.md", heading=("FAQ", RESET_TITLE), text=f"## {RESET_TITLE}\n\n{RESET}", start_line=3),
    Section(path="faq.md", heading=("FAQ", EXPORT_TITLE), text=f"## {EXPORT_TITLE}\n\n{EXPORT}", start_line=7),
    Section(path="faq.md", heading=("FAQ", "Why?"), text="## Why?\n\nBecause.", start_line=11),
    Section(
        path="install.rst",
        heading=("Install", "Requirements"),
        text=f"Requirements\n------------\n\n{REQUIREMENTS}",
        start_line=4,
    ),
    Section(
        path="install.rst",
        heading=("Install", "Upgrade"),
        text=f"Upgrade\n-------\n\n.. _upgrade:\n\n{UPGRADE}",
        start_line=9,
    ),
]


def test_judge_passage_drops_heading_and_markup_lines_of_either_format():
    assert judge_passage(path="faq.md", text=f"## How do I reset my password?\n\n{RESET}") == RESET
    assert judge_passage(path="install.rst", text=f"Upgrade\n-------\n\n.. _upgrade:\n\n{UPGRADE}") == UPGRADE


def test_section_query_is_the_title_a_question_alone_else_with_its_parent():
    assert section_query(("FAQ", "How do I reset my password?")) == "How do I reset my password?"
    assert section_query(("Install", "Upgrade")) == "Install: Upgrade"
    assert section_query(("Upgrade",)) == "Upgrade"
    assert section_query(("Install", "1.2")) is None
    assert section_query(()) is None


@pytest.mark.django_db
def test_pairs_are_mined_from_titles_against_their_own_heading_free_text_with_neighbours_as_negatives():
    repository = RepositoryFactory(name="acme/helpdesk")
    chunks = chunks_index(repository, HELPDESK)

    mined = pairs_mine(repositories=[repository], negatives=1, seed=0)

    # The section "Why?" is too short to answer anything; the others each ask once, their
    # neighbouring section of the same file the negative, every heading line removed.
    by_query = {item.query: item for item in mined}
    assert sorted(by_query) == [EXPORT_TITLE, RESET_TITLE, "Install: Requirements", "Install: Upgrade"]
    assert {query: (item.positive, item.negatives) for query, item in by_query.items()} == {
        "How do I reset my password?": (RESET, (EXPORT,)),
        "Can I export my data?": (EXPORT, (RESET,)),
        "Install: Requirements": (REQUIREMENTS, (UPGRADE,)),
        "Install: Upgrade": (UPGRADE, (REQUIREMENTS,)),
    }
    assert by_query["Install: Upgrade"].chunk_id == chunks[4].pk
    assert {item.repository for item in mined} == {"acme/helpdesk"}
    # Seeded: the same seed mines the same queries in the same order; a budget takes a prefix.
    assert [item.query for item in pairs_mine(repositories=[repository], negatives=1, seed=0)] == [
        item.query for item in mined
    ]
    assert [item.query for item in pairs_mine(repositories=[repository], negatives=1, queries_per_repository=2)] == [
        item.query for item in mined[:2]
    ]


@pytest.mark.django_db
def test_mined_hard_negatives_after_the_neighbour_come_from_the_dense_leg_outside_the_section():
    repository = RepositoryFactory(name="acme/helpdesk")
    chunks_index(repository, HELPDESK)

    mined = pairs_mine(repositories=[repository], negatives=3, seed=0)

    for item in mined:
        assert len(item.negatives) == 3
        assert item.positive not in item.negatives
        assert len(set(item.negative_chunk_ids)) == 3


TINY = [
    MinedQuery("acme/a", 1, "How do I reset my password?", RESET, (EXPORT, UPGRADE), (2, 4)),
    MinedQuery("acme/a", 2, "Can I export my data?", EXPORT, (RESET, REQUIREMENTS), (1, 3)),
    MinedQuery("acme/a", 3, "Install: Requirements", REQUIREMENTS, (UPGRADE, EXPORT), (4, 2)),
    MinedQuery("acme/a", 4, "Install: Upgrade", UPGRADE, (REQUIREMENTS, RESET), (3, 1)),
]


def test_a_judge_trained_on_a_tiny_corpus_ranks_each_positive_first_and_the_fit_is_reproducible():
    hyperparameters = JudgeHyperparameters(
        layers=1, max_length=64, epochs=20, queries_per_step=4, learning_rate=1e-3, head_learning_rate=2e-2
    )

    judge, report = judge_train(TINY, model_path=packaged_model_path(), hyperparameters=hyperparameters)
    again, _ = judge_train(TINY, model_path=packaged_model_path(), hyperparameters=hyperparameters)

    assert (report.queries, report.pairs, report.steps) == (4, 240, 20)
    for item in TINY:
        scores = judge.scores(item.query, [item.positive, *item.negatives])
        assert scores.index(max(scores)) == 0, item.query
        assert again.scores(item.query, [item.positive, *item.negatives]) == pytest.approx(scores, abs=1e-5)


def test_refusal_thresholds_are_the_score_below_which_a_share_of_held_out_positives_fall():
    assert score_quantile([3.0, 1.0, 2.0, 4.0], share=0.0) == 1.0
    assert score_quantile([3.0, 1.0, 2.0, 4.0], share=0.25) == 2.0
    assert score_quantile([3.0, 1.0, 2.0, 4.0], share=0.99) == 4.0
    scored = [HeldOutScores("acme/a", value, (0.0,)) for value in (1.5, 2.5, 3.5, 4.5, 5.5)] + [
        HeldOutScores("acme/b", value, (9.0,)) for value in (-1.25, 0.75, 2.0)
    ]

    thresholds, pooled = refusal_thresholds(scored, share=0.2)

    # acme/b has too few held-out positives (3 < 5) for a threshold of its own: the pooled one.
    assert thresholds == {"acme/a": 2.5}
    assert pooled == 0.75
    assert held_out_accuracy(scored) == (5 / 8, 5 / 8)


@pytest.mark.django_db
def test_without_a_fitted_judge_search_and_abstention_are_todays(settings):
    settings.JUDGE_ENABLED = True
    repository = RepositoryFactory(name="acme/helpdesk")
    chunks_index(repository, HELPDESK)

    outcome = chunk_search(query="forgot my password", repositories=[repository], limit=5)
    plain = chunk_search(query="forgot my password", repositories=[repository], limit=5, judge=False)

    assert outcome.judge is None and outcome.judge_scores == {}
    assert [hit.chunk.pk for hit in outcome.hits] == [hit.chunk.pk for hit in plain.hits]
    assert [hit.judge_score for hit in outcome.hits] == [None] * len(outcome.hits)
    assert abstention_assess(outcome, question="forgot my password").decided_by == "model"


@pytest.mark.django_db
def test_a_judge_that_fails_to_load_is_skipped_with_the_reason_kept(settings, tmp_path, caplog):
    settings.JUDGE_ENABLED = True
    repository = RepositoryFactory(name="acme/helpdesk")
    chunks_index(repository, HELPDESK)
    broken = RelevanceJudge.objects.create(
        index_version=2, pair_count=8, query_count=2, held_out_accuracy=1.0, artifact=str(tmp_path / "missing")
    )

    outcome = chunk_search(query="forgot my password", repositories=[repository], limit=5)

    assert outcome.judge is None and judge_in_use() is None
    failure = judge_load_failure()
    assert failure is not None and failure.startswith(f"relevance judge #{broken.pk} at {tmp_path / 'missing'}")
    assert "failed to load" in caplog.text


@pytest.mark.django_db
def test_fitting_on_a_tiny_corpus_says_why_and_keeps_the_previous_judge():
    repository = RepositoryFactory(name="acme/helpdesk")
    chunks_index(repository, HELPDESK)
    Repository.objects.filter(pk=repository.pk).update(chunk_count=len(HELPDESK))
    previous = RelevanceJudge.objects.create(
        index_version=2, pair_count=8, query_count=2, held_out_accuracy=1.0, artifact="/nowhere"
    )

    with pytest.raises(InvalidInput) as refused:
        judge_fit()

    assert refused.value.code == "judge_corpus_too_small"
    assert refused.value.detail == (
        "Too little documentation to fit a relevance judge: 4 sections with a title and a text were found "
        "(at least 22 needed); the previous judge stays in use."
    )
    assert list(RelevanceJudge.objects.values_list("pk", flat=True)) == [previous.pk]
