from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse
from django.utils import timezone
from pytest_django.asserts import assertContains

from agents.models import Agent, AgentStatus
from tests.adminpages import changelist_cells, changelist_headers
from tests.agents.factories import AgentFactory
from tests.coin.factories import PricePointFactory

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:agents_agent_changelist")


def _listed(response) -> list[str]:
    return [agent.instance_id for agent in response.context["cl"].result_list]


def _form_data(agent: Agent, **changes) -> dict:
    data = {
        "instance_id": agent.instance_id,
        "name": agent.name,
        "status": agent.status,
        "description": agent.description,
        "avatar_url": agent.avatar_url,
        "model": agent.model,
        "owner_address": agent.owner_address,
        "tags": "test",
    }
    return {**data, **changes}


def _messages(response) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


def test_changelist_lists_searches_and_links_to_chat(admin_client):
    agent = AgentFactory(instance_id="alpha", name="Alpha")
    AgentFactory(instance_id="beta", name="Beta")

    response = admin_client.get(CHANGELIST)
    searched = admin_client.get(CHANGELIST, {"q": "alph"})

    assert response.status_code == 200
    assert _listed(response) == ["alpha", "beta"]
    assert _listed(searched) == ["alpha"]
    chat_url = reverse("admin:chat_chatmessage_changelist") + f"?agent__id__exact={agent.pk}"
    assert f'href="{chat_url}"'.encode() in response.content


def test_changelist_filters_by_status_balance_and_runway(admin_client):
    AgentFactory(instance_id="broke", status=AgentStatus.ERROR, balance=Decimal("0"), burn_rate_hourly=Decimal("1"))
    AgentFactory(instance_id="short", balance=Decimal("50"), burn_rate_hourly=Decimal("5"))  # 10 h
    AgentFactory(instance_id="week", balance=Decimal("5000"), burn_rate_hourly=Decimal("50"))  # 100 h
    AgentFactory(instance_id="rich", balance=Decimal("20000"), burn_rate_hourly=Decimal("0"))  # no burn

    assert _listed(admin_client.get(CHANGELIST, {"status__exact": "error"})) == ["broke"]
    assert _listed(admin_client.get(CHANGELIST, {"balance_range": "empty"})) == ["broke"]
    assert _listed(admin_client.get(CHANGELIST, {"balance_range": "low"})) == ["short"]
    assert _listed(admin_client.get(CHANGELIST, {"balance_range": "mid"})) == ["week"]
    assert _listed(admin_client.get(CHANGELIST, {"balance_range": "high"})) == ["rich"]
    assert sorted(_listed(admin_client.get(CHANGELIST, {"runway": "day"}))) == ["broke", "short"]
    assert _listed(admin_client.get(CHANGELIST, {"runway": "week"})) == ["week"]
    assert _listed(admin_client.get(CHANGELIST, {"runway": "none"})) == ["rich"]


def test_change_form_offers_only_allowed_transitions(admin_client):
    agent = AgentFactory(status=AgentStatus.PAUSED)

    response = admin_client.get(reverse("admin:agents_agent_change", args=[agent.pk]))

    choices = [value for value, _ in response.context["adminform"].form.fields["status"].choices]
    assert choices == ["paused", "running", "stopped"]


def test_allowed_status_change_in_the_form_is_saved(admin_client):
    agent = AgentFactory(status=AgentStatus.PAUSED, name="Old name")

    response = admin_client.post(
        reverse("admin:agents_agent_change", args=[agent.pk]), _form_data(agent, status="running", name="New name")
    )

    assert response.status_code == 302
    agent.refresh_from_db()
    assert (agent.status, agent.name) == ("running", "New name")


def test_refused_status_change_in_the_form_names_allowed_ones_and_changes_nothing(admin_client):
    agent = AgentFactory(status=AgentStatus.PAUSED, name="Same")

    response = admin_client.post(
        reverse("admin:agents_agent_change", args=[agent.pk]), _form_data(agent, status="error", name="Changed")
    )

    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {
        "status": ["An agent cannot go from paused to error; allowed from paused: running, stopped."]
    }
    agent.refresh_from_db()
    assert (agent.status, agent.name) == ("paused", "Same")


def test_status_changed_by_someone_else_since_the_form_loaded_is_not_overwritten(admin_client):
    agent = AgentFactory(status=AgentStatus.RUNNING)
    url = reverse("admin:agents_agent_change", args=[agent.pk])
    stale = _form_data(agent, status="paused")
    # Meanwhile another member of staff stops the agent (a final state).
    Agent.objects.filter(pk=agent.pk).update(status=AgentStatus.STOPPED)

    response = admin_client.post(url, stale)

    assert response.status_code == 200  # the form now validates against "stopped", which allows nothing
    agent.refresh_from_db()
    assert agent.status == "stopped"


