"""Fixtures of the browser tests besides the browser itself (tests/conftest.py)."""

from tests.embeddingserver import embedding_server  # noqa: F401 (a fixture, shared with tests/groundtruth)
