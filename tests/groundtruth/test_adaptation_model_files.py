"""An adapted encoder's model files in PostgreSQL (groundtruth/adaptation/model_files.py): a
second host (another ENCODER_ADAPTATION_DIR) restores them byte for byte and embeds as the fitting
host does; damaged stored files leave no directory, keep search lexical and show in /health; two
restores at once end with one directory; a switch deletes the stored files of the encoders whose
files it removes; a host removes its own copies of the encoders no host needs any more; every
process finds the active encoder's directory in one query. The "adapted" model is a copy of the
packaged one: no training here."""

from __future__ import annotations

import hashlib
import logging
import shutil
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import transaction
from django.utils import timezone

from groundtruth.adaptation.active import active_encoder_directory, active_encoder_forget
from groundtruth.adaptation.adaptation_lock import encoder_adaptation_lock
from groundtruth.adaptation.model_files import (
    PART_BYTES,
    ModelFilesInvalid,
    encoder_files_store,
    encoder_model_directory,
    encoder_model_files_ensure,
)
from groundtruth.adaptation.retired_files import retired_model_copies_remove
from groundtruth.adaptation.switching import encoder_switch
from groundtruth.embeddings import (
    PACKAGED_WEIGHTS_SHA256,
    embedding_backend,
    embedding_backend_prepare,
    local_embedding_backend,
    model_exports_dir,
    packaged_model_path,
)
from groundtruth.models import AdaptationStatus, AdaptedEncoder, AdaptedEncoderFile
from groundtruth.search.hybrid_search import chunk_search
from tests.groundtruth.factories import RepositoryFactory
from tests.groundtruth.search_fixtures import chunks_index
from tests.groundtruth.test_adaptation import _encoder, _exported, _fitted_model
from tests.groundtruth.test_judge import HELPDESK, RESET_TITLE

QUESTION = "How do I reset my password?"


@pytest.fixture(autouse=True)
def _no_active_encoder_remembered():
    active_encoder_forget()
    yield
    active_encoder_forget()


def _fitted_copy(adapted_dir: Path) -> Path:
    """The packaged model where a fit keeps a model: <adapted dir>/<weights sha256[:16]>/minilm-adapted."""
    directory = adapted_dir / PACKAGED_WEIGHTS_SHA256[:16] / "minilm-adapted"
    shutil.copytree(packaged_model_path(), directory)
    return directory


