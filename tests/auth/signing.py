"""Real EIP-4361 messages signed with real test keys (EIP-191 personal_sign), as a wallet does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from eth_account import Account
from eth_account.messages import encode_defunct
from eth_account.signers.local import LocalAccount

# Well-known throwaway keys (never used for anything real).
WALLET = Account.from_key("0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318")
OTHER_WALLET = Account.from_key("0x" + "5a" * 32)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def siwe_message(
    *,
    nonce: str,
    address: str = WALLET.address,
    domain: str = "localhost:8000",
    issued_at: datetime | None = None,
    expiration_time: datetime | None = None,
    not_before: datetime | None = None,
) -> str:
    """An EIP-4361 message laid out exactly as the specification's grammar has it."""
    issued_at = issued_at or datetime.now(UTC)
    lines = [
        f"{domain} wants you to sign in with your Ethereum account:",
        address,
        "",
        "Sign in to the agent platform.",
        "",
        f"URI: http://{domain}/",
        "Version: 1",
        "Chain ID: 1",
        f"Nonce: {nonce}",
        f"Issued At: {iso(issued_at)}",
    ]
    if expiration_time is not None:
        lines.append(f"Expiration Time: {iso(expiration_time)}")
    if not_before is not None:
        lines.append(f"Not Before: {iso(not_before)}")
    return "\n".join(lines)


def sign(message: str, account: LocalAccount = WALLET) -> str:
    return "0x" + account.sign_message(encode_defunct(text=message)).signature.hex()


def in_minutes(minutes: float) -> datetime:
    return datetime.now(UTC) + timedelta(minutes=minutes)
