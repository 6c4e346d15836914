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


def _fits_check() -> None:
    """Reads the fitted parameters in use, so that a bad fit file stops start-up naming the
    variable that chose it (as a bad setting does) instead of failing the first /ask."""
    from django.core.exceptions import ImproperlyConfigured

    from groundtruth.search.fitted_parameters import (
        FitInvalid,
        abstention_fit_current,
        rerank_fit_current,
    )

    # Both vector spaces' fits: a switch to an adapted encoder must not meet a bad file later.
    for variable, read in (
        ("ASK_ABSTENTION_FIT_FILE", abstention_fit_current),
        ("SEARCH_RERANK_FIT_FILE", rerank_fit_current),
    ):
        for adapted in (False, True):
            try:
                read(adapted=adapted)
            except FitInvalid as exc:
                raise ImproperlyConfigured(f"{variable}: {exc}") from exc


class GroundTruthConfig(AppConfig):
    name = "groundtruth"
    verbose_name = "Ground truth"

    def ready(self) -> None:
        from celery.signals import beat_init

        _fits_check()

        post_migrate.connect(_schedule_sync_after_migrate, sender=self, dispatch_uid="groundtruth-schedule-sync")
        beat_init.connect(_schedule_sync_on_beat_start, dispatch_uid="groundtruth-schedule-sync-beat", weak=False)
