"""Stateless session ids: everything a `slow` needs travels inside the id, so any worker or replica can serve it.

An id is `as1.<payload>.<check>`: the payload (base64url JSON) holds the provider name, the issue time, a digest
binding it to `workload_id` and `workload_context`, and the provider's small session state; the check is a digest
of the payload. With no secret shared between replicas the check detects damaged or edited ids, not forged ones:
an id is not a credential, and providers treat the state in it as caller input.

With secrets (ATTRIBUTION_SESSION_SECRET) the check is an HMAC-SHA256 of the payload under the first secret, and an
id is accepted when its check matches under any of them (so a secret can be rotated): replicas sharing a secret
accept only ids one of them issued. An unsigned, forged or otherwise signed id is refused like an edited one.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from providers.base import AttributionRequest

PREFIX = "as1"
MAX_LENGTH = 1024
CLOCK_SKEW_SECONDS = 300
MAX_ISSUED_AT = 2**40  # seconds since the epoch; anything larger is not a time this service wrote
_CHECK_CONTEXT = b"attribution-adapter session v1\n"
#: what `json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True)` builds for every call, once
_PAYLOAD_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True)
_SIGNED_CHECK_BYTES = 16
_URLSAFE = bytes.maketrans(b"+/", b"-_")


class InvalidSession(Exception):
    """The id is malformed, tampered, foreign or expired; the reason is for logs, not for the caller."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class SessionTooLarge(Exception):
    """The provider's session state does not fit in a session id."""


@dataclass(frozen=True)
class SessionCodec:
    provider: str
    ttl_seconds: int
    secrets: tuple[str, ...] = field(default=(), repr=False)

    def _checks(self, raw: bytes, issued: bool = False) -> list[bytes]:
        """The checks an id with this payload may carry; the first is the one issued (`issued`: that one alone)."""
        if not self.secrets:
            return [_check(raw)]
        return [_signed_check(secret, raw) for secret in (self.secrets[:1] if issued else self.secrets)]

    def issue(self, request: AttributionRequest, state: Mapping[str, str | int], now: float | None = None) -> str:
        nonce = _b64(secrets.token_bytes(6))  # two fasts in the same second still get distinct ids
        issued_at = int(time.time() if now is None else now)
        # The bytes `_PAYLOAD_JSON.encode({"b": ..., "n": ..., "p": ..., "s": ..., "t": ...})` writes (keys sorted),
        # with the two base64url texts, which need no escape, written as they are.
        raw = b'{"b":"%s","n":"%s","p":%s,"s":%s,"t":%d}' % (
            _binding(request).encode(),
            nonce.encode(),
            _json_text(self.provider),
            _PAYLOAD_JSON.encode(dict(state)).encode(),
            issued_at,
        )
        session_id = f"{PREFIX}.{_b64(raw)}.{_b64(self._checks(raw, issued=True)[0])}"
        if len(session_id) > MAX_LENGTH:
            raise SessionTooLarge(f"session id would be {len(session_id)} characters")
        return session_id

    def open(self, session_id: str, request: AttributionRequest, now: float | None = None) -> dict[str, str | int]:
        """The provider state of a valid id issued for this workload, or InvalidSession."""
        parts = session_id.split(".")
        if len(parts) != 3 or parts[0] != PREFIX:
            raise InvalidSession("malformed")
        try:
            raw, check = _unb64(parts[1]), _unb64(parts[2])
        except (binascii.Error, ValueError):
            raise InvalidSession("malformed") from None
        # Every check is compared, in constant time each: which secret matched is not told by the time taken.
        matches = [hmac.compare_digest(check, expected) for expected in self._checks(raw)]
        if not any(matches):
            raise InvalidSession("tampered")
        try:
            payload = json.loads(raw)
        except (ValueError, RecursionError):
            raise InvalidSession("malformed") from None
        if not _well_formed(payload):
            raise InvalidSession("malformed")
        if payload["p"] != self.provider or not hmac.compare_digest(payload["b"], _binding(request)):
            raise InvalidSession("foreign")
        current = time.time() if now is None else now
        if payload["t"] > current + CLOCK_SKEW_SECONDS:
            raise InvalidSession("malformed")
        if current - payload["t"] > self.ttl_seconds:
            raise InvalidSession("expired")
        return payload["s"]


def _well_formed(payload: object) -> bool:
    if not isinstance(payload, dict) or set(payload) != {"b", "n", "p", "s", "t"}:
        return False
    state = payload["s"]
    return (
        all(isinstance(payload[key], str) and payload[key].isascii() for key in ("b", "n", "p"))
        and type(payload["t"]) is int
        and 0 <= payload["t"] < MAX_ISSUED_AT
        and isinstance(state, dict)
        and all(isinstance(key, str) and type(value) in (str, int) for key, value in state.items())
    )


def _binding(request: AttributionRequest) -> str:
    context = request.workload_context
    return _bound(request.workload_id, context.workflow_id, context.attempt_index)


@functools.lru_cache(maxsize=256)
def _bound(workload_id: str, workflow_id: str, attempt_index: int) -> str:
    """The digest binding an id to one workload attempt (a pure function: the same workload, the same digest)."""
    bound = json.dumps([workload_id, workflow_id, attempt_index], ensure_ascii=True)
    return _b64(hashlib.sha256(bound.encode()).digest()[:18])


@functools.lru_cache(maxsize=16)
def _json_text(text: str) -> bytes:
    return _PAYLOAD_JSON.encode(text).encode()


def _check(raw: bytes) -> bytes:
    return hashlib.sha256(_CHECK_CONTEXT + raw).digest()[:12]


def _signed_check(secret: str, raw: bytes) -> bytes:
    return hmac.new(secret.encode("utf-8", "surrogateescape"), _CHECK_CONTEXT + raw, hashlib.sha256).digest()[
        :_SIGNED_CHECK_BYTES
    ]


def _b64(data: bytes) -> str:
    """Unpadded base64url (what `base64.urlsafe_b64encode` gives, its padding stripped)."""
    return binascii.b2a_base64(data, newline=False).translate(_URLSAFE).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    """Decode unpadded base64url, accepting only the one canonical spelling of the bytes.

    The last character of an unpadded text can carry bits the decoder ignores; without this check two different
    ids would decode to the same payload, and an edited id would pass as the original.
    """
    if not text or any(c not in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_" for c in text):
        raise ValueError("not base64url")
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64(data) != text:
        raise ValueError("not the canonical base64url spelling")
    return data
