"""Celery: the broker, JSON only, late acknowledgement, the database beat scheduler."""

from __future__ import annotations

from agentplatform.settings.cache import REDIS_URL
from agentplatform.settings.env import env

CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default=REDIS_URL)
CELERY_RESULT_BACKEND = None
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
# Django's LOGGING configures the root logger; Celery adding its own handler would print twice.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_TASK_DEFAULT_QUEUE = env.str("CELERY_QUEUE", default="celery")
# Model fits (the adapted encoder's: minutes of both cores; the relevance judge's) have a queue of
# their own, served by the Procfile's `models` worker, so that ingests, webhook-triggered ones
# included, never wait behind a fit. Derived from the default queue, so that a deployment (or a
# test) that names its own queue has its own models queue too.
CELERY_MODELS_QUEUE = f"{CELERY_TASK_DEFAULT_QUEUE}-models"
CELERY_TASK_ROUTES = {
    "groundtruth.tasks.encoder_adapt_task": {"queue": CELERY_MODELS_QUEUE},
    "groundtruth.tasks.judge_fit_task": {"queue": CELERY_MODELS_QUEUE},
}
