"""The staff console in Chromium: a question asked in "Ask the docs" shows the cited lines
highlighted, and an ingest run's page follows the run live, without a reload."""

from __future__ import annotations

import threading
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from django.db import connection
from selenium.webdriver.support.select import Select
from selenium.webdriver.support.wait import WebDriverWait

from groundtruth import services
from groundtruth.ingest.foreground import ingest_foreground
from groundtruth.ingest.pipeline import ingest_run_execute
from groundtruth.ingest.runs import ingest_run_claim
from groundtruth.models import IngestRun, IngestStatus
from groundtruth.search.abstention_model import abstention_model_parse
from tests.chromium import Browser
from tests.gitrepos import GitWorkTree
from tests.groundtruth.conftest import sources_yaml
from tests.groundtruth.fits import abstention_fit_use

CONFIGURE = """\
# Configure

## Token

The service reads its credentials from the environment.
Set `ACME_TOKEN` in the environment before the first start.
A missing token stops the service with a clear error.

## Logging

Logs go to standard output.
"""

TOPICS = 8  # files of the repository besides docs/configure.md: enough batches to watch


@pytest.fixture
def handbook(settings, tmp_path: Path) -> GitWorkTree:
    """acme/handbook in the registry: docs/configure.md and TOPICS small topic pages."""
    settings.GIT_CACHE_DIR = tmp_path / "git-cache"
    settings.GIT_HTTP_TOKEN = ""
    settings.LLM_BASE_URL = ""
    # The question's words must be in the documentation and in a top passage: a decision the
    # test can reason about (the hashed test embeddings carry no meaning).
    abstention_fit_use(
        settings, tmp_path, model=abstention_model_parse({"intercept": -4, "known": 4, "coverage": 4}), threshold=0.5
    )
    tree = GitWorkTree.create(tmp_path / "handbook")
    tree.write("docs/configure.md", CONFIGURE)
    for number in range(1, TOPICS + 1):
        tree.write(f"docs/topic-{number}.md", f"# Topic {number}\n\nNotes on topic number {number}.\n")
    tree.commit("docs")
    registry = GitWorkTree.create(tmp_path / "registry")
    registry.write(
        "sources.yml",
        sources_yaml({"name": "acme/handbook", "url": str(tree.path), "trust": "canonical", "include": ["docs/*.md"]}),
    )
    registry.commit("registry")
    settings.SOURCE_REGISTRY_REPO = str(registry.path)
    settings.SOURCE_REGISTRY_REF = "main"
    settings.SOURCE_REGISTRY_PATH = "sources.yml"
    return tree


def test_a_question_in_the_console_shows_the_cited_lines_highlighted(
    staff_browser: Browser, handbook, embedding_server
):
    [run] = ingest_foreground(repository_name="acme/handbook", ref=None)
    assert run.status == IngestStatus.SUCCEEDED, run.error

    staff_browser.open("/admin/")
    staff_browser.find("#staff-console a[href='/admin/console/ask/']").click()
    staff_browser.fill("#id_q", "Where do I set ACME_TOKEN?")
    Select(staff_browser.find("#id_repo")).select_by_value("acme/handbook")
    staff_browser.submit("#ask-console-submit")

    # A GET form: the result's address can be shared.
    address = urlsplit(staff_browser.path)
    assert address.path == "/admin/console/ask/"
    assert parse_qs(address.query) == {"q": ["Where do I set ACME_TOKEN?"], "repo": ["acme/handbook"]}
    assert staff_browser.text("#sources-found") == "Answered from 1 cited passage (extractive)."
    assert staff_browser.text("#citation-1 .where") == (
        f"[1] acme/handbook : docs/configure.md @ {run.commit[:12]} lines 5\N{EN DASH}7 source"
    )
    assert staff_browser.texts("#citation-1 tr.cited") == [
        "5 The service reads its credentials from the environment.",
        "6 Set `ACME_TOKEN` in the environment before the first start.",
        "7 A missing token stops the service with a clear error.",
    ]
    assert staff_browser.texts("#citation-1 tr:not(.cited) .line-number") == ["2", "3", "4", "8", "9", "10"]
    assert staff_browser.text("#citation-1 .lexical-rank") == "1"
    assert staff_browser.text("#citation-1 .dense-rank") == "1"
    # The /search column beside it: the whole section cited, ranked by both legs.
    assert staff_browser.text("#hit-1 .where") == (
        f"[1] acme/handbook : docs/configure.md @ {run.commit[:12]} lines 1\N{EN DASH}7 source"
    )
    assert staff_browser.find("#search-results").location["x"] > staff_browser.find("#ask-result").location["x"]
    assert staff_browser.horizontal_overflow("html") == 0
    staff_browser.screenshot("console-ask-answered", full_page=True)
    assert staff_browser.console_errors() == []

    staff_browser.fill("#id_q", "How do I rotate Kubernetes secrets?")
    staff_browser.submit("#ask-console-submit")

    assert staff_browser.text("#sources-missing") == "Sources missing: no answer is given."
    assert staff_browser.text("#sources-missing-evidence .reason") == (
        "The model's probability that the passages answer, 0.0180, is below the threshold 0.5."
    )
    assert staff_browser.texts("#sources-missing-evidence tr.feature-known td") == ["known", "0.0", "4.0", "0.0"]
    assert staff_browser.find_all("#citation-1") == []
    staff_browser.screenshot("console-ask-sources-missing", full_page=True)


