import os
from typing import Any

from celery import Celery
from celery.signals import beat_init, celeryd_init

from agentplatform.plumbing.database_backend.deadlines import ProcessKind, process_kind_set

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentplatform.settings")

app = Celery("agentplatform")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@celeryd_init.connect
@beat_init.connect
def _worker_database_deadlines(**kwargs: Any) -> None:
    """The worker (before its pool forks) and beat wait on the database as long as an ingest's
    statements may take (agentplatform/plumbing/database_backend/deadlines.py)."""
    process_kind_set(ProcessKind.WORKER)
