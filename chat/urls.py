from django.urls import path

from chat.views import ChatViewSet, chat_stream

# One path for both methods, without the trailing slash a router would add.
urlpatterns = [
    path("chat", ChatViewSet.as_view({"get": "list", "post": "create"}), name="chat"),
    # Served by the stream process (ASGI); the web process answers it with a 307 there (chat/views.py).
    path("chat/stream", chat_stream, name="chat-stream"),
]
