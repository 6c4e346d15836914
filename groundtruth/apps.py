from __future__ import annotations

import logging
from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate

logger = logging.getLogger(__name__)


def _schedule_sync_after_migrate(sender: AppConfig, **kwargs: Any) -> None:
    """The beat schedule follows INGEST_SCHEDULE after every migrate (see ingest_schedule_sync)."""
    from django.db import DatabaseError

    from groundtruth.services import ingest_schedule_sync

    try:
        ingest_schedule_sync()
    except DatabaseError:
        # A partial migrate (e.g. to an older state) may lack the beat tables; the next full one syncs.
        logger.warning("Beat schedule not synced: django_celery_beat tables are not migrated yet")


def _schedule_sync_on_beat_start(**kwargs: Any) -> None:
    from groundtruth.services import ingest_schedule_sync

    ingest_schedule_sync()


class GroundTruthConfig(AppConfig):
    name = "groundtruth"
    verbose_name = "Ground truth"

    def ready(self) -> None:
        from celery.signals import beat_init

        post_migrate.connect(_schedule_sync_after_migrate, sender=self, dispatch_uid="groundtruth-schedule-sync")
        beat_init.connect(_schedule_sync_on_beat_start, dispatch_uid="groundtruth-schedule-sync-beat", weak=False)
