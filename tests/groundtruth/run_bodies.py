"""The exact JSON of an ingest run as the API returns it, for the tests that start runs."""

from __future__ import annotations

from groundtruth.models import IngestRun


def queued_run_body(run: IngestRun, *, trigger: str, created: bool) -> dict:
    """A run just queued at ref main: nothing done yet."""
    return {
        "id": run.pk,
        "repo": run.repository.name,
        "ref": "main",
        "commit": "",
        "status": "queued",
        "trigger": trigger,
        "phase": "",
        "files": {"total": 0, "processed": 0, "added": 0, "updated": 0, "removed": 0, "unchanged": 0, "skipped": []},
        "chunks": {"added": 0, "updated": 0, "removed": 0, "unchanged": 0, "embedded": 0},
        "timings": {},
        "error": "",
        "attempts": 0,
        "created_at": run.created_at.isoformat().replace("+00:00", "Z"),
        "started_at": None,
        "heartbeat_at": None,
        "finished_at": None,
        "created": created,
    }
