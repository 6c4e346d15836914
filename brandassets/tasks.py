from __future__ import annotations

from celery import shared_task


@shared_task(name="brandassets.tasks.asset_registry_sync_task")
def asset_registry_sync_task() -> dict[str, object]:
    """Syncs brand-assets.yml from the registry repository (queued by every ingest request).

    An invalid or unreadable registry keeps the last good one; the sync logs its report."""
    from brandassets.services import asset_registry_sync

    report = asset_registry_sync()
    return {"status": report.status, "listed": report.listed, "served": report.served, "missing": len(report.missing)}
