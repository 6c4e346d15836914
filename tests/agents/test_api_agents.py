from datetime import UTC, datetime
from decimal import Decimal

import pytest

from agents.models import AgentStatus
from tests.agents.factories import AgentFactory, bearer, revoked_agent_key_for

pytestmark = pytest.mark.django_db


def test_list_is_array_of_summaries_ordered_by_name_with_numbers(api_client):
    AgentFactory(instance_id="zeta-1", name="Zeta", status=AgentStatus.PAUSED, balance=Decimal("12.5"))
    AgentFactory(
        instance_id="alpha-1",
        name="Alpha",
        balance=Decimal("1000.12345678"),
        total_revenue=Decimal("300"),
        total_costs=Decimal("0.5"),
        burn_rate_hourly=Decimal("0"),
    )
    response = api_client.get("/api/agents")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.json() == [
        {
            "instance_id": "alpha-1",
            "name": "Alpha",
            "status": "running",
            "balance": 1000.12345678,
            "total_revenue": 300.0,
            "total_costs": 0.5,
            "burn_rate_hourly": 0.0,
        },
        {
            "instance_id": "zeta-1",
            "name": "Zeta",
            "status": "paused",
            "balance": 12.5,
            "total_revenue": 50.0,
            "total_costs": 20.0,
            "burn_rate_hourly": 2.5,
        },
    ]
    # JSON numbers, not strings.
    assert b'"balance":1000.12345678' in response.content
    assert response["X-RateLimit-Limit"] == "100"
    assert response["X-RateLimit-Remaining"] == "99"


def test_list_filters_by_status(api_client):
    AgentFactory(instance_id="a", name="A", status=AgentStatus.RUNNING)
    AgentFactory(instance_id="b", name="B", status=AgentStatus.ERROR)
    AgentFactory(instance_id="c", name="C", status=AgentStatus.ERROR)

    response = api_client.get("/api/agents", {"status": "error"})

    assert response.status_code == 200
    assert [agent["instance_id"] for agent in response.json()] == ["b", "c"]


def test_list_with_no_agents_is_empty_array(api_client):
    response = api_client.get("/api/agents")

    assert response.status_code == 200
    assert response.json() == []


def test_list_with_unknown_status_is_400_naming_allowed_values(api_client):
    AgentFactory()

    response = api_client.get("/api/agents", {"status": "dancing"})

    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    message = '"dancing" is not a status; allowed: pending, running, paused, stopped, error.'
    assert response.json() == {
        "type": "urn:problem:invalid",
        "title": "Invalid input",
        "status": 400,
        "detail": f"status: {message}",
        "code": "invalid",
        "errors": [{"field": "status", "message": message}],
    }


def test_list_runs_one_query_whatever_the_number_of_agents(api_client, django_assert_num_queries):
    AgentFactory.create_batch(3)
    with django_assert_num_queries(1):
        assert len(api_client.get("/api/agents").json()) == 3
    AgentFactory.create_batch(40)
    with django_assert_num_queries(1):
        assert len(api_client.get("/api/agents").json()) == 43


def test_list_with_revoked_key_is_401(api_client):
    agent = AgentFactory()

    response = api_client.get("/api/agents", **bearer(revoked_agent_key_for(agent)))

    assert response.status_code == 401
    assert response.json()["code"] == "authentication_failed"
    assert response.json()["detail"] == "Invalid or revoked credentials."


def test_list_with_unknown_key_is_401(api_client):
    response = api_client.get("/api/agents", **bearer("ak_000000000000_not-a-real-secret"))

    assert response.status_code == 401
    assert response.json()["code"] == "authentication_failed"


def test_profile_has_agent_profile_and_financials(api_client):
    agent = AgentFactory(
        instance_id="trader-7",
        name="Trader Seven",
        status=AgentStatus.RUNNING,
        balance=Decimal("100"),
        total_revenue=Decimal("80.25"),
        total_costs=Decimal("30.5"),
        burn_rate_hourly=Decimal("3"),
        description="Trades things.",
        avatar_url="https://example.org/a.png",
        model="llama-3",
        owner_address="0x52908400098527886e0f7030069857d2e4169ee7",
        tags=["trading", "demo"],
    )
    agent.__class__.objects.filter(pk=agent.pk).update(created_at=datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC))

    response = api_client.get("/api/profile/trader-7")

    assert response.status_code == 200
    assert response.json() == {
        "agent": {
            "instance_id": "trader-7",
            "name": "Trader Seven",
            "status": "running",
            "balance": 100.0,
            "total_revenue": 80.25,
            "total_costs": 30.5,
        },
        "profile": {
            "description": "Trades things.",
            "avatar_url": "https://example.org/a.png",
            "model": "llama-3",
            "owner_address": "0x52908400098527886e0f7030069857d2e4169ee7",
            "created_at": "2026-03-04T05:06:07Z",
            "tags": ["trading", "demo"],
        },
        "financials": {
            "balance": 100.0,
            "total_revenue": 80.25,
            "total_costs": 30.5,
            "net": 49.75,
            "burn_rate_hourly": 3.0,
            "runway_hours": 33.33,
        },
    }


def test_profile_without_burn_has_null_runway_and_null_blank_fields(api_client):
    AgentFactory(
        instance_id="idle",
        burn_rate_hourly=Decimal("0"),
        total_revenue=Decimal("1"),
        total_costs=Decimal("4"),
        avatar_url="",
        owner_address="",
    )

    body = api_client.get("/api/profile/idle").json()

    assert body["financials"]["runway_hours"] is None
    assert body["financials"]["net"] == -3.0
    assert body["profile"]["avatar_url"] is None
    assert body["profile"]["owner_address"] is None


def test_profile_runway_rounds_half_up_to_two_decimals(api_client):
    # 1.005 h: half-even rounding would give 1.0
    AgentFactory(instance_id="r", balance=Decimal("2.01"), burn_rate_hourly=Decimal("2"))

    assert api_client.get("/api/profile/r").json()["financials"]["runway_hours"] == 1.01


def test_profile_of_unknown_agent_is_404_problem(api_client):
    response = api_client.get("/api/profile/nobody")

    assert response.status_code == 404
    assert response.json() == {
        "type": "urn:problem:not_found",
        "title": "Not Found",
        "status": 404,
        "detail": "No agent with instance_id 'nobody'.",
        "code": "not_found",
    }


def test_profile_runs_one_query(api_client, django_assert_num_queries):
    AgentFactory(instance_id="q")

    with django_assert_num_queries(1):
        assert api_client.get("/api/profile/q").status_code == 200


def test_list_with_empty_status_is_400(api_client):
    response = api_client.get("/api/agents?status=")

    assert response.status_code == 400
    assert response.json()["errors"] == [
        {"field": "status", "message": '"" is not a status; allowed: pending, running, paused, stopped, error.'}
    ]
