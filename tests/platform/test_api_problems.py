"""Every error under /api/ is RFC 9457 problem details (application/problem+json), never HTML."""

from __future__ import annotations

import logging

import pytest

from agentplatform.plumbing.errors import api_path_prefixes, is_api_path

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.platform.urls_testonly")]

PROBLEM = "application/problem+json"


def problem(status: int, code: str, title: str, detail: str, **extra) -> dict:
    return {"type": f"urn:problem:{code}", "title": title, "status": status, "detail": detail, "code": code, **extra}


@pytest.mark.parametrize("accept", ["application/json", "text/html", "*/*"])
def test_unknown_api_path_is_404_problem_not_html(api_client, accept):
    response = api_client.get("/api/no-such-endpoint", HTTP_ACCEPT=accept)

    assert response.status_code == 404
    assert response["Content-Type"] == PROBLEM
    assert response.json() == problem(404, "not_found", "Not Found", "No endpoint at this path.")


def test_unknown_id_is_404_problem(api_client):
    response = api_client.get("/api/profile/nobody")

    assert response.status_code == 404
    assert response["Content-Type"] == PROBLEM
    assert response.json()["code"] == "not_found"


def test_wrong_method_on_a_real_endpoint_is_405_problem_with_allow(api_client):
    response = api_client.put("/api/agents", {}, format="json")

    assert response.status_code == 405
    assert response["Content-Type"] == PROBLEM
    assert response["Allow"] == "GET, HEAD, OPTIONS"
    assert response.json() == problem(405, "method_not_allowed", "Method Not Allowed", 'Method "PUT" not allowed.')


def test_non_json_post_is_415_problem(api_client):
    response = api_client.post("/api/auth/wallet", "<xml/>", content_type="application/xml")

    assert response.status_code == 415
    assert response["Content-Type"] == PROBLEM
    assert response.json() == problem(
        415, "unsupported_media_type", "Unsupported Media Type", 'Unsupported media type "application/xml" in request.'
    )


def test_oversized_body_is_413_problem_before_any_view(api_client, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    body = '{"message": "' + "x" * 2000 + '"}'

    response = api_client.post("/api/chat", data=body, content_type="application/json")

    assert response.status_code == 413
    assert response["Content-Type"] == PROBLEM
    assert response.json() == problem(
        413, "body_too_large", "Request Entity Too Large", "The request body is larger than the limit of 1024 bytes."
    )


def test_validation_error_is_400_with_one_entry_per_field(api_client):
    response = api_client.get("/api/agents", {"status": "sleeping"})

    assert response.status_code == 400
    assert response["Content-Type"] == PROBLEM
    message = '"sleeping" is not a status; allowed: pending, running, paused, stopped, error.'
    assert response.json() == problem(
        400, "invalid", "Invalid input", f"status: {message}", errors=[{"field": "status", "message": message}]
    )


def test_malformed_json_is_400_problem(api_client):
    response = api_client.post("/api/auth/wallet", "{", content_type="application/json")

    assert response.status_code == 400
    assert response["Content-Type"] == PROBLEM
    assert response.json() == problem(
        400,
        "invalid_json",
        "Bad Request",
        "The body is not valid JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1).",
    )


def test_missing_credentials_are_401_problem_with_a_bearer_challenge(api_client):
    response = api_client.post("/api/test/trade")

    assert response.status_code == 401
    assert response["Content-Type"] == PROBLEM
    assert response["WWW-Authenticate"] == "Bearer"
    assert response.json() == problem(
        401, "not_authenticated", "Unauthorized", "Authentication credentials were not provided."
    )


def test_unexpected_error_in_an_api_view_is_a_logged_500_problem_without_details(api_client, caplog):
    with caplog.at_level(logging.ERROR):
        response = api_client.get("/api/test/explode")

    assert response.status_code == 500
    assert response["Content-Type"] == PROBLEM
    assert response.json() == problem(500, "server_error", "Internal Server Error", "An unexpected error occurred.")
    assert b"sk_123" not in response.content
    assert any(record.exc_info and "sk_123" in str(record.exc_info[1]) for record in caplog.records)


def test_unexpected_error_in_a_plain_django_view_under_api_is_a_500_problem(api_client):
    response = api_client.get("/api/test/explode-plain")

    assert response.status_code == 500
    assert response["Content-Type"] == PROBLEM
    assert response.json() == problem(500, "server_error", "Internal Server Error", "An unexpected error occurred.")


def test_paths_outside_the_api_keep_html_error_pages(api_client):
    response = api_client.get("/no-such-page")

    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


def test_api_paths_are_read_from_the_ground_truth_url_confs_at_their_mount(settings):
    assert api_path_prefixes() == (
        "/api/",
        "/ask",
        "/assets",
        "/health",
        "/hooks",
        "/ingest",
        "/repos",
        "/search",
        "/sources",
    )

    settings.GROUNDTRUTH_PREFIX = "gt"

    gt = ("/gt/ask", "/gt/assets", "/gt/health", "/gt/hooks", "/gt/ingest", "/gt/repos", "/gt/search", "/gt/sources")
    assert api_path_prefixes() == ("/api/", *gt)
    assert is_api_path("/gt/ingest/runs/7") and not is_api_path("/ingest/runs/7")


def test_openapi_schema_is_served_offline(api_client):
    response = api_client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")

    assert response.status_code == 200
    assert response.json()["openapi"].startswith("3.")


def test_swagger_docs_page_uses_bundled_assets(api_client):
    response = api_client.get("/api/docs/")

    assert response.status_code == 200
    page = response.content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in page
    assert "cdn." not in page and "unpkg" not in page