def _ingest_in_a_thread(run_id: int, failures: list[BaseException]) -> threading.Thread:
    """The run carried out as a worker would, beside the live server that serves the page."""

    def work() -> None:
        try:
            run = ingest_run_claim(run_id=run_id, worker="browser-test")
            assert run is not None
            ingest_run_execute(run=run)
        except BaseException as exc:  # reported by the test, not lost in the thread
            failures.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=work, name="browser-test-ingest")
    thread.start()
    return thread


def _progress(browser: Browser) -> tuple[str, int, int]:
    status, done, total = browser.driver.execute_script(
        "return [document.getElementById('ingest-status').textContent,"
        " document.getElementById('ingest-files-processed').textContent,"
        " document.getElementById('ingest-files-total').textContent]"
    )
    return status, int(done), int(total)


def test_an_ingest_runs_page_follows_the_run_live_without_a_reload(
    staff_browser: Browser, handbook, embedding_server, settings
):
    settings.INGEST_FILE_BATCH_SIZE = 1
    embedding_server.delay_seconds = 0.4  # each file's batch takes a moment: the run can be watched
    services.registry_reload()  # as a worker syncs it: the request decides from the synced rows
    [request] = services.ingest_request(repository_name="acme/handbook", ref=None, trigger="admin", enqueue=False)
    run = request.run

    staff_browser.open(f"/admin/groundtruth/ingestrun/{run.pk}/change/")
    assert staff_browser.text("#ingest-status") == "queued"
    assert staff_browser.text("#content h2") == f"acme/handbook run #{run.pk} (queued)"
    staff_browser.driver.execute_script("window.sameDocument = true")  # gone if the page reloads
    failures: list[BaseException] = []
    thread = _ingest_in_a_thread(run.pk, failures)
    seen: list[tuple[str, int, int]] = []

    def midway(driver: object) -> bool:
        seen.append(_progress(staff_browser))
        status, done, total = seen[-1]
        return status == "running" and 0 < done < total

    WebDriverWait(staff_browser.driver, 30, poll_frequency=0.1).until(midway)
    staff_browser.screenshot("ingest-run-progress-running")
    bar = staff_browser.find("#ingest-bar")
    assert 0 < float(bar.get_attribute("value")) < float(bar.get_attribute("max")) == TOPICS + 1
    staff_browser.wait_for_text("#ingest-status", "succeeded", timeout=60)
    thread.join(timeout=60)

    assert failures == []
    assert staff_browser.driver.execute_script("return window.sameDocument") is True
    assert _progress(staff_browser) == ("succeeded", TOPICS + 1, TOPICS + 1)
    assert (bar.get_attribute("value"), bar.get_attribute("max")) == ("1", "1")
    assert staff_browser.text("#ingest-summary") == (
        f"Files: {TOPICS + 1} added, 0 updated, 0 removed, 0 unchanged. "
        f"Chunks: {TOPICS + 2} added, 0 updated, 0 removed, 0 unchanged. Reload for the final timings and counts"
    )
    # The page's own fields agree with the panel.
    assert staff_browser.text(".field-status .readonly") == "succeeded"
    assert staff_browser.text(".field-files_processed .readonly") == str(TOPICS + 1)
    # So does the run's title, in the heading, the breadcrumbs and the tab.
    title = f"acme/handbook run #{run.pk} (succeeded)"
    assert staff_browser.text("#content h2") == title
    assert staff_browser.text(".breadcrumbs").endswith(f"\u203a {title}")
    assert staff_browser.driver.title.startswith(title)
    assert staff_browser.find("#ingest-live").is_displayed() is False  # the poll stopped
    assert IngestRun.objects.get(pk=run.pk).status == IngestStatus.SUCCEEDED
    staff_browser.screenshot("ingest-run-progress-succeeded")
    assert staff_browser.console_errors() == []
