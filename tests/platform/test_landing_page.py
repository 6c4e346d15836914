"""The landing page at `/`: what the service is, its links, the health now, the two commands."""

from __future__ import annotations

import pytest
from django.db import connection
from pytest_django.asserts import assertContains, assertNotContains


@pytest.fixture
def healthy_settings(settings):
    # The checks whose outcome depends on the machine (a model directory, an LLM endpoint) are off.
    settings.EMBEDDING_BACKEND = "none"
    settings.LLM_BASE_URL = ""
    return settings


@pytest.mark.django_db
def test_landing_page_links_the_docs_admin_and_health_and_shows_the_health_now(client, healthy_settings):
    response = client.get("/")

    assert response.status_code == 200
    assert response["Content-Type"] == "text/html; charset=utf-8"
    assertContains(response, "<h1>Agent platform and ground-truth service</h1>", html=True)
    assertContains(response, '<a href="/api/docs/">API docs</a>', html=True)
    assertContains(response, '<a href="/api/schema/">/api/schema/</a>', html=True)
    assertContains(response, '<a href="/admin/">Admin</a>', html=True)
    assertContains(response, '<a href="/health">Health</a>', html=True)
    assertContains(response, '<h2>Health now: <span class="status status-ok">ok</span></h2>', html=True)
    assert [(check["name"], check["status"]) for check in response.context["checks"]] == [
        ("database", "ok"),
        ("pgvector", "ok"),
        ("redis", "ok"),
        ("broker", "ok"),
        ("embeddings", "disabled"),
        ("llm", "disabled"),
        ("judge", "disabled"),
    ]
    assertContains(
        response,
        '<tr class="check-llm"><th scope="row">llm</th>'
        '<td><span class="status status-disabled">disabled</span></td>'
        '<td class="detail">no LLM_BASE_URL: /ask answers extractively</td></tr>',
        html=True,
    )
    assertContains(response, "make run     <span", count=1)
    assertContains(response, "make test    <span", count=1)


@pytest.mark.django_db
def test_landing_page_shows_the_same_status_as_health(client, healthy_settings):
    healthy_settings.LLM_BASE_URL = "http://127.0.0.1:9/v1"  # nothing listens on the discard port

    page = client.get("/")
    health = client.get("/health").json()

    assert health["status"] == "degraded"
    assert health["checks"]["llm"]["status"] == "error"
    assertContains(page, '<span class="status status-degraded">degraded</span>', html=True)
    assertContains(page, "Serving, but a non-critical dependency failed: search still answers.")
    assertContains(page, '<td class="detail">language-model endpoint http://127.0.0.1:9/v1 unreachable</td>', html=True)


@pytest.mark.django_db(transaction=True)
def test_landing_page_answers_while_the_database_is_down_and_says_so(client, healthy_settings):
    original = connection.settings_dict["HOST"]
    connection.close()
    connection.settings_dict["HOST"] = "/nonexistent-socket-dir"
    try:
        response = client.get("/")
    finally:
        connection.close()
        connection.settings_dict["HOST"] = original

    assert response.status_code == 200
    assertContains(response, '<span class="status status-unavailable">unavailable</span>', html=True)
    assertContains(response, "The database or pgvector is unavailable: nothing can be searched.")
    assertNotContains(response, "Every dependency answered.")


@pytest.mark.django_db
def test_the_admin_is_named_after_the_project_and_its_view_site_link_is_the_landing_page(admin_client):
    response = admin_client.get("/admin/")

    assertContains(
        response, '<div id="site-name"><a href="/admin/">Agent platform and ground truth</a></div>', html=True
    )
    assertContains(response, '<a href="/">View site</a>', html=True)
    assertContains(response, "<title>Back office | Agent platform admin</title>", html=True)
    assertContains(
        response, '<link rel="icon" href="/static/agentplatform/favicon.svg" type="image/svg+xml">', html=True
    )
