"""An adapted bi-encoder (issue 23): the packaged MiniLM fine-tuned on pairs mined from the indexed
documentation itself, no labelled question used. The experiment that chose it, and (`ship`) the
service's own path (groundtruth/adaptation/, docs/ground-truth-adaptation.md) on the development set.

    # 1. fit (reads the benchmark database that `retrieval.py` left; writes a model directory)
    nice -n 5 .venv/bin/python benchmarks/adapted_encoder.py fit --out var/adapt/model-seed0 \\
        --pairs var/adapt/pairs-seed0.json --measure-packaged
    # 2. a copy of the benchmark database, every chunk re-embedded with the adapted model
    nice -n 5 .venv/bin/python benchmarks/adapted_encoder.py reembed --model var/adapt/model-seed0
    # 3. the retrieval benchmark against that copy, the adapted model embedding the questions
    EMBEDDING_MODEL=$PWD/var/adapt/model-seed0 nice -n 5 .venv/bin/python benchmarks/retrieval.py \\
        --eval-set ../shared/eval-dev --no-ferrite --database gt_adapt --features-out var/adapt/features-adapted.jsonl
    # 4. per-format rankings and AUC answerable vs unanswerable of the evidence features, both models
    # (features-packaged.jsonl: the same retrieval.py run on gt_bench_retrieval, packaged model)
    .venv/bin/python benchmarks/adapted_encoder.py features var/adapt/features-packaged.jsonl \\
        var/adapt/features-adapted.jsonl
    # 5. today's abstention model with the adapted evidence as extra features, left-one-repository-out
    .venv/bin/python benchmarks/adapted_encoder.py abstention var/adapt/features-packaged.jsonl \\
        var/adapt/features-adapted.jsonl
    # 6. the gain on questions whose answer's title the fit trained on, and on the others
    .venv/bin/python benchmarks/adapted_encoder.py exposure --pairs var/adapt/pairs-seed0.json \\
        --eval-set ../shared/eval-dev var/adapt/features-packaged.jsonl var/adapt/features-adapted.jsonl
    # the shipped path (manage.py encoder_adapt's fit, staging and switch) on a copy, then every
    # question through the active encoder (no EMBEDDING_MODEL: the service reads it from the row)
    nice -n 5 .venv/bin/python benchmarks/adapted_encoder.py ship --target gt_shipped
    nice -n 5 .venv/bin/python benchmarks/retrieval.py --eval-set ../shared/eval-dev --no-ferrite --database gt_shipped
    # questions naming a concept their passage lacks, taught to score lower (measured, not shipped:
    # docs/ground-truth-judge.md, "Foreign concepts in the adaptation"); the same pairs without them
    # (one mined negative each) are the baseline, fitted and measured alike
    nice -n 5 .venv/bin/python benchmarks/adapted_encoder.py fit --pairs var/adapt/pairs-n1.json --negatives 1 \
        --out var/adapt/model-plain
    .venv/bin/python benchmarks/adapted_encoder.py foreign-pairs --pairs var/adapt/pairs-n1.json \
        --out var/adapt/pairs-foreign.json
    nice -n 5 .venv/bin/python benchmarks/adapted_encoder.py fit --pairs var/adapt/pairs-foreign.json \
        --out var/adapt/model-foreign
    # then, for each model: reembed --model var/adapt/model-X --target gt_adapt_X, and
    # EMBEDDING_MODEL=$PWD/var/adapt/model-X retrieval.py ... --database gt_adapt_X --refusal-evidence
    # per-corpus refusal calibrations with the adapted evidence (refusal_calibration.py)
    EMBEDDING_MODEL=$PWD/var/adapt/model-seed0 nice -n 5 .venv/bin/python benchmarks/retrieval.py \\
        --eval-set ../shared/eval-dev --no-ferrite --database gt_adapt --refusal-calibration

Pairs (`groundtruth/judge/pair_mining.pairs_mine`, every section of every repository, seeded):
the query is the section's heading path, or (seeded, one form per section and epoch) a question
made of its title by a template, since users ask questions, not titles; the positive is the
section's first chunk as the index embeds it (`<label>: <trail>`, then the text) but with the
section's own title taken out of the trail and the heading lines out of the text (left in, the
model would learn to match a title against itself); the negatives are the mined hard negatives
(the neighbouring section, the passages the dense leg ranks nearest the title) in the same form.
Every fifth mined query is held out. `fit` writes the pairs file, then trains with the service's
trainer in a child process (`python -m groundtruth.adaptation.training`, whose docstring has the
loop: MultipleNegativesRankingLoss with in-batch and hard negatives under GradCache, AdamW, linear
warm-up); the trainer scores the packaged and the adapted model on the held-out queries (own
passage above all its mined negatives) and writes both beside the model (adaptation.json).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def pairs_collect(*, database: str, seed: int, negatives: int) -> list[dict]:
    """The service's own mining (groundtruth/adaptation/pairs.py) over every repository of the
    benchmark database."""
    from benchmarks.benchmark_database import benchmark_database_use

    benchmark_database_use(database)
    from groundtruth.adaptation.pairs import adaptation_pairs_collect
    from groundtruth.models import Repository

    started = time.monotonic()
    records = adaptation_pairs_collect(
        repositories=list(Repository.objects.order_by("name")), seed=seed, negatives=negatives
    )
    print(f"mined {len(records)} queries in {time.monotonic() - started:.0f} s", flush=True)
    return records


def fit(args: argparse.Namespace) -> None:
    """Mines the pairs (unless --pairs exists), then trains in a child process with the service's
    trainer (groundtruth/adaptation/training.py): one training loop, its peak RSS its own."""
    if not args.pairs.is_file():
        started = time.monotonic()
        records = pairs_collect(database=args.database, seed=args.seed, negatives=args.negatives)
        args.pairs.parent.mkdir(parents=True, exist_ok=True)
        args.pairs.write_text(json.dumps(records))
        print(f"{len(records)} pairs written to {args.pairs} in {time.monotonic() - started:.0f} s", flush=True)
    command = [sys.executable, "-m", "groundtruth.adaptation.training", "--pairs", str(args.pairs)]
    command += ["--out", str(args.out), "--seed", str(args.seed), "--max-queries", str(args.max_queries)]
    command += ["--batch-size", str(args.batch_size), "--mini-batch-size", str(args.mini_batch_size)]
    command += ["--epochs", str(args.epochs), "--learning-rate", str(args.learning_rate)]
    command += ["--passage-tokens", str(args.passage_tokens), "--threads", str(args.threads)]
    sys.exit(subprocess.run(command, cwd=ROOT, check=False).returncode)


_TEMPLATE_TITLE = re.compile(r"^(?:How do I use|What is) (.*) in \S+\?$")


def _title_of(record: dict) -> str:
    """A mined record's own title: inside a template question, else the last part of its path."""
    for query in record["queries"]:
        if match := _TEMPLATE_TITLE.match(query):
            return match.group(1)
    return record["queries"][0].split(": ")[-1].strip().rstrip("?")


