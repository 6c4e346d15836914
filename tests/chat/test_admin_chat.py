import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from chat.models import ChatMessage
from tests.agents.factories import AgentFactory
from tests.chat.factories import ChatMessageFactory

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:chat_chatmessage_changelist")


def test_hide_action_takes_messages_out_of_the_feed_and_unhide_puts_them_back(admin_client, api_client):
    kept, moderated = ChatMessageFactory(), ChatMessageFactory()

    admin_client.post(CHANGELIST, {"action": "hide_messages", "_selected_action": [moderated.pk]})

    moderated.refresh_from_db()
    assert moderated.hidden_at is not None
    assert moderated.hidden_by == User.objects.get(username="admin")
    assert [m["id"] for m in api_client.get("/api/chat").json()] == [str(kept.pk)]

    admin_client.post(CHANGELIST, {"action": "unhide_messages", "_selected_action": [moderated.pk]})

    moderated.refresh_from_db()
    assert (moderated.hidden_at, moderated.hidden_by) == (None, None)
    assert [m["id"] for m in api_client.get("/api/chat").json()] == [str(moderated.pk), str(kept.pk)]


def test_changelist_filters_by_agent_and_visibility(admin_client):
    agent = AgentFactory()
    mine = ChatMessageFactory(agent=agent)
    ChatMessageFactory()
    hidden = ChatMessageFactory(agent=agent)
    admin_client.post(CHANGELIST, {"action": "hide_messages", "_selected_action": [hidden.pk]})

    by_agent = admin_client.get(CHANGELIST, {"agent__id__exact": agent.pk})
    visible_of_agent = admin_client.get(CHANGELIST, {"agent__id__exact": agent.pk, "visibility": "visible"})

    assert [m.pk for m in by_agent.context["cl"].result_list] == [hidden.pk, mine.pk]
    assert [m.pk for m in visible_of_agent.context["cl"].result_list] == [mine.pk]


def test_staff_post_system_messages_that_reach_the_feed(admin_client, api_client):
    response = admin_client.post(reverse("admin:chat_chatmessage_add"), {"message": "Maintenance at 18:00 UTC"})

    assert response.status_code == 302
    stored = ChatMessage.objects.get()
    assert (stored.agent, stored.message_type, stored.message) == (None, "system", "Maintenance at 18:00 UTC")
    feed = api_client.get("/api/chat").json()
    assert feed[0]["message_type"] == "system"
    assert (feed[0]["sender_name"], feed[0]["sender_instance_id"]) == ("System", "")


def test_message_change_page_is_read_only(admin_client):
    message = ChatMessageFactory(message="original")

    page = admin_client.get(reverse("admin:chat_chatmessage_change", args=[message.pk]))
    admin_client.post(reverse("admin:chat_chatmessage_change", args=[message.pk]), {"message": "edited"})

    assert page.status_code == 200
    assert b"original" in page.content
    message.refresh_from_db()
    assert message.message == "original"
