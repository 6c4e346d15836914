"""Switching the index to an adapted encoder without a moment of mixed or missing vectors.

1. Staging (`encoder_stage`): every chunk is embedded with the new model into
   `StagedVector`, a batch per transaction, while search keeps reading the current vectors.
   Resumable: a chunk staged already (same content hash) is not embedded again, so a worker that
   dies mid-way loses at most one batch.
2. The switch (`encoder_switch`), one transaction: every repository's index lock (ordered by id,
   the ingests' lock: no ingest writes meanwhile, and an ingest waiting for it re-reads the active
   encoder once it holds it), the chunks written since staging embedded, every chunk's vectors
   replaced by its staged ones, the new space's HNSW indexes built, and the encoder marked
   ACTIVE (the previous one RETIRED). Readers see the old index or the new one, never a mix.
   Processes pick the new query model up within ENCODER_ACTIVE_CHECK_SECONDS. After it, the
   model files and this host's ONNX exports of the encoders retired before the previous one are
   removed.

A failure marks the encoder FAILED with its error; the active encoder and the index stay.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import connection, transaction
from django.utils import timezone

from groundtruth.adaptation.active import active_encoder_forget
from groundtruth.adaptation.model_files import encoder_model_directory, encoder_model_files_ensure
from groundtruth.adaptation.retired_files import model_copies_remove, retired_encoders
from groundtruth.embeddings import local_embedding_backend, model_exports_dir, packaged_model_path
from groundtruth.ingest.index_lock import repository_index_lock
from groundtruth.models import AdaptationStatus, AdaptedEncoder, AdaptedEncoderFile, Chunk, Repository, StagedVector
from groundtruth.services import chunk_vectors_embed
from groundtruth.vector_index import vector_index_ensure, vector_indexes_drop_other

logger = logging.getLogger(__name__)

STAGE_BATCH_SIZE = 256


class SwitchFailed(Exception):
    """The switch found the index in a state it cannot switch (nothing was changed)."""


def _unstaged_ids(encoder: AdaptedEncoder) -> list[int]:
    """The chunks without staged vectors of `encoder` for their current text."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.id FROM groundtruth_chunk c LEFT JOIN groundtruth_staged_vector s"
            " ON s.chunk_id = c.id AND s.encoder_id = %s AND s.content_hash = c.content_hash"
            " WHERE s.chunk_id IS NULL ORDER BY c.id",
            [encoder.pk],
        )
        return [row[0] for row in cursor.fetchall()]


def _stage(encoder: AdaptedEncoder, ids: list[int], *, each_batch: Callable[[int], None]) -> int:
    # A worker may restore the model's files before it embeds (model_files.py): no request waits.
    backend = local_embedding_backend(model_path=str(encoder_model_files_ensure(encoder)))
    staged = 0
    for start in range(0, len(ids), STAGE_BATCH_SIZE):
        chunks = list(Chunk.objects.filter(id__in=ids[start : start + STAGE_BATCH_SIZE]).select_related("repository"))
        rows = []
        for repository_name in sorted({chunk.repository.name for chunk in chunks}):
            of_repository = [chunk for chunk in chunks if chunk.repository.name == repository_name]
            vectors = chunk_vectors_embed(backend=backend, chunks=of_repository, repository_name=repository_name)
            rows += [
                StagedVector(
                    chunk=chunk,
                    encoder=encoder,
                    content_hash=chunk.content_hash,
                    embedding=vector,
                    heading_embedding=title_vector,
                )
                for chunk, (vector, title_vector) in zip(of_repository, vectors, strict=True)
            ]
        with transaction.atomic():
            StagedVector.objects.bulk_create(
                rows,
                update_conflicts=True,
                unique_fields=["chunk"],
                update_fields=["encoder", "content_hash", "embedding", "heading_embedding"],
            )
        staged += len(rows)
        each_batch(staged)
    return staged


def encoder_stage(*, encoder: AdaptedEncoder, progress: Callable[[int, int], None] | None = None) -> int:
    """Embeds every chunk not staged yet with `encoder`'s model; returns how many it embedded."""
    ids = _unstaged_ids(encoder)
    already = Chunk.objects.count() - len(ids)
    AdaptedEncoder.objects.filter(pk=encoder.pk).update(
        status=AdaptationStatus.STAGING, status_changed_at=timezone.now(), staged_count=already, error=""
    )

    def each_batch(staged: int) -> None:
        AdaptedEncoder.objects.filter(pk=encoder.pk).update(staged_count=already + staged)
        if progress:
            progress(already + staged, already + len(ids))

    return _stage(encoder, ids, each_batch=each_batch)


