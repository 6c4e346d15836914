"""The API key back office: create (secret shown once, never stored), list, revoke."""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime

import pytest
from django.contrib.sessions.models import Session
from django.urls import reverse
from django.utils import timezone
from pytest_django.asserts import assertContains, assertNotContains

from agents.models import ApiKey, ApiKeyKind, WalletSession
from agents.services import api_key_create
from tests.adminpages import changelist_cells, changelist_headers
from tests.agents.factories import AgentFactory, bearer, wallet_session_for
from tests.auth.signing import WALLET
from tests.groundtruth.factories import RepositoryFactory

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.auth.urls_probe")]

SECRET = re.compile(r"(?:ak|uk|sk)_[0-9a-f]{12}_[A-Za-z0-9_-]{43}")
ADD_URL = "/admin/agents/apikey/add/"
LIST_URL = "/admin/agents/apikey/"


def create_through_admin(admin_client, **fields):
    data = {"kind": "service", "name": "indexer", "agent": "", "wallet_address": "", **fields}
    return admin_client.post(ADD_URL, data)


def test_created_key_secret_is_shown_once_as_an_admin_message_and_only_its_hash_is_stored(admin_client):
    response = create_through_admin(admin_client, scopes=["read", "ingest"])

    assert response.status_code == 200
    page = response.content.decode()
    secrets_on_page = set(SECRET.findall(page))
    assert len(secrets_on_page) == 1
    secret = secrets_on_page.pop()
    assert 'class="success"' in page and "is shown only now and is not stored" in page
    key = ApiKey.objects.get()
    assert (key.kind, key.name, key.scopes, key.agent_id, key.wallet_address) == (
        "service",
        "indexer",
        ["ingest", "read"],
        None,
        "",
    )
    assert key.hashed_key == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in str(ApiKey.objects.values().get())
    # Not kept for a later page either: no message cookie, nothing in the session store.
    assert secret not in str(response.cookies)
    assert all(secret not in s.get_decoded().__repr__() for s in Session.objects.all())
    later = admin_client.get(reverse("admin:agents_apikey_change", args=[key.pk])).content.decode()
    assert secret not in later and f"sk_{key.lookup}" in later
    assert secret not in admin_client.get(LIST_URL).content.decode()


def test_key_created_in_the_admin_authenticates(admin_client, api_client):
    agent = AgentFactory(instance_id="poster")
    page = create_through_admin(admin_client, kind="agent", agent=str(agent.pk), name="poster key").content.decode()
    secret = SECRET.search(page)[0]

    who = api_client.get("/api/probe/whoami", **bearer(secret)).json()

    assert (who["kind"], who["agent_id"]) == ("agent", agent.pk)


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"kind": "agent"}, "an agent key needs an agent, and only an agent key has one"),
        ({"kind": "user"}, "a user key needs a wallet address, and only a user key has one"),
        ({"kind": "user", "wallet_address": "0xabc"}, "must be a 0x-prefixed 40-digit hex wallet address"),
        # eth_utils.is_address would take it; the one rule (agentplatform/plumbing/wallet_addresses.py) does not.
        ({"kind": "user", "wallet_address": "a" * 40}, "must be a 0x-prefixed 40-digit hex wallet address"),
        ({"kind": "service"}, "a service key needs at least one scope: read, ingest"),
        ({"kind": "user", "wallet_address": "0x" + "a" * 40, "scopes": ["read"]}, "only service keys have scopes"),
    ],
)
def test_invalid_key_form_shows_the_error_and_creates_nothing(admin_client, fields, error):
    response = create_through_admin(admin_client, **fields)

    assert response.status_code == 200
    assert error in response.content.decode()
    assert not SECRET.search(response.content.decode())
    assert ApiKey.objects.count() == 0


def test_key_list_shows_prefix_binding_scopes_and_state_in_short_columns(admin_client):
    agent = AgentFactory(instance_id="lister")
    agent_key, _ = api_key_create(kind=ApiKeyKind.AGENT, name="agent one", agent=agent)
    user_key, _ = api_key_create(kind=ApiKeyKind.USER, name="user one", wallet_address=WALLET.address)
    service_key, _ = api_key_create(kind=ApiKeyKind.SERVICE, name="svc one", scopes=["read", "ingest"])
    ApiKey.objects.filter(pk=user_key.pk).update(revoked_at=datetime(2026, 1, 26, 8, 14, 30, tzinfo=UTC))
    created = timezone.localtime(service_key.created_at).strftime("%Y-%m-%d %H:%M")

    response = admin_client.get(LIST_URL)

    rows = changelist_cells(response)
    address = WALLET.address.lower()
    assert rows == [
        [f"sk_{service_key.lookup}", "svc one", "service", "ingest, read", created, "—", "active"],
        [
            f"uk_{user_key.lookup}",
            "user one",
            f"wallet {address[:8]}…{address[-6:]}",
            "—",
            created,
            "—",
            "revoked 2026-01-26 08:14",
        ],
        [f"ak_{agent_key.lookup}", "agent one", "agent lister", "—", created, "—", "active"],
    ]
    assert changelist_headers(response) == [
        "Prefix",
        "Name",
        "Bound to",
        "Scopes",
        "Created (UTC)",
        "Last used (UTC)",
        "Status",
    ]
    page = response.content.decode()
    assert "delete_selected" not in page
    assert 'value="revoke_keys"' in page


