"""brand-assets.yml lives in the registry repository that every ingest re-reads, so every ingest
request, and every push to the registry repository, syncs the brand asset registry too
(connected in BrandAssetsConfig.ready to `groundtruth.signals`)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction

from brandassets.services import SyncReport, asset_registry_sync
from brandassets.tasks import asset_registry_sync_task


def asset_registry_sync_queue(sender: type, **kwargs: Any) -> None:
    """On the worker, once the ingest runs commit, so a slow brand repository never holds up the
    request."""
    transaction.on_commit(lambda: asset_registry_sync_task.apply_async(queue=settings.CELERY_TASK_DEFAULT_QUEUE))


def asset_registry_sync_now(sender: type, **kwargs: Any) -> SyncReport:
    """After `manage.py ingest`, in its process; the command prints the report."""
    return asset_registry_sync()
