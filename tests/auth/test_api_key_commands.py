"""manage.py create_api_key and revoke_api_key."""

from __future__ import annotations

import hashlib
import io
import re

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from agents.models import ApiKey
from tests.agents.factories import AgentFactory, bearer
from tests.auth.signing import WALLET
from tests.groundtruth.factories import RepositoryFactory

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.auth.urls_probe")]

SECRET_SHAPE = re.compile(r"^(ak|uk|sk)_([0-9a-f]{12})_[A-Za-z0-9_-]{43}$")
ADDRESS_RULE = (
    "must be a 0x-prefixed 40-digit hex wallet address; mixed-case addresses must carry a valid EIP-55 checksum"
)


def run(command: str, *args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(command, *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_agent_key_is_printed_once_on_stdout_and_only_its_hash_is_stored(api_client):
    agent = AgentFactory(instance_id="trader-1")

    out, err = run("create_api_key", "--kind", "agent", "--agent", "trader-1", "--name", "trader bot")

    secret = out.strip()
    match = SECRET_SHAPE.match(secret)
    assert match and match[1] == "ak"
    key = ApiKey.objects.get()
    assert (key.kind, key.agent_id, key.name, key.lookup) == ("agent", agent.pk, "trader bot", match[2])
    assert key.hashed_key == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in str(ApiKey.objects.values().get())
    assert err == (
        f"Created agent key ak_{match[2]} ('trader bot', agent trader-1). "
        "The secret below is shown only now; store it safely.\n"
    )
    who = api_client.get("/api/probe/whoami", **bearer(secret)).json()
    assert (who["kind"], who["agent_id"]) == ("agent", agent.pk)


def test_user_key_is_bound_to_the_lower_cased_wallet():
    out, err = run("create_api_key", "--kind", "user", "--wallet", WALLET.address, "--name", "alice")

    key = ApiKey.objects.get()
    assert (key.kind, key.wallet_address, key.scopes) == ("user", WALLET.address.lower(), [])
    assert out.startswith("uk_")
    assert f"wallet {WALLET.address.lower()}" in err


def test_service_key_takes_repeated_scopes():
    out, _ = run("create_api_key", "--kind", "service", "--scope", "read", "--scope", "ingest", "--name", "indexer")

    key = ApiKey.objects.get()
    assert (key.kind, key.scopes) == ("service", ["ingest", "read"])
    assert out.startswith("sk_")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kind", "agent", "--name", "x"], "agent: an agent key needs an agent, and only an agent key has one"),
        (["--kind", "agent", "--agent", "nobody", "--name", "x"], "No agent with instance_id 'nobody'."),
        (
            ["--kind", "user", "--name", "x"],
            "wallet_address: a user key needs a wallet address, and only a user key has one",
        ),
        (["--kind", "user", "--wallet", "0x123", "--name", "x"], f"wallet_address: {ADDRESS_RULE}"),
        (["--kind", "user", "--wallet", "0X" + "A" * 40, "--name", "x"], f"wallet_address: {ADDRESS_RULE}"),
        (["--kind", "service", "--name", "x"], "scopes: a service key needs at least one scope: read, ingest"),
        (
            ["--kind", "user", "--wallet", "0x" + "a" * 40, "--scope", "read", "--name", "x"],
            "scopes: only service keys have scopes",
        ),
        (["--kind", "service", "--scope", "read", "--name", "  "], "name: must not be blank"),
    ],
)
def test_invalid_requests_fail_and_create_nothing(args, message):
    with pytest.raises(CommandError) as failure:
        run("create_api_key", *args)

    assert str(failure.value) == message
    assert ApiKey.objects.count() == 0


def test_revoke_by_prefix_revokes_and_the_key_stops_working(api_client):
    secret, _ = run("create_api_key", "--kind", "service", "--scope", "read", "--name", "indexer")
    secret = secret.strip()
    prefix = "_".join(secret.split("_")[:2])
    assert api_client.get("/api/probe/whoami", **bearer(secret)).status_code == 200

    out, _ = run("revoke_api_key", prefix)

    assert out == f"Revoked service key {prefix} ('indexer').\n"
    assert ApiKey.objects.get().revoked_at is not None
    assert api_client.get("/api/probe/whoami", **bearer(secret)).status_code == 401


def test_revoke_twice_says_so_and_keeps_the_first_revocation_time():
    secret = run("create_api_key", "--kind", "service", "--scope", "read", "--name", "indexer")[0].strip()
    lookup = secret.split("_")[1]
    run("revoke_api_key", lookup)
    first = ApiKey.objects.get().revoked_at

    out, _ = run("revoke_api_key", secret)  # the whole key names it too

    assert out == f"Service key sk_{lookup} ('indexer') was already revoked.\n"
    assert ApiKey.objects.get().revoked_at == first
    assert first <= timezone.now()


def test_revoking_an_unknown_key_fails_and_changes_nothing():
    run("create_api_key", "--kind", "service", "--scope", "read", "--name", "indexer")

    with pytest.raises(CommandError) as failure:
        run("revoke_api_key", "sk_000000000000")

    assert str(failure.value) == "No API key with prefix or lookup 'sk_000000000000'."
    assert ApiKey.objects.get().revoked_at is None


def test_service_key_limited_to_repositories_and_owners_says_so():
    RepositoryFactory(name="acme/handbook", owners=["docs-team"])
    RepositoryFactory(name="platform/runbooks", owners=["platform"])

    out, err = run(
        "create_api_key", "--kind", "service", "--scope", "read", "--name", "docs",
        "--repo", "acme/handbook", "--owner", "platform", "--owner", "platform",
    )  # fmt: skip

    key = ApiKey.objects.get()
    assert (key.scope_repositories, key.scope_owners) == (["acme/handbook"], ["platform"])
    assert err == (
        f"Created service key sk_{key.lookup} ('docs', scopes read; only acme/handbook, owner platform). "
        "The secret below is shown only now; store it safely.\n"
    )
    assert out.startswith("sk_")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--repo", "acme/nope"],
            "scope_repositories: unknown repositories ['acme/nope']: not listed in the source registry",
        ),
        (
            ["--owner", "nobody"],
            "scope_owners: unknown owners ['nobody']: no repository of the source registry lists them",
        ),
    ],
)
def test_a_scope_naming_an_unknown_repository_or_owner_fails_and_creates_nothing(args, message):
    RepositoryFactory(name="acme/handbook", owners=["docs-team"])

    with pytest.raises(CommandError) as failure:
        run("create_api_key", "--kind", "service", "--scope", "read", "--name", "x", *args)

    assert str(failure.value) == message
    assert ApiKey.objects.count() == 0
