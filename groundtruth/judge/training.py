"""Training the relevance judge: a cross-encoder initialised from the packaged MiniLM weights.

The model reads "[CLS] query [SEP] passage [SEP]" (at most `max_length` tokens, the passage
truncated) through the MiniLM BERT encoder (its first `layers` layers: fewer layers cost less on
two cores at fitting and at query time) and a linear head on the mean of its token vectors: one
score. The word embeddings are kept frozen.

Loss per mined query (1 positive + k negatives, `pair_mining.py`): softmax cross-entropy over
its group (the positive should come first), plus a pointwise logistic loss on each pair (positive
1, negatives 0). The group loss orders; the pointwise one pins the scale, so one threshold can
mean the same thing for every query (refusals, `calibration.py`).

Seeded and reproducible: `torch.manual_seed(seed)` before the head is initialised, the queries in a
seeded order, one thread count. Plain torch, no Django: the fitting service stores what this
returns.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from groundtruth.judge.pair_mining import MinedQuery

HEAD_FILE = "judge_head.pt"
CONFIG_FILE = "judge.json"


@dataclass(frozen=True)
class JudgeHyperparameters:
    layers: int = 2
    max_length: int = 112
    epochs: int = 1
    queries_per_step: int = 4
    learning_rate: float = 1e-4
    head_learning_rate: float = 2e-3
    seed: int = 0


@dataclass(frozen=True)
class TrainingReport:
    queries: int
    pairs: int
    steps: int
    seconds: float
    final_loss: float


def _encoder_load(model_path: str | Path, *, layers: int) -> tuple[Any, Any]:
    import os

    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    from transformers import AutoTokenizer, BertModel
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    transformers_logging.set_verbosity_error()  # the unused upper layers are not news
    tokenizer = AutoTokenizer.from_pretrained(str(model_path))
    encoder = BertModel.from_pretrained(str(model_path), num_hidden_layers=layers, add_pooling_layer=False)
    return tokenizer, encoder


class CrossEncoder:
    """The encoder, its head and its tokenizer; `scores` is the judge's one inference call."""

    def __init__(self, *, tokenizer: Any, encoder: Any, head: Any, max_length: int) -> None:
        self.tokenizer = tokenizer
        self.encoder = encoder
        self.head = head
        self.max_length = max_length

    @classmethod
    def initial(cls, *, model_path: str | Path, hyperparameters: JudgeHyperparameters) -> CrossEncoder:
        import torch

        tokenizer, encoder = _encoder_load(model_path, layers=hyperparameters.layers)
        head = torch.nn.Linear(encoder.config.hidden_size, 1)
        # Small random weights (seeded): a head at zero passes no gradient to the encoder.
        torch.nn.init.normal_(head.weight, std=0.02)
        torch.nn.init.zeros_(head.bias)
        return cls(tokenizer=tokenizer, encoder=encoder, head=head, max_length=hyperparameters.max_length)

    @classmethod
    def load(cls, directory: str | Path) -> CrossEncoder:
        import torch

        config = json.loads((Path(directory) / CONFIG_FILE).read_text())
        tokenizer, encoder = _encoder_load(directory, layers=config["layers"])
        head = torch.nn.Linear(encoder.config.hidden_size, 1)
        head.load_state_dict(torch.load(Path(directory) / HEAD_FILE, weights_only=True))
        encoder.eval()
        return cls(tokenizer=tokenizer, encoder=encoder, head=head, max_length=config["max_length"])

    def save(self, directory: str | Path, *, hyperparameters: JudgeHyperparameters) -> None:
        import torch

        target = Path(directory)
        target.mkdir(parents=True, exist_ok=True)
        self.encoder.save_pretrained(str(target))
        self.tokenizer.save_pretrained(str(target))
        torch.save(self.head.state_dict(), target / HEAD_FILE)
        (target / CONFIG_FILE).write_text(json.dumps(asdict(hyperparameters), indent=2))

    def forward(self, queries: Sequence[str], passages: Sequence[str]) -> Any:
        encoded = self.tokenizer(
            list(queries),
            list(passages),
            truncation="only_second",
            max_length=self.max_length,
            padding=True,
            return_tensors="pt",
        )
        hidden = self.encoder(**encoded).last_hidden_state
        # Mean over the pair's tokens: MiniLM was trained to pool so, its [CLS] vector says little.
        mask = encoded["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1)
        return self.head(pooled).squeeze(-1)

    def scores(self, query: str, passages: Sequence[str]) -> list[float]:
        """The judge's score of each passage for `query` (a logit: above 0, more likely to answer)."""
        import torch

        if not passages:
            return []
        with torch.inference_mode():
            return [float(value) for value in self.forward([query] * len(passages), passages)]


def judge_train(
    queries: Sequence[MinedQuery], *, model_path: str | Path, hyperparameters: JudgeHyperparameters
) -> tuple[CrossEncoder, TrainingReport]:
    """A cross-encoder trained on `queries` (each: its positive first, then its negatives)."""
    import torch

    torch.manual_seed(hyperparameters.seed)
    judge = CrossEncoder.initial(model_path=model_path, hyperparameters=hyperparameters)
    # The word embeddings stay as MiniLM learnt them (most of the weights, least to gain from a
    # few hundred steps); the new head learns faster than the pretrained encoder.
    judge.encoder.embeddings.word_embeddings.weight.requires_grad_(False)
    encoder_parameters = [parameter for parameter in judge.encoder.parameters() if parameter.requires_grad]
    parameters = encoder_parameters + list(judge.head.parameters())
    optimiser = torch.optim.AdamW(
        [
            {"params": encoder_parameters, "lr": hyperparameters.learning_rate},
            {"params": list(judge.head.parameters()), "lr": hyperparameters.head_learning_rate},
        ],
        weight_decay=0.01,
    )
    order = list(range(len(queries)))
    steps_total = max(1, hyperparameters.epochs * -(-len(order) // hyperparameters.queries_per_step))
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda step: min(1.0, (step + 1) / max(1, steps_total // 10)) * max(0.0, 1 - step / steps_total)
    )
    judge.encoder.train()
    started = time.monotonic()
    steps, loss_value, pairs = 0, 0.0, 0
    for epoch in range(hyperparameters.epochs):
        random.Random(hyperparameters.seed * 1000 + epoch).shuffle(order)
        for first in range(0, len(order), hyperparameters.queries_per_step):
            batch = [queries[index] for index in order[first : first + hyperparameters.queries_per_step]]
            texts_query, texts_passage, groups = [], [], []
            for mined in batch:
                group = [mined.positive, *mined.negatives]
                texts_query.extend([mined.query] * len(group))
                texts_passage.extend(group)
                groups.append(len(group))
            logits = judge.forward(texts_query, texts_passage)
            losses = []
            offset = 0
            for size in groups:
                group_logits = logits[offset : offset + size]
                labels = torch.zeros(size)
                labels[0] = 1.0
                listwise = torch.nn.functional.cross_entropy(group_logits.unsqueeze(0), torch.tensor([0]))
                pointwise = torch.nn.functional.binary_cross_entropy_with_logits(group_logits, labels)
                losses.append(listwise + pointwise)
                offset += size
            loss = torch.stack(losses).mean()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(parameters, 1.0)
            optimiser.step()
            scheduler.step()
            optimiser.zero_grad()
            steps += 1
            pairs += len(texts_query)
            loss_value = float(loss.detach())
    judge.encoder.eval()
    return judge, TrainingReport(
        queries=len(queries), pairs=pairs, steps=steps, seconds=time.monotonic() - started, final_loss=loss_value
    )


@dataclass(frozen=True)
class HeldOutScores:
    """The judge's scores on held-out mined queries: each query's positive and its negatives."""

    repository: str
    positive: float
    negatives: tuple[float, ...]


def held_out_score(judge: CrossEncoder, queries: Sequence[MinedQuery]) -> list[HeldOutScores]:
    scored = []
    for mined in queries:
        values = judge.scores(mined.query, [mined.positive, *mined.negatives])
        scored.append(HeldOutScores(repository=mined.repository, positive=values[0], negatives=tuple(values[1:])))
    return scored


def held_out_accuracy(scored: Sequence[HeldOutScores]) -> tuple[float, float]:
    """(share of queries whose positive scores above all its negatives, share of pairs where the
    positive scores above the negative)."""
    if not scored:
        return 0.0, 0.0
    first = sum(all(item.positive > negative for negative in item.negatives) for item in scored) / len(scored)
    pairs = [item.positive > negative for item in scored for negative in item.negatives]
    return first, sum(pairs) / len(pairs) if pairs else 0.0
