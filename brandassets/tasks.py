from __future__ import annotations

from celery import shared_task

from brandassets.services import asset_registry_sync


@shared_task(name="brandassets.tasks.asset_registry_sync_task")
def asset_registry_sync_task() -> dict[str, object]:
    """Syncs brand-assets.yml from the registry repository (queued after every ingest request by
    brandassets/receivers.py).

    An invalid or unreadable registry keeps the last good one; the sync logs its report."""
    report = asset_registry_sync()
    return {"status": report.status, "listed": report.listed, "served": report.served, "missing": len(report.missing)}
