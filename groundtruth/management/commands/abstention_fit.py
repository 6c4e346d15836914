"""`manage.py abstention_fit QUESTIONS.jsonl`: fit the sources-missing model of /ask.

The questions file has one JSON object per line: the question (`question`, or the field named by
--field, `question_paraphrase` by default when present) and `answerable` (true or false). Every
question is searched in the current index exactly as /ask searches it; the logistic model is
fitted on the evidence features (`groundtruth/search/abstention.py`) and the threshold chosen so
that at most --answerable-missing of the answerable questions are declared unanswerable.

Prints the two settings that carry the fit (ASK_ABSTENTION_MODEL, ASK_ABSTENTION_THRESHOLD) and
the in-sample rates. Put them in the environment (or `.env`): no code change is needed. Measure
what they predict on unseen documentation with `benchmarks/retrieval.py`, which fits the same
way repository by repository and reports the cross-validated rates.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from groundtruth.search.abstention import evidence_features
from groundtruth.search.abstention_fit import (
    DEFAULT_FEATURES,
    DEFAULT_REGULARISATION,
    LabelledEvidence,
    abstention_model_fit,
    abstention_rates,
    abstention_threshold_choose,
)
from groundtruth.search.abstention_model import FEATURES
from groundtruth.search.hybrid_search import chunk_search, search_scope_resolve


class Command(BaseCommand):
    help = "Fit the sources-missing model of /ask on questions with known answerability; print its settings."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("questions", type=Path, help="JSON lines with the question and `answerable`")
        parser.add_argument("--field", help="the question's field (default: question_paraphrase, else question)")
        parser.add_argument(
            "--answerable-missing",
            type=float,
            default=0.05,
            help="largest share of answerable questions the threshold may declare unanswerable (default 0.05)",
        )
        parser.add_argument(
            "--features",
            default=",".join(DEFAULT_FEATURES),
            help=f"comma-separated features to fit; known: {', '.join(FEATURES)}",
        )
        parser.add_argument(
            "--regularisation",
            type=float,
            default=DEFAULT_REGULARISATION,
            help=f"inverse strength of the L2 penalty (default {DEFAULT_REGULARISATION})",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        entries = self._entries(options["questions"])
        field = options["field"] or ("question_paraphrase" if "question_paraphrase" in entries[0] else "question")
        if not 0 <= options["answerable_missing"] < 1:
            raise CommandError("--answerable-missing must be at least 0 and below 1")
        features = [name.strip() for name in options["features"].split(",") if name.strip()]
        unknown = sorted(set(features) - set(FEATURES))
        if unknown or not features:
            raise CommandError(f"--features: {', '.join(unknown) or 'none given'}; known: {', '.join(FEATURES)}")
        repositories = search_scope_resolve(names=None)
        if not repositories:
            raise CommandError("No repository is indexed: ingest the documentation the questions are about first.")
        samples = []
        for number, entry in enumerate(entries, start=1):
            text = entry.get(field)
            if not isinstance(text, str) or not text.strip() or not isinstance(entry.get("answerable"), bool):
                raise CommandError(f"line {number}: needs a non-empty {field!r} and a boolean 'answerable'")
            outcome = chunk_search(query=text, repositories=repositories, limit=5)
            evidence, _ = evidence_features(outcome, question=text)
            samples.append(LabelledEvidence(features=evidence, answerable=entry["answerable"]))
        answerable = sum(sample.answerable for sample in samples)
        if answerable in (0, len(samples)):
            raise CommandError("The questions must include answerable and unanswerable ones.")
        model = abstention_model_fit(samples, features=features, regularisation=options["regularisation"])
        threshold = abstention_threshold_choose(model, samples, answerable_missing=options["answerable_missing"])
        rates = abstention_rates(model, threshold, samples)
        self.stdout.write(
            f"Fitted on {answerable} answerable and {len(samples) - answerable} unanswerable questions ({field})."
        )
        self.stdout.write(
            f"In-sample: sources missing on {rates.unanswerable_missing:.3f} of the unanswerable and "
            f"{rates.answerable_missing:.3f} of the answerable questions."
        )
        self.stdout.write(f"ASK_ABSTENTION_MODEL={model.configuration()}")
        self.stdout.write(f"ASK_ABSTENTION_THRESHOLD={threshold:.3f}")

    def _entries(self, path: Path) -> list[dict[str, Any]]:
        try:
            lines = path.read_text().splitlines()
        except OSError as exc:
            raise CommandError(f"Cannot read {path}: {exc.strerror}") from exc
        entries = []
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CommandError(f"{path}:{number}: not JSON ({exc.msg})") from exc
            if not isinstance(entry, dict):
                raise CommandError(f"{path}:{number}: not a JSON object")
            entries.append(entry)
        if not entries:
            raise CommandError(f"{path} holds no questions")
        return entries
