"""`manage.py judge_fit`: fit the relevance judge on the indexed documentation.

Pairs are mined from the chunks of the enabled repositories (`groundtruth/judge/pair_mining.py`;
no question with a known answer is used) and read through the embedding model's ONNX graph; the
late-interaction judge (`groundtruth/judge/late_interaction.py`) is scored on the held-out mined
queries in MiniLM's own token space and with a projection learned on the others, the better one
is kept, and its per-repository refusal thresholds are calibrated on those held-out queries
(by default the score below which --refusal-share of their positives fall; --calibration separation:
the score separating their positives from their negatives). The
new judge is stored (a RelevanceJudge row and its artifact under JUDGE_DIR) and used by search
and /ask from then on. Prints the pairs, the time, the peak resident memory and the held-out
accuracy. A corpus too small to fit on leaves the previous judge in use (exit status 1, and why).
"""

from __future__ import annotations

from argparse import BooleanOptionalAction
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agentplatform.plumbing.errors import InvalidInput
from groundtruth.judge.calibration import CALIBRATIONS
from groundtruth.judge.fitting import JudgeFitOptions, judge_fit


class Command(BaseCommand):
    help = "Fit the relevance judge on pairs mined from the indexed documentation; print what it cost and scored."

    def add_arguments(self, parser: CommandParser) -> None:
        defaults = JudgeFitOptions()
        parser.add_argument("--repo", action="append", dest="repositories", help="only this repository (repeatable)")
        parser.add_argument("--queries-per-repository", type=int, default=defaults.queries_per_repository)
        parser.add_argument("--negatives", type=int, default=defaults.negatives)
        parser.add_argument("--refusal-share", type=float, default=defaults.refusal_share)
        parser.add_argument("--passage-tokens", type=int, default=defaults.passage_tokens)
        parser.add_argument("--epochs", type=int, default=defaults.epochs)
        parser.add_argument("--seed", type=int, default=defaults.seed)
        parser.add_argument(
            "--calibration",
            choices=CALIBRATIONS,
            default=defaults.calibration,
            help="refusal thresholds: the score separating held-out positives from negatives, or a positives' quantile",
        )
        parser.add_argument(
            "--piece-weights",
            action=BooleanOptionalAction,
            default=defaults.piece_weights,
            help="weigh a question's word pieces by their IDF in the corpus",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        fit_options = JudgeFitOptions(
            queries_per_repository=options["queries_per_repository"],
            negatives=options["negatives"],
            refusal_share=options["refusal_share"],
            passage_tokens=options["passage_tokens"],
            epochs=options["epochs"],
            seed=options["seed"],
            calibration=options["calibration"],
            piece_weights=options["piece_weights"],
        )
        try:
            judge = judge_fit(repository_names=options["repositories"], options=fit_options)
        except InvalidInput as exc:
            raise CommandError(exc.detail) from exc
        thresholds = list(judge.thresholds.values())
        spread = f" (spread {max(thresholds) - min(thresholds):.4f})" if thresholds else ""
        self.stdout.write(
            f"judge #{judge.pk}: {judge.query_count} mined queries, {judge.pair_count} pairs, "
            f"{len(judge.repositories)} repositories ({judge.chunk_count} chunks, "
            f"index version {judge.index_version})\n"
            f"fitted in {judge.fit_seconds:.0f} s, peak RSS {judge.peak_rss_mb:.0f} MB\n"
            f"held-out accuracy {judge.held_out_accuracy:.3f} (own passage first, {judge.held_out_query_count} "
            f"queries), pairwise {judge.held_out_pairwise_accuracy:.3f}\n"
            f"refusal thresholds: pooled {judge.default_threshold:g}; "
            + ", ".join(f"{name} {value:g}" for name, value in judge.thresholds.items())
            + spread
            + f"\nartifact: {judge.artifact}"
        )
