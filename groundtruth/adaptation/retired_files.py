"""The model files no host needs any more: those of the encoders retired before the most recently
retired one. Kept: every encoder not retired (active, staging, fitted, failed: each can still be
switched to), the most recently retired (a switch back needs it), and the packaged model.

Removed in two places, by one definition of which (`retired_encoders`):
- the switch (switching.py), on the host that switches: the directories, this host's ONNX exports
  of them, and their stored files in PostgreSQL, after which no host restores them again;
- every process that loads an adapted encoder's model (embeddings.py, where it restores the
  files: a serving process's background preparation, a worker's load), on its own host:
  `retired_model_copies_remove` removes what this host restored or fitted of them under its own
  ENCODER_ADAPTATION_DIR, and its ONNX exports of them, so that a host that never switches does
  not keep a copy (92 MB, and as much again of export) per switch.

The second never reaches outside this host's ENCODER_ADAPTATION_DIR and exports directory, and
removes nothing while an adaptation holds its lock: a fit writes its model under
ENCODER_ADAPTATION_DIR before its row exists, in the directory named by its weights, which may be
a retired encoder's (the same weights fitted again).
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from groundtruth.adaptation.adaptation_lock import encoder_adaptation_lock_holder
from groundtruth.adaptation.model_files import adapted_models_dir, restore_directory
from groundtruth.inference.exported_model import ExportFailed, export_directory
from groundtruth.models import AdaptationStatus, AdaptedEncoder

logger = logging.getLogger(__name__)


def retired_encoders() -> tuple[list[AdaptedEncoder], list[AdaptedEncoder]]:
    """(the encoders whose files are no longer needed, the encoders whose files stay)."""
    retired = list(AdaptedEncoder.objects.filter(status=AdaptationStatus.RETIRED).order_by("-status_changed_at"))
    not_retired = list(AdaptedEncoder.objects.exclude(status=AdaptationStatus.RETIRED).only("pk", "directory"))
    return retired[1:], [*not_retired, *retired[:1]]


def _export_of(model_dir: Path, exports_dir: Path) -> Path | None:
    """This host's ONNX export directory of the model in `model_dir` (exported or not), or None
    when its weights are gone (removed earlier, or never on this host)."""
    try:
        return export_directory(model_dir=model_dir, cache_dir=exports_dir)
    except ExportFailed:
        return None


def model_copies_remove(*, removed: list[Path], kept: set[Path], exports_dir: Path) -> list[Path]:
    """Removes each model directory of `removed` with the directory named by its weights that holds
    it, and this host's ONNX export of it; never one of `kept`, a directory beside one of them, or
    an export a kept model shares (the same name and weights fitted again elsewhere). Returns the
    model directories it removed."""
    kept_parents = {directory.parent for directory in kept}
    removed = [directory for directory in removed if directory not in kept and directory.parent not in kept_parents]
    if not removed:
        return []
    kept_exports = {_export_of(directory, exports_dir) for directory in kept}
    for directory in removed:
        # Derived before the model files go: the name needs the weights' sha256.
        export = _export_of(directory, exports_dir)
        if export is not None and export not in kept_exports and export.is_dir():
            shutil.rmtree(export, ignore_errors=True)
            logger.info("Removed the ONNX export %s of the retired encoder in %s", export, directory)
        shutil.rmtree(directory.parent, ignore_errors=True)
        if not directory.exists():
            logger.info("Removed the model files %s of a retired encoder", directory.parent)
    return [directory for directory in removed if not directory.exists()]


def _under_adapted_models_dir(directory: Path) -> bool:
    # <ENCODER_ADAPTATION_DIR>/<weights sha256[:16]>/<model name>, nothing else: a recorded path
    # whose last names are "" or ".." must not lead the removal out of it.
    root = adapted_models_dir().resolve()
    return (
        directory.parent.name not in {"", ".", ".."}
        and directory.name not in {"", ".", ".."}
        and directory.resolve().parent.parent == root
    )


def retired_model_copies_remove(*, exports_dir: Path) -> list[Path]:
    """Removes this host's copies of the model directories no host needs any more (restored from
    the database or fitted here, under this host's ENCODER_ADAPTATION_DIR) and its ONNX exports of
    them (under `exports_dir`); returns the model directories removed (each logged). Nothing while
    an adaptation holds its lock."""
    holder = encoder_adaptation_lock_holder()
    if holder is not None:
        logger.debug("Retired encoders' copies not removed while an adaptation runs (held by %s)", holder)
        return []
    no_longer_needed, still_needed = retired_encoders()
    # Both places a kept encoder's files may be on this host: where it would be restored, and
    # where it was recorded (an encoder fitted before its files were stored is read there).
    kept = {
        path for encoder in still_needed for path in (restore_directory(encoder.directory), Path(encoder.directory))
    }
    candidates = dict.fromkeys(restore_directory(encoder.directory) for encoder in no_longer_needed)
    on_this_host = [
        directory for directory in candidates if directory.is_dir() and _under_adapted_models_dir(directory)
    ]
    return model_copies_remove(removed=on_this_host, kept=kept, exports_dir=exports_dir)
