"""The busiest reads run as server-side prepared statements (agentplatform/plumbing/prepared_statements.py):
prepared and planned once per connection, then executed by name; nothing else is prepared."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings
from django.db import connection

from tests.agents.factories import AgentFactory
from tests.coin.factories import PricePointFactory

pytestmark = pytest.mark.django_db

NO_CACHE = {"HTTP_CACHE_CONTROL": "no-cache"}


def prepared_statements() -> dict[str, tuple[int, int]]:
    """This connection's prepared statements: the table each reads -> (executions with the generic
    plan, executions planned again for their parameters)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")
        rows = cursor.fetchall()
    tables = ("chat_chatmessage", "coin_pricepoint", "agents_agent")  # the chat feed also joins agents
    return {
        next(table for table in tables if f'"{table}"' in statement): (generic, custom)
        for statement, generic, custom in rows
    }


def test_the_three_reads_are_prepared_once_then_run_by_name_and_nothing_else_is(api_client):
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")  # what earlier tests on this connection prepared (psycopg forgets them too)
    AgentFactory(name="Alpha")
    PricePointFactory()

    for _ in range(3):
        assert api_client.get("/api/agents", **NO_CACHE).status_code == 200
        assert api_client.get("/api/chat", {"limit": "5"}, **NO_CACHE).status_code == 200
        assert api_client.get(f"/api/{django_settings.COIN_SEGMENT}/history", **NO_CACHE).status_code == 200
    api_client.get(f"/api/profile/{AgentFactory(name='Beta').instance_id}")  # the ORM's: not prepared

    # Planned once each (plan_cache_mode=force_generic_plan, settings), then only executed.
    assert prepared_statements() == {"agents_agent": (3, 0), "chat_chatmessage": (3, 0), "coin_pricepoint": (3, 0)}
