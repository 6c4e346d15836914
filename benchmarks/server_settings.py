"""Settings of the servers the load benchmarks start (benchmarks/api.py, benchmarks/assets.py):
the project's settings with benchmarks/server_urls.py, which adds the routes they measure against."""

from agentplatform.settings import *  # noqa: F403

ROOT_URLCONF = "benchmarks.server_urls"
