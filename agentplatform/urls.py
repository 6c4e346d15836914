from django.conf import settings
from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

ground_truth_prefix = f"{settings.GROUNDTRUTH_PREFIX}/" if settings.GROUNDTRUTH_PREFIX else ""

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    path("api/", include("agents.urls")),
    path("api/", include("coin.urls")),
    path("api/", include("chat.urls")),
    path(ground_truth_prefix, include("groundtruth.urls")),
    path(ground_truth_prefix, include("brandassets.urls")),
]

handler404 = "agentplatform.errors.handler404"
handler500 = "agentplatform.errors.handler500"
