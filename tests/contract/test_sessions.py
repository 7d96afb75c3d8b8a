"""Phases and sessions (docs/contract.md, "Phases and sessions")."""

from __future__ import annotations

import base64
import hashlib
import json
import time

import pytest

from app.mapping import to_request
from app.sessions import SessionCodec
from providers.base import AttributionOutcome
from schemas.request import AttributionRequestSchema
from tests.contract.conftest import (
    WINDOW,
    NamedFakeProvider,
    check_200,
    check_empty_error,
    echo_fast,
    make_client,
    post,
    slow_request,
    valid_request,
    with_value,
)
from tests.fakes import FakeProvider

B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def _fast(client, **overrides):
    body = check_200(post(client, valid_request(**overrides)))
    session_id = body["attribution_session_id"]
    assert isinstance(session_id, str) and session_id
    return session_id


def _state_provider(state, name="fake"):
    """Fast leaves `state`; slow answers like fast (so a served slow is visible) and records the state."""
    return NamedFakeProvider(
        name,
        fast=lambda request, *_: AttributionOutcome(session_state=state),
        slow=lambda request, state, *_: echo_fast(request),
    )


def _refused(response, session_id, provider):
    body = check_empty_error(response, "no_attribution_available")
    assert body["attribution_session_id"] == session_id
    assert [call[0] for call in provider.calls if call[0] == "slow"] == []
    return body


# ---------------------------------------------------------------- fast then slow


def test_fast_returns_a_new_session_each_time():
    """Each `fast` starts a new session: two fasts never hand out the same id, even for the same workload,
    the same provider state and within the same second."""
    client = make_client(_state_provider({"cursor": "same"}))
    ids = [_fast(client) for _ in range(3)]
    assert len(set(ids)) == 3, ids


def test_slow_continues_the_session_of_a_fast(client, provider):
    session_id = _fast(client)
    body = check_200(post(client, slow_request(session_id)))
    assert body["attribution_session_id"] == session_id
    assert "error" not in body
    assert body["attributions"][0]["target"] == {"type": "Node", "name": "worker-01"}
    kind, request, state, _trace = provider.calls[-1]
    assert kind == "slow"
    assert state == {"phase": "fast", "nodes": 3}
    assert request.continue_session == session_id
    assert request.scope.start_time is not None and request.scope.end_time is not None


@pytest.mark.parametrize(
    "state",
    [{}, {"cursor": "abc"}, {"offset": 123456789, "source": "loki", "x": ""}, {"k": "\u00e9\u8282"}, {"n": -1}],
)
def test_slow_receives_the_state_the_fast_returned(state):
    provider = _state_provider(state)
    client = make_client(provider)
    session_id = _fast(client)
    check_200(post(client, slow_request(session_id)))
    assert provider.calls[-1][0] == "slow"
    assert provider.calls[-1][2] == state


def test_session_survives_a_different_window_and_nodes(client, provider):
    session_id = _fast(client)
    body = slow_request(session_id)
    body["scope"]["nodes"] = ["worker-09"]
    result = check_200(post(client, body))
    assert result["attributions"][0]["target"]["name"] == "worker-09"


def test_sessions_work_across_app_instances():
    state = {"cursor": "issued-by-replica-a"}
    replica_a = _state_provider(state)
    replica_b = _state_provider({"cursor": "never-used"})
    session_id = _fast(make_client(replica_a))
    body = check_200(post(make_client(replica_b), slow_request(session_id)))
    assert "error" not in body
    assert body["attribution_session_id"] == session_id
    assert [c[0] for c in replica_b.calls] == ["slow"]
    assert replica_b.calls[0][2] == state
    assert [c[0] for c in replica_a.calls] == ["fast"]


def test_slow_may_repeat(client, provider):
    session_id = _fast(client)
    for _ in range(3):
        assert check_200(post(client, slow_request(session_id)))["attribution_session_id"] == session_id
    assert [c[0] for c in provider.calls] == ["fast", "slow", "slow", "slow"]


# ---------------------------------------------------------------- slow without its window


