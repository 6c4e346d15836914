"""The relevance judge's mechanisms on hand-made corpora: pair mining, the late-interaction judge
and its learned projection, calibration, fitting and refitting, and search as today while no
judge is fitted or the fitted one fails to load (with /health saying so)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from datetime import timedelta

import numpy as np
import pytest
from django.conf import settings
from threadpoolctl import threadpool_info

from agentplatform.health import health_probe
from agentplatform.plumbing.errors import InvalidInput
from groundtruth.embeddings import LocalSentenceTransformer, embedding_backend
from groundtruth.ingest.index_text import INDEX_VERSION
from groundtruth.judge.calibration import (
    POSITIVE_QUANTILE,
    SEPARATION,
    HeldOutScores,
    held_out_accuracy,
    refusal_thresholds,
    score_quantile,
    separating_score,
)
from groundtruth.judge.fitting import (
    JudgeFitOptions,
    corpus_piece_idf,
    held_out_score,
    judge_fit,
    judge_refit_due,
    mined_tokenise,
)
from groundtruth.judge.late_interaction import LateInteractionJudge, late_interaction_fit, piece_idf
from groundtruth.judge.pair_mining import MinedQuery, judge_passage, pairs_mine, section_query
from groundtruth.judge.scoring import (
    judge_in_use,
    judge_load_failure,
    judge_state,
    passages_judge,
    single_threaded_blas,
)
from groundtruth.models import IngestRun, IngestStatus, RelevanceJudge, Repository
from groundtruth.search.abstention import abstention_assess
from groundtruth.search.hybrid_search import chunk_search
from groundtruth.tasks import judge_fit_task
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


def test_token_vectors_leave_out_the_special_tokens_and_a_text_matches_itself_fully():
    backend = embedding_backend()
    assert isinstance(backend, LocalSentenceTransformer)
    reset, cut = backend.token_vectors(["reset password", RESET], max_tokens=8)

    # [CLS] reset password [SEP] -> the two word tokens; RESET cut at 8 tokens -> [CLS] and 7.
    assert (reset.shape, cut.shape) == ((2, 384), (7, 384))
    assert np.allclose(np.linalg.norm(reset, axis=1), 1.0, atol=1e-5)
    judge = LateInteractionJudge(passage_tokens=8)
    assert judge.score(reset, reset) == pytest.approx(1.0, abs=1e-5)
    assert judge.score(reset, np.empty((0, 384), dtype=np.float32)) == 0.0


def test_token_ids_are_the_word_pieces_of_the_token_vectors_rows():
    backend = embedding_backend()
    assert isinstance(backend, LocalSentenceTransformer)
    tokenizer = backend._load().tokenizer

    reset, cut = backend.token_ids(["reset password", RESET], max_tokens=8)

    assert reset.tolist() == [tokenizer.token_to_id("reset"), tokenizer.token_to_id("password")]
    # Cut at 8 like the vectors: [CLS] and the first 7 pieces of "Open Settings, choose Security ...".
    assert [tokenizer.id_to_token(piece) for piece in cut] == [
        "open",
        "settings",
        ",",
        "choose",
        "security",
        "and",
        "press",
    ]
    assert [len(vectors) for vectors in backend.token_vectors(["reset password", RESET], max_tokens=8)] == [2, 7]
    assert backend.vocabulary_size() == 30522


def test_judge_scores_with_numpys_blas_on_one_thread_and_gives_the_process_its_setting_back():
    def blas_threads() -> list[int]:
        return [info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"]

    before = blas_threads()
    query = np.eye(3, 4, dtype=np.float32)
    passage = np.eye(4, dtype=np.float32)[[0, 1]]
    with single_threaded_blas():
        inside = blas_threads()
        score = LateInteractionJudge(passage_tokens=8).score(query, passage)

    assert len(before) >= 1  # numpy's own BLAS is loaded
    assert inside == [1] * len(before)
    assert blas_threads() == before
    # Rows 0 and 1 of the question find themselves, row 2 nothing: (1 + 1 + 0) / 3.
    assert score == pytest.approx(2 / 3, abs=1e-7)


# A fresh interpreter, so that scipy's OpenBLAS is certainly loaded after the first scan.
BLAS_LOADED_LATER = """
import django
django.setup()
from threadpoolctl import threadpool_info
from groundtruth.judge.scoring import single_threaded_blas

