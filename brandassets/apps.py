from django.apps import AppConfig


class BrandAssetsConfig(AppConfig):
    name = "brandassets"
