"""An adapted encoder's model files, kept in PostgreSQL so that every host can embed with it
while the hosts share nothing but the database and Redis.

Stored: the fit records the encoder's row and every file of its model directory
(`AdaptedEncoderFile`, parts of PART_BYTES) in one transaction (`encoder_files_store`), so a row
without its files is never seen. The bytes are stored once per encoder, next to the row; a switch
deletes them with the files of the encoders it retires for good (switching.py).

Resolved: an encoder's model directory on this host is `encoder_model_directory`, the one
definition every reader goes through: `adapted_models_dir()/<fit directory>/<model name>`, the
two names the fitting host used (`AdaptedEncoder.directory` keeps that host's absolute path, for
the admin). An encoder recorded before its files were stored (migration 0012) is read where it
was fitted, as before.

Restored: when the resolved directory is missing, or a file in it is missing or of another size,
the files are written from the database into a temporary directory beside it, each checked
against its stored sha256 and size, and the directory renamed into place. The rename is atomic,
so a process (or another on the same host) sees the whole directory or none; of two processes
restoring at once, one rename wins and the other removes its copy. A missing part or a checksum
that does not match raises ModelFilesInvalid and leaves nothing behind. Serving processes restore
while they prepare the model in the background (embeddings.py), never on a request; the workers'
synchronous loads and the switch restore before they embed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef

from groundtruth.models import AdaptationStatus, AdaptedEncoder, AdaptedEncoderFile

# Small enough that storing and restoring hold one part at a time (the weights are about 90 MB),
# large enough that a model is about a hundred rows. Measured (benchmarks/adapted_files.py): 1 MB
# parts store and restore in the same time as 4 MB ones (about 2.2 s and 0.5 s), and the storing
# process peaks 130 MB lower (323 against 455 MB after three stores).
PART_BYTES = 1024 * 1024


class ModelFilesInvalid(Exception):
    """An encoder's stored files cannot be restored (a part missing, a checksum or size that does
    not match): retrying will not help, the stored bytes do not change."""


@dataclass(frozen=True)
class StoredFile:
    relative_path: str
    size: int
    sha256: str


def adapted_models_dir() -> Path:
    """Where this host keeps adapted encoders' model directories (fitted here or restored)."""
    return Path(settings.ENCODER_ADAPTATION_DIR or Path(settings.VAR_DIR) / "models" / "adapted")


def restore_directory(directory: str) -> Path:
    """Where this host keeps (restores) the files of the encoder recorded with `directory`."""
    # The fit keeps a model in <adapted dir>/<weights sha256[:16]>/<model name>: the last two
    # names of the fitting host's path, under this host's adapted dir.
    fitted = Path(directory)
    return adapted_models_dir() / fitted.parent.name / fitted.name


def _files_stored(encoder_id: int) -> bool:
    return AdaptedEncoderFile.objects.filter(encoder_id=encoder_id).exists()


def _directory_on_this_host(directory: str, *, files_stored: bool) -> Path:
    if not files_stored:
        return Path(directory)  # recorded before files were stored: where it was fitted
    return restore_directory(directory)


def _resolved(encoder: AdaptedEncoder) -> tuple[Path, bool]:
    stored = _files_stored(encoder.pk)
    return _directory_on_this_host(encoder.directory, files_stored=stored), stored


def encoder_model_directory(encoder: AdaptedEncoder) -> Path:
    """The encoder's model directory on this host, restored or not (`encoder_model_files_ensure`
    restores it): the one definition of where an encoder's files are read."""
    return _resolved(encoder)[0]


def active_encoder_model_directory() -> Path | None:
    """`encoder_model_directory` of the active encoder, or None when none is active, in one query
    (the row and whether its files are stored together): every process asks this every
    ENCODER_ACTIVE_CHECK_SECONDS (active.py)."""
    active = (
        AdaptedEncoder.objects.filter(status=AdaptationStatus.ACTIVE)
        .annotate(files_stored=Exists(AdaptedEncoderFile.objects.filter(encoder=OuterRef("pk"))))
        .values_list("directory", "files_stored")
        # At most one row is active (a unique constraint): no ordering needed.
        .order_by()[:1]
    )
    for directory, files_stored in active:
        return _directory_on_this_host(directory, files_stored=files_stored)
    return None


def _model_files(model_dir: Path) -> list[Path]:
    # os.walk, not Path.rglob: rglob does not enter linked directories (a model assembled from
    # links to another's files, as the tests do).
    return sorted(
        Path(root) / name
        for root, _, names in os.walk(model_dir, followlinks=True)
        for name in names
        if (Path(root) / name).is_file()
    )


def encoder_files_store(*, encoder: AdaptedEncoder, model_dir: Path) -> list[StoredFile]:
    """Stores every file of `model_dir` (symbolic links read through) as the encoder's files, in
    parts of PART_BYTES; returns what it stored. Runs in the caller's transaction, the one that
    writes the encoder's row."""
    stored = []
    with transaction.atomic():
        for path in _model_files(model_dir):
            # Hashed first, then read again part by part: every part row carries the whole file's
            # sha256, and no more than one part is held in memory.
            digest, size = hashlib.sha256(), 0
            with path.open("rb") as file:
                while block := file.read(PART_BYTES):
                    digest.update(block)
                    size += len(block)
            described = StoredFile(
                relative_path=path.relative_to(model_dir).as_posix(), size=size, sha256=digest.hexdigest()
            )
            with path.open("rb") as file:
                part = 0
                # An empty file is one empty part, so that every file has a row.
                while (content := file.read(PART_BYTES)) or part == 0:
                    AdaptedEncoderFile.objects.create(
                        encoder=encoder,
                        relative_path=described.relative_path,
                        part=part,
                        content=content,
                        file_sha256=described.sha256,
                        file_size=described.size,
                    )
                    part += 1
                    if not content:
                        break
            stored.append(described)
    return stored


