from django.apps import AppConfig


class GroundTruthConfig(AppConfig):
    name = "groundtruth"
