"""The served OpenAPI schema documents every operation's errors, auth and rate-limit headers."""

from __future__ import annotations

import pytest

from agentplatform.plumbing.errors import is_api_path

pytestmark = pytest.mark.django_db

METHODS = {"get", "post", "put", "patch", "delete"}
PROBLEM_REF = {"$ref": "#/components/schemas/ProblemDetails"}


@pytest.fixture(scope="module")
def schema(django_db_blocker) -> dict:
    from rest_framework.test import APIClient

    with django_db_blocker.unblock():
        response = APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return response.json()


def operations(schema: dict):
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            if method in METHODS:
                yield f"{method.upper()} {path}", path, operation


def test_the_schema_lists_the_agent_platform_endpoints(schema):
    assert {"/api/agents", "/api/profile/{instance_id}", "/api/chat", "/api/auth/nonce", "/api/auth/wallet"} <= set(
        schema["paths"]
    )


def test_bearer_scheme_is_documented(schema):
    scheme = schema["components"]["securitySchemes"]["bearerAuth"]

    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
    assert "ws_" in scheme["description"] and "ak_" in scheme["description"]


@pytest.mark.parametrize(
    ("operation", "security"),
    [
        ("GET /api/agents", []),
        ("GET /api/chat", []),
        ("GET /api/auth/nonce", []),
        ("POST /api/auth/wallet", []),
        ("GET /health", []),
        ("POST /api/chat", [{"bearerAuth": []}]),
        ("GET /api/wisent/balance", [{"bearerAuth": []}]),
        ("GET /search", [{"bearerAuth": []}, {"cookieAuth": []}]),
        ("GET /repos", [{"bearerAuth": []}, {"cookieAuth": []}]),
        ("POST /ingest/repo", [{"bearerAuth": []}, {"cookieAuth": []}]),
    ],
)
def test_public_operations_need_no_credentials_and_protected_ones_name_theirs(schema, operation, security):
    method, path = operation.split(" ")

    assert schema["paths"][path][method.lower()]["security"] == security


def test_no_operation_offers_no_credentials_as_an_alternative(schema):
    # `{}` among the requirements ("a key, or nothing") is what Swagger UI drew as a closed lock
    # on public operations; public operations say `security: []` instead.
    offering_nothing = [name for name, _, op in operations(schema) if {} in op["security"]]

    assert offering_nothing == []


def test_every_security_scheme_an_operation_names_is_defined(schema):
    named = {scheme for _, _, op in operations(schema) for requirement in op["security"] for scheme in requirement}

    assert named == set(schema["components"]["securitySchemes"]) == {"bearerAuth", "cookieAuth"}
    assert schema["components"]["securitySchemes"]["cookieAuth"] == {
        "type": "apiKey",
        "in": "cookie",
        "name": "sessionid",
    }


def test_problem_details_shape_is_a_component(schema):
    problem = schema["components"]["schemas"]["ProblemDetails"]

    assert set(problem["properties"]) == {"type", "title", "status", "detail", "code", "errors"}
    assert set(problem["required"]) == {"type", "title", "status", "detail", "code"}


def test_every_operation_is_described(schema):
    undescribed = [name for name, _, op in operations(schema) if not (op.get("summary") or op.get("description"))]

    assert undescribed == []


def test_every_error_response_is_problem_json(schema):
    # GET /health answers 503 with its own report (which check failed), not a problem body: a load
    # balancer and a person both read which dependency is down.
    health_report = ("GET /health", "503")
    wrong = [
        (name, status)
        for name, _, op in operations(schema)
        for status, response in op["responses"].items()
        if status[0] in "45"
        and (name, status) != health_report
        and response.get("content") != {"application/problem+json": {"schema": PROBLEM_REF}}
    ]

    assert wrong == []


def test_operations_taking_credentials_document_401_with_the_challenge(schema):
    missing = [
        name
        for name, _, op in operations(schema)
        if any("bearerAuth" in requirement for requirement in op.get("security", []))
        and "WWW-Authenticate" not in op["responses"].get("401", {}).get("headers", {})
    ]

    assert missing == []


def test_operations_requiring_credentials_document_401_and_403(schema):
    missing = [
        name
        for name, _, op in operations(schema)
        if op.get("security") and {} not in op["security"] and not {"401", "403"} <= set(op["responses"])
    ]

    assert missing == []


def test_operations_with_query_parameters_document_400(schema):
    missing = [
        name
        for name, _, op in operations(schema)
        if any(p["in"] == "query" for p in op.get("parameters", [])) and "400" not in op["responses"]
    ]

    assert missing == []


def test_operations_with_path_parameters_document_404(schema):
    missing = [
        name
        for name, _, op in operations(schema)
        if any(p["in"] == "path" for p in op.get("parameters", [])) and "404" not in op["responses"]
    ]

    assert missing == []


def test_operations_with_a_body_document_400_413_and_415(schema):
    missing = [
        name
        for name, _, op in operations(schema)
        if "requestBody" in op and not {"400", "413", "415"} <= set(op["responses"])
    ]

    assert missing == []


def test_agent_platform_operations_document_rate_limits(schema):
    rate_headers = {"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"}
    problems = []
    for name, path, op in operations(schema):
        if not path.startswith("/api/") or path.startswith(("/api/schema", "/api/docs")):
            continue
        if "Retry-After" not in op["responses"].get("429", {}).get("headers", {}):
            problems.append((name, "429"))
        for status, response in op["responses"].items():
            if not rate_headers <= set(response.get("headers", {})):
                problems.append((name, status))

    assert problems == []


def test_every_api_path_in_the_schema_is_covered_by_problem_rendering(schema):
    outside = [path for path in schema["paths"] if not is_api_path(path.split("{")[0])]

    assert outside == []
