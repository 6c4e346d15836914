from django.apps import AppConfig


class CoinConfig(AppConfig):
    name = "coin"
