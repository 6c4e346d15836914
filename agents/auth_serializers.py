"""Input and output shapes of the Sign-In with Ethereum endpoints."""

from __future__ import annotations

from eth_utils import is_address
from rest_framework import serializers

from agents.wallet_auth import MAX_MESSAGE_LENGTH


class NonceQuerySerializer(serializers.Serializer):
    address = serializers.CharField(
        required=False,
        help_text="Optional wallet address: the response then carries the exact `message` for it to sign.",
    )
    chain_id = serializers.IntegerField(
        required=False, default=1, min_value=1, help_text="EIP-155 chain id to put in the message (default 1)."
    )

    def validate_address(self, value: str) -> str:
        if not is_address(value):
            raise serializers.ValidationError(
                "must be a 0x-prefixed 20-byte hex address (lower-case or EIP-55 checksum)"
            )
        return value


class NonceSerializer(serializers.Serializer):
    nonce = serializers.CharField(help_text="Single-use; put it in the message's `Nonce:` line.")
    issued_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField(help_text="The nonce must be used before this time.")
    domain = serializers.CharField(help_text="The message's domain must be exactly this (SIWE_DOMAIN).")
    uri = serializers.CharField(help_text="A URI for the message's `URI:` line.")
    version = serializers.CharField(help_text='EIP-4361 version, always "1".')
    chain_id = serializers.IntegerField()
    statement = serializers.CharField()
    message = serializers.CharField(
        required=False, help_text="Present when `address` was given: the EIP-4361 message to sign, exactly."
    )


class WalletSignInSerializer(serializers.Serializer):
    message = serializers.CharField(
        max_length=MAX_MESSAGE_LENGTH,
        trim_whitespace=False,
        help_text="The EIP-4361 message exactly as signed.",
    )
    signature = serializers.RegexField(
        r"^(0x)?[0-9a-fA-F]{130}$",
        help_text="The 65-byte EIP-191 (personal_sign) signature, hex.",
        error_messages={"invalid": "must be a 65-byte hex signature (0x followed by 130 hex digits)"},
    )


class WalletSessionSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="Send as `Authorization: Bearer <token>`. Shown once.")
    token_type = serializers.CharField(help_text='Always "Bearer".')
    address = serializers.CharField(help_text="The signing address, lower-case.")
    expires_at = serializers.DateTimeField()
