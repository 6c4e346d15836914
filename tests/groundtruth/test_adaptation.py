"""The adapted encoder's mechanisms on hand-made corpora: its training pairs, the refusal of a
corpus too small, the staging and the one-transaction switch of the index and the query model,
the removal of retired encoders' files and exports, an ingest after a switch, a failed switch
that leaves everything as it was, one adaptation at a time, and when a refit is due. The training
itself (a child process) is tested in test_adaptation_training.py."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import logging
import os
import shutil
import socket
import time
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from django.core.cache import cache
from django.core.management import CommandError, call_command
from django.utils import timezone
from safetensors.numpy import load_file, save_file

from agentplatform.celery import app as celery_app
from agentplatform.plumbing.cache_locks import LockHolder
from agentplatform.plumbing.errors import InvalidInput
from groundtruth.adaptation.active import active_encoder_forget
from groundtruth.adaptation.adaptation_lock import ENCODER_ADAPT_LOCK, encoder_adaptation_lock
from groundtruth.adaptation.backoff import ADAPTATION_FAILED_KEY
from groundtruth.adaptation.fitting import (
    EncoderAdaptationOptions,
    adaptation_gain_shortfall,
    encoder_adapt,
    encoder_adaptation_due,
)
from groundtruth.adaptation.model_files import PART_BYTES
from groundtruth.adaptation.pairs import adaptation_pairs_collect
from groundtruth.adaptation.switching import encoder_activate, encoder_stage, encoder_switch
from groundtruth.embeddings import (
    EmbeddingError,
    embedding_backend,
    local_embedding_backend,
    model_exports_dir,
    packaged_model_path,
)
from groundtruth.inference.exported_model import _exporter_id, export_directory
from groundtruth.ingest.foreground import ingest_foreground
from groundtruth.ingest.index_text import INDEX_VERSION, content_hash, passage_text
from groundtruth.ingest.runs import INGEST_REPO_TASK
from groundtruth.models import (
    AdaptationStatus,
    AdaptedEncoder,
    AdaptedEncoderFile,
    Chunk,
    IngestRun,
    IngestStatus,
    Repository,
    StagedVector,
)
from groundtruth.search.hybrid_search import chunk_search
from groundtruth.tasks import encoder_adapt_task, ingest_repo
from groundtruth.vector_index import stored_vectors, vector_index_name, vector_index_names
from tests.groundtruth.factories import RepositoryFactory
from tests.groundtruth.search_fixtures import Section, chunks_index
from tests.groundtruth.test_judge import EXPORT, EXPORT_TITLE, HELPDESK, REQUIREMENTS, RESET, RESET_TITLE, UPGRADE
from tests.liveserver import procfile_command


@pytest.fixture(autouse=True)
def _no_active_encoder_remembered():
    active_encoder_forget()
    yield
    active_encoder_forget()


@pytest.fixture(scope="session")
def other_model_dir(tmp_path_factory) -> Path:
    """The packaged model with its word embeddings moved a little (seeded): other weights, so a
    vector space of its own, whose vectors still rank like the packaged model's."""
    directory = tmp_path_factory.mktemp("adapted") / "minilm-adapted"
    shutil.copytree(packaged_model_path(), directory)
    tensors = load_file(directory / "model.safetensors")
    name = next(key for key in tensors if key.endswith("word_embeddings.weight"))
    noise = np.random.default_rng(0).normal(0.0, 0.01, tensors[name].shape).astype(tensors[name].dtype)
    tensors[name] = tensors[name] + noise
    save_file(tensors, directory / "model.safetensors", metadata={"format": "pt"})
    return directory


def _encoder(directory: Path, **fields) -> AdaptedEncoder:
    return AdaptedEncoder.objects.create(
        index_version=INDEX_VERSION,
        base_model="all-MiniLM-L6-v2",
        model_name=local_embedding_backend(model_path=str(directory)).model_name,
        directory=str(directory),
        query_count=300,
        held_out_accuracy_before=0.5,
        held_out_accuracy=0.6,
        **fields,
    )


def _helpdesk_indexed() -> Repository:
    """The helpdesk sections indexed in the packaged space, with the repository's chunk count."""
    repository = RepositoryFactory(name="acme/helpdesk")
    chunks_index(repository, HELPDESK)
    Repository.objects.filter(pk=repository.pk).update(chunk_count=len(HELPDESK))
    return repository


@pytest.mark.django_db
def test_pairs_are_each_titled_section_with_question_forms_against_the_indexed_passage_form():
    repository = RepositoryFactory(name="acme/helpdesk")
    chunks_index(repository, HELPDESK)

    records = adaptation_pairs_collect(repositories=[repository], seed=0, negatives=1)

    by_query = {record["queries"][0]: record for record in records}
    assert sorted(by_query) == [EXPORT_TITLE, RESET_TITLE, "Install: Requirements", "Install: Upgrade"]
    # A title that is a question is asked as written; another gets two questions made of it.
    assert by_query[RESET_TITLE]["queries"] == [RESET_TITLE]
    assert by_query["Install: Upgrade"]["queries"] == [
        "Install: Upgrade",
        "How do I use Upgrade in helpdesk?",
        "What is Upgrade in helpdesk?",
    ]
    # Passages in the form the index embeds, without the section's own title or heading lines.
    assert by_query[RESET_TITLE]["positive"] == f"helpdesk: FAQ\n{RESET}"
    assert by_query[RESET_TITLE]["negatives"] == [f"helpdesk: FAQ\n{EXPORT}"]
    assert by_query["Install: Upgrade"]["positive"] == f"helpdesk: Install\n{UPGRADE}"
    assert by_query["Install: Upgrade"]["negatives"] == [f"helpdesk: Install\n{REQUIREMENTS}"]
    # Four mined queries: the fifth would be the first held out.
    assert [record["held_out"] for record in records] == [False, False, False, False]
    assert {record["repository"] for record in records} == {"acme/helpdesk"}


