"""Settings for benchmarks/assets.py: the project's settings, plus a route to Django's static
file view (`django.views.static.serve`) that the asset content endpoint is compared against."""

from agentplatform.settings import *  # noqa: F403

ROOT_URLCONF = "benchmarks.assets_urls"