@pytest.mark.parametrize(
    "window",
    [{}, {"start_time": WINDOW["start_time"]}, {"end_time": WINDOW["end_time"]}],
    ids=["none", "start-only", "end-only"],
)
def test_slow_without_window_is_no_attribution_and_no_call(client, provider, window):
    session_id = _fast(client)
    body = slow_request(session_id, window=False)
    body["scope"].update(window)
    _refused(post(client, body), session_id, provider)
    assert [c[0] for c in provider.calls] == ["fast"]


def test_slow_without_window_and_with_a_bad_session_is_not_called(client, provider):
    _refused(post(client, slow_request("garbage", window=False)), "garbage", provider)
    assert provider.calls == []


# ---------------------------------------------------------------- sessions that are refused


MALFORMED = [
    "x",
    "as1",
    "as1.",
    "as1..",
    "as1...",
    "as1.e30.e30",
    "as2.eyJ9.AAAA",
    "AS1.eyJ9.AAAA",
    "as1.!!!!.AAAA",
    "as1.eyJ9.AAAA.AAAA",
    "as1.A.A",
    "as1.====.====",
    "as1 .eyJ9.AAAA",
    " as1.eyJ9.AAAA",
    "a" * 1024,
    "." * 1024,
]


@pytest.mark.parametrize("session_id", MALFORMED)
def test_malformed_session_is_no_attribution(client, provider, session_id):
    _refused(post(client, slow_request(session_id)), session_id, provider)


def _flip(text, index):
    """`text` with the character at `index` replaced by its base64url neighbour (lowest bit flipped)."""
    char = text[index]
    new = B64URL[B64URL.index(char) ^ 1] if char in B64URL else "A"
    return text[:index] + new + text[index + 1 :]


@pytest.mark.parametrize("where", ["prefix", "first-payload", "middle-payload", "first-check", "last-check"])
def test_tampered_session_is_no_attribution(client, provider, where):
    session_id = _fast(client)
    prefix, payload, check = session_id.split(".")
    index = {
        "prefix": 0,
        "first-payload": len(prefix) + 1,
        "middle-payload": len(prefix) + 1 + len(payload) // 2,
        "first-check": len(prefix) + len(payload) + 2,
        "last-check": len(session_id) - 1,
    }[where]
    tampered = _flip(session_id, index)
    assert tampered != session_id
    _refused(post(client, slow_request(tampered)), tampered, provider)


@pytest.mark.parametrize("state", [{}, {"k": "v"}, {"k": "vv"}, {"k": "vvv"}], ids=["s0", "s1", "s2", "s3"])
def test_no_single_character_flip_is_accepted(state):
    """Any id other than the one issued is unknown: every one-character change of it is refused."""
    provider = _state_provider(state)
    client = make_client(provider)
    session_id = _fast(client)
    accepted = []
    for index in range(len(session_id)):
        tampered = _flip(session_id, index)
        body = check_200(post(client, slow_request(tampered)))
        if body.get("error", {}).get("type") != "no_attribution_available":
            accepted.append((index, session_id[index], tampered[index]))
    assert accepted == [], f"session id {session_id!r}: one-character changes accepted as valid: {accepted}"
    assert [c[0] for c in provider.calls] == ["fast"]


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("workload_id",), "12346"),
        (("workload_id",), "12345 0"),
        (("workload_context", "workflow_id"), "training-example-2"),
        (("workload_context", "attempt_index"), 1),
    ],
    ids=["workload_id", "workload_id-suffix", "workflow_id", "attempt_index"],
)
def test_foreign_session_is_no_attribution(client, provider, path, value):
    session_id = _fast(client)
    body = with_value(slow_request(session_id), path, value)
    _refused(post(client, body), session_id, provider)


def test_binding_is_not_fooled_by_shifting_text_between_fields(client, provider):
    session_id = _fast(client, workload_id="a", workload_context={"workflow_id": "b,c", "attempt_index": 0})
    body = slow_request(session_id, workload_id="a,b", workload_context={"workflow_id": "c", "attempt_index": 0})
    _refused(post(client, body), session_id, provider)


