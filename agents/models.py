from __future__ import annotations

from decimal import Decimal

from django.db import models
from django.db.models import Q

from agentplatform.plumbing.money import MONEY


class AgentStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    PAUSED = "paused", "Paused"
    STOPPED = "stopped", "Stopped"
    ERROR = "error", "Error"


# The one place that says which status changes are allowed. Product decision: agents have no
# status API; staff change status in the admin, through these transitions only
# (docs/spec/DECISIONS.md).
ALLOWED_STATUS_TRANSITIONS: dict[str, frozenset[str]] = {
    AgentStatus.PENDING: frozenset({AgentStatus.RUNNING, AgentStatus.STOPPED}),
    AgentStatus.RUNNING: frozenset({AgentStatus.PAUSED, AgentStatus.STOPPED, AgentStatus.ERROR}),
    AgentStatus.PAUSED: frozenset({AgentStatus.RUNNING, AgentStatus.STOPPED}),
    AgentStatus.ERROR: frozenset({AgentStatus.RUNNING, AgentStatus.STOPPED}),
    AgentStatus.STOPPED: frozenset(),
}


class Agent(models.Model):
    instance_id = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=120)
    status = models.CharField(max_length=16, choices=AgentStatus.choices, default=AgentStatus.PENDING)
    balance = models.DecimalField(**MONEY, default=Decimal("0"))
    total_revenue = models.DecimalField(**MONEY, default=Decimal("0"))
    total_costs = models.DecimalField(**MONEY, default=Decimal("0"))
    burn_rate_hourly = models.DecimalField(**MONEY, default=Decimal("0"))
    description = models.TextField(blank=True)
    avatar_url = models.URLField(blank=True)
    model = models.CharField(max_length=120, blank=True, help_text="The language model the agent runs on.")
    owner_address = models.CharField(max_length=42, blank=True, help_text="Lower-case 0x wallet address.")
    tags = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "id"]
        indexes = [models.Index(fields=["status", "name"])]

    def __str__(self) -> str:
        return f"{self.name} ({self.instance_id})"

    @property
    def runway_hours(self) -> Decimal | None:
        if self.burn_rate_hourly <= 0:
            return None
        return self.balance / self.burn_rate_hourly


class ApiKeyKind(models.TextChoices):
    AGENT = "agent", "Agent"
    USER = "user", "User"
    SERVICE = "service", "Service"


class ApiKeyScope(models.TextChoices):
    READ = "read", "read"
    INGEST = "ingest", "ingest"


class ApiKey(models.Model):
    """An API key: only a SHA-256 hash of the secret is stored; the secret is shown once.

    The key reads `<kind prefix>_<lookup>_<secret>`; `lookup` is stored in clear to find the
    row, and the hash of the whole key is compared in constant time.
    """

    kind = models.CharField(max_length=16, choices=ApiKeyKind.choices)
    name = models.CharField(max_length=120)
    lookup = models.CharField(max_length=16, unique=True, editable=False)
    hashed_key = models.CharField(max_length=64, editable=False)
    agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.CASCADE, related_name="api_keys")
    wallet_address = models.CharField(max_length=42, blank=True, help_text="Lower-case 0x address of a user key.")
    scopes = models.JSONField(default=list, blank=True, help_text='Service keys: any of "read", "ingest".')
    # Both empty: every repository. Names are checked against the registry when the key is created.
    scope_repositories = models.JSONField(
        default=list, blank=True, help_text="Service keys: only these repositories (owner/name)…"
    )
    scope_owners = models.JSONField(
        default=list, blank=True, help_text="…and those whose registry `owners` list one of these."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"
        constraints = [
            models.CheckConstraint(
                name="api_key_binding_matches_kind",
                condition=(
                    Q(kind="agent", agent__isnull=False, wallet_address="")
                    | Q(kind="user", agent__isnull=True) & ~Q(wallet_address="")
                    | Q(kind="service", agent__isnull=True, wallet_address="")
                ),
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind}, {self.display_prefix})"

    @property
    def display_prefix(self) -> str:
        return f"{KEY_PREFIXES[self.kind]}_{self.lookup}"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


# Bearer token prefixes (agentplatform/plumbing/authentication.py: `<prefix>_<lookup>_<secret>`).
KEY_PREFIXES: dict[str, str] = {ApiKeyKind.AGENT: "ak", ApiKeyKind.USER: "uk", ApiKeyKind.SERVICE: "sk"}
KIND_BY_PREFIX = {prefix: kind for kind, prefix in KEY_PREFIXES.items()}
WALLET_SESSION_PREFIX = "ws"


class WalletNonce(models.Model):
    """A single-use Sign-In with Ethereum nonce."""

    nonce = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"nonce {self.nonce[:6]}…"


class WalletSession(models.Model):
    """A bearer session for a wallet address, issued after a valid SIWE signature."""

    address = models.CharField(max_length=42, db_index=True, help_text="Lower-case 0x address.")
    lookup = models.CharField(max_length=16, unique=True)
    hashed_token = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"wallet session of {self.address}"