@pytest.mark.django_db
def test_adapting_to_a_tiny_corpus_says_why_and_changes_nothing(settings, tmp_path):
    settings.ENCODER_ADAPTATION_DIR = str(tmp_path / "adapted")
    _helpdesk_indexed()

    with pytest.raises(InvalidInput) as refused:
        encoder_adapt()

    assert refused.value.code == "adaptation_corpus_too_small"
    assert refused.value.detail == (
        "Too little documentation to adapt the encoder to: 4 sections with a title and a text were found, "
        "4 to train on (at least 200 needed); the current encoder stays in use."
    )
    assert AdaptedEncoder.objects.count() == 0
    assert not (tmp_path / "adapted").exists()
    with pytest.raises(CommandError, match=r"^Too little documentation to adapt the encoder to: 4 sections"):
        call_command("encoder_adapt")


@pytest.mark.django_db(transaction=True)  # the switch creates and drops HNSW indexes: real commits
def test_the_switch_moves_every_chunk_and_the_query_model_to_the_adapted_space_together(other_model_dir):
    repository = RepositoryFactory(name="acme/helpdesk")
    chunks = chunks_index(repository, HELPDESK)
    packaged = embedding_backend().model_name
    encoder = _encoder(other_model_dir)
    adapted = local_embedding_backend(model_path=str(other_model_dir))
    assert encoder.model_name.startswith("minilm-adapted@") and encoder.model_name != packaged

    assert encoder_stage(encoder=encoder) == 5
    # Staged only: the index and the query model are still the packaged ones.
    encoder.refresh_from_db()
    assert (encoder.status, encoder.staged_count) == (AdaptationStatus.STAGING, 5)
    assert StagedVector.objects.count() == 5
    assert [(item.model_name, item.chunks) for item in stored_vectors()] == [(packaged, 5)]
    assert embedding_backend().model_name == packaged

    assert encoder_switch(encoder=encoder) == 5

    encoder.refresh_from_db()
    assert (encoder.status, encoder.staged_count) == (AdaptationStatus.ACTIVE, 5)
    assert StagedVector.objects.count() == 0
    assert [(item.model_name, item.chunks) for item in stored_vectors()] == [(encoder.model_name, 5)]
    assert embedding_backend().model_name == encoder.model_name
    # The new space's HNSW indexes, and no other space's.
    assert vector_index_names() == sorted(
        vector_index_name(model_name=encoder.model_name, dimension=384, column=column)
        for column in ("embedding", "heading_embedding")
    )
    reset = Chunk.objects.get(pk=chunks[0].pk)
    expected = adapted.embed([passage_text(repository_name="acme/helpdesk", heading=reset.heading, text=reset.text)])
    assert np.allclose(reset.embedding, expected[0], atol=1e-6)
    assert np.allclose(reset.heading_embedding, adapted.embed([RESET_TITLE])[0], atol=1e-6)
    # The dense leg reads the new space with the new query model.
    outcome = chunk_search(query="I forgot my password, how do I get a new one?", repositories=[repository], limit=3)
    assert outcome.hits[0].chunk.pk == chunks[0].pk
    assert outcome.hits[0].dense_rank == 1


@pytest.mark.django_db(transaction=True)
def test_a_chunk_rewritten_after_staging_is_embedded_anew_at_the_switch(other_model_dir):
    repository = RepositoryFactory(name="acme/helpdesk")
    chunks = chunks_index(repository, HELPDESK)
    encoder = _encoder(other_model_dir)
    encoder_stage(encoder=encoder)
    # An ingest rewrote a chunk meanwhile (same row here; an ingest writes new rows: not staged either).
    text = f"## {EXPORT_TITLE}\n\nNo: exports were removed in version 3."
    heading = ["FAQ", EXPORT_TITLE]
    Chunk.objects.filter(pk=chunks[1].pk).update(
        text=text, content_hash=content_hash(repository_name="acme/helpdesk", heading=heading, text=text)
    )

    assert encoder_switch(encoder=encoder) == 5

    rewritten = Chunk.objects.get(pk=chunks[1].pk)
    adapted = local_embedding_backend(model_path=str(other_model_dir))
    expected = adapted.embed([passage_text(repository_name="acme/helpdesk", heading=heading, text=text)])[0]
    assert np.allclose(rewritten.embedding, expected, atol=1e-6)
    assert rewritten.embedding_model == encoder.model_name


