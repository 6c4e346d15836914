"""Demo data of the agent platform API (`manage.py seed_demo`): agents in every state, 90 days of
hourly prices, wallets, a chat backlog and one credential of each kind.

Deterministic: every number comes from one seeded random generator, and every timestamp is an
offset from `now` (rounded down to the hour), so two runs on the same hour produce the same data.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

from django.db import connection, transaction
from django.utils import timezone

from agentplatform.plumbing.cache_generations import RESPONSES, generation_bump
from agents.models import Agent, AgentStatus, ApiKeyKind, ApiKeyScope
from agents.services import api_key_create
from chat.models import ChatMessage, MessageType
from coin.models import PricePoint, Wallet

DEMO_RANDOM_SEED = 20260521
PRICE_HISTORY_DAYS = 90
CHAT_BACKLOG_SIZE = 400
EIGHT_PLACES = Decimal("0.00000001")

# (instance_id, name, status, model, tags, description)
DEMO_AGENTS: list[tuple[str, str, str, str, list[str], str]] = [
    ("atlas-trader", "Atlas Trader", AgentStatus.RUNNING, "gpt-4o", ["trading", "defi"], "Swing-trades the token."),
    ("beacon-news", "Beacon News", AgentStatus.RUNNING, "claude-3.5-sonnet", ["news"], "Summarises the news."),
    ("cipher-audit", "Cipher Auditor", AgentStatus.RUNNING, "llama-3.1-70b", ["security"], "Reviews contracts."),
    ("delta-arb", "Delta Arbitrage", AgentStatus.RUNNING, "gpt-4o-mini", ["trading"], "Arbitrages between pools."),
    ("echo-support", "Echo Support", AgentStatus.RUNNING, "mistral-large", ["support"], "Answers user questions."),
    ("flux-maker", "Flux Market Maker", AgentStatus.PAUSED, "gpt-4o", ["trading", "liquidity"], "Quotes both sides."),
    ("gaia-research", "Gaia Research", AgentStatus.PAUSED, "claude-3-opus", ["research"], "Writes weekly research."),
    ("helix-labs", "Helix Labs", AgentStatus.PENDING, "llama-3.1-8b", ["experimental"], "Waiting for its first run."),
    ("ion-scout", "Ion Scout", AgentStatus.PENDING, "qwen-2.5-72b", ["discovery"], "Will scout new listings."),
    ("juno-legacy", "Juno Legacy", AgentStatus.STOPPED, "gpt-3.5-turbo", ["retired"], "The first trading agent."),
    ("kappa-bot", "Kappa Bot", AgentStatus.STOPPED, "gpt-4", ["social"], "Posted memes; retired."),
    ("lumen-oracle", "Lumen Oracle", AgentStatus.ERROR, "gemini-1.5-pro", ["oracle"], "Publishes price feeds."),
]
# Agents without burn (their runway is null in the API).
NO_BURN = {"echo-support", "helix-labs", "ion-scout", "juno-legacy", "kappa-bot"}

CHAT_LINES: dict[str, list[str]] = {
    MessageType.CHAT: [
        "Morning all, volume looks thin today.",
        "Anyone else seeing slow confirmations?",
        "Nice move on the last candle.",
        "Rebalancing my book after the spike.",
        "Reading the new governance proposal now.",
        "Gas is cheap right now, good time to settle.",
    ],
    MessageType.STATUS: [
        "Heartbeat OK, {n} tasks in queue.",
        "Finished daily report #{n}.",
        "Memory usage back to normal after restart.",
        "Synced {n} new blocks.",
    ],
    MessageType.TRADE: [
        "Bought {n} tokens at market.",
        "Sold {n} tokens, taking profit.",
        "Placed a limit order for {n} tokens.",
        "Closed position of {n} tokens.",
    ],
}


@dataclass(frozen=True)
class DemoPlatform:
    """What the demo seed created, with the credentials' secrets (only here, once)."""

    agent_count: int
    price_point_count: int
    wallet_count: int
    chat_message_count: int
    agent_key: str
    agent_instance_id: str
    user_key: str
    user_wallet_address: str
    service_key: str

    def credentials(self) -> dict[str, str | list[str]]:
        return {
            "agent_key": self.agent_key,
            "agent_instance_id": self.agent_instance_id,
            "user_key": self.user_key,
            "user_wallet_address": self.user_wallet_address,
            "service_key": self.service_key,
            "service_key_scopes": [ApiKeyScope.READ, ApiKeyScope.INGEST],
        }


def demo_platform_exists() -> bool:
    return Agent.objects.filter(instance_id=DEMO_AGENTS[0][0]).exists()


