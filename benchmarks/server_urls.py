"""The project's URLs plus the routes only a benchmark's server has (benchmarks/server_settings.py):

- /bench/ceiling: a bare view returning a constant body, the ceiling that benchmarks/api.py
  compares the API endpoints against;
- /bench/static/<path> (when BENCH_STATIC_ROOT is set): Django's static file view over that
  directory, which benchmarks/assets.py compares the asset content endpoint against.
"""

import os
from typing import Any

from django.http import HttpRequest, JsonResponse
from django.urls import path
from django.views.static import serve
from drf_spectacular.utils import extend_schema

from agentplatform.urls import handler404, handler500
from agentplatform.urls import urlpatterns as project_urlpatterns


@extend_schema(exclude=True)
def ceiling_view(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok", "service": "agentplatform"})


urlpatterns: list[Any] = [path("bench/ceiling", ceiling_view, name="bench-ceiling")]
if static_root := os.environ.get("BENCH_STATIC_ROOT"):
    urlpatterns.append(path("bench/static/<path:path>", serve, {"document_root": static_root}))
urlpatterns += project_urlpatterns

__all__ = ["handler404", "handler500", "urlpatterns"]
