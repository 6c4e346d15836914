"""Agents and the credentials the API accepts, made the way production makes them."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import factory
from django.utils import timezone

from agentplatform.plumbing.authentication import new_token
from agents.models import WALLET_SESSION_PREFIX, Agent, AgentStatus, ApiKeyKind, WalletSession
from agents.services import api_key_create, api_key_revoke


class AgentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Agent

    instance_id = factory.Sequence(lambda n: f"agent-{n:04d}")
    name = factory.Sequence(lambda n: f"Agent {n:04d}")
    status = AgentStatus.RUNNING
    balance = Decimal("100.00000000")
    total_revenue = Decimal("50.00000000")
    total_costs = Decimal("20.00000000")
    burn_rate_hourly = Decimal("2.50000000")
    description = "A test agent."
    model = "gpt-test"
    tags = factory.LazyFunction(lambda: ["test"])


def agent_key_for(agent: Agent) -> str:
    """A fresh agent API key's secret."""
    return api_key_create(kind=ApiKeyKind.AGENT, name=f"key of {agent.instance_id}", agent=agent)[1]


def user_key_for(address: str) -> str:
    """A fresh user API key's secret, bound to `address`."""
    return api_key_create(kind=ApiKeyKind.USER, name=f"key of {address}", wallet_address=address)[1]


def service_key(scopes: list[str] | None = None) -> str:
    return api_key_create(kind=ApiKeyKind.SERVICE, name="service", scopes=scopes or ["read"])[1]


def revoked_agent_key_for(agent: Agent) -> str:
    key, secret = api_key_create(kind=ApiKeyKind.AGENT, name="revoked", agent=agent)
    api_key_revoke(key=key)
    return secret


def wallet_session_for(address: str, *, expires_in: timedelta = timedelta(hours=1)) -> str:
    """A wallet session token for `address`, as POST /api/auth/wallet issues it after a SIWE signature."""
    token, lookup, hashed = new_token(WALLET_SESSION_PREFIX)
    WalletSession.objects.create(
        address=address.lower(), lookup=lookup, hashed_token=hashed, expires_at=timezone.now() + expires_in
    )
    return token


def bearer(token: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}