def foreign_pairs(args: argparse.Namespace) -> None:
    """The mined pairs plus, for a seeded --share of the training records, one record that teaches
    a question naming a concept its passage lacks to score below the question without it: the
    passage as the anchor, one of the section's own queries as the positive, and the same query
    "with <the title of a section of another repository>" as the negative. Users' unanswerable
    questions are often an answerable one plus a concept the documentation does not have ("deploy
    spiders as an AWS Lambda function"). No question of an evaluation set is read."""
    import random

    records = json.loads(args.pairs.read_text())
    rng = random.Random(args.seed)
    by_repository: dict[str, list[dict]] = {}
    for record in records:
        by_repository.setdefault(record["repository"], []).append(record)
    added = []
    for record in records:
        if record["held_out"] or rng.random() >= args.share:
            continue
        others = [other for name, items in by_repository.items() if name != record["repository"] for other in items]
        foreign = _title_of(rng.choice(others))
        query = rng.choice(record["queries"]).rstrip("?")
        asked = f"{query}?" if record["queries"][0].endswith("?") else query
        added.append(
            {
                "repository": record["repository"],
                "held_out": False,
                "queries": [record["positive"]],
                "positive": asked,
                "negatives": [f"{query} with {foreign}?"],
            }
        )
    args.out.write_text(json.dumps(records + added))
    print(f"{len(records)} mined records and {len(added)} with a foreign concept written to {args.out}")


