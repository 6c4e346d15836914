import pytest

from agentplatform.plumbing.errors import Conflict, InvalidInput
from agents.models import ALLOWED_STATUS_TRANSITIONS, Agent, AgentStatus
from agents.services import agent_status_change
from tests.agents.factories import AgentFactory

pytestmark = pytest.mark.django_db

TRANSITIONS = [(old, new) for old in AgentStatus.values for new in AgentStatus.values if old != new]


@pytest.mark.parametrize(("old", "new"), TRANSITIONS)
def test_every_transition_is_allowed_or_refused_as_the_table_says(old, new):
    agent = AgentFactory(status=old)

    if new in ALLOWED_STATUS_TRANSITIONS[old]:
        assert agent_status_change(agent=agent, new_status=new).status == new
        assert Agent.objects.get(pk=agent.pk).status == new
    else:
        with pytest.raises(Conflict) as refused:
            agent_status_change(agent=agent, new_status=new)
        assert refused.value.code == "status_transition_not_allowed"
        assert Agent.objects.get(pk=agent.pk).status == old


def test_stale_status_is_refused_and_changes_nothing():
    agent = AgentFactory(status=AgentStatus.RUNNING)
    Agent.objects.filter(pk=agent.pk).update(status=AgentStatus.STOPPED)

    with pytest.raises(Conflict) as refused:
        agent_status_change(agent=agent, new_status=AgentStatus.PAUSED)

    assert refused.value.code == "status_changed_concurrently"
    assert refused.value.detail == (
        f"The status of {agent.instance_id} changed since it was read (no longer running); reload and retry."
    )
    assert Agent.objects.get(pk=agent.pk).status == "stopped"


def test_unknown_status_is_invalid_input():
    agent = AgentFactory(status=AgentStatus.RUNNING)

    with pytest.raises(InvalidInput):
        agent_status_change(agent=agent, new_status="asleep")

    assert Agent.objects.get(pk=agent.pk).status == "running"
