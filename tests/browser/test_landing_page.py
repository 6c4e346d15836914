"""The landing page in Chromium: what a newcomer sees at `/`, and where its links go."""

from __future__ import annotations

from django.test import override_settings


@override_settings(EMBEDDING_BACKEND="none", LLM_BASE_URL="")
def test_landing_page_says_what_the_service_is_and_links_the_docs_admin_and_health(browser):
    browser.open("/")

    assert browser.driver.title == "Agent platform and ground-truth service"
    assert browser.text("h1") == "Agent platform and ground-truth service"
    assert browser.texts("#where a") == ["API docs", "/api/schema/", "Admin", "Health", "Live chat"]
    assert browser.text("#health h2") == "Health now: ok"
    assert browser.texts("#health th") == ["database", "pgvector", "redis", "broker", "embeddings", "llm", "judge"]
    assert browser.text("#commands pre").splitlines() == [
        "make run     # installs into .venv, migrates, loads demo data once, starts web + worker + beat",
        "make test    # installs into .venv (and Chromium), runs ruff, mypy and the whole test suite",
    ]
    assert browser.horizontal_overflow("html") == 0
    browser.screenshot("landing", full_page=True)
    assert browser.console_errors() == []

    browser.find("#where a[href='/health']").click()
    assert browser.path == "/health"
    assert '"status":"ok"' in browser.text("body").replace(" ", "")


def test_admin_view_site_link_leads_to_the_landing_page(staff_browser):
    assert staff_browser.text("#site-name") == "Agent platform and ground truth"

    staff_browser.find("#user-tools a[href='/']").click()

    assert staff_browser.path == "/"
    assert staff_browser.text("h1") == "Agent platform and ground-truth service"


def test_api_docs_link_opens_swagger_ui(browser):
    browser.open("/")
    browser.find("#where a[href='/api/docs/']").click()

    browser.wait_for(".swagger-ui .info .title")
    assert browser.path == "/api/docs/"
    assert browser.text(".swagger-ui .info .title").startswith("Agent platform and ground-truth API")
