"""Input and output shapes of the Sign-In with Ethereum endpoints."""

from __future__ import annotations

from rest_framework import serializers

from agentplatform.plumbing.json_bodies import StrictBodySerializer, StrictCharField, StrictRegexField
from agentplatform.plumbing.query_params import QueryIntegerField
from agentplatform.plumbing.serializer_fields import WalletAddressField
from agents.wallet_auth import MAX_MESSAGE_LENGTH

# EIP-155 leaves chain ids unbounded; wallets keep them within JSON's exact integers.
CHAIN_ID_MAX = 2**53 - 1
CHAIN_ID_RULE = f"must be an EIP-155 chain id: an integer from 1 to {CHAIN_ID_MAX}"


class NonceQuerySerializer(serializers.Serializer):
    address = WalletAddressField(
        required=False,
        help_text="Optional wallet address: the response then carries the exact `message` for it to sign.",
    )
    chain_id = QueryIntegerField(
        required=False,
        default=1,
        min_value=1,
        max_value=CHAIN_ID_MAX,
        error_messages=dict.fromkeys(("invalid", "min_value", "max_value", "max_string_length"), CHAIN_ID_RULE),
        help_text="EIP-155 chain id to put in the message (default 1).",
    )


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


class WalletSignInSerializer(StrictBodySerializer):
    message = StrictCharField(
        max_length=MAX_MESSAGE_LENGTH,
        trim_whitespace=False,
        help_text="The EIP-4361 message exactly as signed.",
    )
    signature = StrictRegexField(
        r"^(0x)?[0-9a-fA-F]{130}\Z",
        help_text="The 65-byte EIP-191 (personal_sign) signature, hex.",
        error_messages={"invalid": "must be a 65-byte hex signature (0x followed by 130 hex digits)"},
    )


class WalletSessionSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="Send as `Authorization: Bearer <token>`. Shown once.")
    token_type = serializers.CharField(help_text='Always "Bearer".')
    address = serializers.CharField(help_text="The signing address, lower-case.")
    expires_at = serializers.DateTimeField()
