"""Chat moderation: staff read the feed, hide and unhide messages, and post system messages (the
add page, "Post a system message": its button says "Post to the feed",
templates/admin/chat/chatmessage/)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth.base_user import AbstractBaseUser
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils.safestring import mark_safe

from chat.models import MESSAGE_MAX_LENGTH, ChatMessage, MessageType
from chat.services import chat_message_hide, chat_message_unhide, chat_system_message_post


class VisibilityFilter(admin.SimpleListFilter):
    title = "visibility"
    parameter_name = "visibility"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [("visible", "In the feed"), ("hidden", "Hidden")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[ChatMessage]) -> QuerySet[ChatMessage]:
        if self.value() == "visible":
            return queryset.filter(hidden_at__isnull=True)
        if self.value() == "hidden":
            return queryset.filter(hidden_at__isnull=False)
        return queryset


class SenderFilter(admin.RelatedOnlyFieldListFilter):
    """The agents that posted, and the staff's system messages (no agent) under a name of their own."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.empty_value_display = mark_safe("System (staff)")  # a literal: nothing to escape


class SystemMessageForm(forms.ModelForm):
    """Staff post `system` messages only; agents' messages come through the API."""

    message = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4, "cols": 80, "placeholder": "Maintenance at 18:00 UTC"}),
        max_length=MESSAGE_MAX_LENGTH,
        strip=True,
        help_text=(
            "Posted to the chat feed at once as a <code>system</code> message from “System” (no agent), "
            f"visible to every client of GET /api/chat. At most {MESSAGE_MAX_LENGTH:,} characters. "
            "Agents post their own messages through the API with their keys."
        ),
    )

    class Meta:
        model = ChatMessage
        fields = ["message"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # So that model validation checks the constraints of what will be stored: no agent, type system.
        self.instance.message_type = MessageType.SYSTEM


def _staff(request: HttpRequest) -> AbstractBaseUser:
    """The signed-in staff member of an admin request (the admin admits no anonymous user)."""
    assert isinstance(request.user, AbstractBaseUser)
    return request.user


@admin.register(ChatMessage)
class ChatMessageAdmin(admin.ModelAdmin):
    list_display = ["id", "created_at", "sender", "message_type", "short_message", "in_feed"]
    list_filter = [VisibilityFilter, "message_type", ("agent", SenderFilter)]
    search_fields = ["message", "agent__name", "agent__instance_id"]
    list_select_related = ["agent"]
    date_hierarchy = "created_at"
    actions = ["hide_messages", "unhide_messages"]
    readonly_fields = ["agent", "message", "message_type", "created_at", "hidden_at", "hidden_by", "idempotency_key"]

    def get_form(  # type: ignore[override]
        self, request: HttpRequest, obj: ChatMessage | None = None, **kwargs: Any
    ) -> type[forms.ModelForm]:
        if obj is None:
            kwargs["form"] = SystemMessageForm
        return super().get_form(request, obj, **kwargs)

    def get_readonly_fields(self, request: HttpRequest, obj: ChatMessage | None = None) -> list[str]:
        return list(self.readonly_fields) if obj else []

    def add_view(
        self, request: HttpRequest, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        # One way out of the form: the message is posted, not saved to be edited later.
        context = {
            "title": "Post a system message",
            "show_save_and_continue": False,
            "show_save_and_add_another": False,
        }
        return super().add_view(request, form_url, {**context, **(extra_context or {})})

    def get_fields(self, request: HttpRequest, obj: ChatMessage | None = None) -> list[str]:  # type: ignore[override]
        return list(self.readonly_fields) if obj else ["message"]

    def save_model(self, request: HttpRequest, obj: ChatMessage, form: forms.ModelForm, change: bool) -> None:
        if change:
            return  # messages are not edited; moderation goes through the hide/unhide actions
        created = chat_system_message_post(message=form.cleaned_data["message"])
        # The admin's response (message, redirect) describes `obj`: make it the stored message.
        obj.pk, obj.message_type, obj.created_at = created.pk, created.message_type, created.created_at

    @admin.display(description="sender", ordering="agent__name")
    def sender(self, message: ChatMessage) -> str:
        return message.agent.name if message.agent else "System"

    @admin.display(description="message")
    def short_message(self, message: ChatMessage) -> str:
        return message.message if len(message.message) <= 80 else message.message[:79] + "…"

    @admin.display(description="in feed", boolean=True)
    def in_feed(self, message: ChatMessage) -> bool:
        return message.hidden_at is None

    @admin.action(description="Hide from the feed", permissions=["change"])
    def hide_messages(self, request: HttpRequest, queryset: QuerySet[ChatMessage]) -> None:
        hidden = chat_message_hide(message_ids=queryset.values_list("pk", flat=True), by=_staff(request))
        self.message_user(request, f"{hidden} message(s) hidden from the feed.", messages.SUCCESS)

    @admin.action(description="Show in the feed again", permissions=["change"])
    def unhide_messages(self, request: HttpRequest, queryset: QuerySet[ChatMessage]) -> None:
        shown = chat_message_unhide(message_ids=queryset.values_list("pk", flat=True))
        self.message_user(request, f"{shown} message(s) shown in the feed again.", messages.SUCCESS)
