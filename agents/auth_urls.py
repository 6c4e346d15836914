"""Sign-In with Ethereum routes, included under /api/ by agents/urls.py."""

from django.urls import path

from agents.auth_views import WalletAuthViewSet

urlpatterns = [
    path("auth/nonce", WalletAuthViewSet.as_view({"get": "nonce"}), name="auth-nonce"),
    path("auth/wallet", WalletAuthViewSet.as_view({"post": "sign_in"}), name="auth-wallet"),
]
