"""The ONNX Runtime path of the local embedding model: the same vectors as sentence-transformers,
an export cached per host and rebuilt when corrupt, bounded failures, no torch in web processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from agentplatform.health import _check_embeddings
from groundtruth.embeddings import (
    EmbeddingError,
    EmbeddingModelNotReady,
    LocalSentenceTransformer,
    _backend_for,
    embedding_backend,
    embedding_backend_load_for_forks,
    packaged_model_path,
)
from groundtruth.inference.exported_model import (
    ExportFailed,
    export_problem,
    exported_model_ensure,
    model_weights_sha256,
)
from groundtruth.inference.sentence_encoder import BATCH_TOKENS, OnnxSentenceEncoder, token_batches
from groundtruth.search.query_embedding import query_embed

TEXTS = [
    "How do I deploy to production?",
    "Deploying a release to production",
    "A recipe for chocolate cake",
    "x",
    "",
    "Ünïcödé — and CJK 日本語 text, with punctuation!?",
    "gunicorn workers " * 200,  # beyond max_seq_length (256 tokens): truncated the same way
    "def embedding_backend() -> EmbeddingBackend: return _backend_for(settings.EMBEDDING_BACKEND)",
]


@pytest.fixture(autouse=True)
def _fresh_backends():
    _backend_for.cache_clear()
    yield
    _backend_for.cache_clear()


def test_onnx_and_torch_runtimes_give_the_same_vectors_in_one_vector_space(settings):
    settings.EMBEDDING_BACKEND, settings.EMBEDDING_MODEL = "local", ""
    settings.EMBEDDING_RUNTIME = "onnx"
    onnx_backend = embedding_backend()
    settings.EMBEDDING_RUNTIME = "torch"
    torch_backend = embedding_backend()
    assert onnx_backend is not torch_backend
    onnx_vectors = np.array(onnx_backend.embed(TEXTS))
    torch_vectors = np.array(torch_backend.embed(TEXTS))
    assert onnx_vectors.shape == torch_vectors.shape == (8, 384)
    cosines = (onnx_vectors * torch_vectors).sum(axis=1)
    assert cosines.min() >= 0.9999
    assert np.allclose(np.linalg.norm(onnx_vectors, axis=1), 1.0, atol=1e-5)
    # Same space: chunks embedded by either are searched together, nothing re-embeds.
    assert onnx_backend.model_name == torch_backend.model_name == "all-MiniLM-L6-v2"
    assert "ONNX Runtime (loaded)" in onnx_backend.describe()


def test_a_gunicorn_arbiter_loads_the_model_prepacked_for_its_forks_once_it_is_exported(settings, tmp_path):
    settings.EMBEDDING_BACKEND, settings.EMBEDDING_MODEL, settings.EMBEDDING_RUNTIME = "local", "", "onnx"
    exported_var_dir = settings.VAR_DIR
    settings.VAR_DIR = tmp_path  # no export here: the workers prepare it themselves, as before
    assert embedding_backend_load_for_forks() is None
    assert not embedding_backend().loaded
    settings.VAR_DIR = exported_var_dir
    _backend_for.cache_clear()  # its export directory comes from VAR_DIR
    exported_model_ensure(model_dir=packaged_model_path(), cache_dir=Path(exported_var_dir) / "models", timeout=600)
    assert embedding_backend_load_for_forks() == "local model all-MiniLM-L6-v2 on ONNX Runtime (loaded)"
    prepacked = embedding_backend()
    assert isinstance(prepacked, LocalSentenceTransformer) and (prepacked.loaded, prepacked.prepacked) == (True, True)
    assert embedding_backend_load_for_forks() is None  # loaded already
    # The same vectors as a process that maps the weights unpacked.
    unpacked = LocalSentenceTransformer(
        model_path=str(packaged_model_path()),
        batch_size=16,
        runtime="onnx",
        export_dir=Path(exported_var_dir) / "models",
    )
    cosines = (np.array(prepacked.embed(TEXTS)) * np.array(unpacked.embed(TEXTS))).sum(axis=1)
    assert unpacked.prepacked is False and cosines.min() >= 0.99999


def test_batches_hold_at_most_the_token_budget_and_the_batch_size():
    # Longest first: two passages of 256 tokens per batch, then more of the shorter ones.
    assert token_batches([256, 256, 256, 200, 120, 100, 90, 30, 8, 8], 512, 64) == [
        range(0, 2),
        range(2, 4),
        range(4, 8),
        range(8, 10),
    ]
    assert token_batches([8] * 100, 512, 64) == [range(0, 64), range(64, 100)]
    assert token_batches([600, 300, 3], 512, 64) == [range(0, 1), range(1, 2), range(2, 3)]
    assert token_batches([], 512, 64) == []
    assert BATCH_TOKENS == 512


def test_token_batched_vectors_equal_those_of_each_text_run_alone(settings):
    model_dir = packaged_model_path()
    exported = exported_model_ensure(model_dir=model_dir, cache_dir=Path(settings.VAR_DIR) / "models", timeout=300)
    batched = OnnxSentenceEncoder(model_dir=model_dir, exported=exported, threads=1)
    alone = OnnxSentenceEncoder(model_dir=model_dir, exported=exported, threads=1, batch_tokens=1)
    texts = TEXTS * 3  # 24 texts: several batches, each in the order given back
    batched_vectors = batched.encode(texts, batch_size=64)
    alone_vectors = alone.encode(texts, batch_size=64)
    assert batched_vectors.shape == alone_vectors.shape == (24, 384)
    # Padding is masked out of the mean: the batch a text runs in changes its vector only by
    # float rounding (and a vector given back in another text's row would differ by far more).
    assert np.abs(batched_vectors - alone_vectors).max() < 1e-5
    assert np.abs(batched_vectors - np.roll(alone_vectors, 1, axis=0)).max() > 0.1
    assert batched.encode([], batch_size=64).shape == (0, 0)


def test_the_export_is_reused_and_a_corrupt_one_is_exported_again(tmp_path):
    model_dir = packaged_model_path()
    first = exported_model_ensure(model_dir=model_dir, cache_dir=tmp_path, timeout=300)
    weights_sha256 = model_weights_sha256(model_dir)
    assert first.weights_sha256 == weights_sha256
    assert first.directory.name.startswith(f"model-{weights_sha256[:16]}-export2-torch")
    assert sorted(path.name for path in first.directory.iterdir()) == ["manifest.json", "model.onnx", "weights.bin"]
    graph_written_at = first.graph_path.stat().st_mtime_ns
    assert exported_model_ensure(model_dir=model_dir, cache_dir=tmp_path, timeout=300) == first
    assert first.graph_path.stat().st_mtime_ns == graph_written_at  # reused, not exported again

    with (first.directory / "weights.bin").open("r+b") as weights:
        weights.truncate(1000)
    assert export_problem(first.directory) == "weights.bin does not match its manifest"
    progress: list[str] = []
    again = exported_model_ensure(model_dir=model_dir, cache_dir=tmp_path, timeout=300, progress=progress.append)
    assert (again, export_problem(again.directory)) == (first, None)
    problem = "weights.bin does not match its manifest"
    assert progress[0] == f"Exporting model to ONNX ({problem}) into {first.directory} ..."
    assert [path.name for path in tmp_path.iterdir() if not path.name.startswith(".export")] == [first.directory.name]


def _model_copy(tmp_path: Path, weights: bytes) -> Path:
    copy = tmp_path / "other-minilm"
    copy.mkdir()
    for path in packaged_model_path().iterdir():
        if path.name != "model.safetensors":
            (copy / path.name).symlink_to(path)
    (copy / "model.safetensors").write_bytes(weights)
    return copy


def test_unusable_weights_fail_with_a_clear_error_and_name_another_vector_space(tmp_path):
    model_dir = _model_copy(tmp_path, b"not safetensors")
    backend = LocalSentenceTransformer(
        model_path=str(model_dir), batch_size=8, runtime="onnx", export_dir=tmp_path / "models", export_timeout=300
    )
    sha256 = model_weights_sha256(model_dir)
    assert backend.model_name == f"other-minilm@{sha256[:12]}"
    with pytest.raises(EmbeddingError, match=r"^the ONNX export of other-minilm failed \(1\): "):
        backend.embed(["x"])
    assert backend.state.startswith("failed: EmbeddingError: the ONNX export of other-minilm failed (1): ")
    # Nothing half-written is left to be mistaken for an export.
    assert [path.name for path in (tmp_path / "models").iterdir()] == [".export.lock"]


def test_an_export_that_does_not_finish_in_time_is_stopped_and_reported(tmp_path):
    with pytest.raises(ExportFailed, match=r"^the ONNX export of model took over 0\.5 s and was stopped$"):
        exported_model_ensure(model_dir=packaged_model_path(), cache_dir=tmp_path, timeout=0.5)
    assert [path.name for path in tmp_path.iterdir()] == [".export.lock"]


def test_while_the_model_is_prepared_search_is_lexical_and_health_says_so(settings, tmp_path):
    settings.EMBEDDING_BACKEND, settings.EMBEDDING_MODEL, settings.EMBEDDING_RUNTIME = "local", "", "onnx"
    settings.VAR_DIR = tmp_path  # no export yet: preparing it takes seconds
    backend = embedding_backend()
    assert isinstance(backend, LocalSentenceTransformer)
    preparing = backend.prepare_in_background()
    assert preparing is not None
    assert backend.prepare_in_background() is None  # one preparation at a time
    with pytest.raises(EmbeddingModelNotReady):
        backend.embed(["deploy"])
    assert query_embed(text="deploy") is None
    health = _check_embeddings()
    assert (health.status, health.detail) == (
        "error",
        "model not ready: local model all-MiniLM-L6-v2 on ONNX Runtime (being prepared)",
    )
    preparing.join(timeout=300)
    assert (backend.state, _check_embeddings().status) == ("loaded", "ok")
    embedding = query_embed(text="deploy")
    assert embedding is not None and (len(embedding.vector), embedding.model_name) == (384, "all-MiniLM-L6-v2")


def test_web_mcp_and_stream_processes_embed_without_importing_torch():
    program = """
