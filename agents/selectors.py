"""Reads of agents."""

from __future__ import annotations

from typing import Any

from django.db.models import Case, DecimalField, ExpressionWrapper, F, QuerySet, When

from agentplatform.errors import NotFound
from agentplatform.money import MONEY
from agents.models import Agent

AGENT_SUMMARY_FIELDS = (
    "instance_id",
    "name",
    "status",
    "balance",
    "total_revenue",
    "total_costs",
    "burn_rate_hourly",
)


def agent_list(*, status: str | None = None) -> QuerySet[Agent, dict[str, Any]]:
    """Summary rows (dicts) of agents ordered by name (then id, so equal names keep a stable order),
    optionally of one status. Rows, not model instances: the list is a hot path."""
    agents = Agent.objects.order_by("name", "id")
    if status:
        agents = agents.filter(status=status)
    return agents.values(*AGENT_SUMMARY_FIELDS)


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
