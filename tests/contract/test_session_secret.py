"""Signed sessions (docs/contract.md, "Phases and sessions"): with ATTRIBUTION_SESSION_SECRET, replicas accept only
ids signed with one of their secrets; without it, ids behave exactly as before.

Each app instance stands for another worker or replica: only the session id travels between them.
"""

from __future__ import annotations

import base64
import hashlib
import json

import pytest

from app.settings import Settings, SettingsError
from tests.contract.conftest import (
    check_200,
    check_empty_error,
    echo_fast,
    make_client,
    post,
    slow_request,
    valid_request,
)
from tests.fakes import FakeProvider

OLD = "old-secret-0123456789abcdef"
NEW = "new-secret-fedcba9876543210"
OTHER = "another-cluster-secret-000000"


def provider() -> FakeProvider:
    return FakeProvider(fast=echo_fast, slow=lambda request, state, *_: echo_fast(request))


def replica(*secrets: str) -> tuple[object, FakeProvider]:
    fake = provider()
    return make_client(fake, session_secrets=secrets), fake


def fast(client) -> str:
    return check_200(post(client, valid_request()))["attribution_session_id"]


def served(client, fake: FakeProvider, session_id: str) -> None:
    body = check_200(post(client, slow_request(session_id)))
    assert "error" not in body, body
    assert body["attribution_session_id"] == session_id
    assert [call[0] for call in fake.calls] == ["slow"]


def refused(client, fake: FakeProvider, session_id: str) -> None:
    body = check_empty_error(post(client, slow_request(session_id)), "no_attribution_available")
    assert body["attribution_session_id"] == session_id
    assert fake.calls == []


def parts(session_id: str) -> tuple[str, bytes, bytes]:
    prefix, payload, check = session_id.split(".")

    def decode(text: str) -> bytes:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))

    return prefix, decode(payload), decode(check)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsigned_check(raw: bytes) -> bytes:
    """The documented check of an id issued without a secret: anyone can compute it."""
    return hashlib.sha256(b"attribution-adapter session v1\n" + raw).digest()[:12]


# ---------------------------------------------------------------- without a secret: as before


def test_without_a_secret_ids_carry_the_unsigned_check_and_any_replica_continues_them():
    issuer, _ = replica()
    session_id = fast(issuer)
    prefix, raw, check = parts(session_id)
    assert prefix == "as1" and check == unsigned_check(raw)
    other, fake = replica()
    served(other, fake, session_id)


def test_without_a_secret_a_forged_id_is_accepted_as_documented():
    # Not a credential: with no secret an id made up from the documented format is continued.
    issuer, _ = replica()
    _, raw, _ = parts(fast(issuer))
    payload = json.loads(raw)
    payload["s"] = {"forged": 1}
    forged_raw = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    forged = f"as1.{b64(forged_raw)}.{b64(unsigned_check(forged_raw))}"
    other, fake = replica()
    served(other, fake, forged)
    assert fake.calls[0][2] == {"forged": 1}


# ---------------------------------------------------------------- with a secret


def test_replicas_sharing_a_secret_continue_each_others_sessions():
    issuer, _ = replica(NEW)
    session_id = fast(issuer)
    _, raw, check = parts(session_id)
    assert check != unsigned_check(raw) and len(check) == 16
    other, fake = replica(NEW)
    served(other, fake, session_id)


def test_an_unsigned_id_is_refused_where_sessions_are_signed():
    issuer, _ = replica()
    session_id = fast(issuer)
    signed, fake = replica(NEW)
    refused(signed, fake, session_id)


def test_an_id_forged_from_a_signed_one_is_refused():
    issuer, _ = replica(NEW)
    _, raw, check = parts(fast(issuer))
    payload = json.loads(raw)
    payload["s"] = {"forged": 1}
    forged_raw = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    signed, fake = replica(NEW)
    for forged_check in (check, unsigned_check(forged_raw), bytes(16)):
        refused(signed, fake, f"as1.{b64(forged_raw)}.{b64(forged_check)}")


def test_an_id_signed_with_another_secret_is_refused():
    issuer, _ = replica(OTHER)
    session_id = fast(issuer)
    signed, fake = replica(NEW)
    refused(signed, fake, session_id)


def test_a_signed_id_is_refused_by_a_replica_without_a_secret():
    issuer, _ = replica(NEW)
    session_id = fast(issuer)
    unsigned, fake = replica()
    refused(unsigned, fake, session_id)


def test_rotation_signs_with_the_first_secret_and_accepts_any():
    # Step 1 of a rotation: the new secret is added behind the old one everywhere, so ids are still signed with OLD.
    before, _ = replica(OLD)
    old_id = fast(before)
    during, fake = replica(NEW, OLD)
    served(during, fake, old_id)
    # Ids issued during the rotation are signed with NEW: replicas that accept NEW continue them.
    new_id = fast(replica(NEW, OLD)[0])
    for secrets in ((NEW, OLD), (NEW,), (OLD, NEW)):
        client, fake = replica(*secrets)
        served(client, fake, new_id)
    # Once OLD is dropped, ids signed with it are refused; a replica still on OLD alone refuses NEW ids.
    after, fake = replica(NEW)
    refused(after, fake, old_id)
    stale, fake = replica(OLD)
    refused(stale, fake, new_id)


# ---------------------------------------------------------------- the setting


def test_the_setting_is_a_comma_separated_list_of_secrets():
    env = {"ATTRIBUTION_PROVIDER": "fake", "ATTRIBUTION_SESSION_SECRET": f" {NEW} , {OLD}"}
    settings = Settings.from_env(env)
    assert settings.session_secrets == (NEW, OLD)
    # The secret is kept from the provider's options and from the settings' repr.
    assert "ATTRIBUTION_SESSION_SECRET" not in settings.options
    assert NEW not in repr(settings) and OLD not in repr(settings)


@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_setting_means_no_secret(value):
    env = {"ATTRIBUTION_PROVIDER": "fake", "ATTRIBUTION_SESSION_SECRET": value}
    assert Settings.from_env(env).session_secrets == ()
    assert Settings.from_env({"ATTRIBUTION_PROVIDER": "fake"}).session_secrets == ()


@pytest.mark.parametrize("value", ["short", f"{NEW},", f"{NEW},,{OLD}", f"{NEW},tooshort"])
def test_a_short_or_empty_secret_stops_the_boot_without_echoing_it(value):
    with pytest.raises(SettingsError) as error:
        Settings.from_env({"ATTRIBUTION_PROVIDER": "fake", "ATTRIBUTION_SESSION_SECRET": value})
    message = str(error.value)
    assert "ATTRIBUTION_SESSION_SECRET" in message
    assert all(part.strip() not in message for part in value.split(",") if part.strip())


def test_the_secret_from_the_environment_signs_the_sessions():
    settings = Settings.from_env({"ATTRIBUTION_PROVIDER": "fake", "ATTRIBUTION_SESSION_SECRET": NEW})
    issuer = make_client(provider(), session_secrets=settings.session_secrets)
    session_id = fast(issuer)
    other, fake = replica(NEW)
    served(other, fake, session_id)
    unsigned, fake = replica()
    refused(unsigned, fake, session_id)