@pytest.mark.django_db(transaction=True)
def test_a_switch_to_a_model_that_fails_marks_the_encoder_failed_and_leaves_the_index(tmp_path):
    repository = RepositoryFactory(name="acme/helpdesk")
    chunks_index(repository, HELPDESK)
    packaged = embedding_backend().model_name
    previous = _encoder(packaged_model_path(), status=AdaptationStatus.RETIRED)
    missing = tmp_path / "minilm-adapted"
    encoder = AdaptedEncoder.objects.create(
        index_version=INDEX_VERSION,
        base_model=packaged,
        model_name="minilm-adapted@000000000000",
        directory=str(missing),
        query_count=300,
        held_out_accuracy_before=0.5,
        held_out_accuracy=0.6,
    )

    with pytest.raises(EmbeddingError, match=r"^embedding model directory .* does not exist$"):
        encoder_activate(encoder=encoder)

    encoder.refresh_from_db()
    assert encoder.status == AdaptationStatus.FAILED
    assert encoder.error == f"EmbeddingError: embedding model directory {missing} does not exist"
    assert StagedVector.objects.count() == 0
    assert [(item.model_name, item.chunks) for item in stored_vectors()] == [(packaged, 5)]
    assert AdaptedEncoder.objects.get(pk=previous.pk).status == AdaptationStatus.RETIRED
    assert embedding_backend().model_name == packaged
    with pytest.raises(CommandError, match=f"^Not switched to adapted encoder #{encoder.pk}: embedding model"):
        call_command("encoder_adapt", "--activate", str(encoder.pk))
    with pytest.raises(CommandError, match=r"^No adapted encoder #999999\.$"):
        call_command("encoder_adapt", "--activate", "999999")


def _fitted_model(adapted_dir: Path, weights: bytes) -> Path:
    """A model directory where a fit keeps it (<weights sha256[:16]>/minilm-adapted): the packaged
    model's configuration and tokenizer with `weights`. A switch with no chunk to embed reads its
    dimension from the files and never loads it."""
    directory = adapted_dir / hashlib.sha256(weights).hexdigest()[:16] / "minilm-adapted"
    directory.mkdir(parents=True)
    for path in packaged_model_path().iterdir():
        if path.name != "model.safetensors":
            (directory / path.name).symlink_to(path)
    (directory / "model.safetensors").write_bytes(weights)
    return directory


def _exported(model_dir: Path) -> str:
    """An ONNX export of `model_dir` where the service makes and looks for it; its files do not
    matter to its removal (a real export takes 12 s of both cores: test_inference.py tests it)."""
    directory = export_directory(model_dir=model_dir, cache_dir=model_exports_dir())
    directory.mkdir(parents=True)
    for name in ("model.onnx", "weights.bin", "manifest.json"):
        (directory / name).write_text(name)
    return directory.name


@pytest.mark.django_db(transaction=True)  # the switch creates and drops HNSW indexes: real commits
def test_a_switch_removes_the_files_and_exports_of_encoders_retired_before_the_previous_one(settings, tmp_path):
    settings.VAR_DIR = tmp_path / "var"
    adapted_dir = tmp_path / "adapted"
    first, second, third, fifth = (_fitted_model(adapted_dir, f"weights {n}".encode()) for n in (1, 2, 3, 5))
    # The third's weights fitted again while ENCODER_ADAPTATION_DIR was elsewhere: one export for both.
    again = _fitted_model(tmp_path / "adapted-before", b"weights 3")
    packaged_export = _exported(packaged_model_path())
    first_export, second_export, third_export = (_exported(model) for model in (first, second, third))
    assert first_export == f"minilm-adapted-{hashlib.sha256(b'weights 1').hexdigest()[:16]}-{_exporter_id()}"
    encoders = [_encoder(model) for model in (first, second, again, third, fifth)]

    def switched_to(encoder: AdaptedEncoder) -> tuple[list[str], list[str], list[str]]:
        assert encoder_switch(encoder=encoder) == 0  # no chunks: nothing embedded, no model loaded
        return (
            sorted(path.name for path in model_exports_dir().iterdir()),
            sorted(path.name for path in adapted_dir.iterdir()),
            sorted(path.name for path in (tmp_path / "adapted-before").iterdir()),
        )

    every_export = sorted([packaged_export, first_export, second_export, third_export])
    every_model = sorted(model.parent.name for model in (first, second, third, fifth))
    assert switched_to(encoders[0]) == (every_export, every_model, [again.parent.name])
    # The first is the most recently retired: a switch back needs it.
    assert switched_to(encoders[1]) == (every_export, every_model, [again.parent.name])
    assert switched_to(encoders[2]) == (
        sorted([packaged_export, second_export, third_export]),
        sorted(model.parent.name for model in (second, third, fifth)),
        [again.parent.name],
    )
    assert switched_to(encoders[3]) == (
        sorted([packaged_export, third_export]),
        sorted(model.parent.name for model in (third, fifth)),
        [again.parent.name],
    )
    # `again` goes, but its export is the previous encoder's too (the same name and weights): it stays.
    assert switched_to(encoders[4]) == (
        sorted([packaged_export, third_export]),
        sorted(model.parent.name for model in (third, fifth)),
        [],
    )
    assert [encoder.status for encoder in AdaptedEncoder.objects.order_by("pk")] == [
        AdaptationStatus.RETIRED,
        AdaptationStatus.RETIRED,
        AdaptationStatus.RETIRED,
        AdaptationStatus.RETIRED,
        AdaptationStatus.ACTIVE,
    ]


@pytest.mark.django_db(transaction=True)
def test_an_ingest_in_a_process_that_has_not_seen_the_switch_yet_writes_into_the_new_space(
    handbook_registered, other_model_dir
):
    from groundtruth.adaptation import active

    [run] = ingest_foreground(repository_name="acme/handbook", ref=None)
    assert (run.status, run.chunks_added) == (IngestStatus.SUCCEEDED, 7)
    encoder = _encoder(other_model_dir)
    assert encoder_activate(encoder=encoder) == 7
    # As a process that read "no adapted encoder" a moment before the switch.
    active._state.update(checked_at=10.0**12, directory=None)
    assert embedding_backend().model_name == "all-MiniLM-L6-v2"
    handbook_registered.write("docs/faq.md", "# FAQ\n\n## Is there a dark mode?\n\nYes, under Settings.\n")
    handbook_registered.commit("faq")

    [run] = ingest_foreground(repository_name="acme/handbook", ref=None)

    assert (run.status, run.chunks_added, run.error) == (IngestStatus.SUCCEEDED, 1, "")
    assert [(item.model_name, item.chunks) for item in stored_vectors()] == [(encoder.model_name, 8)]


