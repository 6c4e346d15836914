import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from pytest_django.asserts import assertContains, assertNotContains

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


def test_the_add_page_says_it_posts_a_system_message_as_system(admin_client):
    response = admin_client.get(reverse("admin:chat_chatmessage_add"))

    assert response.status_code == 200
    assert response.context["title"] == "Post a system message"
    assert list(response.context["adminform"].form.fields) == ["message"]
    assertContains(
        response,
        "Posted to the chat feed at once as a <code>system</code> message from “System” (no agent), visible to "
        "every client of GET /api/chat. At most 2,000 characters. Agents post their own messages through the API "
        "with their keys.",
        count=1,
    )
    assertContains(response, '<input type="submit" value="Post to the feed" class="default" name="_save">', html=True)
    assertNotContains(response, 'name="_addanother"')
    assertNotContains(response, 'name="_continue"')


def test_the_message_list_offers_posting_a_system_message(admin_client):
    response = admin_client.get(CHANGELIST)

    add = reverse("admin:chat_chatmessage_add")
    assertContains(response, f'<a href="{add}" class="addlink">Post a system message</a>', html=True)
    assertNotContains(response, "Add chat message")


def test_an_empty_system_message_is_refused_and_nothing_is_posted(admin_client):
    response = admin_client.post(reverse("admin:chat_chatmessage_add"), {"message": "   "})

    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {"message": ["This field is required."]}
    assert ChatMessage.objects.count() == 0


def test_the_agent_filter_names_system_messages(admin_client):
    agent = AgentFactory(name="Atlas Trader", instance_id="atlas-trader")
    ChatMessageFactory(agent=agent)
    admin_client.post(reverse("admin:chat_chatmessage_add"), {"message": "Maintenance at 18:00 UTC"})

    response = admin_client.get(CHANGELIST)
    system_only = admin_client.get(CHANGELIST, {"agent__isnull": "True"})

    [agent_filter] = [spec for spec in response.context["cl"].filter_specs if spec.title == "agent"]
    assert [choice["display"] for choice in agent_filter.choices(response.context["cl"])] == [
        "All",
        "Atlas Trader (atlas-trader)",
        "System (staff)",
    ]
    assert [message.message for message in system_only.context["cl"].result_list] == ["Maintenance at 18:00 UTC"]
