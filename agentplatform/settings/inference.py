"""Inference: the embedding backend and runtime, and the language model /ask may call."""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

from agentplatform.settings.env import env, env_boolean, env_non_negative, env_positive_int

EMBEDDING_BACKEND = env.str("EMBEDDING_BACKEND", default="local")
if EMBEDDING_BACKEND not in {"local", "openai", "none"}:
    raise ImproperlyConfigured("EMBEDDING_BACKEND must be one of local, openai, none")
EMBEDDING_MODEL = env.str("EMBEDDING_MODEL", default="")
EMBEDDING_URL = env.str("EMBEDDING_URL", default="")
EMBEDDING_API_KEY = env.str("EMBEDDING_API_KEY", default="")
EMBEDDING_BATCH_SIZE = env_positive_int("EMBEDDING_BATCH_SIZE", 64)
EMBEDDING_TIMEOUT_SECONDS = env_non_negative("EMBEDDING_TIMEOUT_SECONDS", 60.0)
EMBEDDING_DIMENSION = env_positive_int("EMBEDDING_DIMENSION", 1) if env.str("EMBEDDING_DIMENSION", default="") else None
# local backend: what runs the model. onnx (default): ONNX Runtime over an export made once per host
# in VAR_DIR/models, twice as fast, weights shared by every process, no torch in web/MCP/stream
# processes; torch: sentence-transformers, the same vectors (kept to compare and to fall back).
EMBEDDING_RUNTIME = env.str("EMBEDDING_RUNTIME", default="onnx")
if EMBEDDING_RUNTIME not in {"onnx", "torch"}:
    raise ImproperlyConfigured("EMBEDDING_RUNTIME must be one of onnx, torch")
# onnx runtime: threads per inference in the serving processes (web, stream, MCP). 1 suits them:
# one query each, and as many workers as cores already use every core.
EMBEDDING_THREADS = env_positive_int("EMBEDDING_THREADS", 1)
# onnx runtime: threads per inference in the Celery worker and management commands, which embed
# ingest batches one after another: every core (twice the texts/s of one thread on 2 cores,
# benchmarks/inference.py).
EMBEDDING_WORKER_THREADS = env_positive_int("EMBEDDING_WORKER_THREADS", os.cpu_count() or 1)
EMBEDDING_EXPORT_TIMEOUT_SECONDS = env_non_negative("EMBEDDING_EXPORT_TIMEOUT_SECONDS", 600.0)

# The adapted encoder (docs/ground-truth-adaptation.md): MiniLM fine-tuned on pairs mined from the
# indexed documentation. True: an ingest that changed the index enough queues a fit, a re-embed of
# every chunk into the new model's space and the switch, on the models queue (settings/celery.py:
# ingests never wait behind it; the worker trains in a child process). On by default: it ranks
# better in both formats of the development set, cross-validated; a fit of its 7,324 chunks costs
# about 17 minutes of both cores (fit and re-embedding) and 1.4 GB (docs/ground-truth-adaptation.md).
ENCODER_ADAPTATION_ENABLED = env_boolean("ENCODER_ADAPTATION_ENABLED", True)
# An automatic adaptation switches to the model it fitted only when that model's held-out mined
# accuracy (own passage above its mined negatives, on queries kept out of its training) beats the
# model it was fitted from by at least this much: a fit that does not measurably help is kept
# `fitted`, and `manage.py encoder_adapt --activate ID` switches to it by hand.
ENCODER_ADAPTATION_MIN_GAIN = env_non_negative("ENCODER_ADAPTATION_MIN_GAIN", 0.02)
# Where this host keeps adapted models (fitted here, or restored from PostgreSQL, where a fit
# stores every encoder's files: groundtruth/adaptation/model_files.py). Nothing is shared between hosts.
ENCODER_ADAPTATION_DIR = env.str("ENCODER_ADAPTATION_DIR", default="")
ENCODER_ADAPTATION_MAX_QUERIES = env_positive_int("ENCODER_ADAPTATION_MAX_QUERIES", 1536)
ENCODER_ADAPTATION_TIMEOUT_SECONDS = env_non_negative("ENCODER_ADAPTATION_TIMEOUT_SECONDS", 3600.0)
ENCODER_ADAPTATION_REFIT_CHANGED_SHARE = env_non_negative("ENCODER_ADAPTATION_REFIT_CHANGED_SHARE", 0.25)
# After an automatic adaptation failed (a corpus too small, a training over time, a failed
# switch), the next is due only once the corpus changed by the share above, or after this long.
ENCODER_ADAPTATION_RETRY_SECONDS = env_non_negative("ENCODER_ADAPTATION_RETRY_SECONDS", 7 * 24 * 3600.0)
# How often a process re-reads which encoder is active (one small query): after a switch, a
# process still on the previous model answers lexically for at most this long.
ENCODER_ACTIVE_CHECK_SECONDS = env_non_negative("ENCODER_ACTIVE_CHECK_SECONDS", 10.0)


LLM_BASE_URL = env.str("LLM_BASE_URL", default="")
LLM_MODEL = env.str("LLM_MODEL", default="")
LLM_API_KEY = env.str("LLM_API_KEY", default="")
LLM_TIMEOUT_SECONDS = env_non_negative("LLM_TIMEOUT_SECONDS", 30.0)
