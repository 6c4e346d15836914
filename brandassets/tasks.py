from __future__ import annotations

import logging

from celery import shared_task

logger = logging.getLogger(__name__)


@shared_task(name="brandassets.tasks.asset_registry_sync_task")
def asset_registry_sync_task() -> dict[str, object]:
    """Syncs brand-assets.yml from the registry repository (queued by every ingest request).

    An invalid or unreadable registry keeps the last good one; the report says why."""
    from brandassets.services import asset_registry_sync

    report = asset_registry_sync()
    log = logger.info if report.ok and not report.missing else logger.warning
    for line in report.lines():
        log("%s", line)
    return {"status": report.status, "listed": report.listed, "served": report.served, "missing": len(report.missing)}
