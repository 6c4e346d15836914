"""Serializers of the agent endpoints."""

from __future__ import annotations

from decimal import ROUND_HALF_UP

from rest_framework import serializers

from agentplatform.plumbing.serializer_fields import BlankAsNullCharField, FlatRowSerializer, MoneyField
from agents.models import Agent, AgentStatus


class AgentListQuerySerializer(serializers.Serializer):
    status = serializers.ChoiceField(
        choices=AgentStatus.choices,
        required=False,
        error_messages={"invalid_choice": f'"{{input}}" is not a status; allowed: {", ".join(AgentStatus.values)}.'},
    )


class AgentSerializer(serializers.ModelSerializer):
    """The six fields of an agent shown everywhere."""

    balance = MoneyField()
    total_revenue = MoneyField()
    total_costs = MoneyField()

    class Meta:
        model = Agent
        fields = ["instance_id", "name", "status", "balance", "total_revenue", "total_costs"]
        read_only_fields = fields


class AgentSummarySerializer(FlatRowSerializer):
    """An agent as GET /api/agents lists it."""

    instance_id = serializers.CharField(read_only=True)
    name = serializers.CharField(read_only=True)
    status = serializers.ChoiceField(choices=AgentStatus.choices, read_only=True)
    balance = MoneyField()
    total_revenue = MoneyField()
    total_costs = MoneyField()
    burn_rate_hourly = MoneyField()


class AgentProfileDetailsSerializer(serializers.ModelSerializer):
    """What the agent is and who owns it."""

    avatar_url = BlankAsNullCharField(help_text="null when the agent has no avatar.")
    owner_address = BlankAsNullCharField(help_text="Lower-case 0x address of the owner's wallet; null when unknown.")
    tags = serializers.ListField(child=serializers.CharField(), read_only=True)

    class Meta:
        model = Agent
        fields = ["description", "avatar_url", "model", "owner_address", "created_at", "tags"]
        read_only_fields = fields


class AgentFinancialsSerializer(serializers.Serializer):
    """The agent's money figures."""

    balance = MoneyField()
    total_revenue = MoneyField()
    total_costs = MoneyField()
    net = MoneyField(help_text="total_revenue - total_costs")
    burn_rate_hourly = MoneyField()
    runway_hours = MoneyField(
        decimal_places=2,
        max_digits=None,
        rounding=ROUND_HALF_UP,
        allow_null=True,
        help_text="balance / burn_rate_hourly, rounded to 2 decimals; null when the burn rate is 0.",
    )


class AgentProfileSerializer(serializers.Serializer):
    """An agent's profile: its summary fields, profile and financials."""

    agent = AgentSerializer(source="*", read_only=True)
    profile = AgentProfileDetailsSerializer(source="*", read_only=True)
    financials = AgentFinancialsSerializer(source="*", read_only=True)