@pytest.mark.django_db
def test_an_adaptation_is_due_when_on_and_none_is_fitted_or_a_quarter_of_its_chunks_changed(settings):
    repository = RepositoryFactory(name="acme/helpdesk", chunk_count=400)
    assert encoder_adaptation_due() is False  # off by default
    settings.ENCODER_ADAPTATION_ENABLED = True
    assert encoder_adaptation_due() is True
    encoder = _encoder(packaged_model_path(), chunk_count=400)

    def finished_run(minutes: int, changed: int) -> None:
        IngestRun.objects.create(
            repository=repository,
            status=IngestStatus.SUCCEEDED,
            finished_at=encoder.fitted_at + timedelta(minutes=minutes),
            chunks_added=changed,
        )

    finished_run(1, 60)
    assert encoder_adaptation_due() is False
    finished_run(2, 39)
    assert encoder_adaptation_due() is False
    finished_run(3, 1)
    assert encoder_adaptation_due() is True  # 100 of 400 chunks
    AdaptedEncoder.objects.filter(pk=encoder.pk).update(index_version=INDEX_VERSION - 1)
    assert encoder_adaptation_due() is True
    settings.EMBEDDING_MODEL = str(packaged_model_path())
    assert encoder_adaptation_due() is False  # a model the operator chose is never replaced


TOPICS = [
    ("Backups", "nightly snapshots of the archive volume are copied to the cold bucket and kept for ninety days"),
    ("Certificates", "the proxy renews its TLS certificates from the internal authority a week before expiry"),
    ("Dashboards", "charts of request latency and error rates are drawn from the metrics store every minute"),
    ("Feature flags", "a flag is toggled per tenant in the flags table and read by the services at each request"),
    ("Invoices", "the billing job totals each customer's usage on the first day of the month and mails a PDF"),
    ("Kubernetes", "each service runs as a deployment of three pods spread over the availability zones"),
    ("Logging", "structured JSON lines go to standard output and the collector ships them to the search cluster"),
    ("Migrations", "schema changes are applied by the release pipeline before the new containers start"),
    ("Notifications", "push messages to phones are sent through the gateway with a retry after thirty seconds"),
    ("On-call", "the primary engineer is paged first and the secondary after fifteen minutes without an answer"),
    ("Passwords", "users reset a forgotten password with a one-time link mailed to their verified address"),
    ("Queues", "background jobs wait in the broker and a worker acknowledges each only after it finished"),
    ("Rate limits", "each API key may send one hundred requests per minute before the gateway answers 429"),
    ("Releases", "a tag on the main branch builds the images, runs the tests and rolls out to staging first"),
    ("Search", "documents are indexed with their titles boosted and the index is rebuilt every Sunday night"),
    ("Secrets", "credentials live in the vault and are mounted into the containers as files at start"),
    ("Single sign-on", "employees log in through the identity provider and groups map to roles in the app"),
    ("Storage", "uploaded files are written to object storage and their metadata to the relational database"),
    ("Translations", "strings are extracted into catalogues that the translators edit in the web platform"),
    ("Uptime", "an external probe requests the health page every thirty seconds from three regions"),
    ("Caching", "rendered pages are kept in the shared cache for five minutes and purged on every publish"),
    ("Exports", "a customer downloads all their records as a ZIP archive with one CSV file per table"),
    ("Firewall", "only the load balancer may reach the application subnet, on ports 80 and 443 alone"),
    ("Git hooks", "a pre-commit hook formats the code and refuses a commit whose tests were not run"),
    ("Health checks", "the orchestrator restarts a pod whose readiness endpoint fails three times in a row"),
    ("Incidents", "a timeline is written in the incident channel and a review follows within five days"),
    ("Licences", "third-party packages are scanned at each build and a copyleft licence stops the release"),
    ("Monitoring", "alerts fire when the error budget of a service is burnt faster than twice its rate"),
    ("Onboarding", "a new engineer gets a laptop, accounts and a buddy on the first morning"),
    ("Profiling", "a sampling profiler is attached to one pod for ten minutes when latency regresses"),
]


def _operations_corpus() -> Repository:
    repository = RepositoryFactory(name="acme/operations")
    sections = [
        Section(
            path="manual.md",
            heading=("Operations", title),
            text=f"## {title}\n\nIn operations, {text}.",
            start_line=1 + 4 * index,
        )
        for index, (title, text) in enumerate(TOPICS)
    ]
    chunks_index(repository, sections)
    Repository.objects.filter(pk=repository.pk).update(chunk_count=len(sections))
    return repository


TINY_BUDGET = EncoderAdaptationOptions(
    max_queries=16, min_training_queries=20, batch_size=8, mini_batch_size=4, passage_tokens=64
)


