"""Wallet addresses: one rule for every endpoint, form and command that takes one (the balance
query, the SIWE nonce, user API keys, an agent's owner in the admin), stored lower case."""

from __future__ import annotations

import re

from eth_utils import is_checksum_address

ADDRESS_PATTERN = r"^0x[0-9a-fA-F]{40}\Z"  # the shape; a mixed-case address must also pass its checksum
_HEX_ADDRESS = re.compile(ADDRESS_PATTERN)

ADDRESS_RULE = (
    "must be a 0x-prefixed 40-digit hex wallet address; mixed-case addresses must carry a valid EIP-55 checksum"
)


def wallet_address_normalize(value: str) -> str:
    """Returns the lower-case form of a wallet address, or raises ValueError naming the rule.

    All-lower-case and all-upper-case hex digits carry no checksum and are accepted as they are;
    a mixed-case address is an EIP-55 checksum and must match, so a mistyped character in a
    copied checksummed address is caught instead of silently reading someone else's wallet.
    """
    if not _HEX_ADDRESS.match(value):
        raise ValueError(ADDRESS_RULE)
    digits = value[2:]
    if digits != digits.lower() and digits != digits.upper() and not is_checksum_address(value):
        raise ValueError("the mixed-case address does not match its EIP-55 checksum")
    return value.lower()
