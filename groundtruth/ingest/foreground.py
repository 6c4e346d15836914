"""Ingest runs carried out in this process instead of by a worker: the `ingest` and `reindex`
commands, the tests and the benchmarks."""

from __future__ import annotations

from collections.abc import Callable

from groundtruth.ingest.pipeline import ProgressCallback, ingest_run_execute
from groundtruth.ingest.runs import ingest_run_claim, ingest_run_fail
from groundtruth.models import IngestRun, IngestTrigger, Repository
from groundtruth.services import ingest_request, registry_reload


def ingest_foreground(
    *,
    repository_name: str | None,
    ref: str | None,
    trigger: str = IngestTrigger.COMMAND,
    full: bool = False,
    progress_factory: Callable[[Repository], ProgressCallback | None] | None = None,
) -> list[IngestRun]:
    """Runs ingests in this process: one repository or every enabled one, one after the other.
    A repository whose run is already active elsewhere is skipped (its active run is returned as
    is). Returns the runs, finished or failed.

    Re-reads the registry first (this process can: it is where the ingest runs), so a repository
    just added to sources.yml is known. Raises what `registry_reload` and `ingest_request` raise
    (invalid or unreachable registry, unknown or disabled repository).
    """
    runs: list[IngestRun] = []
    registry_reload()
    requests = ingest_request(repository_name=repository_name, ref=ref, trigger=trigger, enqueue=False)
    for request in requests:
        if not request.created:
            runs.append(request.run)
            continue
        run = ingest_run_claim(run_id=request.run.pk, task_id=f"{trigger}")
        if run is None:
            runs.append(IngestRun.objects.get(pk=request.run.pk))
            continue
        progress = progress_factory(run.repository) if progress_factory else None
        try:
            ingest_run_execute(run=run, progress=progress, full=full)
        except Exception as exc:
            ingest_run_fail(run=run, error=f"{type(exc).__name__}: {exc}")
        runs.append(IngestRun.objects.select_related("repository").get(pk=run.pk))
    return runs