def encoder_switch(*, encoder: AdaptedEncoder) -> int:
    """Moves every chunk to `encoder`'s staged vectors and makes it the active encoder, in one
    transaction; returns the number of chunks switched."""
    backend = local_embedding_backend(model_path=str(encoder_model_files_ensure(encoder)))
    dimension = backend.dimension
    with transaction.atomic():
        for repository_id in Repository.objects.order_by("pk").values_list("pk", flat=True):
            repository_index_lock(repository_id=repository_id)
        # Written by ingests since the staging (a few at most): embedded here, under the locks.
        _stage(encoder, _unstaged_ids(encoder), each_batch=lambda staged: None)
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE groundtruth_chunk c SET embedding = s.embedding, heading_embedding = s.heading_embedding,"
                " embedding_model = %s FROM groundtruth_staged_vector s"
                " WHERE s.chunk_id = c.id AND s.encoder_id = %s AND s.content_hash = c.content_hash",
                [encoder.model_name, encoder.pk],
            )
            switched = cursor.rowcount
            cursor.execute("SELECT count(*) FROM groundtruth_chunk WHERE embedding_model <> %s", [encoder.model_name])
            left = cursor.fetchone()[0]
        if left:
            raise SwitchFailed(f"{left} chunks have no vectors of {encoder.model_name}; nothing was switched")
        # Built after the vectors are in place: one bulk build of the graph is faster than
        # inserting every row into an empty one (pgvector's advice).
        indexes = vector_index_ensure(model_name=encoder.model_name, dimension=dimension)
        now = timezone.now()
        AdaptedEncoder.objects.filter(status=AdaptationStatus.ACTIVE).update(
            status=AdaptationStatus.RETIRED, status_changed_at=now
        )
        AdaptedEncoder.objects.filter(pk=encoder.pk).update(
            status=AdaptationStatus.ACTIVE, status_changed_at=now, staged_count=switched, error=""
        )
        StagedVector.objects.all().delete()
    dropped = vector_indexes_drop_other(keep=indexes)
    active_encoder_forget()
    _retired_models_remove()
    logger.info(
        "Switched %d chunks to the adapted encoder %s (dropped indexes: %s)",
        switched,
        encoder.model_name,
        ", ".join(dropped) or "none",
    )
    return switched


def _retired_models_remove() -> None:
    """The model files of the encoders no host needs any more (retired_files.py: retired before the
    most recently retired one), on this host and in the database, and this host's ONNX exports of
    them (other hosts remove their own copies when they next load the active model). The packaged
    model's files and export are never removed, nor those of an encoder not retired."""
    no_longer_needed, still_needed = retired_encoders()
    # Compared as this host's directories (model_files.py): two encoders of the same weights
    # fitted into the same directory share it.
    kept = {*(encoder_model_directory(encoder) for encoder in still_needed), packaged_model_path()}
    removed_encoders = [encoder for encoder in no_longer_needed if encoder_model_directory(encoder) not in kept]
    # Resolved before the stored files go: an encoder without them is read where it was fitted.
    removed = list(dict.fromkeys(encoder_model_directory(encoder) for encoder in removed_encoders))
    # The rows before the files: once they are gone no host restores the files again.
    AdaptedEncoderFile.objects.filter(encoder__in=removed_encoders).delete()
    model_copies_remove(removed=removed, kept=kept, exports_dir=model_exports_dir())


def encoder_activate(*, encoder: AdaptedEncoder, progress: Callable[[int, int], None] | None = None) -> int:
    """Stages `encoder`'s vectors, then switches the index to it; on a failure the encoder is
    marked FAILED (with why), its staged vectors are removed and the index stays as it was."""
    try:
        encoder_stage(encoder=encoder, progress=progress)
        return encoder_switch(encoder=encoder)
    except Exception as exc:
        AdaptedEncoder.objects.filter(pk=encoder.pk).update(
            status=AdaptationStatus.FAILED, status_changed_at=timezone.now(), error=f"{type(exc).__name__}: {exc}"
        )
        StagedVector.objects.filter(encoder=encoder).delete()
        raise
