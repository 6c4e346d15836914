"""The OpenAPI schema documents the agent platform endpoints: parameters, bodies, errors and auth."""

import pytest
from django.conf import settings

pytestmark = pytest.mark.django_db

SEGMENT = settings.COIN_SEGMENT


@pytest.fixture(scope="module")
def schema(django_db_blocker):
    from rest_framework.test import APIClient

    with django_db_blocker.unblock():
        response = APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return response.json()


@pytest.mark.parametrize(
    ("path", "method", "parameters", "statuses", "public"),
    [
        ("/api/agents", "get", ["status"], ["200", "400", "401", "429"], True),
        ("/api/profile/{instance_id}", "get", ["instance_id"], ["200", "401", "404", "429"], True),
        (f"/api/{SEGMENT}/balance", "get", ["user_id"], ["200", "400", "401", "403", "429"], False),
        (f"/api/{SEGMENT}/history", "get", ["limit", "period"], ["200", "400", "401", "404", "429"], True),
        ("/api/chat", "get", ["before", "limit"], ["200", "400", "401", "429"], True),
        (
            "/api/chat",
            "post",
            ["Idempotency-Key"],
            ["201", "400", "401", "403", "409", "413", "415", "429"],
            False,
        ),
    ],
)
def test_endpoint_is_documented(schema, path, method, parameters, statuses, public):
    operation = schema["paths"][path][method]

    assert sorted(p["name"] for p in operation.get("parameters", [])) == sorted(parameters)
    assert sorted(operation["responses"]) == statuses
    for status in statuses:
        if status.startswith("4"):
            assert list(operation["responses"][status]["content"]) == ["application/problem+json"]
    assert operation["security"] == ([] if public else [{"bearerAuth": []}])


def test_chat_post_body_and_money_types_are_documented(schema):
    components = schema["components"]["schemas"]

    assert components["ChatPostRequest"]["required"] == ["message"]
    assert components["ChatPostRequest"]["properties"]["message"]["maxLength"] == 2000
    assert components["AgentSummary"]["properties"]["balance"]["type"] == "number"
    assert components["PriceSample"]["properties"]["timestamp"]["format"] == "date-time"
