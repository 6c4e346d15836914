"""Every shell example of README.md and docs/*.md runs as written against a live service with the
demo data, started as `make run` starts it: the embedding model prepared, `seed_demo --once`, a
Celery worker that runs the first ingest it queues, gunicorn, the stream and the MCP processes
(tests/docs/doc_examples.py says how an example is run and checked)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from django.conf import settings

from brandassets.models import BrandAsset
from groundtruth.models import IngestRun, IngestStatus
from tests import celeryworker
from tests.celeryworker import celery_worker
from tests.docs.doc_examples import ROOT, document_directory, example_run, examples
from tests.liveserver import gunicorn_server, procfile_server

# The demo's repositories ingested (three enabled), and its brand assets synced.
DEMO_RUNS = 3
DEMO_ASSETS = 10


def test_examples_are_found_and_every_skipped_one_says_why():
    found = examples()

    assert len([example for example in found if example.not_run_reason is None]) >= 20
    assert [example.where for example in found if example.language == "console"] == []
    assert [example.where for example in found if example.not_run_reason == ""] == []


def _manage(*arguments: str, environment: dict[str, str]) -> None:
    subprocess.run([sys.executable, "manage.py", *arguments], cwd=ROOT, env=environment, check=True, timeout=900)


def _wait_for_demo_ingest(*, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = list(IngestRun.objects.values_list("status", flat=True))
        if IngestStatus.FAILED in runs:
            raise AssertionError(f"a demo ingest failed: {list(IngestRun.objects.values('repository__name', 'error'))}")
        if runs.count(IngestStatus.SUCCEEDED) == DEMO_RUNS and BrandAsset.objects.count() == DEMO_ASSETS:
            return
        time.sleep(1)
    raise AssertionError(f"the demo ingest did not finish: {runs}, {BrandAsset.objects.count()} brand assets")


def test_every_shell_example_of_the_docs_runs_against_the_demo(transactional_db, tmp_path, monkeypatch):
    for variable in ("SOURCE_REGISTRY_REPO", "GIT_LOCAL_ROOTS", "SIWE_DOMAIN", "WEB_BASE_URL", "GROUNDTRUTH_PREFIX"):
        monkeypatch.delenv(variable, raising=False)
    var_dir = tmp_path / "var"
    var_dir.mkdir()
    # The host's ONNX export, as `make run` leaves it (exported once per host; prepare_models below
    # makes it if this host has none yet).
    models = Path(settings.VAR_DIR) / "models"
    models.mkdir(parents=True, exist_ok=True)
    (var_dir / "models").symlink_to(models)
    environment = {
        **os.environ,
        "DATABASE_URL": celeryworker.test_database_url(),
        "VAR_DIR": str(var_dir),
        "CELERY_QUEUE": f"docs-{uuid.uuid4().hex}",
        # The push-webhook example signs its delivery with the server's secret, from the environment.
        "INGEST_WEBHOOK_SECRET": uuid.uuid4().hex,
    }

    _manage("prepare_models", environment=environment)
    _manage("seed_demo", "--once", environment=environment)
    logs = tmp_path / "logs"
    logs.mkdir()
    with celery_worker(queue=environment["CELERY_QUEUE"], environment=environment, log_path=logs / "worker.log"):
        _wait_for_demo_ingest(timeout=600)
        with (
            procfile_server(
                name="stream", port_variable="STREAM_PORT", environment=environment, log_path=logs / "stream.log"
            ) as stream,
            gunicorn_server(
                environment={**environment, "STREAM_PORT": stream.rpartition(":")[2]}, log_path=logs / "web.log"
            ) as web,
            procfile_server(
                name="mcp",
                port_variable="MCP_PORT",
                environment={**environment, "WEB_BASE_URL": web},
                log_path=logs / "mcp.log",
            ) as mcp,
        ):
            addresses = {"web": web, "stream": stream, "mcp": mcp}
            failures = []
            ran = 0
            for document in sorted({example.document for example in examples()}):
                directory = document_directory(tmp_path / "examples", document, var_dir)
                for example in examples():
                    if example.document != document or example.not_run_reason is not None:
                        continue
                    ran += 1
                    problem = example_run(example, directory=directory, environment=environment, addresses=addresses)
                    if problem:
                        failures.append(problem)

    assert "\n\n".join(failures) == ""
    assert ran == len([example for example in examples() if example.not_run_reason is None])
