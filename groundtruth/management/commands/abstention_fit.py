"""`manage.py abstention_fit QUESTIONS.jsonl`: fit the sources-missing model of /ask.

The questions file has one JSON object per line: the question (`question`, or the field named by
--field, `question_paraphrase` by default when present), `answerable` (true or false) and
`repository` (the one the question is about; any label). Every question is searched in the
current index exactly as /ask searches it; the logistic model is fitted on the evidence features
(`groundtruth/search/abstention.py`) and on the prior over questions (fitted on the questions'
vectors, each question's prior from a prior fitted without its repository; `--no-question-prior`
leaves it out, and then `repository` is not needed), and the threshold chosen so that at most
--answerable-missing of the answerable questions are declared unanswerable.

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

from groundtruth.search.abstention import evidence_features, first_passage_vector
from groundtruth.search.abstention_fit import (
    DEFAULT_FEATURES,
    DEFAULT_REGULARISATION,
    LabelledEvidence,
    abstention_rates,
    sources_missing_fit,
)
from groundtruth.search.abstention_model import FEATURES, PRIOR_FEATURE
from groundtruth.search.fitted_parameters import fit_provenance, sources_missing_fit_document
from groundtruth.search.hybrid_search import chunk_search, search_scope_resolve

# The features computed from the evidence (the prior over questions is fitted apart).
EVIDENCE_FEATURES = [name for name in FEATURES if name != PRIOR_FEATURE]


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
            help=f"comma-separated evidence features to fit; known: {', '.join(EVIDENCE_FEATURES)}",
        )
        parser.add_argument(
            "--no-question-prior",
            action="store_true",
            help="fit without the prior over questions (then the questions need no `repository`)",
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
        known = EVIDENCE_FEATURES
        unknown = sorted(set(features) - set(known))
        if unknown or not features:
            raise CommandError(
                f"--features: {', '.join(unknown) or 'none given'}; known: {', '.join(known)}"
                f" (the prior over questions is fitted unless --no-question-prior)"
            )
        with_prior = not options["no_question_prior"]
        repositories = search_scope_resolve(names=None)
        if not repositories:
            raise CommandError("No repository is indexed: ingest the documentation the questions are about first.")
        for number, entry in enumerate(entries, start=1):
            text = entry.get(field)
            if not isinstance(text, str) or not text.strip() or not isinstance(entry.get("answerable"), bool):
                raise CommandError(f"line {number}: needs a non-empty {field!r} and a boolean 'answerable'")
            if with_prior and (not isinstance(entry.get("repository"), str) or not entry["repository"].strip()):
                raise CommandError(
                    f"line {number}: needs the 'repository' the question is about (the prior over questions is "
                    "fitted without each repository's own questions), or fit with --no-question-prior"
                )
        samples = []
        encoders = set()
        for entry in entries:
            outcome = chunk_search(query=entry[field], repositories=repositories, limit=5)
            evidence, _ = evidence_features(outcome, question=entry[field])
            if outcome.embedding is not None:
                encoders.add(outcome.embedding.model_name)
            samples.append(
                LabelledEvidence(
                    features=evidence,
                    answerable=entry["answerable"],
                    question_vector=tuple(outcome.embedding.vector) if outcome.embedding else (),
                    passage_vector=first_passage_vector(outcome),
                    group=entry.get("repository", "") if with_prior else "",
                )
            )
        answerable = sum(sample.answerable for sample in samples)
        if answerable in (0, len(samples)):
            raise CommandError("The questions must include answerable and unanswerable ones.")
        if with_prior:
            if len(encoders) != 1 or any(not sample.question_vector for sample in samples):
                raise CommandError("The prior over questions needs the embedding model (EMBEDDING_BACKEND is none).")
            if len({sample.group for sample in samples}) < 2:
                raise CommandError("The prior over questions needs questions about at least two repositories.")
        fitted = sources_missing_fit(
            samples,
            features=features,
            question_prior_encoder=encoders.pop() if with_prior else None,
            regularisation=options["regularisation"],
            answerable_missing=options["answerable_missing"],
        )
        model, threshold = fitted.model, fitted.threshold
        rates = abstention_rates(model, threshold, fitted.samples)
        self.stdout.write(
            f"Fitted on {answerable} answerable and {len(samples) - answerable} unanswerable questions ({field})."
        )
        # The model is measured on the questions it was fitted on; their priors are out of fold.
        prior_note = " (each question's prior fitted without its repository)" if with_prior else ""
        self.stdout.write(
            f"In-sample{prior_note}: sources missing on {rates.unanswerable_missing:.3f} of the unanswerable and "
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
        document = sources_missing_fit_document(fitted, provenance=provenance)
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
        if options["no_question_prior"]:
            arguments.append("--no-question-prior")
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
