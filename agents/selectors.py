"""Reads of agents."""

from __future__ import annotations

from django.db import connection
from django.db.models import Case, DecimalField, ExpressionWrapper, F, QuerySet, When

from agentplatform.plumbing.errors import NotFound
from agentplatform.plumbing.money import MONEY
from agentplatform.plumbing.prepared_statements import prepared_cursor
from agentplatform.plumbing.renderers import RenderedJSON
from agentplatform.plumbing.sql_json import json_array, serializer_json_object
from agents.models import Agent
from agents.serializers import AgentSummarySerializer

# An agent of the list as AgentSummarySerializer writes it, rendered by PostgreSQL
# (agentplatform/plumbing/sql_json.py): each field from the column of the subquery below.
_AGENT_SUMMARY_JSON = serializer_json_object(
    AgentSummarySerializer,
    {
        "instance_id": "instance_id",
        "name": "name",
        "status": "status",
        "balance": "balance",
        "total_revenue": "total_revenue",
        "total_costs": "total_costs",
        "burn_rate_hourly": "burn_rate_hourly",
    },
)


def agent_list_json(*, status: str | None = None) -> RenderedJSON:
    """GET /api/agents's body: every agent (or those of one status) as a summary, ordered by name
    (then id, so equal names keep a stable order). One query, which also writes the JSON."""
    where = "WHERE status = %s" if status else ""
    table = connection.ops.quote_name(Agent._meta.db_table)
    # The money columns as float8 once per row (json_number refers to its value four times, and
    # PostgreSQL converts a numeric to float8 through text); OFFSET 0 keeps the subquery from being
    # flattened into the outer query, which would convert again at each reference.
    rows = (
        "SELECT id, instance_id, name, status, balance::float8 AS balance, total_revenue::float8 AS total_revenue,"
        " total_costs::float8 AS total_costs, burn_rate_hourly::float8 AS burn_rate_hourly"
        f" FROM {table} {where} OFFSET 0"
    )
    with prepared_cursor() as cursor:
        cursor.execute(
            f"SELECT {json_array(_AGENT_SUMMARY_JSON, order_by='name, id')} FROM ({rows}) AS agent",
            [status] if status else [],
        )
        return RenderedJSON(cursor.fetchone()[0])


def agent_profile_get(*, instance_id: str) -> Agent:
    """One agent with `net` (revenue - costs) computed by the database; 404 if unknown."""
    agent = (
        Agent.objects.annotate(
            net=ExpressionWrapper(F("total_revenue") - F("total_costs"), output_field=DecimalField(**MONEY))
        )
        .filter(instance_id=instance_id)
        .first()
    )
    if agent is None:
        raise NotFound(f"No agent with instance_id '{instance_id}'.")
    return agent


def agent_with_runway_queryset() -> QuerySet[Agent]:
    """Agents annotated with `runway` (hours of balance left at the burn rate; NULL without burn), for
    the admin list, where it can be sorted and filtered."""
    return Agent.objects.annotate(
        runway=Case(
            When(burn_rate_hourly__gt=0, then=F("balance") / F("burn_rate_hourly")),
            default=None,
            output_field=DecimalField(max_digits=30, decimal_places=2),
        )
    )