def test_new_agent_starts_pending_only(admin_client):
    url = reverse("admin:agents_agent_add")
    data = {
        "instance_id": "fresh",
        "name": "Fresh",
        "balance": "10",
        "total_revenue": "0",
        "total_costs": "0",
        "burn_rate_hourly": "1",
        "description": "",
        "avatar_url": "",
        "model": "m",
        "owner_address": "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
        "tags": "",
    }

    refused = admin_client.post(url, {**data, "status": "running"})
    created = admin_client.post(url, {**data, "status": "pending"})

    assert refused.status_code == 200
    assert refused.context["adminform"].form.errors == {"status": ["New agents start as pending."]}
    assert created.status_code == 302
    agent = Agent.objects.get()
    assert (agent.instance_id, agent.status, agent.owner_address) == (
        "fresh",
        "pending",
        "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed",
    )


def test_status_action_changes_allowed_agents_and_reports_refused_ones(admin_client):
    paused = AgentFactory(instance_id="p", status=AgentStatus.PAUSED)
    stopped = AgentFactory(instance_id="s", status=AgentStatus.STOPPED)
    already = AgentFactory(instance_id="r", status=AgentStatus.RUNNING)

    response = admin_client.post(
        CHANGELIST,
        {"action": "change_status_to_running", "_selected_action": [paused.pk, stopped.pk, already.pk]},
        follow=True,
    )

    assert _messages(response) == [
        "1 agent(s) changed to running.",
        "Refused: s: An agent cannot go from stopped to running; allowed from stopped: none (final state).",
    ]
    statuses = dict(Agent.objects.values_list("instance_id", "status"))
    assert statuses == {"p": "running", "s": "stopped", "r": "running"}


def test_changelist_shows_money_at_two_decimals(admin_client):
    AgentFactory(
        instance_id="atlas",
        name="Atlas",
        balance=Decimal("14102.31000000"),
        burn_rate_hourly=Decimal("31.205"),  # rounds half up
    )

    response = admin_client.get(CHANGELIST)

    assert changelist_headers(response) == [
        "Name",
        "Instance id",
        "Status",
        "Balance",
        "Burn / hour",
        "Runway (h)",
        "Chat",
    ]
    assert changelist_cells(response) == [
        ["Atlas", "atlas", "Running", "14,102.31", "31.21", "451.9", "messages of atlas"]
    ]


def test_change_page_shows_finances_at_two_decimals_beside_the_token_price_chart(admin_client):
    agent = AgentFactory(
        balance=Decimal("14102.31000000"),
        total_revenue=Decimal("1234567.895"),
        total_costs=Decimal("0.004"),
        burn_rate_hourly=Decimal("31.20500000"),
    )
    PricePointFactory(timestamp=timezone.now() - timedelta(days=2), price=Decimal("0.04200000"))
    PricePointFactory(timestamp=timezone.now() - timedelta(hours=1), price=Decimal("0.05420352"))

    response = admin_client.get(reverse("admin:agents_agent_change", args=[agent.pk]))

    fields = {
        line.field["name"]: line.contents()
        for fieldset in response.context["adminform"]
        for row in fieldset
        for line in row
        if line.is_readonly
    }
    assert {name: fields[name] for name in ("balance_display", "total_revenue_display", "total_costs_display")} == {
        "balance_display": "14,102.31",
        "total_revenue_display": "1,234,567.90",
        "total_costs_display": "0.00",
    }
    assert (fields["burn_rate_display"], fields["runway_hours_display"]) == ("31.21", "451.9")
    assert "balance" not in response.context["adminform"].form.fields  # shown, not edited
    assertContains(response, '<fieldset class="module aligned" id="token-price">', count=1)
    assertContains(response, "Price, last 30 days (2 points) — now 0.05420352", count=1)
    assertContains(response, '<polyline class="price-line"', count=1)


def test_tags_are_typed_separated_by_commas_and_stored_as_a_json_list(admin_client):
    agent = AgentFactory(tags=["trading", "research"])
    url = reverse("admin:agents_agent_change", args=[agent.pk])

    form_page = admin_client.get(url)
    saved = admin_client.post(url, _form_data(agent, tags=" oracle,  price feeds ,\noracle,, news "))

    assertContains(form_page, 'value="trading, research"', count=1)
    assert saved.status_code == 302
    agent.refresh_from_db()
    assert agent.tags == ["oracle", "price feeds", "news"]
    assertContains(admin_client.get(url), 'value="oracle, price feeds, news"', count=1)


def test_a_tag_too_long_is_refused_and_changes_nothing(admin_client):
    agent = AgentFactory(tags=["trading"])

    response = admin_client.post(
        reverse("admin:agents_agent_change", args=[agent.pk]), _form_data(agent, tags="ok, " + "x" * 41)
    )

    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {"tags": [f"Tags are at most 40 characters: {'x' * 41}…"]}
    agent.refresh_from_db()
    assert agent.tags == ["trading"]