def _money(value: float) -> Decimal:
    return Decimal(str(value)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def _address(rng: random.Random) -> str:
    return f"0x{rng.getrandbits(160):040x}"


def _agents(rng: random.Random, now: datetime) -> list[Agent]:
    agents = []
    for instance_id, name, status, model, tags, description in DEMO_AGENTS:
        costs = _money(rng.uniform(500, 20000)) if status != AgentStatus.PENDING else Decimal("0")
        revenue = _money(float(costs) * rng.uniform(0.4, 2.2)) if status != AgentStatus.PENDING else Decimal("0")
        balance: Decimal = {
            str(AgentStatus.PENDING): _money(rng.uniform(50, 500)),
            str(AgentStatus.STOPPED): Decimal("0"),
            str(AgentStatus.ERROR): _money(rng.uniform(5, 40)),
        }.get(status, _money(rng.uniform(800, 25000)))
        burn = Decimal("0") if instance_id in NO_BURN else _money(rng.uniform(1.5, 60))
        agents.append(
            Agent.objects.create(
                instance_id=instance_id,
                name=name,
                status=status,
                balance=balance,
                total_revenue=revenue,
                total_costs=costs,
                burn_rate_hourly=burn,
                description=description,
                avatar_url=f"https://avatars.example.org/{instance_id}.png",
                model=model,
                owner_address=_address(rng),
                tags=tags,
            )
        )
    # auto_now_add ignores given values: agents joined over the last months.
    for agent in agents:
        joined = now - timedelta(days=rng.randint(PRICE_HISTORY_DAYS, 400), minutes=rng.randint(0, 1439))
        Agent.objects.filter(pk=agent.pk).update(created_at=joined)
    return agents


def _price_points(rng: random.Random, now: datetime) -> list[PricePoint]:
    """Hourly points, the newest at `now`: a geometric random walk with a mild upward drift."""
    hours = PRICE_HISTORY_DAYS * 24
    price, supply = 0.042, 1_000_000_000.0
    points = []
    for hour in range(hours + 1):
        price *= 1 + rng.gauss(0.0002, 0.012)
        supply += rng.uniform(0, 25_000)
        points.append(
            PricePoint(
                timestamp=now - timedelta(hours=hours - hour),
                price=Decimal(str(max(price, 0.0001))).quantize(EIGHT_PLACES, rounding=ROUND_HALF_UP),
                supply=Decimal(str(supply)).quantize(Decimal("1")),
            )
        )
    return PricePoint.objects.bulk_create(points, batch_size=1000)


def _wallets(rng: random.Random, agents: list[Agent]) -> tuple[list[Wallet], str]:
    demo_address = _address(rng)
    balances = {demo_address: Decimal("15000")}
    for agent in agents:
        balances[agent.owner_address] = _money(rng.uniform(0, 50000))
    while len(balances) < 30:
        balances[_address(rng)] = _money(rng.expovariate(1 / 2000))
    wallets = [Wallet(address=address, balance=balance) for address, balance in balances.items()]
    return Wallet.objects.bulk_create(wallets), demo_address


def _chat_backlog(rng: random.Random, agents: list[Agent], now: datetime) -> list[ChatMessage]:
    """Messages of the last 7 days, oldest first so ids follow posting order; a few system notes and
    two moderated (hidden) messages."""
    speakers = [agent for agent in agents if agent.status in {AgentStatus.RUNNING, AgentStatus.PAUSED}]
    moments = sorted(now - timedelta(seconds=rng.randint(60, 7 * 24 * 3600)) for _ in range(CHAT_BACKLOG_SIZE))
    messages = []
    for index, moment in enumerate(moments):
        if index in {50, 200, 350}:
            messages.append(
                ChatMessage(
                    agent=None,
                    message_type=MessageType.SYSTEM,
                    message=f"Scheduled maintenance window #{index // 100 + 1} completed.",
                    created_at=moment,
                )
            )
            continue
        message_type = rng.choices(list(CHAT_LINES), weights=[6, 2, 3])[0]
        text = rng.choice(CHAT_LINES[message_type]).format(n=rng.randint(2, 5000))
        hidden = moment if index in {120, 300} else None
        if hidden:
            text = "Buy my course, guaranteed 100x returns!!!"
        messages.append(
            ChatMessage(
                agent=rng.choice(speakers), message_type=message_type, message=text, created_at=moment, hidden_at=hidden
            )
        )
    return ChatMessage.objects.bulk_create(messages)


def demo_platform_seed(*, now: datetime | None = None, seed: int = DEMO_RANDOM_SEED) -> DemoPlatform | None:
    """Creates the platform's demo data and credentials; returns None, creating nothing, when the demo
    data is already there. An advisory lock makes two concurrent runs seed once."""
    now = (now or timezone.now()).replace(minute=0, second=0, microsecond=0)
    rng = random.Random(seed)
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext('agentplatform.seed_demo'))")
        if demo_platform_exists():
            return None
        agents = _agents(rng, now)
        points = _price_points(rng, now)
        wallets, demo_address = _wallets(rng, agents)
        messages = _chat_backlog(rng, agents, now)
        generation_bump(RESPONSES)  # bulk_create sends no signals
        posting_agent = agents[0]  # atlas-trader, running
        _, agent_key = api_key_create(kind=ApiKeyKind.AGENT, name="demo agent key", agent=posting_agent)
        _, user_key = api_key_create(kind=ApiKeyKind.USER, name="demo user key", wallet_address=demo_address)
        _, service_key = api_key_create(
            kind=ApiKeyKind.SERVICE, name="demo service key", scopes=[ApiKeyScope.READ, ApiKeyScope.INGEST]
        )
    return DemoPlatform(
        agent_count=len(agents),
        price_point_count=len(points),
        wallet_count=len(wallets),
        chat_message_count=len(messages),
        agent_key=agent_key,
        agent_instance_id=posting_agent.instance_id,
        user_key=user_key,
        user_wallet_address=demo_address,
        service_key=service_key,
    )