def _sha256s(directory: Path) -> dict[str, str]:
    return {
        path.relative_to(directory).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def _stored_encoder(settings, tmp_path: Path, **fields) -> tuple[AdaptedEncoder, Path]:
    """An encoder fitted on the first host (its row and files stored in one transaction, as the
    fit does); then this test is the second host, with an ENCODER_ADAPTATION_DIR of its own."""
    settings.ENCODER_ADAPTATION_DIR = str(tmp_path / "first-host")
    fitted = _fitted_copy(tmp_path / "first-host")
    with transaction.atomic():
        encoder = _encoder(fitted, **fields)
        encoder_files_store(encoder=encoder, model_dir=fitted)
    settings.ENCODER_ADAPTATION_DIR = str(tmp_path / "second-host")
    return encoder, fitted


@pytest.mark.django_db
def test_a_second_host_restores_the_stored_files_byte_identical_and_embeds_the_same_vector(settings, tmp_path):
    encoder, fitted = _stored_encoder(settings, tmp_path, status=AdaptationStatus.ACTIVE)
    weights_parts = -(-fitted.joinpath("model.safetensors").stat().st_size // PART_BYTES)
    assert weights_parts == 87
    assert list(
        AdaptedEncoderFile.objects.filter(encoder=encoder, relative_path="model.safetensors")
        .order_by("part")
        .values_list("part", "file_size", "file_sha256")
    ) == [(part, 90868376, PACKAGED_WEIGHTS_SHA256) for part in range(87)]
    assert AdaptedEncoderFile.objects.filter(encoder=encoder, part=0).count() == len(_sha256s(fitted)) == 13
    second = tmp_path / "second-host" / PACKAGED_WEIGHTS_SHA256[:16] / "minilm-adapted"
    # The fitting host's path stays on the row, for the admin; this host reads its own.
    assert (encoder.directory, encoder_model_directory(encoder)) == (str(fitted), second)
    assert not second.exists()

    # A worker (an ingest, fresh=True) restores the files when it loads the model.
    backend = embedding_backend(fresh=True)
    assert backend.model_path == str(second)
    vector = backend.embed([QUESTION])[0]

    assert _sha256s(second) == _sha256s(fitted)
    assert vector == local_embedding_backend(model_path=str(fitted)).embed([QUESTION])[0]
    assert backend.model_name == encoder.model_name == "minilm-adapted"
    # Nothing but the model directory: the restore's temporary directory was renamed into place.
    assert [path.name for path in second.parent.iterdir()] == ["minilm-adapted"]
    # In place and complete: not restored again (its files stay the same inodes).
    inode = (second / "model.safetensors").stat().st_ino
    assert encoder_model_files_ensure(encoder) == second
    assert (second / "model.safetensors").stat().st_ino == inode


@pytest.mark.django_db(transaction=True)  # the background preparation reads the files on its own connection
def test_a_corrupted_part_leaves_no_directory_keeps_search_lexical_and_health_says_why(
    settings, tmp_path, monkeypatch, caplog
):
    from agentplatform.health import _check_embeddings
    from agentplatform.plumbing.database_backend import deadlines
    from groundtruth.search.query_embedding import query_embed

    repository = RepositoryFactory(name="acme/helpdesk")
    chunks_index(repository, HELPDESK)
    encoder, _ = _stored_encoder(settings, tmp_path, status=AdaptationStatus.ACTIVE)
    part = AdaptedEncoderFile.objects.get(encoder=encoder, relative_path="model.safetensors", part=3)
    damaged = bytearray(part.content)
    damaged[1000] ^= 0xFF
    AdaptedEncoderFile.objects.filter(pk=part.pk).update(content=bytes(damaged))
    second = tmp_path / "second-host" / PACKAGED_WEIGHTS_SHA256[:16] / "minilm-adapted"
    why = (
        f"the stored files of adapted encoder #{encoder.pk} are damaged: "
        "model.safetensors does not match its stored sha256"
    )
    monkeypatch.setattr(deadlines, "_process_kind", deadlines.ProcessKind.SERVING)
    active_encoder_forget()  # as a process starting (or ENCODER_ACTIVE_CHECK_SECONDS after the switch)

    with caplog.at_level(logging.WARNING, logger="groundtruth.embeddings"):
        # A serving process restores in its background preparation, never on a request.
        preparing = embedding_backend_prepare()
        assert preparing is not None
        preparing.join()
        assert embedding_backend_prepare() is None  # not tried again: the same bytes would fail again
        assert query_embed(text=QUESTION) is None
        outcome = chunk_search(query=QUESTION, repositories=[repository], limit=3)

    assert not second.exists()
    assert [path for path in (tmp_path / "second-host").rglob("*")] == []
    assert (_check_embeddings().status, _check_embeddings().detail) == (
        "error",
        f"model directory {second} is missing ({why})",
    )
    # Lexical alone: the one passage with the question's words.
    assert [(hit.chunk.heading, hit.dense_rank) for hit in outcome.hits] == [(["FAQ", RESET_TITLE], None)]
    assert caplog.messages == [f"Embedding model {second} not loaded: {why}"]


@pytest.mark.django_db
@pytest.mark.parametrize("part", [0, 5, 86])
def test_a_missing_part_is_an_error_that_leaves_no_directory(settings, tmp_path, part):
    encoder, _ = _stored_encoder(settings, tmp_path)
    AdaptedEncoderFile.objects.filter(encoder=encoder, relative_path="model.safetensors", part=part).delete()

    with pytest.raises(ModelFilesInvalid) as failed:
        encoder_model_files_ensure(encoder)

    # The last part missing: the parts before it are whole, the file is short.
    why = (
        "model.safetensors has 90177536 bytes in its stored parts, not 90868376"
        if part == 86
        else (f"part {part} of model.safetensors is missing")
    )
    assert str(failed.value) == f"the stored files of adapted encoder #{encoder.pk} are damaged: {why}"
    assert [path for path in (tmp_path / "second-host").rglob("*")] == []


@pytest.mark.django_db(transaction=True)  # each thread reads the stored files on its own connection
def test_two_restores_at_once_end_with_one_complete_directory(settings, tmp_path):
    from django.db import connections

    encoder, fitted = _stored_encoder(settings, tmp_path)
    start = threading.Barrier(2)
    results: list[Path | BaseException] = []

    def restore() -> None:
        start.wait()
        try:
            results.append(encoder_model_files_ensure(encoder))
        except BaseException as exc:  # reported by the assertion below
            results.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=restore) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    second = tmp_path / "second-host" / PACKAGED_WEIGHTS_SHA256[:16] / "minilm-adapted"
    assert results == [second, second]
    assert _sha256s(second) == _sha256s(fitted)
    assert [path.name for path in second.parent.iterdir()] == ["minilm-adapted"]


@pytest.mark.django_db(transaction=True)  # the switch creates and drops HNSW indexes: real commits
def test_a_switch_deletes_the_stored_files_of_the_encoders_whose_files_it_removes(settings, tmp_path):
    settings.VAR_DIR = tmp_path / "var"
    adapted_dir = tmp_path / "adapted"
    settings.ENCODER_ADAPTATION_DIR = str(adapted_dir)
    models = [_fitted_model(adapted_dir, f"weights {n}".encode()) for n in (1, 2, 3, 4)]
    encoders = []
    for model in models:
        with transaction.atomic():
            encoder = _encoder(model)
            encoder_files_store(encoder=encoder, model_dir=model)
        encoders.append(encoder)
    first, second, third, fitted_only = encoders
    parts = AdaptedEncoderFile.objects.filter(encoder=first).count()
    assert parts == 13  # the packaged model's 12 small files (read through their links) and the weights

    def stored() -> dict[int, int]:
        return {encoder.pk: AdaptedEncoderFile.objects.filter(encoder=encoder).count() for encoder in encoders}

    assert encoder_switch(encoder=first) == 0  # no chunks: nothing embedded, no model loaded
    assert encoder_switch(encoder=second) == 0
    assert stored() == {first.pk: parts, second.pk: parts, third.pk: parts, fitted_only.pk: parts}

    # The first is now retired before the previous one: its files go, here and in the database.
    assert encoder_switch(encoder=third) == 0

    assert stored() == {first.pk: 0, second.pk: parts, third.pk: parts, fitted_only.pk: parts}
    assert sorted(path.name for path in adapted_dir.iterdir()) == sorted(model.parent.name for model in models[1:])
    assert [encoder.status for encoder in AdaptedEncoder.objects.order_by("pk")] == [
        AdaptationStatus.RETIRED,
        AdaptationStatus.RETIRED,
        AdaptationStatus.ACTIVE,
        AdaptationStatus.FITTED,
    ]


@pytest.mark.django_db
def test_every_process_finds_the_active_encoders_directory_in_one_query(settings, tmp_path, django_assert_num_queries):
    with django_assert_num_queries(1):
        assert active_encoder_directory(fresh=True) is None  # none active: the configured model
    # Recorded before files were stored (migration 0012): read where it was fitted.
    unstored = tmp_path / "fitted-before-0012" / "minilm-adapted"
    earlier = _encoder(unstored, status=AdaptationStatus.ACTIVE)
    with django_assert_num_queries(1):
        assert active_encoder_directory(fresh=True) == str(unstored)
    AdaptedEncoder.objects.filter(pk=earlier.pk).update(status=AdaptationStatus.RETIRED)
    _stored_encoder(settings, tmp_path, status=AdaptationStatus.ACTIVE)
    second = tmp_path / "second-host" / PACKAGED_WEIGHTS_SHA256[:16] / "minilm-adapted"

    with django_assert_num_queries(1):
        assert active_encoder_directory(fresh=True) == str(second)  # this host's, restored or not
    with django_assert_num_queries(0):
        assert active_encoder_directory() == str(second)  # within ENCODER_ACTIVE_CHECK_SECONDS


def _sha16(weights: bytes) -> str:
    return hashlib.sha256(weights).hexdigest()[:16]


def _tree(directory: Path) -> list[str]:
    return sorted(path.relative_to(directory).as_posix() for path in directory.rglob("*") if not path.is_symlink())


@pytest.mark.django_db
def test_a_host_removes_its_copies_of_encoders_no_host_needs_with_their_exports_and_nothing_else(
    settings, tmp_path, caplog
):
    settings.VAR_DIR = tmp_path / "var"
    fitting_host, here = tmp_path / "fitting-host", tmp_path / "here"
    settings.ENCODER_ADAPTATION_DIR = str(here)
    now = timezone.now()

    def recorded(weights: bytes, status: str, minutes_ago: int, *, copy_here: bool = True) -> AdaptedEncoder:
        """An encoder fitted on another host and, unless not, restored here (the same two names)."""
        encoder = _encoder(
            _fitted_model(fitting_host, weights), status=status, status_changed_at=now - timedelta(minutes=minutes_ago)
        )
        if copy_here:
            _fitted_model(here, weights)
        return encoder

    recorded(b"retired long ago", AdaptationStatus.RETIRED, 90)
    recorded(b"retired before", AdaptationStatus.RETIRED, 60)
    recorded(b"never loaded here", AdaptationStatus.RETIRED, 50, copy_here=False)
    recorded(b"previous", AdaptationStatus.RETIRED, 10)  # a switch back needs it
    recorded(b"active", AdaptationStatus.ACTIVE, 10)
    recorded(b"staging", AdaptationStatus.STAGING, 5)
    recorded(b"fitted", AdaptationStatus.FITTED, 5)
    recorded(b"failed", AdaptationStatus.FAILED, 5)
    # Retired long ago, but the active one's weights fitted again: the same directory, kept.
    _encoder(
        fitting_host / _sha16(b"active") / "minilm-adapted",
        status=AdaptationStatus.RETIRED,
        status_changed_at=now - timedelta(minutes=80),
    )
    # Recorded paths whose last names lead nowhere: this host's adapted dir itself, and above it.
    for nowhere, minutes_ago in (("/", 70), (f"{tmp_path}/x/..", 75)):
        AdaptedEncoder.objects.create(
            index_version=1,
            base_model="all-MiniLM-L6-v2",
            model_name=f"nowhere {minutes_ago}",
            directory=nowhere,
            query_count=1,
            held_out_accuracy_before=0.5,
            held_out_accuracy=0.5,
            status=AdaptationStatus.RETIRED,
            status_changed_at=now - timedelta(minutes=minutes_ago),
        )
    (here / ".fit-in-progress").mkdir()  # a fit's work directory: no row yet
    _fitted_model(here, b"fitted here, its row not written yet")
    exports = [
        _exported(here / _sha16(weights) / "minilm-adapted")
        for weights in (b"retired long ago", b"previous", b"active")
    ]
    before = (_tree(here), _tree(fitting_host), _tree(model_exports_dir()))
    assert sorted(path.name for path in model_exports_dir().iterdir()) == sorted(exports)

    with encoder_adaptation_lock():  # a fit may be writing under here: nothing is removed
        assert retired_model_copies_remove(exports_dir=model_exports_dir()) == []
    assert (_tree(here), _tree(fitting_host), _tree(model_exports_dir())) == before

    with caplog.at_level(logging.INFO, logger="groundtruth.adaptation.retired_files"):
        removed = retired_model_copies_remove(exports_dir=model_exports_dir())

    gone = [here / _sha16(weights) / "minilm-adapted" for weights in (b"retired before", b"retired long ago")]
    assert removed == gone  # the most recently retired first
    assert sorted(path.name for path in here.iterdir()) == sorted(
        [".fit-in-progress"]
        + [_sha16(weights) for weights in (b"previous", b"active", b"staging", b"fitted", b"failed")]
        + [_sha16(b"fitted here, its row not written yet")]
    )
    # The recorded paths (outside this host's ENCODER_ADAPTATION_DIR) untouched; one export gone.
    assert _tree(fitting_host) == before[1]
    assert sorted(path.name for path in model_exports_dir().iterdir()) == sorted(exports[1:])
    assert caplog.messages == [
        f"Removed the model files {gone[0].parent} of a retired encoder",
        f"Removed the ONNX export {model_exports_dir() / exports[0]} of the retired encoder in {gone[1]}",
        f"Removed the model files {gone[1].parent} of a retired encoder",
    ]
    assert retired_model_copies_remove(exports_dir=model_exports_dir()) == []  # nothing left to remove


@pytest.mark.django_db(transaction=True)  # the background preparation reads the database on its own connection
def test_a_host_that_never_switches_removes_its_retired_copies_when_it_prepares_the_active_encoder(
    settings, tmp_path, monkeypatch, caplog
):
    from agentplatform.plumbing.database_backend import deadlines

    # From here on this test is the second host, which has never switched.
    active, _ = _stored_encoder(settings, tmp_path, status=AdaptationStatus.ACTIVE)
    here = tmp_path / "second-host"
    now = timezone.now()
    for weights, minutes_ago in ((b"retired long ago", 60), (b"previous", 10)):
        _encoder(
            _fitted_model(tmp_path / "first-host", weights),
            status=AdaptationStatus.RETIRED,
            status_changed_at=now - timedelta(minutes=minutes_ago),
        )
        _fitted_model(here, weights)  # restored here while it was active
    monkeypatch.setattr(deadlines, "_process_kind", deadlines.ProcessKind.SERVING)
    active_encoder_forget()  # as a process starting, or ENCODER_ACTIVE_CHECK_SECONDS after a switch elsewhere

    with caplog.at_level(logging.INFO, logger="groundtruth.adaptation.retired_files"):
        preparing = embedding_backend_prepare()
        assert preparing is not None
        preparing.join()

    assert embedding_backend().loaded is True
    assert sorted(path.name for path in here.iterdir()) == sorted(
        [PACKAGED_WEIGHTS_SHA256[:16], _sha16(b"previous")]  # the active one restored, the previous kept
    )
    assert caplog.record_tuples == [
        (
            "groundtruth.adaptation.retired_files",
            logging.INFO,
            f"Removed the model files {here / _sha16(b'retired long ago')} of a retired encoder",
        )
    ]
    assert AdaptedEncoderFile.objects.filter(encoder=active).count() == 99  # its stored parts stay