def _database_copy(*, source: str, target: str) -> None:
    """CREATE DATABASE target TEMPLATE source (dropped first if it exists)."""
    import psycopg

    from benchmarks.benchmark_database import _server_url

    _, maintenance = _server_url(source)
    # A template copy needs no other session on the source: run it before any benchmark on it.
    with psycopg.connect(**maintenance, autocommit=True) as connection:
        if connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [target]).fetchone():
            connection.execute(f'DROP DATABASE "{target}"')
        connection.execute(f'CREATE DATABASE "{target}" TEMPLATE "{source}"')
    print(f"{target} copied from {source}", flush=True)


def ship(args: argparse.Namespace) -> None:
    """The shipped path end to end on a copy of the benchmark database: `encoder_adapt`'s fit
    (mining, the trainer in its child process, the row), then the staging and the switch, each
    timed; `retrieval.py --database TARGET` then asks every question through the active encoder
    (no EMBEDDING_MODEL: the service picks the active encoder's model itself).

    Holds the adaptation lock (groundtruth/adaptation/adaptation_lock.py) from before the copy to
    the end of the switch, as `manage.py encoder_adapt` holds it for its fit, staging and switch:
    the lock is in the service's Redis and the models under its ENCODER_ADAPTATION_DIR (a switch
    removes retired encoders' files there), which this run shares with the service on this host.
    While another adaptation holds it, the run changes nothing (the target's previous copy stays)
    and exits with status 1, naming the holder."""
    os.environ.pop("EMBEDDING_MODEL", None)
    os.environ["EMBEDDING_RUNTIME"] = "onnx"
    from benchmarks.benchmark_database import _server_url, benchmark_database_use

    # Django set up on the target before the copy, for the lock: it opens no connection until a
    # query (the copy drops the target, which needs no session on it).
    os.environ["DATABASE_URL"] = _server_url(args.target)[0]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentplatform.settings")
    import django

    django.setup()
    from groundtruth.adaptation.adaptation_lock import AdaptationRunning, encoder_adaptation_lock

    try:
        with encoder_adaptation_lock():
            _database_copy(source=args.source, target=args.target)
            benchmark_database_use(args.target)
            _ship_timed()
    except AdaptationRunning as exc:
        sys.exit(f"Not run: {exc.detail}")


def _ship_timed() -> None:
    from groundtruth.adaptation.fitting import encoder_adapt
    from groundtruth.adaptation.switching import encoder_stage, encoder_switch

    started = time.monotonic()
    encoder = encoder_adapt()
    print(
        f"fitted #{encoder.pk} {encoder.model_name}: {encoder.query_count} of {encoder.mined_query_count} mined queries"
        f" trained on, {encoder.fit_seconds:.0f} s, training peak RSS {encoder.peak_rss_mb:.0f} MB, held-out accuracy"
        f" {encoder.held_out_accuracy_before:.3f} -> {encoder.held_out_accuracy:.3f}"
        f" ({encoder.held_out_query_count} queries)",
        flush=True,
    )
    staged_at = time.monotonic()
    staged = encoder_stage(encoder=encoder)
    switched_at = time.monotonic()
    switched = encoder_switch(encoder=encoder)
    print(
        f"staged {staged} chunks in {switched_at - staged_at:.0f} s, switched {switched} in"
        f" {time.monotonic() - switched_at:.1f} s; whole path {time.monotonic() - started:.0f} s;"
        f" this process's peak RSS {_peak_rss_mb():.0f} MB",
        flush=True,
    )


