from django.urls import include, path

from agents.views import AgentViewSet

# Explicit paths: the spec's paths (/api/agents, /api/profile/<id>, no trailing slash) do not
# follow a router's list/detail layout.
urlpatterns = [
    path("agents", AgentViewSet.as_view({"get": "list"}), name="agent-list"),
    path("profile/<slug:instance_id>", AgentViewSet.as_view({"get": "profile"}), name="agent-profile"),
    path("", include("agents.auth_urls")),
]