def blas_threads():
    return [info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"]

with single_threaded_blas():
    first = blas_threads()
import scipy.linalg  # brings its own OpenBLAS beside numpy's
before = blas_threads()
with single_threaded_blas():
    inside = blas_threads()
print(json.dumps({"first": first, "before": before, "inside": inside, "after": blas_threads()}))
"""


def test_a_blas_library_loaded_after_the_first_block_is_held_to_one_thread_too():
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "agentplatform.settings", "OPENBLAS_NUM_THREADS": "2"}
    finished = subprocess.run(
        [sys.executable, "-c", "import json\n" + BLAS_LOADED_LATER],
        capture_output=True,
        text=True,
        env=environment,
        cwd=settings.BASE_DIR,
        timeout=60,
        check=True,
    )

    threads = json.loads(finished.stdout.strip().splitlines()[-1])
    assert threads == {"first": [1], "before": [2, 2], "inside": [1, 1], "after": [2, 2]}


def test_piece_idf_is_bm25s_inverse_document_frequency_over_the_corpus():
    weights = piece_idf([np.array([1, 2, 2]), np.array([2, 3]), np.array([2])], vocabulary_size=5)

    # 3 documents; document frequencies 0, 1, 3, 1, 0 (a piece twice in one document counts once).
    assert weights.dtype == np.float32
    assert np.allclose(weights, np.log([8.0, 8 / 3, 8 / 7, 8 / 3, 8.0]))


def test_weighted_maxsim_is_the_weighted_mean_of_each_query_pieces_best_cosine(tmp_path):
    first, second = np.eye(2, dtype=np.float32)
    query, passage = np.stack([first, second]), np.stack([first])
    judge = LateInteractionJudge(passage_tokens=8, piece_weights=np.array([0.5, 3.0, 1.0], dtype=np.float32))

    # The first piece finds itself (1.0), the second nothing better than an orthogonal token (0.0).
    assert judge.score(query, passage) == 0.5
    assert judge.query_weights(np.array([1, 2])).tolist() == [3.0, 1.0]
    assert judge.score(query, passage, judge.query_weights(np.array([1, 2]))) == 0.75
    assert judge.score(query, passage, np.zeros(2, dtype=np.float32)) == 0.5  # no weight: unweighted

    judge.save(tmp_path)
    loaded = LateInteractionJudge.load(tmp_path)
    assert loaded.piece_weights is not None and loaded.piece_weights.tolist() == [0.5, 3.0, 1.0]
    (tmp_path / "judge.json").write_text('{"kind": "late_interaction", "passage_tokens": 8, "projection": false}')
    assert LateInteractionJudge.load(tmp_path).piece_weights is None  # saved before piece weights existed


def test_a_judge_on_a_tiny_corpus_ranks_each_positive_first_and_its_projection_fit_is_reproducible():
    tokenised = mined_tokenise(TINY, passage_tokens=64)

    projection = late_interaction_fit(tokenised, seed=0, epochs=10)
    again = late_interaction_fit(tokenised, seed=0, epochs=10)

    assert np.array_equal(projection, again)
    assert projection.shape == (384, 384) and not np.array_equal(projection, np.eye(384, dtype=np.float32))
    for judge in (
        LateInteractionJudge(passage_tokens=64),
        LateInteractionJudge(passage_tokens=64, projection=projection),
    ):
        scored = held_out_score(judge, tokenised)
        assert held_out_accuracy(scored) == (1.0, 1.0)
    # The learned projection widens the gap between each positive and its best negative.
    identity_gaps = [
        item.positive - max(item.negatives)
        for item in held_out_score(LateInteractionJudge(passage_tokens=64), tokenised)
    ]
    projected = LateInteractionJudge(passage_tokens=64, projection=projection)
    projected_gaps = [item.positive - max(item.negatives) for item in held_out_score(projected, tokenised)]
    assert sum(projected_gaps) > sum(identity_gaps)


def test_refusal_thresholds_are_the_score_below_which_a_share_of_held_out_positives_fall():
    assert score_quantile([3.0, 1.0, 2.0, 4.0], share=0.0) == 1.0
    assert score_quantile([3.0, 1.0, 2.0, 4.0], share=0.25) == 2.0
    assert score_quantile([3.0, 1.0, 2.0, 4.0], share=0.99) == 4.0
    scored = [HeldOutScores("acme/a", value, (0.0,)) for value in (1.5, 2.5, 3.5, 4.5, 5.5)] + [
        HeldOutScores("acme/b", value, (9.0,)) for value in (-1.25, 0.75, 2.0)
    ]

    thresholds, pooled = refusal_thresholds(scored, share=0.2, calibration=POSITIVE_QUANTILE)

    # acme/b has too few held-out positives (3 < 5) for a threshold of its own: the pooled one.
    assert thresholds == {"acme/a": 2.5}
    assert pooled == 0.75
    assert held_out_accuracy(scored) == (5 / 8, 5 / 8)
    # The default of a fit (the separation refused too much of what was answerable, docs/).
    assert JudgeFitOptions().calibration == POSITIVE_QUANTILE
    assert refusal_thresholds(scored, share=0.2) == (thresholds, pooled)
    with pytest.raises(ValueError, match="calibration 'median' is not one of separation, positive_quantile"):
        refusal_thresholds(scored, share=0.2, calibration="median")


def test_separation_thresholds_are_the_score_best_separating_a_repositorys_positives_from_its_negatives():
    # Positives 0.5-0.9; negatives mostly 0.2-0.45 with one hard negative at 0.7.
    scored = [
        HeldOutScores("acme/a", 0.5, (0.2, 0.7)),
        HeldOutScores("acme/a", 0.6, (0.3,)),
        HeldOutScores("acme/a", 0.7, (0.4,)),
        HeldOutScores("acme/a", 0.8, (0.45,)),
        HeldOutScores("acme/a", 0.9, (0.25,)),
        HeldOutScores("acme/b", 0.1, (0.05,)),
    ]

    # At 0.5 every positive is kept and 1 of 6 negatives passes (J = 5/6); at 0.6 J = 4/5 - 1/6.
    assert separating_score([0.5, 0.6, 0.7, 0.8, 0.9], [0.2, 0.7, 0.3, 0.4, 0.45, 0.25]) == 0.5
    # Equal separations: the lowest threshold (it refuses fewest positives).
    assert separating_score([1.0, 3.0], [2.0, 4.0]) == 1.0
    thresholds, pooled = refusal_thresholds(scored, share=0.05, calibration=SEPARATION)
    assert thresholds == {"acme/a": 0.5}
    # Pooled, acme/b's 0.1 and 0.05 join: 0.5 still separates best (5/6 - 1/7 against 1/7 at 0.1).
    assert pooled == 0.5
    with pytest.raises(ValueError, match="a separation needs positive and negative scores"):
        separating_score([0.5], [])


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


# Transactional: /health's checks run in threads of their own, which see only committed rows.
@pytest.mark.django_db(transaction=True)
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
    assert failure == (
        f"relevance judge #{broken.pk} at {tmp_path / 'missing'} failed to load: "
        f"[Errno 2] No such file or directory: '{tmp_path / 'missing' / 'judge.json'}'"
    )
    assert caplog.record_tuples == [
        (
            "groundtruth.judge.scoring",
            logging.WARNING,
            f"{failure}; search and /ask use the fitted relevance and abstention model",
        )
    ]
    # Today's model decides, and /health says so (degraded, still serving).
    assert abstention_assess(outcome, question="forgot my password").decided_by == "model"
    settings.HEALTH_TIMEOUT_SECONDS = 30  # a loaded machine's slow check is not what this pins
    health_probe.clear()
    body, serving = health_probe.report()
    assert (body["status"], serving) == ("degraded", True), body
    assert body["checks"]["judge"]["status"] == "error"  # type: ignore[index]
    assert body["checks"]["judge"]["detail"] == (  # type: ignore[index]
        f"{failure}; today's relevance and abstention model decide"
    )


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


@pytest.mark.django_db
def test_the_refit_task_on_a_tiny_corpus_logs_why_and_keeps_the_previous_judge(settings, caplog):
    settings.JUDGE_ENABLED = True
    repository = RepositoryFactory(name="acme/helpdesk")
    chunks_index(repository, HELPDESK)
    Repository.objects.filter(pk=repository.pk).update(chunk_count=len(HELPDESK))
    previous = RelevanceJudge.objects.create(
        index_version=INDEX_VERSION - 1, pair_count=8, query_count=2, held_out_accuracy=1.0, artifact="/nowhere"
    )

    assert judge_fit_task() is None

    assert list(RelevanceJudge.objects.values_list("pk", flat=True)) == [previous.pk]
    assert ("groundtruth.tasks", logging.WARNING) in [(name, level) for name, level, _ in caplog.record_tuples]
    assert "Relevance judge not refitted: Too little documentation to fit a relevance judge: 4 sections" in caplog.text


@pytest.mark.django_db
def test_a_refit_is_due_once_ingests_since_the_judge_changed_a_tenth_of_its_chunks(settings):
    settings.JUDGE_ENABLED = True
    repository = RepositoryFactory(name="acme/helpdesk", chunk_count=5)
    assert judge_refit_due()  # no judge yet
    judge = RelevanceJudge.objects.create(
        index_version=INDEX_VERSION, chunk_count=200, pair_count=8, query_count=2, held_out_accuracy=1.0, artifact="/a"
    )
    assert not judge_refit_due()

    def finished_run(minutes: int, **counts: int) -> None:
        run = IngestRun.objects.create(repository=repository, ref="main", status=IngestStatus.SUCCEEDED, **counts)
        IngestRun.objects.filter(pk=run.pk).update(finished_at=judge.fitted_at + timedelta(minutes=minutes))

    finished_run(-5, chunks_added=500)  # before the judge: already in it
    finished_run(5, chunks_added=6, chunks_updated=4)
    assert not judge_refit_due()  # 10 of 200 changed
    finished_run(6, chunks_removed=10)
    assert judge_refit_due()  # 20 of 200
    settings.JUDGE_ENABLED = False
    assert not judge_refit_due()
    settings.JUDGE_ENABLED = True
    RelevanceJudge.objects.filter(pk=judge.pk).update(index_version=INDEX_VERSION - 1)
    IngestRun.objects.all().delete()
    assert judge_refit_due()  # fitted on another chunk recipe


# 26 sections of two files: enough mined queries (21 to train on, 5 held out) for a fit.
HANDBOOK_TOPICS = [
    ("Cache", "Cached pages expire after ten minutes; purge them with the clear-cache button on the dashboard."),
    ("Logging", "Log lines go to standard error as JSON, one object per line, with the request id in every entry."),
    ("Backups", "A nightly job dumps the database to object storage and keeps thirty daily copies of every dump."),
    ("Email", "Outgoing mail is sent through the SMTP relay named in the settings, retried three times on failure."),
    ("Timezones", "Dates are stored in UTC and shown in the browser's own timezone, converted when a page renders."),
    ("Uploads", "Files larger than fifty megabytes are refused with a clear error before any byte is written."),
    ("Search", "The search box matches words in titles and bodies, ranking exact phrases above scattered words."),
    ("Themes", "A dark and a light theme ship with the product; the choice is saved in the user's profile."),
    ("Webhooks", "Each webhook delivery is signed with an HMAC of its body so receivers can verify the sender."),
    ("Quotas", "Every account may store ten thousand records; beyond that new records are refused politely."),
    ("Sessions", "A login session lasts two weeks, and signing out on one device ends the session everywhere."),
    ("Exports", "The export page writes a ZIP archive holding one CSV file per table of the account's data."),
    ("Imports", "Spreadsheets are imported row by row, and rows with missing required columns are skipped."),
    ("Languages", "The interface is translated into German, French and Japanese, picked from the browser's locale."),
    ("Invoices", "Invoices are generated on the first day of each month as PDF files attached to an email."),
    ("Teams", "A team owner invites members by email address and may remove any member at any time."),
    ("Passwords", "Passwords need twelve characters at least and are hashed with Argon2 before they are stored."),
    ("Metrics", "Prometheus scrapes request counts and latency histograms from the metrics endpoint every minute."),
    ("Printing", "Reports print on A4 or Letter paper, with page numbers and the report's title in the footer."),
    ("Keyboard", "Press question mark anywhere to list every keyboard shortcut the current page understands."),
    ("Mobile", "The mobile app syncs every five minutes over Wi-Fi and only when asked on a cellular network."),
    ("Archiving", "Projects untouched for a year are archived: read-only, hidden from lists, restorable in a click."),
    ("Audit", "Every change to a record is written to the audit trail with who made it, when and from where."),
    ("Tags", "Records can carry up to twenty tags, each a lowercase word without spaces or punctuation."),
    ("Maps", "Addresses are geocoded once when saved and shown as pins on an interactive map of the region."),
    ("Calendars", "Deadlines appear in an iCalendar feed that desktop and phone calendar applications subscribe to."),
]
HANDBOOK = [
    Section(
        path=f"handbook/{'admin' if index < 13 else 'users'}.md",
        heading=("Handbook", topic),
        text=f"## {topic}\n\n{text}",
        start_line=1 + 4 * (index % 13),
    )
    for index, (topic, text) in enumerate(HANDBOOK_TOPICS)
]


@pytest.mark.django_db
def test_a_judge_fitted_on_a_corpus_is_stored_with_its_calibration_and_decides_refusals(settings, tmp_path):
    settings.JUDGE_ENABLED = True
    settings.JUDGE_DIR = tmp_path
    health_probe.clear()
    repository = RepositoryFactory(name="acme/handbook")
    chunks = chunks_index(repository, HANDBOOK)
    Repository.objects.filter(pk=repository.pk).update(chunk_count=len(chunks), index_version=INDEX_VERSION)

    row = judge_fit(options=JudgeFitOptions(negatives=3, epochs=5, piece_weights=True, calibration=SEPARATION))

    assert (row.index_version, row.chunk_count, row.repositories) == (INDEX_VERSION, 26, ["acme/handbook"])
    assert (row.query_count, row.pair_count, row.held_out_query_count) == (20, 80, 6)
    assert row.held_out_accuracy == 1.0
    # 6 held-out queries (>= 5): the repository's own threshold, the score separating their
    # positives from their negatives.
    artifact = LateInteractionJudge.load(row.artifact)
    # A question's pieces are weighed by their IDF over the corpus's 26 judged passages.
    assert artifact.piece_weights is not None and np.array_equal(artifact.piece_weights, corpus_piece_idf([repository]))
    assert artifact.piece_weights.shape == (30522,)
    mined = pairs_mine(repositories=[repository], negatives=3, queries_per_repository=60, seed=0)
    held_out = [item for index, item in enumerate(mined) if index % 5 == 0]
    scored = held_out_score(artifact, mined_tokenise(held_out, passage_tokens=JudgeFitOptions().passage_tokens))
    separating = separating_score([item.positive for item in scored], [n for item in scored for n in item.negatives])
    assert row.thresholds == {"acme/handbook": np.floor(separating * 10000) / 10000}
    assert row.default_threshold == row.thresholds["acme/handbook"]

    # In use: it orders the head of the results and decides "sources missing" on its threshold.
    outcome = chunk_search(query="How long does a login session last?", repositories=[repository], limit=5)
    assert outcome.judge is not None and outcome.judge.row.pk == row.pk
    assert outcome.hits[0].chunk.heading == ["Handbook", "Sessions"]
    assert outcome.hits[0].judge_score == max(outcome.judge_scores.values())
    # A query that repeats a section's title finds that section first, even where the judge alone
    # orders (no relevance beside its score) and scores another higher: it reads passages without
    # their titles, and for "Email" Teams' ("invites members by email address") scores highest.
    settings.SEARCH_JUDGE_RELEVANCE_WEIGHT = 0.0
    by_title = chunk_search(query="Email", repositories=[repository], limit=5)
    teams = chunks[[topic for topic, _ in HANDBOOK_TOPICS].index("Teams")]
    assert max(by_title.judge_scores, key=by_title.judge_scores.__getitem__) == teams.pk
    assert by_title.hits[0].chunk.heading == ["Handbook", "Email"]
    firsts = {
        topic: chunk_search(query=topic, repositories=[repository], limit=5).hits[0].chunk.heading[-1]
        for topic, _ in HANDBOOK_TOPICS
    }
    assert firsts == {topic: topic for topic, _ in HANDBOOK_TOPICS}
    assessment = abstention_assess(outcome, question="How long does a login session last?")
    assert (assessment.decided_by, assessment.threshold, assessment.supported) == (
        "judge",
        row.thresholds["acme/handbook"],
        assessment.probability >= row.thresholds["acme/handbook"],
    )
    scores = passages_judge(outcome.judge, query="How long does a login session last?", chunks=[chunks[10]])
    assert scores == {chunks[10].pk: outcome.judge_scores[chunks[10].pk]}  # the cached passage scores alike
    assert judge_state().status == "ok"
    assert judge_state().detail.startswith(f"relevance judge #{row.pk} in use (fitted ")
    assert judge_state().detail.endswith(" UTC on 80 pairs, held-out accuracy 1.000)")