def test_key_change_page_shows_the_whole_prefix_and_moments_as_the_list_does(admin_client):
    key, _ = api_key_create(kind=ApiKeyKind.SERVICE, name="dated", scopes=["read"])
    ApiKey.objects.filter(pk=key.pk).update(
        created_at=datetime(2026, 1, 26, 8, 14, 5, tzinfo=UTC), revoked_at=datetime(2026, 2, 3, 17, 2, tzinfo=UTC)
    )

    response = admin_client.get(reverse("admin:agents_apikey_change", args=[key.pk]))

    assertContains(response, f'<div class="readonly">sk_{key.lookup}</div>', html=True)
    assertContains(response, '<div class="readonly">2026-01-26 08:14</div>', html=True)
    assertContains(response, '<div class="readonly">2026-02-03 17:02</div>', html=True)
    assertNotContains(response, "a.m.")
    assertNotContains(response, "p.m.")


def test_keys_cannot_be_deleted_only_revoked(admin_client):
    key, _ = api_key_create(kind=ApiKeyKind.SERVICE, name="kept on record", scopes=["read"])

    page = admin_client.get(reverse("admin:agents_apikey_change", args=[key.pk]))
    delete = admin_client.post(reverse("admin:agents_apikey_delete", args=[key.pk]), {"post": "yes"})

    assert page.status_code == 200
    assert 'class="deletelink"' not in page.content.decode()
    assert delete.status_code == 403
    assert list(ApiKey.objects.values_list("name", flat=True)) == ["kept on record"]


def test_revoke_action_revokes_selected_keys_and_they_stop_working(admin_client, api_client):
    keep, keep_secret = api_key_create(kind=ApiKeyKind.SERVICE, name="keep", scopes=["read"])
    drop, drop_secret = api_key_create(kind=ApiKeyKind.SERVICE, name="drop", scopes=["read"])

    response = admin_client.post(LIST_URL, {"action": "revoke_keys", "_selected_action": [str(drop.pk)]}, follow=True)

    assert "Revoked 1 API key(s); 0 already revoked." in response.content.decode()
    assert ApiKey.objects.get(pk=drop.pk).revoked_at is not None
    assert ApiKey.objects.get(pk=keep.pk).revoked_at is None
    assert api_client.get("/api/probe/whoami", **bearer(drop_secret)).status_code == 401
    assert api_client.get("/api/probe/whoami", **bearer(keep_secret)).status_code == 200


def test_change_page_lets_only_the_name_change(admin_client):
    key, _ = api_key_create(kind=ApiKeyKind.SERVICE, name="old name", scopes=["read"])
    before = ApiKey.objects.values().get(pk=key.pk)

    admin_client.post(
        reverse("admin:agents_apikey_change", args=[key.pk]),
        {"name": "new name", "kind": "agent", "scopes": ["ingest"], "wallet_address": "0x" + "b" * 40},
    )

    after = ApiKey.objects.values().get(pk=key.pk)
    assert after == {**before, "name": "new name"}


def test_wallet_sessions_are_listed_and_revocable_but_not_creatable(admin_client, api_client):
    token = wallet_session_for(WALLET.address)
    session = WalletSession.objects.get()

    listing = admin_client.get("/admin/agents/walletsession/").content.decode()
    add = admin_client.get("/admin/agents/walletsession/add/")
    admin_client.post(
        "/admin/agents/walletsession/", {"action": "revoke_sessions", "_selected_action": [str(session.pk)]}
    )

    assert WALLET.address.lower() in listing and f'<td class="field-prefix">ws_{session.lookup}</td>' in listing
    assert token not in listing
    assert add.status_code == 403
    assert WalletSession.objects.get().revoked_at is not None
    assert api_client.get("/api/probe/whoami", **bearer(token)).status_code == 401


def test_a_key_limited_to_repositories_is_created_in_the_admin_and_shown_on_its_page(admin_client):
    RepositoryFactory(name="acme/handbook", owners=["docs-team"])
    RepositoryFactory(name="platform/runbooks", owners=["platform"])

    create_through_admin(
        admin_client, scopes=["read"], scope_repositories="acme/handbook, acme/handbook", scope_owners="platform"
    )

    key = ApiKey.objects.get()
    assert (key.scope_repositories, key.scope_owners) == (["acme/handbook"], ["platform"])
    page = admin_client.get(reverse("admin:agents_apikey_change", args=[key.pk])).content.decode()
    assert '<div class="readonly">acme/handbook, owner platform</div>' in page


def test_an_unscoped_key_page_says_it_reads_every_repository(admin_client):
    key, _ = api_key_create(kind=ApiKeyKind.SERVICE, name="all", scopes=["read"])

    page = admin_client.get(reverse("admin:agents_apikey_change", args=[key.pk])).content.decode()

    assert '<div class="readonly">all</div>' in page


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        (
            {"scope_repositories": "acme/nope"},
            "unknown repositories [&#x27;acme/nope&#x27;]: not listed in the source registry",
        ),
        (
            {"scope_owners": "nobody"},
            "unknown owners [&#x27;nobody&#x27;]: no repository of the source registry lists them",
        ),
    ],
)
def test_a_scope_naming_an_unknown_repository_or_owner_is_a_form_error_and_creates_nothing(admin_client, fields, error):
    RepositoryFactory(name="acme/handbook", owners=["docs-team"])

    response = create_through_admin(admin_client, scopes=["read"], **fields)

    assert response.status_code == 200
    assert error in response.content.decode()
    assert not SECRET.search(response.content.decode())
    assert ApiKey.objects.count() == 0