def reembed(args: argparse.Namespace) -> None:
    """CREATE DATABASE target TEMPLATE source, then every chunk re-embedded with the adapted model."""
    if not args.no_copy:
        _database_copy(source=args.source, target=args.target)
        if args.copy_only:
            return
    os.environ["EMBEDDING_MODEL"] = str(args.model.resolve())
    os.environ["EMBEDDING_RUNTIME"] = "onnx"
    from benchmarks.benchmark_database import benchmark_database_use

    benchmark_database_use(args.target)
    from django.core.management import call_command

    started = time.monotonic()
    call_command("reembed", no_progress=True)
    print(f"re-embedded in {time.monotonic() - started:.0f} s, peak RSS {_peak_rss_mb():.0f} MB")


def features_report(args: argparse.Namespace) -> None:
    """From `retrieval.py --features-out` files: paraphrased R@1/R@5/MRR@10 of every ranking the
    benchmark records, and the AUC (answerable paraphrased against unanswerable) of every evidence
    feature, pooled and per format."""
    from benchmarks.evaluation_sets import repository_format
    from benchmarks.refusal_calibration import auc
    from benchmarks.retrieval import RankMetrics

    groups = {
        "pooled": lambda row: True,
        "rst": lambda row: repository_format(row["fold"]) == "rst",
        "Markdown": lambda row: repository_format(row["fold"]) == "Markdown",
    }
    for path in args.features:
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        paraphrased = [row for row in rows if row["answerable"] and row["wording"] == "paraphrase"]
        unanswerable = [row for row in rows if not row["answerable"]]
        print(f"\n{path}: paraphrased R@1/R@5/MRR@10 ({', '.join(groups)})")
        for method in paraphrased[0]["ranks"]:
            cells = []
            for keep in groups.values():
                metrics = RankMetrics.of([row["ranks"][method] for row in paraphrased if keep(row)])
                cells.append(f"{metrics.recall_1:.3f}/{metrics.recall_5:.3f}/{metrics.mrr_10:.3f}")
            print(f"  {method:<28} " + "  ".join(cells))
        print(f"AUC answerable (paraphrased) vs unanswerable ({', '.join(groups)})")
        for name, value in rows[0]["features"].items():
            if not isinstance(value, int | float):
                continue
            cells = []
            for keep in groups.values():
                positives = [row["features"][name] for row in paraphrased if keep(row)]
                negatives = [row["features"][name] for row in unanswerable if keep(row)]
                cells.append(f"{auc(positives, negatives):.3f}")
            print(f"  {name:<28} " + "  ".join(cells))


