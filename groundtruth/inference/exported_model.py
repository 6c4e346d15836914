"""The ONNX export of a sentence-transformers model directory, made once per host and reused.

An export lives in `<cache_dir>/<model dir name>-<weights sha256[:16]>-export<EXPORTER_VERSION>-torch<version>/`
with the graph, its page-aligned weights file and `manifest.json` (the sha256 of both files). A
change of the weights or of the exporter (this module's EXPORTER_VERSION, torch's version) names
another directory, so it is exported afresh; an export whose files do not match their manifest
(truncated, edited, half-written) is exported again. The export runs in a child process (torch is
never imported by the caller) under a file lock, so that processes starting together export once
and the others wait for it, each wait and the export itself bounded by `timeout`.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from groundtruth.inference.onnx_export import GRAPH_FILE, WEIGHTS_FILE

# Bump when onnx_export.py changes what it writes: every host then exports again.
EXPORTER_VERSION = 2  # 2: the graph also returns the token vectors (`tokens`)
MANIFEST_FILE = "manifest.json"
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


class ExportFailed(Exception):
    """The model could not be exported (the message says why, with the exporter's last output)."""


@dataclass(frozen=True)
class ExportedModel:
    directory: Path
    weights_sha256: str

    @property
    def graph_path(self) -> Path:
        return self.directory / GRAPH_FILE


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


@lru_cache(maxsize=8)
def _weights_sha256(path: str, size: int, modified_ns: int) -> str:
    return _file_sha256(Path(path))


def model_weights_sha256(model_dir: Path) -> str:
    """The sha256 of the model's weights file: the identity of what the model computes (read
    once per process while the file's size and mtime stay the same)."""
    for name in _WEIGHT_FILES:
        path = model_dir / name
        if path.is_file():
            stat = path.stat()
            return _weights_sha256(str(path), stat.st_size, stat.st_mtime_ns)
    raise ExportFailed(f"no weights file ({' or '.join(_WEIGHT_FILES)}) in {model_dir}")


def _exporter_id() -> str:
    try:
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch_version = "none"
    return f"export{EXPORTER_VERSION}-torch{torch_version}"


def export_directory(*, model_dir: Path, cache_dir: Path) -> Path:
    """Where the export of `model_dir` is kept under `cache_dir`, whether it exists or not: the
    one definition of its name, shared by the export and by whatever removes it. Raises
    ExportFailed when the model has no weights file (its name cannot be known then)."""
    return cache_dir / f"{model_dir.name}-{model_weights_sha256(model_dir)[:16]}-{_exporter_id()}"


def export_problem(directory: Path) -> str | None:
    """Why the export in `directory` cannot be used, or None when its files match its manifest."""
    try:
        manifest = json.loads((directory / MANIFEST_FILE).read_text())
        files: dict[str, str] = manifest["files"]
    except FileNotFoundError:
        return "not exported yet"
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"unreadable manifest ({type(exc).__name__})"
    for name in (GRAPH_FILE, WEIGHTS_FILE):
        path = directory / name
        if not path.is_file():
            return f"{name} is missing"
        if files.get(name) != _file_sha256(path):
            return f"{name} does not match its manifest"
    return None


def exported_model_found(*, model_dir: Path, cache_dir: Path) -> ExportedModel | None:
    """The usable export of `model_dir`, or None when it is missing or corrupt (nothing is
    exported). Raises ExportFailed when the model has no weights file."""
    directory = export_directory(model_dir=model_dir, cache_dir=cache_dir)
    if export_problem(directory) is not None:
        return None
    return ExportedModel(directory=directory, weights_sha256=model_weights_sha256(model_dir))


def exported_model_ensure(
    *, model_dir: Path, cache_dir: Path, timeout: float, progress: Callable[[str], None] | None = None
) -> ExportedModel:
    """The usable export of `model_dir`, exporting it first when it is missing or corrupt.
    Raises ExportFailed (never waits longer than about `timeout` seconds for the lock, and kills an
    export that runs longer)."""
    say = progress or (lambda message: None)
    if (found := exported_model_found(model_dir=model_dir, cache_dir=cache_dir)) is not None:
        return found
    directory = export_directory(model_dir=model_dir, cache_dir=cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    with _export_lock(cache_dir / ".export.lock", timeout=timeout, say=say):
        problem = export_problem(directory)  # another process may have exported it while we waited
        if problem is not None:
            say(f"Exporting {model_dir.name} to ONNX ({problem}) into {directory} ...")
            started = time.monotonic()
            _export_in_child(model_dir=model_dir, directory=directory, timeout=timeout)
            say(f"Exported {model_dir.name} in {time.monotonic() - started:.1f} s.")
    return ExportedModel(directory=directory, weights_sha256=model_weights_sha256(model_dir))


@contextlib.contextmanager
def _export_lock(path: Path, *, timeout: float, say: Callable[[str], None]) -> Iterator[None]:
    """An exclusive flock on `path`, waited for at most `timeout` seconds (released by the kernel
    if its holder dies, so a killed exporter never blocks the next one)."""
    with path.open("a") as stream:
        deadline = time.monotonic() + timeout
        announced = False
        while True:
            try:
                fcntl.flock(stream, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ExportFailed(f"another process has been exporting the model for over {timeout:g} s") from None
                if not announced:
                    say("Another process is exporting the model; waiting for it ...")
                    announced = True
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(stream, fcntl.LOCK_UN)


def _export_in_child(*, model_dir: Path, directory: Path, timeout: float) -> None:
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}-", dir=directory.parent))
    try:
        environment = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        try:
            finished = subprocess.run(
                [sys.executable, "-m", "groundtruth.inference.onnx_export", str(model_dir), str(staging)],
                capture_output=True,
                text=True,
                timeout=timeout,
                env=environment,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise ExportFailed(f"the ONNX export of {model_dir.name} took over {timeout:g} s and was stopped") from exc
        if finished.returncode != 0:
            last_lines = " | ".join(finished.stderr.strip().splitlines()[-3:])
            raise ExportFailed(f"the ONNX export of {model_dir.name} failed ({finished.returncode}): {last_lines}")
        manifest = {
            "model": model_dir.name,
            "exporter": _exporter_id(),
            "files": {name: _file_sha256(staging / name) for name in (GRAPH_FILE, WEIGHTS_FILE)},
        }
        (staging / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2))
        if directory.exists():
            shutil.rmtree(directory)
        staging.rename(directory)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