@pytest.mark.django_db
def test_a_training_that_fails_or_runs_too_long_says_why_and_leaves_no_row_or_file(settings, tmp_path):
    settings.ENCODER_ADAPTATION_DIR = str(tmp_path / "adapted")
    _operations_corpus()

    with pytest.raises(InvalidInput) as failed:
        encoder_adapt(options=dataclasses.replace(TINY_BUDGET, passage_tokens=0))
    assert (failed.value.code, failed.value.detail) == (
        "adaptation_training_failed",
        "The encoder's training failed (exit status 2): python -m groundtruth.adaptation.training: error: "
        "argument --passage-tokens: "
        "0 is not a positive integer; the current encoder stays.",
    )

    settings.ENCODER_ADAPTATION_TIMEOUT_SECONDS = 0.5
    with pytest.raises(InvalidInput) as stopped:
        encoder_adapt(options=TINY_BUDGET)
    assert (stopped.value.code, stopped.value.detail) == (
        "adaptation_timeout",
        "The encoder's training took longer than ENCODER_ADAPTATION_TIMEOUT_SECONDS (0.5 s) and was stopped; "
        "the current encoder stays.",
    )
    assert AdaptedEncoder.objects.count() == 0
    assert list((tmp_path / "adapted").iterdir()) == []