def abstention_report(args: argparse.Namespace) -> None:
    """Today's abstention model (its features from the packaged model's run) with the adapted
    model's dense evidence of the same question as extra features, fitted on eleven repositories'
    labelled paraphrased and unanswerable questions and measured on the one left out (rotated), and
    in-sample; the re-ranking as shipped in both runs, as `--refusal-calibration` measures."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentplatform.settings")
    from benchmarks.evaluation_sets import ANSWERABLE_MISSING_TARGET, repository_format
    from groundtruth.search.abstention_fit import (
        DEFAULT_FEATURES,
        LabelledEvidence,
        abstention_model_fit,
        abstention_threshold_choose,
    )

    def load(path: Path) -> dict[str, dict]:
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        return {row["id"]: row for row in rows if row["wording"] == "paraphrase"}

    packaged, adapted = load(args.packaged), load(args.adapted)
    rows = []
    for question_id, row in packaged.items():
        features = dict(row["features"])
        for name in ("similarity", "heading_similarity", "peak"):
            features[f"adapted_{name}"] = adapted[question_id]["features"][name]
        rows.append((row, features))
    folds = sorted({row["fold"] for row, _ in rows})
    variants = {
        "today (packaged evidence)": DEFAULT_FEATURES,
        "today's features from the adapted run": DEFAULT_FEATURES,
        "packaged similarity alone": ("similarity",),
        "adapted similarity alone": ("adapted_similarity",),
        "+ adapted similarity": (*DEFAULT_FEATURES, "adapted_similarity"),
        "+ adapted heading_similarity": (*DEFAULT_FEATURES, "adapted_heading_similarity"),
        "+ adapted similarity, heading_similarity, peak": (
            *DEFAULT_FEATURES,
            "adapted_similarity",
            "adapted_heading_similarity",
            "adapted_peak",
        ),
    }

    def samples_of(chosen, from_adapted: bool) -> list[LabelledEvidence]:
        return [
            LabelledEvidence(
                features=adapted[row["id"]]["features"] if from_adapted else features, answerable=row["answerable"]
            )
            for row, features in chosen
        ]

    def refusals(names, training, measured, from_adapted: bool) -> list[bool]:
        samples = samples_of(training, from_adapted)
        model = abstention_model_fit(samples, features=names)
        threshold = abstention_threshold_choose(model, samples, answerable_missing=ANSWERABLE_MISSING_TARGET)
        return [model.probability(sample.features) < threshold for sample in samples_of(measured, from_adapted)]

    def rates(chosen, refused) -> str:
        caught = [r for (row, _), r in zip(chosen, refused, strict=True) if not row["answerable"]]
        wrong = [r for (row, _), r in zip(chosen, refused, strict=True) if row["answerable"]]
        return f"{sum(caught) / len(caught):.3f}/{sum(wrong) / len(wrong):.3f}"

    print("sources_missing unanswerable/answerable, left-one-repository-out (in-sample)")
    for name, names in variants.items():
        from_adapted = name.startswith("today's features from the adapted")
        cross: dict[str, bool] = {}
        for fold in folds:
            measured = [item for item in rows if item[0]["fold"] == fold]
            training = [item for item in rows if item[0]["fold"] != fold]
            cross.update(
                zip([row["id"] for row, _ in measured], refusals(names, training, measured, from_adapted), strict=True)
            )
        inside = dict(zip([row["id"] for row, _ in rows], refusals(names, rows, rows, from_adapted), strict=True))
        cells = []
        for group in ("pooled", "rst", "Markdown"):
            chosen = [item for item in rows if group == "pooled" or repository_format(item[0]["fold"]) == group]
            cells.append(
                f"{group} {rates(chosen, [cross[row['id']] for row, _ in chosen])}"
                f" ({rates(chosen, [inside[row['id']] for row, _ in chosen])})"
            )
        over = []
        for fold in folds:
            answerable = [row for row, _ in rows if row["fold"] == fold and row["answerable"]]
            share = sum(cross[row["id"]] for row in answerable) / len(answerable)
            if share > 0.10:
                over.append(f"{fold} {share:.3f}")
        print(f"  {name:<48} " + "  ".join(cells) + f"; answerable refused > 0.10: {', '.join(over) or 'none'}")


def exposure_report(args: argparse.Namespace) -> None:
    """Paraphrased R@1/R@5/MRR@10 (dense leg, hybrid) split by whether the answer's section title
    (its FAQ question) was among the queries the fit trained on: the fit reads the corpus, which
    holds the development set's FAQ titles, so a gain only on those would be memorised sections.
    Matched by the title's words (`question_verbatim` against the query or its last part)."""
    import re

    from benchmarks.retrieval import RankMetrics
    from groundtruth.adaptation.training import training_sample

    def words(text: str) -> str:
        return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()

    records = json.loads(args.pairs.read_text())
    trained = set()
    training = training_sample(records, seed=args.seed, max_queries=args.max_queries)
    for record in training:
        query = record["queries"][0]
        trained |= {words(query), words(query.split(": ", 1)[-1])}
    lines = (args.eval_set / "questions.jsonl").read_text().splitlines()
    questions = {entry["id"]: entry for entry in map(json.loads, lines)}
    for path in args.features:
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        paraphrased = [row for row in rows if row["answerable"] and row["wording"] == "paraphrase"]
        print(f"\n{path}")
        for label, seen in (("answer's title trained on", True), ("answer's title not trained on", False)):
            chosen = [r for r in paraphrased if (words(questions[r["id"]]["question_verbatim"]) in trained) is seen]
            cells = []
            for method in ("dense", "hybrid"):
                metrics = RankMetrics.of([row["ranks"][method] for row in chosen])
                cells.append(f"{method} {metrics.recall_1:.3f}/{metrics.recall_5:.3f}/{metrics.mrr_10:.3f}")
            print(f"  {label:<32} {len(chosen):>4}  " + "  ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    fit_parser = commands.add_parser("fit")
    fit_parser.add_argument("--database", default="gt_bench_retrieval")
    fit_parser.add_argument("--out", type=Path, required=True)
    fit_parser.add_argument("--seed", type=int, default=0)
    fit_parser.add_argument("--epochs", type=int, default=1)
    fit_parser.add_argument("--batch-size", type=int, default=32)
    fit_parser.add_argument("--negatives", type=int, default=3, help="hard negatives mined per query")
    fit_parser.add_argument("--learning-rate", type=float, default=2e-5)
    fit_parser.add_argument("--passage-tokens", type=int, default=128)
    fit_parser.add_argument("--threads", type=int, default=2)
    fit_parser.add_argument("--max-queries", type=int, default=1536, help="trained on at most this many (seeded)")
    fit_parser.add_argument("--mini-batch-size", type=int, default=8, help="texts embedded with autograd at once")
    fit_parser.add_argument(
        "--measure-packaged", action="store_true", help="no effect: the trainer always measures the base model"
    )
    fit_parser.add_argument(
        "--pairs", type=Path, required=True, help="the mined pairs as JSON: read if it exists, else written"
    )
    foreign_parser = commands.add_parser("foreign-pairs")
    foreign_parser.add_argument("--pairs", type=Path, required=True, help="mined pairs (`fit --pairs` writes them)")
    foreign_parser.add_argument("--out", type=Path, required=True)
    foreign_parser.add_argument("--share", type=float, default=0.5, help="of the training records")
    foreign_parser.add_argument("--seed", type=int, default=0)
    reembed_parser = commands.add_parser("reembed")
    reembed_parser.add_argument("--model", type=Path, required=True)
    reembed_parser.add_argument("--source", default="gt_bench_retrieval")
    reembed_parser.add_argument("--target", default="gt_adapt")
    reembed_parser.add_argument("--no-copy", action="store_true", help="re-embed the target as it is")
    reembed_parser.add_argument("--copy-only", action="store_true", help="copy the source and stop")
    ship_parser = commands.add_parser("ship")
    ship_parser.add_argument("--source", default="gt_bench_retrieval")
    ship_parser.add_argument("--target", default="gt_shipped")
    features_parser = commands.add_parser("features")
    features_parser.add_argument("features", type=Path, nargs="+")
    abstention_parser = commands.add_parser("abstention")
    abstention_parser.add_argument("packaged", type=Path, help="retrieval.py --features-out of the packaged model")
    abstention_parser.add_argument("adapted", type=Path, help="the same of the adapted model")
    exposure_parser = commands.add_parser("exposure")
    exposure_parser.add_argument("--pairs", type=Path, required=True)
    exposure_parser.add_argument("--seed", type=int, default=0)
    exposure_parser.add_argument("--max-queries", type=int, default=1536)
    exposure_parser.add_argument("--eval-set", type=Path, required=True)
    exposure_parser.add_argument("features", type=Path, nargs="+")
    args = parser.parse_args()
    {
        "fit": fit,
        "foreign-pairs": foreign_pairs,
        "reembed": reembed,
        "ship": ship,
        "features": features_report,
        "abstention": abstention_report,
        "exposure": exposure_report,
    }[args.command](args)


if __name__ == "__main__":
    main()