import json, sys, django
django.setup()
import agentplatform.urls, agentplatform.asgi, agentplatform.mcp_app, agentplatform.wsgi
import time
from groundtruth.embeddings import embedding_backend
from groundtruth.search.query_embedding import query_embed
# A serving process never loads the model on a request's thread: the first query starts its
# preparation in the background and is answered without it (lexically).
assert query_embed(text="how do I deploy") is None
deadline = time.monotonic() + 300
while not embedding_backend().loaded and time.monotonic() < deadline:
    time.sleep(0.1)
embedding = query_embed(text="how do I deploy")
print(json.dumps({"dimension": len(embedding.vector), "torch": "torch" in sys.modules,
                  "sentence_transformers": "sentence_transformers" in sys.modules}))
"""
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "agentplatform.settings", "EMBEDDING_RUNTIME": "onnx"}
    environment.pop("EMBEDDING_BACKEND", None)
    finished = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=300, env=environment, check=False
    )
    assert finished.returncode == 0, finished.stderr[-2000:]
    assert json.loads(finished.stdout.strip().splitlines()[-1]) == {
        "dimension": 384,
        "torch": False,
        "sentence_transformers": False,
    }


@pytest.mark.parametrize(
    ("entry_point", "threads"),
    [("agentplatform.wsgi", 1), ("agentplatform.mcp_app", 1), ("agentplatform.celery", 3), (None, 3)],
)
def test_serving_processes_infer_on_one_thread_and_batch_processes_on_the_worker_threads(entry_point, threads):
    # A web worker embeds one query while the other workers use the other cores; the Celery worker
    # and commands embed ingest batches one after another and use every core they are given.
    program = f"""
import json, django
django.setup()
entry_point = {entry_point!r}
if entry_point == "agentplatform.celery":
    from agentplatform.celery import app
    from celery.signals import celeryd_init
    celeryd_init.send(sender="worker@bench", instance=None, conf=app.conf, options={{}})
elif entry_point:
    __import__(entry_point)
from groundtruth.embeddings import embedding_backend
print(json.dumps(embedding_backend().threads))
"""
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "agentplatform.settings",
        "EMBEDDING_THREADS": "1",
        "EMBEDDING_WORKER_THREADS": "3",
    }
    environment.pop("EMBEDDING_BACKEND", None)
    finished = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=300, env=environment, check=False
    )
    assert finished.returncode == 0, finished.stderr[-2000:]
    assert json.loads(finished.stdout.strip().splitlines()[-1]) == threads
