"""Back office for agents: list, search, filter (status, balance, runway), status changes through
the allowed transitions only, a link to each agent's chat, and on an agent's page its finances (at
2 decimals) beside the price chart of the token they are held in
(templates/admin/agents/agent/change_form.html)."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from agentplatform.plumbing.errors import ApplicationError
from agentplatform.plumbing.money import money_text
from agentplatform.plumbing.wallet_addresses import wallet_address_normalize
from agents import admin_keys  # noqa: F401  (API key and wallet session admin, registered on import)
from agents.models import ALLOWED_STATUS_TRANSITIONS, Agent, AgentStatus
from agents.selectors import agent_with_runway_queryset
from agents.services import agent_status_change

if TYPE_CHECKING:
    from django.contrib.admin.options import _FieldsetSpec

# Money moves through the platform, not through this form: once an agent exists its figures
# are shown, not edited (a form save would overwrite concurrent updates).
FINANCIAL_FIELDS = ["balance", "total_revenue", "total_costs", "burn_rate_hourly"]
PROFILE_FIELDS = ["instance_id", "name", "status", "description", "avatar_url", "model", "owner_address", "tags"]
TAG_MAX_LENGTH = 40


def _allowed_text(status: str) -> str:
    return ", ".join(sorted(ALLOWED_STATUS_TRANSITIONS[status])) or "none (final state)"


class BalanceRangeFilter(admin.SimpleListFilter):
    title = "balance"
    parameter_name = "balance_range"
    RANGES: dict[str, tuple[str, Decimal | None, Decimal | None]] = {
        "empty": ("0 or less", None, Decimal("0")),
        "low": ("above 0 to 100", Decimal("0"), Decimal("100")),
        "mid": ("above 100 to 10,000", Decimal("100"), Decimal("10000")),
        "high": ("above 10,000", Decimal("10000"), None),
    }

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [(key, label) for key, (label, _, _) in self.RANGES.items()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Agent]) -> QuerySet[Agent]:
        value = self.value()
        if value is None or value not in self.RANGES:
            return queryset
        _, above, up_to = self.RANGES[value]
        if above is not None:
            queryset = queryset.filter(balance__gt=above)
        if up_to is not None:
            queryset = queryset.filter(balance__lte=up_to)
        return queryset


class RunwayFilter(admin.SimpleListFilter):
    """On the `runway` annotation (balance / burn rate, NULL without burn) of agent_with_runway_queryset."""

    title = "runway"
    parameter_name = "runway"
    RANGES: dict[str, tuple[str, Q]] = {
        "day": ("under 24 hours", Q(runway__lt=24)),
        "week": ("1 to 7 days", Q(runway__gte=24, runway__lt=24 * 7)),
        "month": ("7 to 30 days", Q(runway__gte=24 * 7, runway__lt=24 * 30)),
        "long": ("30 days or more", Q(runway__gte=24 * 30)),
        "none": ("no burn (unlimited)", Q(runway__isnull=True)),
    }

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [(key, label) for key, (label, _) in self.RANGES.items()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Agent]) -> QuerySet[Agent]:
        value = self.value()
        if value is None or value not in self.RANGES:
            return queryset
        return queryset.filter(self.RANGES[value][1])


class TagListField(forms.Field):
    """A JSON list of strings typed as text: tags separated by commas (or one per line), shown back
    the same way. Blanks and repeats are dropped; the order typed is kept."""

    widget = forms.TextInput(attrs={"size": 60, "placeholder": "trading, research"})

    def prepare_value(self, value: Any) -> str:
        if isinstance(value, list):
            return ", ".join(str(tag) for tag in value)
        return "" if value is None else str(value)  # the text typed, when the form is shown again

    def to_python(self, value: Any) -> list[str]:
        if isinstance(value, list):
            return value
        tags = [tag.strip() for tag in str(value or "").replace("\n", ",").split(",")]
        return list(dict.fromkeys(tag for tag in tags if tag))

    def validate(self, value: list[str]) -> None:
        super().validate(value)
        too_long = [tag for tag in value if len(tag) > TAG_MAX_LENGTH]
        if too_long:
            raise forms.ValidationError(f"Tags are at most {TAG_MAX_LENGTH} characters: {too_long[0][:60]}…")


class AgentAdminForm(forms.ModelForm):
    """The status field offers the current status and its allowed transitions only; a new agent starts
    as pending. Any other value (a crafted or stale form) is refused with the allowed ones named."""

    # https is what an avatar URL typed without a scheme means (and Django 6's default).
    avatar_url = forms.URLField(
        required=False, max_length=200, assume_scheme="https", widget=forms.URLInput(attrs={"size": 60})
    )
    tags = TagListField(
        required=False,
        help_text=f"Separated by commas, e.g. trading, research; each at most {TAG_MAX_LENGTH} characters.",
    )

    class Meta:
        model = Agent
        fields = [
            "instance_id",
            "name",
            "status",
            "balance",
            "total_revenue",
            "total_costs",
            "burn_rate_hourly",
            "description",
            "avatar_url",
            "model",
            "owner_address",
            "tags",
        ]
        widgets = {"owner_address": forms.TextInput(attrs={"size": 44})}  # a whole 0x address in view

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        status_field = self.fields["status"]
        assert isinstance(status_field, forms.ChoiceField)
        current = self.instance.status if self.instance.pk else None
        allowed = [current, *sorted(ALLOWED_STATUS_TRANSITIONS[current])] if current else [AgentStatus.PENDING]
        status_field.choices = [(value, AgentStatus(value).label) for value in allowed]
        if current:
            status_field.help_text = f"From {current} an agent may go to: {_allowed_text(current)}."
            status_field.error_messages["invalid_choice"] = (
                f"An agent cannot go from {current} to %(value)s; allowed from {current}: {_allowed_text(current)}."
            )
        else:
            status_field.help_text = "New agents start as pending."
            status_field.error_messages["invalid_choice"] = "New agents start as pending."

    def clean_owner_address(self) -> str:
        address = self.cleaned_data["owner_address"]
        if not address:
            return ""
        try:
            return wallet_address_normalize(address)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from exc


def _status_action(target: str) -> Callable[..., None]:
    def change_status(modeladmin: AgentAdmin, request: HttpRequest, queryset: QuerySet[Agent]) -> None:
        changed, refused = 0, []
        for agent in queryset.order_by("pk"):
            if agent.status == target:
                continue
            try:
                agent_status_change(agent=agent, new_status=target)
                changed += 1
            except ApplicationError as exc:
                refused.append(f"{agent.instance_id}: {exc.detail}")
        if changed:
            modeladmin.message_user(request, f"{changed} agent(s) changed to {target}.", messages.SUCCESS)
        if refused:
            modeladmin.message_user(request, "Refused: " + " ".join(refused), messages.ERROR)

    change_status.__name__ = f"change_status_to_{target}"
    return admin.action(description=f"Change status to {target}", permissions=["change"])(change_status)


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    form = AgentAdminForm
    list_display = [
        "name",
        "instance_id",
        "status",
        "balance_display",
        "burn_rate_display",
        "runway_hours_display",
        "chat",
    ]
    list_filter = ["status", BalanceRangeFilter, RunwayFilter]
    search_fields = ["name", "instance_id", "owner_address", "model"]
    ordering = ["name"]
    readonly_fields = ["chat", "created_at", "updated_at"]
    actions = [_status_action(status) for status in AgentStatus.values]
    list_per_page = 50

    def get_fieldsets(self, request: HttpRequest, obj: Agent | None = None) -> _FieldsetSpec:
        if obj is None:  # a new agent starts with the figures typed here
            return [(None, {"fields": [*PROFILE_FIELDS, *FINANCIAL_FIELDS]})]
        # Finances last, right above the token's price chart (templates/admin/agents/agent/change_form.html).
        return [
            (None, {"fields": [*PROFILE_FIELDS]}),
            ("Record", {"fields": ["chat", "created_at", "updated_at"]}),
            (
                "Finances",
                {
                    "fields": [
                        "balance_display",
                        "total_revenue_display",
                        "total_costs_display",
                        "burn_rate_display",
                        "runway_hours_display",
                    ],
                    "description": "In the platform token; moved by the platform, not edited here.",
                },
            ),
        ]

    def get_readonly_fields(self, request: HttpRequest, obj: Agent | None = None) -> list[str]:
        if obj is None:
            return list(self.readonly_fields)
        money = ["balance_display", "total_revenue_display", "total_costs_display", "burn_rate_display"]
        return [*self.readonly_fields, *money, "runway_hours_display"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Agent]:
        return agent_with_runway_queryset()

    @admin.display(description="balance", ordering="balance")
    def balance_display(self, agent: Agent) -> str:
        return money_text(agent.balance)

    @admin.display(description="total revenue")
    def total_revenue_display(self, agent: Agent) -> str:
        return money_text(agent.total_revenue)

    @admin.display(description="total costs")
    def total_costs_display(self, agent: Agent) -> str:
        return money_text(agent.total_costs)

    @admin.display(description="burn / hour", ordering="burn_rate_hourly")
    def burn_rate_display(self, agent: Agent) -> str:
        return money_text(agent.burn_rate_hourly)

    @admin.display(description="runway (h)", ordering="runway")
    def runway_hours_display(self, agent: Agent) -> str:
        runway = getattr(agent, "runway", None)
        return "—" if runway is None else f"{runway:,.1f}"

    @admin.display(description="chat")
    def chat(self, agent: Agent) -> str:
        if not agent.pk:
            return "—"
        url = reverse("admin:chat_chatmessage_changelist") + f"?agent__id__exact={agent.pk}"
        return format_html('<a href="{}">messages of {}</a>', url, agent.instance_id)

    def save_model(self, request: HttpRequest, obj: Agent, form: forms.ModelForm, change: bool) -> None:
        if not change:
            super().save_model(request, obj, form, change)
            return
        new_status = obj.status
        # Only the fields edited in the form are written, so concurrent updates of the others
        # survive; the status changes only through the service, whose conditional update also
        # catches a change made by someone else since the form was loaded.
        obj.status = form.initial["status"]
        edited = [name for name in form.changed_data if name != "status"]
        if edited:
            obj.save(update_fields=[*edited, "updated_at"])
        if new_status != obj.status:
            try:
                agent_status_change(agent=obj, new_status=new_status)
            except ApplicationError as exc:
                self.message_user(request, f"Status not changed: {exc.detail}", messages.ERROR)
