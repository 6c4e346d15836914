"""Embedding backends: the packaged local model offline, an OpenAI-compatible endpoint, none."""

from __future__ import annotations

import math

import pytest

from groundtruth.embeddings import (
    EmbeddingError,
    EmbeddingsDisabled,
    EmbeddingUnavailable,
    _backend_for,
    _pooled_dimension,
    embedding_backend,
    embedding_backend_get,
)
from tests.embeddingserver import EmbeddingServer, hashed_vector


@pytest.fixture(autouse=True)
def _fresh_backends():
    _backend_for.cache_clear()
    yield
    _backend_for.cache_clear()


def test_local_backend_runs_the_packaged_minilm_offline(settings, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    settings.EMBEDDING_BACKEND = "local"
    settings.EMBEDDING_MODEL = ""
    backend = embedding_backend()
    assert backend is embedding_backend()  # one model per process
    # The dimension comes from the model's files: an ingest with nothing to embed never loads it.
    assert (backend.model_name, backend.dimension, backend.loaded) == ("all-MiniLM-L6-v2", 384, False)
    deploy, rollback, cake = backend.embed(
        ["How do I deploy to production?", "Deploying a release to production", "A recipe for chocolate cake"]
    )
    assert (len(deploy), backend.loaded) == (384, True)
    assert math.isclose(sum(value * value for value in deploy), 1.0, rel_tol=1e-5)
    similarity = sum(a * b for a, b in zip(deploy, rollback, strict=True))
    unrelated = sum(a * b for a, b in zip(deploy, cake, strict=True))
    assert similarity > unrelated + 0.3
    import os

    assert os.environ["HF_HUB_OFFLINE"] == "1"


def test_openai_backend_batches_sorts_by_index_and_sends_the_key(settings):
    with EmbeddingServer(dimension=8, model="m-8", api_key="sk-test-123") as server:
        settings.EMBEDDING_BACKEND = "openai"
        settings.EMBEDDING_URL = server.base_url
        settings.EMBEDDING_MODEL = "m-8"
        settings.EMBEDDING_API_KEY = "sk-test-123"
        settings.EMBEDDING_BATCH_SIZE = 2
        settings.EMBEDDING_DIMENSION = 8
        backend = embedding_backend()
        texts = ["alpha beta", "gamma", "delta epsilon", "zeta", "eta"]
        vectors = backend.embed(texts)
        assert vectors == [pytest.approx(hashed_vector(text, 8)) for text in texts]
        assert (server.requests, server.texts_embedded) == (3, texts)
        assert (backend.model_name, backend.dimension) == ("m-8", 8)

        settings.EMBEDDING_API_KEY = "wrong"
        with pytest.raises(EmbeddingError, match="refused the request: 401") as caught:
            embedding_backend().embed(["x"])
        assert not isinstance(caught.value, EmbeddingUnavailable)

        settings.EMBEDDING_API_KEY = "sk-test-123"
        server.fail_with = 503
        with pytest.raises(EmbeddingUnavailable, match="answered 503"):
            embedding_backend().embed(["x"])
        server.fail_with = 429
        with pytest.raises(EmbeddingUnavailable, match="answered 429"):
            embedding_backend().embed(["x"])
    with pytest.raises(EmbeddingUnavailable, match="unreachable: ConnectError"):
        embedding_backend().embed(["x"])


def test_openai_backend_needs_url_and_model(settings):
    settings.EMBEDDING_BACKEND = "openai"
    settings.EMBEDDING_URL = ""
    settings.EMBEDDING_MODEL = "m"
    with pytest.raises(EmbeddingError, match="EMBEDDING_BACKEND=openai needs EMBEDDING_URL"):
        embedding_backend()


def test_none_backend_stores_no_vectors(settings):
    settings.EMBEDDING_BACKEND = "none"
    backend = embedding_backend()
    assert (backend.enabled, backend.model_name, embedding_backend_get()) == (False, "", None)
    with pytest.raises(EmbeddingsDisabled):
        backend.embed(["x"])


def test_a_model_whose_modules_may_change_the_dimension_is_asked_after_loading(tmp_path):
    import json

    (tmp_path / "modules.json").write_text(
        json.dumps(
            [
                {"path": "", "type": "sentence_transformers.models.Transformer"},
                {"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                {"path": "2_Dense", "type": "sentence_transformers.models.Dense"},
            ]
        )
    )
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text('{"word_embedding_dimension": 384}')
    assert _pooled_dimension(tmp_path) is None
    (tmp_path / "modules.json").write_text(json.dumps(json.loads((tmp_path / "modules.json").read_text())[:2]))
    assert _pooled_dimension(tmp_path) == 384
