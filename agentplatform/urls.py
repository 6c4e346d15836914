from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from agentplatform.ground_truth_routes import GROUND_TRUTH_URLCONFS, ground_truth_mount
from agentplatform.landing import landing_page
from chat.pages import chat_live_page

urlpatterns = [
    path("", landing_page, name="landing"),
    path("chat/", chat_live_page, name="chat-live"),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    path("api/", include("agents.urls")),
    path("api/", include("coin.urls")),
    path("api/", include("chat.urls")),
    *(path(ground_truth_mount(), include(urlconf)) for urlconf in GROUND_TRUTH_URLCONFS),
]

handler404 = "agentplatform.plumbing.errors.handler404"
handler500 = "agentplatform.plumbing.errors.handler500"