def test_session_of_another_provider_is_no_attribution():
    issuer = _state_provider({"a": 1}, name="other_provider")
    session_id = _fast(make_client(issuer))
    provider = _state_provider({}, name="fake")
    _refused(post(make_client(provider), slow_request(session_id)), session_id, provider)


def _request_for(body):
    return to_request(AttributionRequestSchema().load(body))


@pytest.mark.parametrize(
    ("ttl", "age", "accepted"),
    [
        (3600, 3700, False),
        (3600, 86400 * 2, False),
        (3600, 3500, True),
        (86400, 3700, True),
    ],
)
def test_expired_session_is_no_attribution(ttl, age, accepted):
    provider = _state_provider({})
    client = make_client(provider, session_ttl_seconds=ttl)
    body = slow_request("placeholder")
    session_id = SessionCodec(provider="fake", ttl_seconds=ttl).issue(
        _request_for(valid_request()), {"issued": "past"}, now=time.time() - age
    )
    body["continue_session"] = session_id
    response = post(client, body)
    if accepted:
        result = check_200(response)
        assert "error" not in result
        assert provider.calls[-1][2] == {"issued": "past"}
    else:
        _refused(response, session_id, provider)


def test_session_from_the_far_future_is_no_attribution():
    provider = _state_provider({})
    client = make_client(provider)
    session_id = SessionCodec(provider="fake", ttl_seconds=86400).issue(
        _request_for(valid_request()), {}, now=time.time() + 7 * 86400
    )
    _refused(post(client, slow_request(session_id)), session_id, provider)


def test_small_ttl_setting_expires_sessions_issued_by_the_app():
    provider = _state_provider({})
    client = make_client(provider, session_ttl_seconds=60)
    codec = SessionCodec(provider="fake", ttl_seconds=60)
    fresh = codec.issue(_request_for(valid_request()), {}, now=time.time() - 30)
    stale = codec.issue(_request_for(valid_request()), {}, now=time.time() - 61)
    assert "error" not in check_200(post(client, slow_request(fresh)))
    provider.calls.clear()
    _refused(post(client, slow_request(stale)), stale, provider)


# ---------------------------------------------------------------- hand-built ids: malformed payloads never 500


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _forge(payload: bytes) -> str:
    """An id with a correct check over `payload` (the check is a public digest, not a secret)."""
    check = hashlib.sha256(b"attribution-adapter session v1\n" + payload).digest()[:12]
    return f"as1.{_b64(payload)}.{_b64(check)}"


def _binding(body):
    bound = json.dumps([body["workload_id"], *body["workload_context"].values()], ensure_ascii=True)
    return _b64(hashlib.sha256(bound.encode()).digest()[:18])


def test_forge_helper_matches_the_service():
    """The hand-built ids below are only meaningful if a well-formed one is accepted."""
    provider = _state_provider({})
    client = make_client(provider)
    payload = {"b": _binding(valid_request()), "n": "AAAAAAAA", "p": "fake", "s": {"k": "v"}, "t": int(time.time())}
    session_id = _forge(json.dumps(payload).encode())
    assert "error" not in check_200(post(client, slow_request(session_id)))
    assert provider.calls[-1][2] == {"k": "v"}