def _stored_files(encoder_id: int) -> list[StoredFile]:
    # From every part, not the first alone: a file whose first part is missing is still listed,
    # and its restore says so.
    return [
        StoredFile(relative_path=relative_path, size=size, sha256=sha256)
        for relative_path, size, sha256 in AdaptedEncoderFile.objects.filter(encoder_id=encoder_id)
        .order_by("relative_path", "file_size", "file_sha256")
        .values_list("relative_path", "file_size", "file_sha256")
        .distinct()
    ]


def _complete(directory: Path, files: list[StoredFile]) -> bool:
    # Sizes, not checksums: a directory in place was checked when it was restored (or written by
    # the fit); hashing 90 MB at every load would cost each process seconds of CPU.
    try:
        return directory.is_dir() and all(
            (directory / file.relative_path).stat().st_size == file.size for file in files
        )
    except OSError:
        return False


def encoder_model_files_ensure(encoder: AdaptedEncoder) -> Path:
    """The encoder's model directory on this host, restored from the database first when it is
    missing or incomplete; raises ModelFilesInvalid (nothing left behind) when the stored files
    are damaged."""
    directory, stored = _resolved(encoder)
    if stored:
        _directory_ensure(encoder_id=encoder.pk, directory=directory)
    return directory


def model_directory_ensure(*, model_dir: Path) -> bool:
    """Restores `model_dir` when it is the directory of an encoder whose files are stored and it
    is missing or incomplete (the embedding backend calls this before it loads a model: it knows
    the directory, not the encoder). Any other directory is left alone, without a query when it
    is not under this host's ENCODER_ADAPTATION_DIR. Returns whether it is an adapted encoder's
    directory there."""
    if model_dir.parent.parent != adapted_models_dir():
        return False  # the packaged model, EMBEDDING_MODEL, an encoder fitted elsewhere without stored files
    stored = AdaptedEncoder.objects.filter(Exists(AdaptedEncoderFile.objects.filter(encoder=OuterRef("pk"))))
    for encoder_id, directory in stored.order_by("-pk").values_list("pk", "directory"):
        if restore_directory(directory) == model_dir:
            _directory_ensure(encoder_id=encoder_id, directory=model_dir)
            break
    return True


def _directory_ensure(*, encoder_id: int, directory: Path) -> None:
    files = _stored_files(encoder_id)
    if _complete(directory, files):
        return
    parent_made = not directory.parent.is_dir()
    directory.parent.mkdir(parents=True, exist_ok=True)
    # Beside the target (the same file system, so the rename is atomic), hidden, and inside the
    # directory a switch removes with the model: a restore cut short leaves nothing elsewhere.
    restoring = Path(tempfile.mkdtemp(dir=directory.parent, prefix=f".{directory.name}-restoring-"))
    try:
        for file in files:
            _file_restore(encoder_id=encoder_id, file=file, path=restoring / file.relative_path, root=restoring)
        _rename_into_place(restoring, directory, files)
    except ModelFilesInvalid as exc:
        shutil.rmtree(restoring, ignore_errors=True)
        if parent_made:
            with contextlib.suppress(OSError):  # not empty: another process restored it meanwhile
                directory.parent.rmdir()
        raise ModelFilesInvalid(f"the stored files of adapted encoder #{encoder_id} are damaged: {exc}") from None
    finally:
        shutil.rmtree(restoring, ignore_errors=True)  # gone already once renamed into place


def _file_restore(*, encoder_id: int, file: StoredFile, path: Path, root: Path) -> None:
    if not path.resolve().is_relative_to(root.resolve()):
        raise ModelFilesInvalid(f"{file.relative_path} is not a path inside the model directory")
    path.parent.mkdir(parents=True, exist_ok=True)
    parts = list(
        AdaptedEncoderFile.objects.filter(encoder_id=encoder_id, relative_path=file.relative_path)
        .order_by("part")
        .values_list("pk", "part")
    )
    digest, size = hashlib.sha256(), 0
    with path.open("wb") as out:
        for expected, (pk, part) in enumerate(parts):
            if part != expected:
                raise ModelFilesInvalid(f"part {expected} of {file.relative_path} is missing")
            # One part's bytes at a time, each its own small query.
            content = AdaptedEncoderFile.objects.filter(pk=pk).values_list("content", flat=True).get()
            digest.update(content)
            size += len(content)
            out.write(content)
    if size != file.size:
        raise ModelFilesInvalid(f"{file.relative_path} has {size} bytes in its stored parts, not {file.size}")
    if digest.hexdigest() != file.sha256:
        raise ModelFilesInvalid(f"{file.relative_path} does not match its stored sha256")


def _rename_into_place(restoring: Path, directory: Path, files: list[StoredFile]) -> None:
    try:
        os.rename(restoring, directory)  # atomic; refused when a non-empty directory is there
        return
    except OSError:
        if _complete(directory, files):
            return  # another process restored it meanwhile: ours is removed by the caller
    # An incomplete directory (a copy cut short by hand): moved aside, ours renamed in its place.
    aside = directory.parent / f".{directory.name}-incomplete-{uuid.uuid4().hex}"
    try:
        os.rename(directory, aside)
    except FileNotFoundError:
        pass  # moved aside by another process restoring it
    try:
        os.rename(restoring, directory)
    except OSError:
        if not _complete(directory, files):
            raise
    finally:
        shutil.rmtree(aside, ignore_errors=True)
