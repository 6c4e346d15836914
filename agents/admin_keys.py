"""Back office for credentials: API keys (created here, the secret shown once) and wallet sessions.

Registered by an import in agents/admin.py.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.html import format_html

from agentplatform.plumbing.admin_display import moment_text
from agentplatform.plumbing.errors import InvalidInput
from agents.models import WALLET_SESSION_PREFIX, ApiKey, ApiKeyKind, ApiKeyScope, WalletSession
from agents.services import (
    api_key_create,
    api_key_repository_scope_validate,
    api_key_revoke,
    api_key_validate,
    wallet_session_revoke,
)


class ApiKeyCreationForm(forms.ModelForm):
    scopes = forms.MultipleChoiceField(
        choices=ApiKeyScope.choices,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Service keys only: read (search, ask, assets) and/or ingest.",
    )

    scope_repositories = forms.CharField(
        label="Only repositories",
        required=False,
        help_text="Service keys: limit the key to these repositories (owner/name, comma- or space-separated). "
        "Left empty with owners empty: every repository.",
    )
    scope_owners = forms.CharField(
        label="Only owners",
        required=False,
        help_text="Service keys: and to the repositories whose registry `owners` list one of these.",
    )

    class Meta:
        model = ApiKey
        fields = ["kind", "name", "agent", "wallet_address", "scopes", "scope_repositories", "scope_owners"]
        help_texts = {
            "agent": "Agent keys only: the agent the key posts as.",
            "wallet_address": "User keys only: the 0x address whose balance the key may read.",
        }

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.errors:
            return data
        try:
            data["scopes"] = api_key_validate(
                kind=data.get("kind", ""),
                name=data.get("name", ""),
                agent=data.get("agent"),
                wallet_address=data.get("wallet_address", ""),
                scopes=data.get("scopes"),
            )
            data["scope_repositories"], data["scope_owners"] = api_key_repository_scope_validate(
                kind=data.get("kind", ""),
                repositories=_names(data.get("scope_repositories", "")),
                owners=_names(data.get("scope_owners", "")),
            )
        except InvalidInput as exc:
            for error in exc.errors or [{"field": "", "message": exc.detail}]:
                self.add_error(error["field"] if error["field"] in self.fields else None, error["message"])
        return data

    def _post_clean(self) -> None:
        # The row is written by api_key_create (which draws the secret), not by this form; the
        # model's own checks would only repeat api_key_validate with less helpful messages.
        pass


def revocation_text(revoked_at: datetime | None) -> str:
    """`active` or `revoked 2026-01-26 08:14`: a red ✗ read as "not revoked" where it meant "no"."""
    return "active" if revoked_at is None else f"revoked {moment_text(revoked_at)}"


def _names(text: str) -> list[str]:
    return text.replace(",", " ").split()


class RevokedFilter(admin.SimpleListFilter):
    title = "revoked"
    parameter_name = "revoked"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [("yes", "Revoked"), ("no", "Active")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "yes":
            return queryset.filter(revoked_at__isnull=False)
        if self.value() == "no":
            return queryset.filter(revoked_at__isnull=True)
        return queryset


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    # The kind is in the prefix (ak_, uk_, sk_) and the binding; the list filters by it.
    list_display = ["prefix", "name", "binding_short", "scope_list", "created", "last_used", "revocation"]
    list_filter = ["kind", RevokedFilter]
    search_fields = ["name", "lookup", "wallet_address", "agent__instance_id", "agent__name"]
    list_select_related = ["agent"]
    actions = ["revoke_keys"]
    readonly_after_creation = ["kind", "agent", "wallet_address", "scopes", "repository_scope"]

    @admin.display(description="prefix", ordering="lookup")
    def prefix(self, key: ApiKey) -> str:
        # Whole, as `manage.py revoke_api_key` takes it.
        return key.display_prefix

    @admin.display(description="bound to")
    def binding(self, key: ApiKey) -> str:
        if key.kind == ApiKeyKind.AGENT:
            return f"agent {key.agent.instance_id}" if key.agent else "—"
        if key.kind == ApiKeyKind.USER:
            return f"wallet {key.wallet_address}"
        return "service"

    @admin.display(description="bound to")
    def binding_short(self, key: ApiKey) -> str:
        """The binding with a user key's address shortened (the search box takes the whole one)."""
        if key.kind == ApiKeyKind.USER and len(key.wallet_address) == 42:
            return f"wallet {key.wallet_address[:8]}…{key.wallet_address[-6:]}"
        return self.binding(key)

    @admin.display(description="scopes")
    def scope_list(self, key: ApiKey) -> str:
        return ", ".join(key.scopes or []) or "—"

    @admin.display(description="repositories")
    def repository_scope(self, key: ApiKey) -> str:
        """What the key may read: every repository, or the ones and owners it is limited to."""
        if not key.scope_repositories and not key.scope_owners:
            return "all"
        parts = [*key.scope_repositories, *(f"owner {owner}" for owner in key.scope_owners)]
        return ", ".join(parts)

    @admin.display(description="created (UTC)", ordering="created_at")
    def created(self, key: ApiKey) -> str:
        return moment_text(key.created_at)

    @admin.display(description="last used (UTC)", ordering="last_used_at")
    def last_used(self, key: ApiKey) -> str:
        return moment_text(key.last_used_at)

    @admin.display(description="status", ordering="revoked_at")
    def revocation(self, key: ApiKey) -> str:
        return revocation_text(key.revoked_at)

    def get_form(self, request: HttpRequest, obj: ApiKey | None = None, change: bool = False, **kwargs: Any):
        if obj is None:
            kwargs["form"] = ApiKeyCreationForm
        return super().get_form(request, obj, change=change, **kwargs)

    def get_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> list[str]:  # type: ignore[override]
        if obj is None:
            return ["kind", "name", "agent", "wallet_address", "scopes", "scope_repositories", "scope_owners"]
        return ["prefix", "name", *self._shown_after_creation, "created_at", "last_used_at", "revoked_at"]

    def get_readonly_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> list[str]:
        if obj is None:
            return []
        return ["prefix", *self._shown_after_creation, "created_at", "last_used_at", "revoked_at"]

    @property
    def _shown_after_creation(self) -> list[str]:
        # Scopes as the list shows them ("ingest, read"), not as their JSON.
        return ["scope_list" if name == "scopes" else name for name in self.readonly_after_creation]

    def save_model(self, request: HttpRequest, obj: ApiKey, form: ModelForm, change: bool) -> None:
        if change:
            obj.save(update_fields=["name"])
            return
        data = form.cleaned_data
        key, secret = api_key_create(
            kind=data["kind"],
            name=data["name"],
            agent=data.get("agent"),
            wallet_address=data.get("wallet_address", ""),
            scopes=data.get("scopes"),
            scope_repositories=data.get("scope_repositories"),
            scope_owners=data.get("scope_owners"),
        )
        # The admin goes on with `obj` (change log, redirects): make it the row just written.
        obj.pk = key.pk
        obj.refresh_from_db()
        obj._state.adding = False
        # Kept on this request only, for response_add; never written anywhere.
        request._api_key_secret = secret  # type: ignore[attr-defined]

    def response_add(self, request: HttpRequest, obj: ApiKey, post_url_continue: str | None = None) -> HttpResponse:
        secret = getattr(request, "_api_key_secret", None)
        if secret is None:
            return super().response_add(request, obj, post_url_continue)
        # Rendered now rather than after a redirect: the message is read while this page renders,
        # so the messages framework never stores it (in a cookie or the session).
        messages.success(
            request,
            format_html(
                "API key “{}” created. Its secret is shown only now and is not stored; copy it: <code>{}</code>",
                obj.name,
                secret,
            ),
        )
        context = {
            **self.admin_site.each_context(request),
            "title": "API key created",
            "opts": self.opts,
            "key": obj,
            "binding": self.binding(obj),
        }
        return TemplateResponse(request, "admin/agents/apikey/created.html", context)

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False  # keys are revoked, not deleted, so their last use stays on record

    @admin.action(description="Revoke selected API keys")
    def revoke_keys(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        revoked = sum(api_key_revoke(key=key) for key in queryset)
        already = queryset.count() - revoked
        self.message_user(request, f"Revoked {revoked} API key(s); {already} already revoked.", messages.SUCCESS)


@admin.register(WalletSession)
class WalletSessionAdmin(admin.ModelAdmin):
    list_display = ["address", "prefix", "created", "expires", "revocation"]
    list_filter = [RevokedFilter]
    search_fields = ["address", "lookup"]
    readonly_fields = ("address", "prefix", "created_at", "expires_at", "revoked_at")
    fields = readonly_fields
    actions = ["revoke_sessions"]

    @admin.display(description="prefix", ordering="lookup")
    def prefix(self, session: WalletSession) -> str:
        return f"{WALLET_SESSION_PREFIX}_{session.lookup}"

    @admin.display(description="status", ordering="revoked_at")
    def revocation(self, session: WalletSession) -> str:
        return revocation_text(session.revoked_at)

    @admin.display(description="created (UTC)", ordering="created_at")
    def created(self, session: WalletSession) -> str:
        return moment_text(session.created_at)

    @admin.display(description="expires (UTC)", ordering="expires_at")
    def expires(self, session: WalletSession) -> str:
        return moment_text(session.expires_at)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # sessions come from Sign-In with Ethereum only

    @admin.action(description="Revoke selected wallet sessions")
    def revoke_sessions(self, request: HttpRequest, queryset: QuerySet[WalletSession]) -> None:
        revoked = sum(wallet_session_revoke(session=session) for session in queryset)
        self.message_user(request, f"Revoked {revoked} wallet session(s).", messages.SUCCESS)
