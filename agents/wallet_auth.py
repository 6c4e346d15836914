"""Sign-In with Ethereum (EIP-4361) messages: the message a wallet signs, and the checks of a signed one.

The flow: `agents.services.wallet_nonce_issue` stores a single-use nonce; the client builds an
EIP-4361 message naming SIWE_DOMAIN and that nonce (`wallet_sign_in_message` shows it), has the
wallet sign it (EIP-191 `personal_sign`) and sends message and signature to
`agents.services.wallet_session_create`, which checks them here (`wallet_sign_in_verify`), consumes
the nonce and returns a bearer session bound to the signing address. This module writes nothing.

Parsing uses the maintained `siwe` package; the signature is recovered with eth-account over the
exact text received (not a re-serialisation), so what the wallet showed is what was checked.

Errors (all problem details; a failed attempt changes nothing, the nonce included, so a client
whose wallet signed the wrong thing can retry with the same nonce):
- 400 `siwe_malformed`: not an EIP-4361 message (or a field of it is invalid).
- 401 `siwe_bad_signature`: the signature does not recover the message's address.
- 401 `siwe_domain_mismatch`: the message is for another domain than SIWE_DOMAIN.
- 401 `siwe_expired` / `siwe_not_yet_valid`: outside the message's Expiration Time / Not Before.
- 401 `siwe_nonce_invalid` (from `wallet_session_create`): nonce never issued, already used, or
  older than SIWE_NONCE_TTL_SECONDS.
"""

from __future__ import annotations

import warnings
from datetime import UTC, datetime

from django.conf import settings
from django.utils import timezone
from eth_account import Account
from eth_account.messages import encode_defunct
from eth_keys.exceptions import BadSignature
from eth_utils import to_checksum_address

from agentplatform.plumbing.errors import InvalidInput, Unauthenticated
from agentplatform.plumbing.wallet_addresses import wallet_address_normalize
from agents.models import WalletNonce

with warnings.catch_warnings():
    # abnf 2.8 warns that siwe's grammar restates RFC 5234 core rules; harmless (and abnf 2.9,
    # which makes it an error, is pinned out in requirements.txt).
    warnings.simplefilter("ignore")
    from siwe import SiweMessage

MAX_MESSAGE_LENGTH = 2048
SIGN_IN_STATEMENT = "Sign in to the agent platform."


def wallet_sign_in_message(*, nonce: WalletNonce, address: str, uri: str, chain_id: int = 1) -> str:
    """The EIP-4361 message for `address` to sign with `nonce`, as a wallet would show it."""
    try:
        address = wallet_address_normalize(address)
    except ValueError as exc:
        raise InvalidInput.for_field("address", str(exc)) from exc
    message = SiweMessage(
        domain=settings.SIWE_DOMAIN,
        address=to_checksum_address(address),  # EIP-4361 wants the checksummed form
        statement=SIGN_IN_STATEMENT,
        uri=uri,
        version="1",
        chain_id=chain_id,
        nonce=nonce.nonce,
        issued_at=_iso(timezone.now()),
        expiration_time=_iso(nonce.expires_at),
    )
    return message.prepare_message()


def wallet_sign_in_verify(*, message: str, signature: str, now: datetime) -> SiweMessage:
    """Checks a signed SIWE message at `now` (its form, signature, domain and validity period)
    and returns it parsed; raises InvalidInput or Unauthenticated (codes above). Whether its nonce
    is still usable is the caller's check, made where it is consumed."""
    parsed = _parse(message)
    recovered = _recover_address(message, signature)
    if recovered is None or recovered.lower() != parsed.address.lower():
        raise Unauthenticated("The signature was not made by the message's address.", code="siwe_bad_signature")
    if parsed.domain != settings.SIWE_DOMAIN:
        raise Unauthenticated(
            f"The message is for domain {parsed.domain!r}; this service signs in {settings.SIWE_DOMAIN!r}.",
            code="siwe_domain_mismatch",
        )
    if parsed.expiration_time is not None and now >= _parse_time(parsed.expiration_time):
        raise Unauthenticated(f"The message expired at {parsed.expiration_time}.", code="siwe_expired")
    if parsed.not_before is not None and now < _parse_time(parsed.not_before):
        raise Unauthenticated(f"The message is not valid before {parsed.not_before}.", code="siwe_not_yet_valid")
    return parsed


def _parse(message: str) -> SiweMessage:
    if len(message) > MAX_MESSAGE_LENGTH:
        raise _malformed(f"is longer than {MAX_MESSAGE_LENGTH} characters")
    # siwe's regular-expression parser first: it rejects garbage in microseconds, where the
    # ABNF parser (pure Python) can take seconds on a long non-message.
    try:
        parsed = SiweMessage.from_message(message, abnf=False)
    except ValueError as exc:
        raise _malformed(_reason(exc)) from exc
    # Then the EIP-4361 ABNF grammar itself, which is stricter (exact line structure).
    try:
        strict = SiweMessage.from_message(message, abnf=True)
    except ValueError as exc:
        raise _malformed(_reason(exc)) from exc
    if strict != parsed:
        raise _malformed("the message's fields are ambiguous")
    return strict


def _recover_address(message: str, signature: str) -> str | None:
    try:
        return Account.recover_message(encode_defunct(text=message), signature=signature)
    except (BadSignature, ValueError):  # out-of-range r/s/v, or not hex
        return None


def _malformed(reason: str) -> InvalidInput:
    return InvalidInput(
        f"message: not an EIP-4361 (Sign-In with Ethereum) message: {reason}.",
        code="siwe_malformed",
        errors=[{"field": "message", "message": f"not an EIP-4361 message: {reason}"}],
    )


def _reason(exc: ValueError) -> str:
    # pydantic's ValidationError names the field; siwe's parsers raise a bare ValueError.
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        location = ".".join(str(part) for part in first.get("loc", ()))
        return f"{location}: {first.get('msg', 'invalid')}" if location else str(first.get("msg", "invalid"))
    # Their own texts ("did not match the regular expression") would not help a client.
    return "it does not follow the EIP-4361 format"


def _parse_time(value: str) -> datetime:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise _malformed(f"invalid timestamp {value!r}") from exc


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
