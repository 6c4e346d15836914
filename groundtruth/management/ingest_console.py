"""What the ingest and reindex commands show: a progress bar per repository and one line per run."""

from __future__ import annotations

import logging
from typing import Any, TextIO, cast

from django.core.management.base import OutputWrapper
from django.core.management.color import Style
from tqdm import tqdm

from groundtruth.ingest.pipeline import ProgressCallback
from groundtruth.models import IngestRun, IngestStatus, Repository

PIPELINE_LOGGER = logging.getLogger("groundtruth.ingest.pipeline")


def raw_stream(wrapper: OutputWrapper) -> TextIO:
    """The stream under a command's stdout/stderr: tqdm writes "\r" without a newline, which
    OutputWrapper.write would complete with one."""
    return cast(TextIO, wrapper._out)


class IngestProgressBars:
    """A tqdm bar per repository (files chunked of files to chunk, and the phase), closed on exit."""

    def __init__(self, *, stream: TextIO, enabled: bool) -> None:
        self.stream = stream
        self.enabled = enabled
        self._bars: list[tqdm] = []

    def __enter__(self) -> IngestProgressBars:
        # The command prints one line per run (`run_report`); the pipeline's own "done" log line
        # (meant for worker logs) would say it a second time.
        self._pipeline_log_level = PIPELINE_LOGGER.level
        PIPELINE_LOGGER.setLevel(logging.WARNING)
        return self

    def __exit__(self, *exc: Any) -> None:
        for bar in self._bars:
            bar.close()
        PIPELINE_LOGGER.setLevel(self._pipeline_log_level)

    def for_repository(self, repository: Repository) -> ProgressCallback | None:
        if not self.enabled:
            return None
        # Files to (re)chunk of those that changed: "0/0 files" when nothing changed, never a rate.
        bar = tqdm(
            desc=repository.name,
            total=0,
            bar_format="{desc}: {n_fmt}/{total_fmt} files changed, {elapsed} [{postfix}]",
            file=self.stream,
            leave=True,
        )
        self._bars.append(bar)

        def update(phase: str, done: int, total: int) -> None:
            bar.total = total
            bar.set_postfix_str(phase)
            bar.n = done
            bar.refresh()

        return update


def run_report(run: IngestRun, style: Style) -> tuple[str, bool]:
    """(the line that reports `run`, whether it failed)."""
    name = run.repository.name
    if run.status == IngestStatus.SUCCEEDED:
        return (
            style.SUCCESS(
                f"{name} @ {run.commit[:12]}: run {run.pk} succeeded: files +{run.files_added} "
                f"~{run.files_updated} -{run.files_removed} ={run.files_unchanged}; chunks "
                f"+{run.chunks_added} ~{run.chunks_updated} -{run.chunks_removed} ={run.chunks_unchanged}, "
                f"{run.chunks_embedded} embedded in {run.timings.get('total', 0):.1f} s"
            ),
            False,
        )
    if run.status == IngestStatus.FAILED:
        return style.ERROR(f"{name}: run {run.pk} failed: {run.error}"), True
    return style.WARNING(f"{name}: run {run.pk} is already {run.status} elsewhere; skipped"), False
