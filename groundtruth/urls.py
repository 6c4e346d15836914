"""Ground-truth routes, at the root or under GROUNDTRUTH_PREFIX (agentplatform/urls.py).

Explicit paths: the spec's paths are not a router's conventions.
"""

from django.urls import path

from groundtruth.push_views import GitPushHookViewSet
from groundtruth.search_views import AskViewSet, SearchViewSet
from groundtruth.source_views import SourceLinesViewSet
from groundtruth.views import IngestViewSet, RepositoryViewSet

urlpatterns = [
    path("repos", RepositoryViewSet.as_view({"get": "list"}), name="repos"),
    path("ingest/repo", IngestViewSet.as_view({"post": "create"}), name="ingest-repo"),
    path("ingest/runs", IngestViewSet.as_view({"get": "list"}), name="ingest-runs"),
    path("ingest/runs/<int:run_id>", IngestViewSet.as_view({"get": "retrieve"}), name="ingest-run"),
    path("hooks/git", GitPushHookViewSet.as_view({"post": "create"}), name="hooks-git"),
    path("search", SearchViewSet.as_view({"get": "list"}), name="search"),
    path("ask", AskViewSet.as_view({"post": "create"}), name="ask"),
    # A repository name is owner/name (two segments); the file path may hold any number of them.
    path(
        "sources/<str:owner>/<str:name>/<path:path>",
        SourceLinesViewSet.as_view({"get": "retrieve"}),
        name="source-lines",
    ),
]
