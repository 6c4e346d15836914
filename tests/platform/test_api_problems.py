import pytest

pytestmark = pytest.mark.django_db


def test_unknown_api_path_is_404_problem_not_html(api_client):
    response = api_client.get("/api/no-such-endpoint")

    assert response.status_code == 404
    assert response["Content-Type"] == "application/problem+json"
    assert response.json() == {
        "type": "urn:problem:not_found",
        "title": "Not Found",
        "status": 404,
        "detail": "No endpoint at this path.",
        "code": "not_found",
    }


def test_oversized_body_is_413_problem_before_any_view(api_client, settings):
    body = "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)

    response = api_client.post("/api/chat", data=body, content_type="application/json")

    assert response.status_code == 413
    assert response.json()["code"] == "body_too_large"


def test_openapi_schema_is_served_offline(api_client):
    response = api_client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")

    assert response.status_code == 200
    assert response.json()["openapi"].startswith("3.")


def test_swagger_docs_page_uses_bundled_assets(api_client):
    response = api_client.get("/api/docs/")

    assert response.status_code == 200
    assert b"/static/drf_spectacular_sidecar/" in response.content
