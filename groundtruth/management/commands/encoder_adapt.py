"""`manage.py encoder_adapt`: adapt the embedding model to the indexed documentation and switch
the index to it.

Pairs are mined from the chunks of the enabled (or the named) repositories
(`groundtruth/adaptation/pairs.py`; no question with a known answer is used), the packaged MiniLM
is fine-tuned on them in a child process, every chunk is re-embedded with the new model into a
staging table while search goes on, and one transaction switches the index and the query model to
it (`groundtruth/adaptation/switching.py`). Prints the pairs, the time, the training's peak
resident memory and the held-out mined accuracy before and after.

    manage.py encoder_adapt                 # fit, stage, switch (if the fit gains enough, below)
    manage.py encoder_adapt --no-switch     # fit only (status fitted)
    manage.py encoder_adapt --activate 7    # stage and switch to encoder 7 (resumes a staging)
    manage.py encoder_adapt --lock-status   # who holds the adaptation lock, or "free"
    manage.py encoder_adapt --break-lock    # delete it (its holder's process is known to be dead)

The switch follows a fit only when the new model beats the serving one on the held-out mined
queries by ENCODER_ADAPTATION_MIN_GAIN; otherwise the encoder stays `fitted` (exit status 1, and
its figures), and `--activate ID` switches to it by hand.

A corpus too small to train on, a failed or over-long training or a failed switch leaves the
active encoder and the index as they were (exit status 1, and why). One adaptation runs at a
time: while `encoder_adapt_task` or another `encoder_adapt` holds the lock
(`groundtruth/adaptation/adaptation_lock.py`), the command changes nothing and exits with status 1,
naming the holder. `--lock-status` and `--break-lock` do nothing else and exit with status 0.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agentplatform.plumbing.errors import InvalidInput
from groundtruth.adaptation.adaptation_lock import (
    AdaptationRunning,
    encoder_adaptation_lock,
    encoder_adaptation_lock_break,
    encoder_adaptation_lock_holder,
)
from groundtruth.adaptation.fitting import EncoderAdaptationOptions, adaptation_gain_shortfall, encoder_adapt
from groundtruth.adaptation.switching import SwitchFailed, encoder_activate
from groundtruth.embeddings import EmbeddingError
from groundtruth.models import AdaptationStatus, AdaptedEncoder


class Command(BaseCommand):
    help = "Fine-tune the embedding model on pairs mined from the indexed documentation and switch the index to it."

    def add_arguments(self, parser: CommandParser) -> None:
        defaults = EncoderAdaptationOptions()
        parser.add_argument("--repo", action="append", dest="repositories", help="only this repository (repeatable)")
        parser.add_argument("--max-queries", type=int, default=None, help="default: ENCODER_ADAPTATION_MAX_QUERIES")
        parser.add_argument("--min-training-queries", type=int, default=defaults.min_training_queries)
        parser.add_argument("--seed", type=int, default=defaults.seed)
        parser.add_argument("--epochs", type=int, default=defaults.epochs)
        parser.add_argument("--batch-size", type=int, default=defaults.batch_size)
        parser.add_argument("--mini-batch-size", type=int, default=defaults.mini_batch_size)
        parser.add_argument("--passage-tokens", type=int, default=defaults.passage_tokens)
        parser.add_argument("--no-switch", action="store_true", help="fit only; the index stays as it is")
        parser.add_argument("--activate", type=int, metavar="ID", help="stage and switch to this fitted encoder")
        lock = parser.add_mutually_exclusive_group()
        lock.add_argument(
            "--lock-status", action="store_true", help='print who holds the adaptation lock, or "free"; nothing else'
        )
        lock.add_argument(
            "--break-lock",
            action="store_true",
            help="delete the adaptation lock, printing whose it was; only when its holder's process is known to be "
            "dead (a live one would run beside the next adaptation)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["lock_status"]:
            holder = encoder_adaptation_lock_holder()
            self.stdout.write("free" if holder is None else f"held by {holder}")
            return
        if options["break_lock"]:
            holder = encoder_adaptation_lock_break()
            self.stdout.write("free" if holder is None else f"broken: it was held by {holder}")
            return
        try:
            with encoder_adaptation_lock():
                self._adapt(options)
        except AdaptationRunning as exc:
            raise CommandError(exc.detail) from exc

    def _adapt(self, options: dict[str, Any]) -> None:
        if options["activate"] is not None:
            encoder = AdaptedEncoder.objects.filter(pk=options["activate"]).first()
            if encoder is None:
                raise CommandError(f"No adapted encoder #{options['activate']}.")
            if encoder.status == AdaptationStatus.ACTIVE:
                raise CommandError(f"Adapted encoder #{encoder.pk} is active already.")
        else:
            fit_options = EncoderAdaptationOptions(
                max_queries=options["max_queries"] or settings.ENCODER_ADAPTATION_MAX_QUERIES,
                min_training_queries=options["min_training_queries"],
                seed=options["seed"],
                epochs=options["epochs"],
                batch_size=options["batch_size"],
                mini_batch_size=options["mini_batch_size"],
                passage_tokens=options["passage_tokens"],
            )
            try:
                encoder = encoder_adapt(repository_names=options["repositories"], options=fit_options)
            except InvalidInput as exc:
                raise CommandError(exc.detail) from exc
            self.stdout.write(
                f"adapted encoder #{encoder.pk} {encoder.model_name}: {encoder.query_count} of "
                f"{encoder.mined_query_count} mined queries trained on, {len(encoder.repositories)} repositories "
                f"({encoder.chunk_count} chunks, index version {encoder.index_version})\n"
                f"fitted in {encoder.fit_seconds:.0f} s, training peak RSS {encoder.peak_rss_mb:.0f} MB\n"
                f"held-out accuracy {encoder.held_out_accuracy_before:.3f} -> {encoder.held_out_accuracy:.3f} "
                f"(own passage above its mined negatives, {encoder.held_out_query_count} queries)\n"
                f"model: {encoder.directory}"
            )
            if options["no_switch"]:
                return
            shortfall = adaptation_gain_shortfall(encoder)
            if shortfall is not None:
                raise CommandError(
                    f"Adapted encoder #{encoder.pk} fitted but not switched to: {shortfall}. "
                    f"`manage.py encoder_adapt --activate {encoder.pk}` switches to it anyway."
                )
        try:
            switched = encoder_activate(encoder=encoder)
        except (SwitchFailed, EmbeddingError) as exc:
            raise CommandError(f"Not switched to adapted encoder #{encoder.pk}: {exc}") from exc
        self.stdout.write(self.style.SUCCESS(f"{switched} chunks switched to {encoder.model_name}."))
