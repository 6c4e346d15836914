from django.urls import path

from chat.views import ChatViewSet

# One path for both methods, without the trailing slash a router would add.
urlpatterns = [
    path("chat", ChatViewSet.as_view({"get": "list", "post": "create"}), name="chat"),
]
