"""The project's URLs plus /bench/static/<path>, served from BENCH_STATIC_ROOT by Django's
static file view, for benchmarks/assets.py."""

import os

from django.urls import path
from django.views.static import serve

from agentplatform.urls import handler404, handler500
from agentplatform.urls import urlpatterns as project_urlpatterns

urlpatterns = [
    path("bench/static/<path:path>", serve, {"document_root": os.environ["BENCH_STATIC_ROOT"]}),
    *project_urlpatterns,
]

__all__ = ["handler404", "handler500", "urlpatterns"]