def _payloads():
    now = int(time.time())
    good_b = _binding(valid_request())
    base = {"b": good_b, "n": "AAAAAAAA", "p": "fake", "s": {}, "t": now}
    cases = {
        "not-json": b"not json",
        "not-utf8": b"\xff\xfe\xfd",
        "json-array": b"[]",
        "json-null": b"null",
        "json-string": b'"as1"',
        "nested-arrays": b"[" * 300 + b"]" * 300,
        "NaN-time": json.dumps({**base, "t": float("nan")}).encode(),
        "float-time": json.dumps({**base, "t": now + 0.5}).encode(),
        "string-time": json.dumps({**base, "t": str(now)}).encode(),
        "bool-time": json.dumps({**base, "t": True}).encode(),
        "missing-key": json.dumps({k: v for k, v in base.items() if k != "s"}).encode(),
        "extra-key": json.dumps({**base, "x": 1}).encode(),
        "state-list": json.dumps({**base, "s": []}).encode(),
        "state-nested": json.dumps({**base, "s": {"k": {"x": 1}}}).encode(),
        "state-bool": json.dumps({**base, "s": {"k": True}}).encode(),
        "state-null": json.dumps({**base, "s": {"k": None}}).encode(),
        "binding-int": json.dumps({**base, "b": 5}).encode(),
        "binding-non-ascii": json.dumps({**base, "b": "\u00e9" * 24}).encode(),
        "binding-non-ascii-raw": json.dumps({**base, "b": "\u00e9" * 24}, ensure_ascii=False).encode(),
        "provider-non-ascii": json.dumps({**base, "p": "f\u00e4ke"}).encode(),
        "provider-int": json.dumps({**base, "p": 1}).encode(),
        "time-huge": json.dumps({**base, "t": 10**400}).encode(),
        "time-huge-negative": json.dumps({**base, "t": -(10**400)}).encode(),
        "time-negative": json.dumps({**base, "t": -1}).encode(),
        "time-zero": json.dumps({**base, "t": 0}).encode(),
    }
    return cases


@pytest.mark.parametrize("case", sorted(_payloads()))
def test_hand_built_session_with_a_bad_payload_is_no_attribution_never_500(case):
    provider = _state_provider({})
    client = make_client(provider)
    session_id = _forge(_payloads()[case])
    assert len(session_id) <= 1024
    _refused(post(client, slow_request(session_id)), session_id, provider)


# ---------------------------------------------------------------- a state too large for an id


def test_state_too_large_for_a_session_id_is_service_error():
    provider = _state_provider({"blob": "x" * 2000})
    body = check_empty_error(post(make_client(provider), valid_request()), "service_error")
    assert body["attribution_session_id"] is None


def test_state_that_is_not_a_mapping_of_strings_to_strings_or_ints_is_service_error():
    provider = _state_provider({"k": 1.5})
    check_empty_error(post(make_client(provider), valid_request()), "service_error")


def test_ids_are_printable_ascii_at_most_1024():
    provider = _state_provider({"k": "\u00e9" * 50})
    session_id = _fast(make_client(provider))
    assert len(session_id) <= 1024
    assert all(0x20 <= ord(c) <= 0x7E for c in session_id)


def test_fast_provider_is_called_once_per_fast():
    provider = FakeProvider(fast=echo_fast)
    client = make_client(provider)
    _fast(client)
    assert [c[0] for c in provider.calls] == ["fast"]


@pytest.mark.parametrize(
    "state",
    [{}, {"v": 1}, {"z": "last", "a": "first"}, {"k": "\u00e9\u8282\U0001f600"}, {"q": 'a "quoted" \\ back\nslash'},
     {"n": -(2**70)}, {"provider": "x", "é": 0}],
)  # fmt: skip
@pytest.mark.parametrize("provider_name", ["fake", "f\u00e4ke \"q\""])
def test_a_session_payload_is_the_canonical_json_of_its_fields(state, provider_name):
    """An id's payload is exactly `json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True)`:
    the same bytes for the same fields, whichever version of the service issued them."""
    provider = _state_provider(state, name=provider_name)
    session_id = _fast(make_client(provider))
    payload = base64.urlsafe_b64decode(session_id.split(".")[1] + "==")
    fields = json.loads(payload)
    assert fields["s"] == state and fields["p"] == provider_name
    assert payload == json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def test_a_session_continues_on_a_provider_with_the_same_session_identity_under_another_name():
    """A provider renamed between releases keeps its first name as `session_identity`: ids issued under either name
    continue under the other, and the name shown in answers is the new one."""
    before = _state_provider({"a": 1}, name="old_name")
    session_id = _fast(make_client(before))
    after = _state_provider({}, name="new_name")
    after.session_identity = "old_name"
    body = check_200(post(make_client(after), slow_request(session_id)))
    assert body["attribution_session_id"] == session_id and body["service"]["provider"] == "new_name"
    assert [call[0] for call in after.calls] == ["slow"]
    back = _fast(make_client(after))
    check_200(post(make_client(before), slow_request(back)))
    assert [call[0] for call in before.calls] == ["fast", "slow"]
