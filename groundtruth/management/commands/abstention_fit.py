"""`manage.py abstention_fit QUESTIONS.jsonl`: fit the sources-missing model of /ask.

The questions file has one JSON object per line: the question (`question`, or the field named by
--field, `question_paraphrase` by default when present) and `answerable` (true or false). Every
question is searched in the current index exactly as /ask searches it; the logistic model is
fitted on the evidence features (`groundtruth/search/abstention.py`) and the threshold chosen so
that at most --answerable-missing of the answerable questions are declared unanswerable.

Prints the in-sample rates and the fit file (groundtruth/search/fitted_parameters.py: the model,
the threshold and the fit's provenance); `--output FILE` writes it there. Commit it over
groundtruth/search/fitted/abstention.json, or point ASK_ABSTENTION_FIT_FILE at it. Measure what it
predicts on unseen documentation with `benchmarks/retrieval.py`, which fits the same way
repository by repository and reports the cross-validated rates.
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
from groundtruth.search.fitted_parameters import abstention_fit_document, fit_provenance
from groundtruth.search.hybrid_search import chunk_search, search_scope_resolve


class Command(BaseCommand):
    help = "Fit the sources-missing model of /ask on questions with known answerability; print or write its fit file."

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
        parser.add_argument("--output", type=Path, help="write the fit file here (default: print it)")

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
        names = ", ".join(sorted(repository.name for repository in repositories))
        provenance = fit_provenance(
            command=f"manage.py abstention_fit {' '.join(self._arguments(options))}",
            data=(
                f"{options['questions'].name}: {answerable} answerable and {len(samples) - answerable} unanswerable "
                f"questions ({field}), searched in the repositories indexed then: {names}"
            ),
            measured=(
                f"in-sample: sources missing on {rates.unanswerable_missing:.3f} of the unanswerable and "
                f"{rates.answerable_missing:.3f} of the answerable questions"
            ),
        )
        document = abstention_fit_document(model=model, threshold=threshold, provenance=provenance)
        if options["output"] is None:
            self.stdout.write(document, ending="")
        else:
            options["output"].write_text(document)
            self.stdout.write(f"Fit written to {options['output']}.")

    def _arguments(self, options: dict[str, Any]) -> list[str]:
        """The command line that reproduces this fit (the questions file by name)."""
        arguments = [options["questions"].name]
        if options["field"]:
            arguments.append(f"--field {options['field']}")
        arguments.append(f"--answerable-missing {options['answerable_missing']:g}")
        arguments.append(f"--features {options['features']}")
        arguments.append(f"--regularisation {options['regularisation']:g}")
        return arguments

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