@pytest.mark.django_db(transaction=True)
def test_an_encoder_fitted_on_a_corpus_is_recorded_and_the_index_switched_to_it(settings, tmp_path):
    """The whole path with the real trainer in its child process, on a tiny budget."""
    settings.ENCODER_ADAPTATION_DIR = str(tmp_path / "adapted")
    _operations_corpus()

    encoder = encoder_adapt(options=TINY_BUDGET)

    assert (encoder.status, encoder.mined_query_count, encoder.query_count, encoder.held_out_query_count) == (
        AdaptationStatus.FITTED,
        30,
        16,
        6,
    )
    assert (encoder.repositories, encoder.chunk_count, encoder.index_version) == (
        ["acme/operations"],
        30,
        INDEX_VERSION,
    )
    assert encoder.base_model == "all-MiniLM-L6-v2"
    directory = Path(encoder.directory)
    assert directory.name == "minilm-adapted" and directory.parent.parent == tmp_path / "adapted"
    assert encoder.model_name == f"minilm-adapted@{directory.parent.name[:12]}"
    assert (directory / "adaptation.json").is_file()
    assert [path.name for path in (tmp_path / "adapted").iterdir()] == [directory.parent.name]  # no work files left
    # Its model's files stored with the row, every part carrying its whole file's sha256 and size.
    files = sorted(path for path in directory.rglob("*") if path.is_file())
    assert list(
        AdaptedEncoderFile.objects.filter(encoder=encoder, part=0)
        .order_by("relative_path")
        .values_list("relative_path", "file_size", "file_sha256")
    ) == [
        (path.relative_to(directory).as_posix(), path.stat().st_size, hashlib.sha256(path.read_bytes()).hexdigest())
        for path in sorted(files, key=lambda path: path.relative_to(directory).as_posix())
    ]
    assert AdaptedEncoderFile.objects.filter(encoder=encoder).count() == sum(
        max(1, -(-path.stat().st_size // PART_BYTES)) for path in files
    )
    assert 0 < encoder.peak_rss_mb and 0 < encoder.fit_seconds

    assert encoder_activate(encoder=encoder) == 30

    encoder.refresh_from_db()
    assert encoder.status == AdaptationStatus.ACTIVE
    assert [(item.model_name, item.chunks) for item in stored_vectors()] == [(encoder.model_name, 30)]
    assert embedding_backend().model_name == encoder.model_name


@pytest.mark.django_db
def test_the_adaptation_task_on_a_tiny_corpus_logs_why_and_changes_nothing(settings, tmp_path, caplog):
    settings.ENCODER_ADAPTATION_ENABLED = True
    settings.ENCODER_ADAPTATION_DIR = str(tmp_path / "adapted")
    _helpdesk_indexed()

    assert encoder_adapt_task() is None

    assert AdaptedEncoder.objects.count() == 0
    assert [(item.model_name, item.chunks) for item in stored_vectors()] == [("all-MiniLM-L6-v2", 5)]
    assert (
        "groundtruth.tasks",
        logging.INFO,
        "Encoder not adapted: Too little documentation to adapt the encoder to: 4 sections with a title and a "
        "text were found, 4 to train on (at least 200 needed); the current encoder stays in use.",
    ) in caplog.record_tuples
    settings.ENCODER_ADAPTATION_ENABLED = False
    assert encoder_adapt_task() is None  # not due: nothing mined, nothing logged
    assert len([record for record in caplog.records if record.name == "groundtruth.tasks"]) == 1


@pytest.mark.django_db
def test_a_failed_adaptation_is_not_tried_again_until_the_corpus_changes_or_the_backoff_expires(
    settings, tmp_path, caplog
):
    settings.ENCODER_ADAPTATION_ENABLED = True
    settings.ENCODER_ADAPTATION_DIR = str(tmp_path / "adapted")
    repository = _helpdesk_indexed()
    assert encoder_adaptation_due() is True

    assert encoder_adapt_task() is None  # refused: too small

    failure = cache.get(ADAPTATION_FAILED_KEY)
    assert (failure["index_version"], failure["chunks"], failure["reason"]) == (
        INDEX_VERSION,
        5,
        "adaptation_corpus_too_small",
    )
    assert encoder_adaptation_due() is False  # not on every ingest
    assert encoder_adapt_task() is None
    assert len([record for record in caplog.records if record.name == "groundtruth.tasks"]) == 1

    def finished_run(changed: int) -> None:
        IngestRun.objects.create(
            repository=repository, status=IngestStatus.SUCCEEDED, finished_at=timezone.now(), chunks_added=changed
        )

    finished_run(1)
    assert encoder_adaptation_due() is False  # 1 of 5 chunks changed: under a quarter
    finished_run(1)
    assert encoder_adaptation_due() is True  # 2 of 5

    settings.ENCODER_ADAPTATION_RETRY_SECONDS = 1
    assert encoder_adapt_task() is None  # refused again, recorded again, now for one second
    assert encoder_adaptation_due() is False
    time.sleep(1.5)
    assert cache.get(ADAPTATION_FAILED_KEY) is None
    assert encoder_adaptation_due() is True


@pytest.mark.django_db
def test_an_adaptation_while_another_holds_the_lock_is_refused_at_once_and_changes_nothing(
    settings, tmp_path, other_model_dir, caplog
):
    settings.ENCODER_ADAPTATION_ENABLED = True
    settings.ENCODER_ADAPTATION_DIR = str(tmp_path / "adapted")
    _helpdesk_indexed()
    encoder = _encoder(other_model_dir)

    def state() -> tuple:
        return (
            list(AdaptedEncoder.objects.values_list("pk", "status", "staged_count", "error")),
            StagedVector.objects.count(),
            [(item.model_name, item.chunks) for item in stored_vectors()],
            cache.get(ENCODER_ADAPT_LOCK),
        )

    with encoder_adaptation_lock():  # as a task or a command in another process: the same cache key
        before = state()
        holder = LockHolder.parse(before[3])
        assert holder is not None
        refused = (
            "Another adaptation of the encoder (a fit, a staging or a switch) is running, held by "
            f"{socket.gethostname()} pid {os.getpid()} since {holder.taken_at:%Y-%m-%d %H:%M:%S} UTC, "
            f"token {holder.token}; nothing was changed."
        )
        for arguments in ([], ["--no-switch"], ["--activate", str(encoder.pk)]):
            with pytest.raises(CommandError) as refusal:
                call_command("encoder_adapt", *arguments)
            assert (str(refusal.value), refusal.value.returncode) == (refused, 1)
        with caplog.at_level(logging.INFO, logger="groundtruth.tasks"):
            assert encoder_adapt_task() is None
        # Nothing changed, the lock included: a refused command does not release the holder's lock.
        assert state() == before

    # The holder's own value (cache_locks.py), so that only it releases the lock.
    assert (holder.host, holder.pid, len(holder.token)) == (socket.gethostname(), os.getpid(), 32)
    assert before == ([(encoder.pk, AdaptationStatus.FITTED, 0, "")], 0, [("all-MiniLM-L6-v2", 5)], holder.value())
    assert not (tmp_path / "adapted").exists()
    assert caplog.record_tuples == [("groundtruth.tasks", logging.INFO, f"Encoder not adapted: {refused}")]
    # Released by its holder; a command takes it and releases it however it ends.
    assert cache.get(ENCODER_ADAPT_LOCK) is None
    with pytest.raises(CommandError, match=r"^No adapted encoder #999999\.$"):
        call_command("encoder_adapt", "--activate", "999999")
    assert cache.get(ENCODER_ADAPT_LOCK) is None


def _encoder_adapt_output(*arguments: str) -> str:
    out = io.StringIO()
    call_command("encoder_adapt", *arguments, stdout=out)
    return out.getvalue()


# A holder on another host whose process died: only its value is left in Redis. (docs/operations.md,
# "A stuck adaptation lock", shows the outputs these give.)
DEAD_HOLDER = LockHolder(
    host="worker-2", pid=4242, taken_at=datetime(2026, 11, 27, 9, 30, 5, tzinfo=UTC), token="ab" * 16
)
DEAD_HOLDER_NAMED = f"worker-2 pid 4242 since 2026-11-27 09:30:05 UTC, token {'ab' * 16}"


def test_the_lock_status_names_the_holder_and_a_broken_lock_lets_the_next_adaptation_in():
    assert _encoder_adapt_output("--lock-status") == "free\n"
    assert _encoder_adapt_output("--break-lock") == "free\n"  # nothing held it: nothing deleted
    assert cache.add(ENCODER_ADAPT_LOCK, DEAD_HOLDER.value(), timeout=3600)

    assert _encoder_adapt_output("--lock-status") == f"held by {DEAD_HOLDER_NAMED}\n"
    with pytest.raises(CommandError) as refusal:
        call_command("encoder_adapt", "--activate", "1")
    assert (str(refusal.value), refusal.value.returncode) == (
        "Another adaptation of the encoder (a fit, a staging or a switch) is running, held by "
        f"{DEAD_HOLDER_NAMED}; nothing was changed.",
        1,
    )
    assert cache.get(ENCODER_ADAPT_LOCK) == DEAD_HOLDER.value()  # neither the status nor a refusal touch it

    assert _encoder_adapt_output("--break-lock") == f"broken: it was held by {DEAD_HOLDER_NAMED}\n"

    assert cache.get(ENCODER_ADAPT_LOCK) is None
    assert _encoder_adapt_output("--lock-status") == "free\n"
    with encoder_adaptation_lock():  # the next adaptation takes it at once
        holder = LockHolder.parse(cache.get(ENCODER_ADAPT_LOCK))
        assert holder is not None and (holder.host, holder.pid) == (socket.gethostname(), os.getpid())
        assert _encoder_adapt_output("--lock-status") == f"held by {holder}\n"
    assert _encoder_adapt_output("--lock-status") == "free\n"


def test_a_holder_whose_lock_was_broken_does_not_release_the_next_holders():
    with ExitStack() as first:
        first.enter_context(encoder_adaptation_lock())
        broken = _encoder_adapt_output("--break-lock")  # wrongly: this holder was alive
        with encoder_adaptation_lock():  # the next one takes it...
            taken_next = cache.get(ENCODER_ADAPT_LOCK)
            first.close()  # ...and the first one ends while it runs: its release finds another's value
            assert cache.get(ENCODER_ADAPT_LOCK) == taken_next
        assert cache.get(ENCODER_ADAPT_LOCK) is None  # released by its own holder
    assert broken.startswith(f"broken: it was held by {socket.gethostname()} pid {os.getpid()} since ")


def test_lock_status_and_break_lock_are_not_given_together():
    with pytest.raises(CommandError, match=r"not allowed with argument --lock-status"):
        call_command("encoder_adapt", "--lock-status", "--break-lock")


@pytest.mark.django_db
def test_an_ingest_queues_an_adaptation_once_it_is_due(
    settings, handbook_registered, django_capture_on_commit_callbacks
):
    repository = Repository.objects.get(name="acme/handbook")
    with django_capture_on_commit_callbacks() as off:
        ingest_repo.apply(args=[repository.pk]).get()
    settings.ENCODER_ADAPTATION_ENABLED = True
    handbook_registered.write("docs/faq.md", "# FAQ\n\n## Is there a dark mode?\n\nYes, under Settings.\n")
    handbook_registered.commit("faq")
    with django_capture_on_commit_callbacks() as on:
        ingest_repo.apply(args=[repository.pk]).get()

    assert encoder_adapt_task.delay not in off
    assert on.count(encoder_adapt_task.delay) == 1


@pytest.mark.django_db
def test_a_host_without_the_active_encoders_files_says_so_in_health_and_searches_lexically(
    tmp_path, monkeypatch, caplog
):
    from agentplatform.health import _check_embeddings
    from agentplatform.plumbing.database_backend import deadlines
    from groundtruth.search.query_embedding import query_embed

    repository = RepositoryFactory(name="acme/helpdesk")
    chunks_index(repository, HELPDESK)
    missing = tmp_path / "minilm-adapted"
    AdaptedEncoder.objects.create(
        status=AdaptationStatus.ACTIVE,
        index_version=INDEX_VERSION,
        base_model="all-MiniLM-L6-v2",
        model_name="minilm-adapted@000000000000",
        directory=str(missing),
        query_count=300,
        held_out_accuracy_before=0.5,
        held_out_accuracy=0.6,
    )
    monkeypatch.setattr(deadlines, "_process_kind", deadlines.ProcessKind.SERVING)
    active_encoder_forget()  # as a process starting (or ENCODER_ACTIVE_CHECK_SECONDS later)

    assert (_check_embeddings().status, _check_embeddings().detail) == (
        "error",
        f"model directory {missing} is missing",
    )
    with caplog.at_level(logging.WARNING, logger="groundtruth.embeddings"):
        assert query_embed(text="How do I reset my password?") is None
        outcome = chunk_search(query="How do I reset my password?", repositories=[repository], limit=3)
    # Lexical alone: the one passage with the question's words.
    assert [(hit.chunk.heading, hit.dense_rank) for hit in outcome.hits] == [(["FAQ", RESET_TITLE], None)]
    # Tried once, not on every request.
    assert caplog.messages == [
        f"Embedding model {missing} not loaded: embedding model directory {missing} does not exist"
    ]


@pytest.mark.django_db(transaction=True)
def test_the_adaptation_task_resumes_a_staging_cut_short_instead_of_fitting_again(settings, other_model_dir):
    settings.ENCODER_ADAPTATION_ENABLED = True
    repository = RepositoryFactory(name="acme/helpdesk")
    chunks = chunks_index(repository, HELPDESK)
    encoder = _encoder(other_model_dir)
    encoder_stage(encoder=encoder)
    # As a worker killed mid-way: two chunks' staged vectors never written.
    StagedVector.objects.filter(chunk_id__in=[chunks[0].pk, chunks[3].pk]).delete()
    assert encoder_adaptation_due() is True

    assert encoder_adapt_task() == encoder.pk

    assert list(AdaptedEncoder.objects.values_list("pk", "status")) == [(encoder.pk, AdaptationStatus.ACTIVE)]
    assert [(item.model_name, item.chunks) for item in stored_vectors()] == [(encoder.model_name, 5)]


def test_a_fit_is_switched_to_only_when_it_gains_the_minimum_on_its_held_out_queries(settings):
    settings.ENCODER_ADAPTATION_MIN_GAIN = 0.02

    def shortfall(before: float, after: float) -> str | None:
        encoder = AdaptedEncoder(held_out_accuracy_before=before, held_out_accuracy=after, held_out_query_count=50)
        return adaptation_gain_shortfall(encoder)

    assert shortfall(0.58, 0.6) is None  # 0.02: exactly enough (the difference of floats rounded)
    assert shortfall(0.582, 0.652) is None
    assert shortfall(0.5801, 0.6) == (
        "its held-out mined accuracy 0.580 -> 0.600 (50 queries) gains +0.020, less than "
        "ENCODER_ADAPTATION_MIN_GAIN (0.02)"
    )
    assert shortfall(0.6, 0.55) == (
        "its held-out mined accuracy 0.600 -> 0.550 (50 queries) gains -0.050, less than "
        "ENCODER_ADAPTATION_MIN_GAIN (0.02)"
    )
    settings.ENCODER_ADAPTATION_MIN_GAIN = 0.0
    assert shortfall(0.6, 0.6) is None


def _settings_corpus(size: int) -> Repository:
    """`size` titled sections (at least the 200 training queries an automatic fit needs once the
    fifth held out is set aside), each on one setting of one component."""
    components = ["cache", "queue", "proxy", "scheduler", "mailer", "indexer", "uploader", "resolver", "tracer"]
    aspects = [
        "timeout", "retries", "port", "log level", "batch size", "workers", "memory limit", "rate limit",
        "compression", "encryption", "backoff", "buffer", "keep-alive", "checksum", "threshold", "expiry",
        "quota", "priority", "region", "replicas", "snapshot", "sampling", "warm-up", "drain", "locale",
        "timezone", "prefix", "ttl", "pool size",
    ]  # fmt: skip
    pairs = [(component, aspect) for aspect in aspects for component in components][:size]
    repository = RepositoryFactory(name="acme/settings")
    sections = [
        Section(
            path=f"{component}.md",
            heading=(component.title(), f"The {component}'s {aspect}"),
            text=f"## The {component}'s {aspect}\n\nSet `{component}.{aspect.replace(' ', '_')}` to change the "
            f"{aspect} of the {component}; it is read when the {component} starts.",
            start_line=1 + 4 * index,
        )
        for index, (component, aspect) in enumerate(pairs)
    ]
    chunks_index(repository, sections)
    Repository.objects.filter(pk=repository.pk).update(chunk_count=len(sections))
    return repository


@pytest.mark.django_db(transaction=True)  # the switch by hand creates and drops HNSW indexes: real commits
def test_the_adaptation_task_keeps_a_fit_that_does_not_gain_enough_fitted_and_the_index_as_it_is(
    settings, tmp_path, caplog
):
    """The task's whole fit with the real trainer (one batch of 32 queries), then its check."""
    settings.ENCODER_ADAPTATION_ENABLED = True
    settings.ENCODER_ADAPTATION_DIR = str(tmp_path / "adapted")
    settings.ENCODER_ADAPTATION_MAX_QUERIES = 32
    settings.ENCODER_ADAPTATION_MIN_GAIN = 1.0  # more than any fit can gain
    _settings_corpus(255)
    assert encoder_adaptation_due() is True

    assert encoder_adapt_task() is None

    encoder = AdaptedEncoder.objects.get()
    assert (encoder.status, encoder.mined_query_count, encoder.query_count) == (AdaptationStatus.FITTED, 255, 32)
    assert [(item.model_name, item.chunks) for item in stored_vectors()] == [("all-MiniLM-L6-v2", 255)]
    assert embedding_backend(fresh=True).model_name == "all-MiniLM-L6-v2"
    gain = round(encoder.held_out_accuracy - encoder.held_out_accuracy_before, 4)
    assert (
        "groundtruth.tasks",
        logging.WARNING,
        f"Adapted encoder #{encoder.pk} fitted but not switched to: its held-out mined accuracy "
        f"{encoder.held_out_accuracy_before:.3f} -> {encoder.held_out_accuracy:.3f} "
        f"({encoder.held_out_query_count} queries) gains {gain:+.3f}, less than ENCODER_ADAPTATION_MIN_GAIN (1); "
        f"`manage.py encoder_adapt --activate {encoder.pk}` switches to it anyway",
    ) in caplog.record_tuples
    assert encoder.held_out_query_count == 51
    assert cache.get(ADAPTATION_FAILED_KEY) is None  # not a failure: the fitted row holds the next fit back
    assert encoder_adaptation_due() is False

    # The command applies the same check and says so.
    with pytest.raises(CommandError) as refused:
        call_command("encoder_adapt", "--max-queries", "32", stdout=io.StringIO())
    second = AdaptedEncoder.objects.latest("pk")
    assert str(refused.value) == (
        f"Adapted encoder #{second.pk} fitted but not switched to: its held-out mined accuracy "
        f"{second.held_out_accuracy_before:.3f} -> {second.held_out_accuracy:.3f} ({second.held_out_query_count} "
        f"queries) gains {round(second.held_out_accuracy - second.held_out_accuracy_before, 4):+.3f}, less than "
        f"ENCODER_ADAPTATION_MIN_GAIN (1). `manage.py encoder_adapt --activate {second.pk}` switches to it anyway."
    )
    assert second.status == AdaptationStatus.FITTED
    assert [(item.model_name, item.chunks) for item in stored_vectors()] == [("all-MiniLM-L6-v2", 255)]

    # By hand it switches all the same.
    call_command("encoder_adapt", "--activate", str(encoder.pk))
    encoder.refresh_from_db()
    assert encoder.status == AdaptationStatus.ACTIVE
    assert [(item.model_name, item.chunks) for item in stored_vectors()] == [(encoder.model_name, 255)]


def test_model_fits_have_a_queue_of_their_own_which_the_procfiles_models_worker_serves(settings):
    """A fit takes minutes of both cores: on the ingest worker's queue it would hold every ingest."""
    route = celery_app.amqp.router.route
    assert settings.CELERY_MODELS_QUEUE == f"{settings.CELERY_TASK_DEFAULT_QUEUE}-models"
    assert route({}, "groundtruth.tasks.encoder_adapt_task")["queue"].name == settings.CELERY_MODELS_QUEUE
    assert route({}, "groundtruth.tasks.judge_fit_task")["queue"].name == settings.CELERY_MODELS_QUEUE
    assert route({}, INGEST_REPO_TASK)["queue"].name == settings.CELERY_TASK_DEFAULT_QUEUE
    models = procfile_command("models", {"CELERY_QUEUE": "acme"})
    assert models[models.index("--queues") + 1 :][:3] == ["acme-models", "--hostname", "models@%h"]
    assert models[models.index("--concurrency") + 1] == "1"
    assert procfile_command("models", {})[models.index("--queues") + 1] == "celery-models"
