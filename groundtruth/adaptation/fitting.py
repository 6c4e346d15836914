"""Fitting an adapted encoder: mine pairs from the indexed documentation, train in a child
process, keep the model under VAR_DIR/models/adapted/ and record it (an AdaptedEncoder row,
status FITTED, with its model's files in the database for the other hosts: model_files.py).
Staging its vectors and switching the index to it is `switching.py`.

The training runs in a process of its own (`python -m groundtruth.adaptation.training`): torch
and the training's memory never enter the worker, a hung or over-long fit is killed at
ENCODER_ADAPTATION_TIMEOUT_SECONDS, and whatever fails leaves the active encoder as it was.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from django.conf import settings
from django.db import transaction

from agentplatform.plumbing.errors import InvalidInput
from groundtruth.adaptation.backoff import adaptation_held_back
from groundtruth.adaptation.model_files import adapted_models_dir, encoder_files_store
from groundtruth.adaptation.pairs import adaptation_pairs_collect
from groundtruth.adaptation.training import TrainingOptions
from groundtruth.embeddings import LocalSentenceTransformer, embedding_backend, local_embedding_backend
from groundtruth.inference.exported_model import model_weights_sha256
from groundtruth.ingest.index_text import INDEX_VERSION
from groundtruth.ingest.runs import ingest_chunks_changed_since
from groundtruth.models import AdaptationStatus, AdaptedEncoder, Repository

logger = logging.getLogger(__name__)

# The model directory's name, and so the first half of its vector space's name (name@weights).
ADAPTED_MODEL_NAME = "minilm-adapted"
# The trainer's own exit status for input it cannot train on (it prints why on stderr).
TRAINER_BAD_INPUT = 2


@dataclass(frozen=True)
class EncoderAdaptationOptions:
    # The training's own defaults are the trainer's (training.TrainingOptions: one definition).
    # At most max_queries mined queries are trained on (a seeded sample of every repository's):
    # the fit's time grows with them, not with the corpus (docs/ground-truth-adaptation.md).
    max_queries: int = TrainingOptions.max_queries
    # A smaller corpus teaches the model its few titles and little else: the current encoder stays.
    min_training_queries: int = 200
    seed: int = TrainingOptions.seed
    epochs: int = TrainingOptions.epochs
    batch_size: int = TrainingOptions.batch_size
    mini_batch_size: int = TrainingOptions.mini_batch_size
    passage_tokens: int = TrainingOptions.passage_tokens
    negatives: int = 3
    learning_rate: float = TrainingOptions.learning_rate


class AdaptationFailed(InvalidInput):
    """The fit could not produce a model; the active encoder stays."""


def _trainer_command(*, pairs: Path, out: Path, base_model: str, options: EncoderAdaptationOptions) -> list[str]:
    return [
        sys.executable,
        "-m",
        "groundtruth.adaptation.training",
        f"--pairs={pairs}",
        f"--out={out}",
        f"--base-model={base_model}",
        f"--seed={options.seed}",
        f"--max-queries={options.max_queries}",
        f"--epochs={options.epochs}",
        f"--batch-size={options.batch_size}",
        f"--mini-batch-size={options.mini_batch_size}",
        f"--passage-tokens={options.passage_tokens}",
        f"--learning-rate={options.learning_rate}",
        f"--threads={settings.EMBEDDING_WORKER_THREADS}",
    ]


def _train(command: list[str]) -> None:
    """Runs the trainer, its output lines logged as they come (the fit's progress in the worker's
    log), and stops it past ENCODER_ADAPTATION_TIMEOUT_SECONDS; raises AdaptationFailed."""
    timeout = settings.ENCODER_ADAPTATION_TIMEOUT_SECONDS
    last_lines: deque[str] = deque(maxlen=1)

    def relay(stream: IO[str]) -> None:
        for line in stream:
            if line.strip():
                last_lines.append(line.strip())
                logger.info("Encoder training: %s", line.rstrip())

    with subprocess.Popen(
        command, cwd=settings.BASE_DIR, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as child:
        assert child.stdout is not None
        reader = threading.Thread(target=relay, args=(child.stdout,), name="encoder-training-output", daemon=True)
        reader.start()
        try:
            returncode = child.wait(timeout=timeout or None)
        except subprocess.TimeoutExpired as exc:
            child.kill()
            child.wait()
            raise AdaptationFailed(
                f"The encoder's training took longer than ENCODER_ADAPTATION_TIMEOUT_SECONDS ({timeout:g} s) and "
                "was stopped; the current encoder stays.",
                code="adaptation_timeout",
            ) from exc
        reader.join(timeout=5)
    if returncode != 0:
        raise AdaptationFailed(
            f"The encoder's training failed (exit status {returncode}): "
            f"{last_lines[-1] if last_lines else '(no output)'}; the current encoder stays.",
            code="adaptation_training_failed",
        )


def encoder_adapt(
    *, repository_names: list[str] | None = None, options: EncoderAdaptationOptions | None = None
) -> AdaptedEncoder:
    """Fits an adapted encoder on the enabled (or the named) repositories and records it as
    FITTED; raises AdaptationFailed (the reason) and changes nothing when it cannot."""
    options = options or EncoderAdaptationOptions(max_queries=settings.ENCODER_ADAPTATION_MAX_QUERIES)
    backend = embedding_backend(fresh=True)
    if not isinstance(backend, LocalSentenceTransformer):
        raise AdaptationFailed(
            f"An adapted encoder is fine-tuned from the local model, not {backend.describe()}.",
            code="adaptation_model_unavailable",
        )
    repositories = list(Repository.objects.filter(enabled=True, chunk_count__gt=0).order_by("name"))
    if repository_names is not None:
        repositories = [repository for repository in repositories if repository.name in repository_names]
    started = time.monotonic()
    records = adaptation_pairs_collect(repositories=repositories, seed=options.seed, negatives=options.negatives)
    training = [record for record in records if not record["held_out"]]
    if len(training) < options.min_training_queries or len(training) == len(records):
        raise AdaptationFailed(
            f"Too little documentation to adapt the encoder to: {len(records)} sections with a title and a text "
            f"were found, {len(training)} to train on (at least {options.min_training_queries} needed); "
            "the current encoder stays in use.",
            code="adaptation_corpus_too_small",
        )
    models_dir = adapted_models_dir()
    models_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=models_dir, prefix=".fit-") as work:
        pairs, out = Path(work) / "pairs.json", Path(work) / ADAPTED_MODEL_NAME
        pairs.write_text(json.dumps(records))
        command = _trainer_command(pairs=pairs, out=out, base_model=backend.model_path, options=options)
        _train(command)
        summary = json.loads((out / "adaptation.json").read_text())
        sha = model_weights_sha256(out)
        target = models_dir / sha[:16] / ADAPTED_MODEL_NAME
        if not target.is_dir():  # the same weights fitted before: keep the first copy
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(out), str(target))
    # The row and its model's files in one transaction: no host ever reads a row whose files it
    # cannot restore (model_files.py).
    with transaction.atomic():
        row = AdaptedEncoder.objects.create(
            index_version=INDEX_VERSION,
            base_model=backend.model_name,
            model_name=local_embedding_backend(model_path=str(target)).model_name,  # name@weights
            directory=str(target),
            repositories=[repository.name for repository in repositories],
            chunk_count=sum(repository.chunk_count for repository in repositories),
            mined_query_count=len(records),
            query_count=int(summary["trained_queries"]),
            held_out_query_count=int(summary["held_out_measured"]),
            held_out_accuracy_before=round(float(summary["held_out_accuracy_before"]), 4),
            held_out_accuracy=round(float(summary["held_out_accuracy_after"]), 4),
            seed=options.seed,
            fit_seconds=round(time.monotonic() - started, 1),
            peak_rss_mb=round(float(summary["peak_rss_mb"]), 1),
        )
        encoder_files_store(encoder=row, model_dir=target)
    logger.info(
        "Adapted encoder %s fitted: %d queries trained on, %.0f s, peak RSS %.0f MB, held-out accuracy %.3f -> %.3f",
        row.model_name,
        row.query_count,
        row.fit_seconds,
        row.peak_rss_mb,
        row.held_out_accuracy_before,
        row.held_out_accuracy,
    )
    return row


def adaptation_gain_shortfall(encoder: AdaptedEncoder) -> str | None:
    """Why an automatic adaptation should not switch to `encoder`, or None. Its held-out mined
    queries (kept out of its training) are the only measure of it that reads no labelled
    question: it must beat the model it was fitted from (the one serving then) on them by
    ENCODER_ADAPTATION_MIN_GAIN, or the index stays on the model that serves."""
    gain = round(encoder.held_out_accuracy - encoder.held_out_accuracy_before, 4)  # both stored to 4 places
    if gain >= settings.ENCODER_ADAPTATION_MIN_GAIN:
        return None
    return (
        f"its held-out mined accuracy {encoder.held_out_accuracy_before:.3f} -> {encoder.held_out_accuracy:.3f} "
        f"({encoder.held_out_query_count} queries) gains {gain:+.3f}, less than ENCODER_ADAPTATION_MIN_GAIN "
        f"({settings.ENCODER_ADAPTATION_MIN_GAIN:g})"
    )


def encoder_adaptation_due() -> bool:
    """Whether an adaptation is due: adaptation is on, and a staging was cut short, or none was
    fitted on this index version yet, or the chunks added, updated and removed since
    the newest fit reach ENCODER_ADAPTATION_REFIT_CHANGED_SHARE of the chunks it was fitted on;
    and no recent failure holds it back (backoff.py)."""
    if not settings.ENCODER_ADAPTATION_ENABLED or settings.EMBEDDING_BACKEND != "local" or settings.EMBEDDING_MODEL:
        return False
    if AdaptedEncoder.objects.filter(status=AdaptationStatus.STAGING).exists():
        return True  # cut short (or running: the task's lock keeps it to one): resumed
    if adaptation_held_back():
        return False
    newest = AdaptedEncoder.objects.exclude(status=AdaptationStatus.FAILED).order_by("-fitted_at", "-id").first()
    if newest is None or newest.index_version != INDEX_VERSION:
        return Repository.objects.filter(enabled=True, chunk_count__gt=0).exists()
    changed = ingest_chunks_changed_since(moment=newest.fitted_at)
    return changed >= settings.ENCODER_ADAPTATION_REFIT_CHANGED_SHARE * max(1, newest.chunk_count)
