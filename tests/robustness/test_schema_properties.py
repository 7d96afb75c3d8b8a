"""Property tests of the request schema, in process: every valid request is accepted and reaches the provider
unchanged; every request that breaks exactly one rule is a 422 whose `loc` names the broken path, never a 500."""

from __future__ import annotations

import copy
import json
import unicodedata
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app import create_app
from tests.fakes import FakeProvider
from tests.robustness.contract_rules import FORBIDDEN_CATEGORIES, is_canonical, parse_timestamp

MAX_INT32 = 2147483647
PROPERTY_SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
URL = "/v1/attribution"


@pytest.fixture(scope="module")
def provider() -> FakeProvider:
    return FakeProvider()


@pytest.fixture(scope="module")
def client(provider: FakeProvider):
    return create_app(provider=provider).test_client()


def post(client, body: Any, headers: dict[str, str] | None = None):
    # ensure_ascii: a lone surrogate travels as a `\udXXX` escape, as a JSON client would send it.
    return client.post(URL, data=json.dumps(body, ensure_ascii=True), content_type="application/json", headers=headers)


# ------------------------------------------------------------------ valid requests

_allowed_chars = st.characters(exclude_categories=tuple(FORBIDDEN_CATEGORIES))


def canonical_strings(max_size: int) -> st.SearchStrategy[str]:
    """Canonical strings (NFC, no surrounding white space, no Cc/Cf/Cs/Co/Cn) of 1..max_size code points, with
    ASCII node-like names mixed with arbitrary non-ASCII text."""
    arbitrary = (
        st.text(_allowed_chars, min_size=1, max_size=min(max_size, 40))
        .map(lambda text: unicodedata.normalize("NFC", text).strip())
        .filter(lambda text: 1 <= len(text) <= max_size and is_canonical(text))
    )
    ascii_names = st.from_regex(r"[a-z0-9][a-z0-9.-]{0,30}", fullmatch=True)
    edge = st.sampled_from(["é", "Zürich-gpu-01", "节点-7", "ñ" * max_size, "x" * max_size, "a b"])
    return st.one_of(ascii_names, arbitrary, edge.filter(lambda text: len(text) <= max_size))


_offsets = st.integers(min_value=-(23 * 60 + 59), max_value=23 * 60 + 59).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)


def wall_clock(value: datetime) -> str:
    """`YYYY-MM-DDThh:mm:ss` (strftime does not pad years before 1000)."""
    return f"{value.year:04d}-{value.month:02d}-{value.day:02d}T{value.hour:02d}:{value.minute:02d}:{value.second:02d}"


@st.composite
def timestamps(draw: st.DrawFn) -> tuple[str, datetime]:
    """(RFC 3339 text with a random offset, the same instant in UTC)."""
    local = draw(st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31)))
    offset = draw(_offsets)
    aware = local.replace(tzinfo=offset)
    text = wall_clock(aware)
    if local.microsecond or draw(st.booleans()):
        digits = f"{local.microsecond:06d}"
        text += "." + digits + "0" * draw(st.integers(0, 3))
    minutes = int(offset.utcoffset(None).total_seconds() // 60)
    if minutes == 0 and draw(st.booleans()):
        text += draw(st.sampled_from(["Z", "z"]))
    else:
        sign = "-" if minutes < 0 else "+"
        text += f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
    return text, aware.astimezone(timezone.utc)


@st.composite
def fast_requests(draw: st.DrawFn) -> dict[str, Any]:
    scope: dict[str, Any] = {
        "nodes": draw(st.lists(canonical_strings(253), unique=True, max_size=6)),
        "ranks": draw(st.lists(st.one_of(st.integers(0, 64), st.integers(0, MAX_INT32)), unique=True, max_size=8)),
    }
    window = draw(st.sampled_from(["none", "start", "end", "both"]))
    if window == "both":
        (start, start_utc), (end, end_utc) = draw(timestamps()), draw(timestamps())
        if start_utc == end_utc:
            end_utc += timedelta(seconds=1)
            end = f"{wall_clock(end_utc)}.{end_utc.microsecond:06d}Z"
        if start_utc > end_utc:
            start, end = end, start
        scope.update(start_time=start, end_time=end)
    elif window != "none":
        scope[f"{window}_time"] = draw(timestamps())[0]
    return {
        "schema_version": "0.1.0",
        "workload_id": draw(canonical_strings(256)),
        "scope": scope,
        "failure_context": {
            "detected_at": draw(timestamps())[0],
            "detection_signal": draw(st.from_regex(r"[a-z][a-z0-9_]{0,63}", fullmatch=True)),
        },
        # Long enough for the in-process fake to answer: the round trip, not the timeout, is under test here.
        "timeout_ms": draw(st.integers(10000, 300000)),
        "workload_context": {
            "workflow_id": draw(canonical_strings(256)),
            "attempt_index": draw(st.one_of(st.integers(0, 10), st.integers(0, MAX_INT32))),
        },
        "phase": "fast",
    }


def utc(text: str | None) -> datetime | None:
    if text is None:
        return None
    parsed = parse_timestamp(text)
    assert parsed is not None, text
    return parsed


def assert_received(received, body: dict[str, Any]) -> None:
    """The provider got exactly what was sent: same strings, same lists in the same order, same instants in UTC."""
    scope = body["scope"]
    assert received.workload_id == body["workload_id"]
    assert received.scope.nodes == tuple(scope["nodes"])
    assert received.scope.ranks == tuple(scope["ranks"])
    for name in ("start_time", "end_time"):
        got = getattr(received.scope, name)
        assert got == utc(scope.get(name))
        assert got is None or got.utcoffset() == timedelta(0)
    assert received.failure_context.detected_at == utc(body["failure_context"]["detected_at"])
    assert received.failure_context.detected_at.utcoffset() == timedelta(0)
    assert received.failure_context.detection_signal == body["failure_context"]["detection_signal"]
    assert received.timeout_ms == body["timeout_ms"]
    assert received.workload_context.workflow_id == body["workload_context"]["workflow_id"]
    assert received.workload_context.attempt_index == body["workload_context"]["attempt_index"]
    assert received.phase.value == body["phase"]
    assert received.continue_session == body.get("continue_session")


def assert_answer(answer, body: dict[str, Any]) -> dict[str, Any]:
    assert answer.status_code == 200, answer.get_data(as_text=True)
    data = answer.get_json()
    assert data["schema_version"] == "0.1.0"
    assert data["request_id"] == answer.headers["X-Request-ID"]
    assert isinstance(data["attribution_session_id"], str)
    nodes = body["scope"]["nodes"]
    assert [f["target"] for f in data["attributions"]] == ([{"type": "Node", "name": nodes[0]}] if nodes else [])
    assert data["unattributed_targets"] == [{"type": "Node", "name": n} for n in nodes[1:]]
    for finding in data["attributions"]:
        # The fake reports detected_at as observed_at: emitted in UTC with `Z`, the same instant.
        assert finding["observed_at"].endswith("Z")
        assert parse_timestamp(finding["observed_at"]) == utc(body["failure_context"]["detected_at"])
    return data


@PROPERTY_SETTINGS
@given(body=fast_requests())
def test_every_valid_fast_request_is_accepted_and_reaches_the_provider_unchanged(client, provider, body):
    before = len(provider.calls)
    answer = post(client, body)
    assert_answer(answer, body)
    assert len(provider.calls) == before + 1
    phase, received, _, _ = provider.calls[-1]
    assert phase == "fast"
    assert_received(received, body)


@PROPERTY_SETTINGS
@given(body=fast_requests(), window=st.tuples(timestamps(), timestamps()))
def test_every_valid_slow_request_continues_its_fast_session_unchanged(client, provider, body, window):
    first = assert_answer(post(client, body), body)
    (start, start_utc), (end, end_utc) = sorted(window, key=lambda item: item[1])
    if start_utc == end_utc:
        end_utc += timedelta(microseconds=1)
        end = f"{wall_clock(end_utc)}.{end_utc.microsecond:06d}Z"
    slow = copy.deepcopy(body)
    slow["phase"] = "slow"
    slow["continue_session"] = first["attribution_session_id"]
    slow["scope"].update(start_time=start, end_time=end)
    before = len(provider.calls)
    data = assert_answer(post(client, slow), slow)
    assert data["attribution_session_id"] == first["attribution_session_id"]
    assert "error" not in data
    assert len(provider.calls) == before + 1
    phase, received, state, _ = provider.calls[-1]
    assert phase == "slow"
    assert state["nodes"] == len(body["scope"]["nodes"])
    assert_received(received, slow)


# ------------------------------------------------------------------ single-rule mutations

REQUIRED = {
    ("schema_version",),
    ("workload_id",),
    ("scope",),
    ("scope", "nodes"),
    ("scope", "ranks"),
    ("failure_context",),
    ("failure_context", "detected_at"),
    ("failure_context", "detection_signal"),
    ("timeout_ms",),
    ("workload_context",),
    ("workload_context", "workflow_id"),
    ("workload_context", "attempt_index"),
    ("phase",),
}
OBJECTS = [(), ("scope",), ("failure_context",), ("workload_context",)]
STRINGS = [("workload_id",), ("workload_context", "workflow_id")]
INTEGERS = {("timeout_ms",): (1, 300000), ("workload_context", "attempt_index"): (0, MAX_INT32)}
TIMES = [("failure_context", "detected_at"), ("scope", "start_time"), ("scope", "end_time")]
NOT_A_STRING = [0, 1.5, True, False, None, [], {}, ["x"], {"x": "y"}]
NOT_AN_INTEGER = ["1", " 1", 1.0, 1.5, True, False, None, [], {}, 1e300]
NOT_AN_OBJECT = ["x", 1, True, None, [], [{}]]
NOT_A_LIST = ["x", 1, True, None, {}, {"0": 1}]
NON_CANONICAL = [
    " x",
    "x ",
    "\tx",
    "x\n",
    "a\u0000b",
    "a\u007fb",
    "a\u0085b",
    "a\u200bb",  # Cf: zero width space
    "a\ufeffb",  # Cf: BOM
    "a\u202eb",  # Cf: right-to-left override
    "a\ue000b",  # Co: private use
    "a\U000f0000b",  # Co: supplementary private use
    "a\u0378b",  # Cn: unassigned
    "a\ud800b",  # Cs: lone surrogate
    "a\udfffb",
    "e\u0301",  # NFD of é
    "\u212b",  # ANGSTROM SIGN, NFC is U+00C5
    "\u3000x",  # ideographic space
]
NAIVE_OR_BAD_TIMES = [
    "2026-09-09T12:00:00",
    "2026-09-09T12:00:00.123456",
    "2026-09-09 12:00:00",
    "2026-09-09",
    "2026-09-09T12:00Z",
    "2026-13-09T12:00:00Z",
    "2026-02-30T12:00:00Z",
    "2026-09-09T24:00:00Z",
    "2026-09-09T12:00:00+24:00",
    "2026-09-09T12:00:00+0100",
    "20260909T120000Z",
    "",
    "now",
    "2026-09-09T12:00:00.1234567Z",
]


def get(body: dict[str, Any], path: tuple[Any, ...]) -> Any:
    for key in path:
        body = body[key]
    return body


def put(body: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    get(body, path[:-1])[path[-1]] = value


@st.composite
def single_mutations(draw: st.DrawFn) -> tuple[dict[str, Any], tuple[Any, ...], str]:
    """(a request that breaks exactly one rule, the path of that rule, what was done)."""
    body = draw(fast_requests())
    scope = body["scope"]
    kind = draw(
        st.sampled_from(
            [
                "missing",
                "unknown",
                "object_type",
                "string_type",
                "integer_type",
                "list_type",
                "integer_bounds",
                "string_length",
                "non_canonical",
                "time",
                "node",
                "rank",
                "duplicate",
                "literal",
                "token",
                "session",
                "window",
            ]
        )
    )
    if kind == "missing":
        path = draw(st.sampled_from(sorted(REQUIRED)))
        del get(body, path[:-1])[path[-1]]
        return body, path, kind
    if kind == "unknown":
        parent = draw(st.sampled_from(OBJECTS))
        name = draw(st.sampled_from(["extra", "Phase", "schema_version ", "continueSession", "é", "\ud800", "_"]))
        get(body, parent)[name] = draw(st.sampled_from([None, 1, "x", [], {}]))
        return body, (*parent, name), kind
    if kind == "object_type":
        path = draw(st.sampled_from([p for p in OBJECTS if p]))
        put(body, path, draw(st.sampled_from(NOT_AN_OBJECT)))
        return body, path, kind
    if kind == "string_type":
        path = draw(
            st.sampled_from(
                [*STRINGS, *TIMES, ("schema_version",), ("phase",), ("failure_context", "detection_signal")]
            )
        )
        put(body, path, draw(st.sampled_from(NOT_A_STRING)))
        return body, path, kind
    if kind == "integer_type":
        path = draw(st.sampled_from(sorted(INTEGERS)))
        put(body, path, draw(st.sampled_from(NOT_AN_INTEGER)))
        return body, path, kind
    if kind == "list_type":
        path = draw(st.sampled_from([("scope", "nodes"), ("scope", "ranks")]))
        put(body, path, draw(st.sampled_from(NOT_A_LIST)))
        return body, path, kind
    if kind == "integer_bounds":
        path = draw(st.sampled_from(sorted(INTEGERS)))
        low, high = INTEGERS[path]
        put(body, path, draw(st.sampled_from([low - 1, high + 1, -(2**63), 2**63, 10**30, -(10**30)])))
        return body, path, kind
    if kind == "string_length":
        path = draw(st.sampled_from(STRINGS))
        put(body, path, draw(st.sampled_from(["", "x" * 257, "é" * 257, "\U0001f600" * 257])))
        return body, path, kind
    if kind == "non_canonical":
        path = draw(st.sampled_from(STRINGS))
        put(body, path, draw(st.sampled_from(NON_CANONICAL)))
        return body, path, kind
    if kind == "time":
        path = draw(st.sampled_from(TIMES))
        if path[0] == "scope":  # the other bound goes, so the order rule cannot fire as well
            scope.pop("start_time", None)
            scope.pop("end_time", None)
        put(body, path, draw(st.sampled_from(NAIVE_OR_BAD_TIMES)))
        return body, path, kind
    if kind == "node":
        bad = draw(st.sampled_from(["", "n" * 254, "ñ" * 254, 7, None, True, *NON_CANONICAL]))
        nodes = [n for n in scope["nodes"] if n != bad]
        index = draw(st.integers(0, len(nodes)))
        nodes.insert(index, bad)
        scope["nodes"] = nodes
        return body, ("scope", "nodes", index), kind
    if kind == "rank":
        bad = draw(st.sampled_from([-1, MAX_INT32 + 1, 10**30, "1", 1.0, 0.5, True, None, [], {}]))
        ranks = list(scope["ranks"])
        index = draw(st.integers(0, len(ranks)))
        ranks.insert(index, bad)
        scope["ranks"] = ranks
        return body, ("scope", "ranks", index), kind
    if kind == "duplicate":
        name = draw(st.sampled_from(["nodes", "ranks"]))
        items = scope[name] or (["worker-01"] if name == "nodes" else [0])
        source = draw(st.integers(0, len(items) - 1))
        index = draw(st.integers(source + 1, len(items)))
        items = [*items[:index], items[source], *items[index:]]
        scope[name] = items
        return body, ("scope", name, index), kind
    if kind == "literal":
        path = draw(st.sampled_from([("schema_version",), ("phase",)]))
        wrong = ["0.1.1", "0.1", "0.1.0 ", "1.0.0", "", "FAST", "Fast", "slow ", "medium", "0.1.0\u0000"]
        put(body, path, draw(st.sampled_from(wrong)))
        return body, path, kind
    if kind == "token":
        wrong = ["", "A", "1abc", "_a", "a-b", "a b", "abc" + "x" * 62, "é", "application_error\n", " a"]
        body["failure_context"]["detection_signal"] = draw(st.sampled_from(wrong))
        return body, ("failure_context", "detection_signal"), kind
    if kind == "session":
        # `fast` with a continue_session, valid or not, is refused on that field.
        body["continue_session"] = draw(st.sampled_from(["as1.x.y", "x", "\u00e9", "", "x" * 1025]))
        return body, ("continue_session",), kind
    # window: start_time not earlier than end_time
    text, _ = draw(timestamps())
    scope["start_time"] = text
    scope["end_time"] = draw(st.sampled_from([text, "0001-01-01T00:00:00Z"]))
    return body, ("scope", "end_time"), kind


def assert_problem_list(answer) -> list[dict[str, Any]]:
    assert answer.status_code == 422, (answer.status_code, answer.get_data(as_text=True))
    assert answer.mimetype == "application/json"
    assert answer.headers.get("X-Request-ID")
    data = answer.get_json()
    assert set(data) == {"detail"}
    assert isinstance(data["detail"], list) and data["detail"]
    for item in data["detail"]:
        assert set(item) == {"loc", "msg", "type"}
        assert isinstance(item["loc"], list) and item["loc"][0] in ("body", "header")
        assert isinstance(item["msg"], str) and item["msg"]
        assert isinstance(item["type"], str) and item["type"]
    return data["detail"]


@PROPERTY_SETTINGS
@given(mutation=single_mutations())
def test_every_single_rule_break_is_a_422_naming_the_broken_path(client, provider, mutation):
    body, path, kind = mutation
    before = len(provider.calls)
    detail = assert_problem_list(post(client, body))
    # Every problem reported is on the broken path (a malformed `continue_session` on `fast` breaks two rules there).
    assert {tuple(item["loc"]) for item in detail} == {("body", *path)}, (kind, detail)
    assert len(provider.calls) == before, "a refused request must not reach the provider"


@PROPERTY_SETTINGS
@given(body=fast_requests(), session=st.sampled_from(["", "x" * 1025, "é", "a\u0000b", "a\nb", 7, None, True]))
def test_a_slow_request_with_a_malformed_continue_session_is_a_422_on_that_field(client, body, session):
    body["phase"] = "slow"
    body["continue_session"] = session
    detail = assert_problem_list(post(client, body))
    assert [item["loc"] for item in detail] == [["body", "continue_session"]]


@PROPERTY_SETTINGS
@given(body=fast_requests())
def test_a_slow_request_without_continue_session_is_a_422_on_that_field(client, body):
    body["phase"] = "slow"
    detail = assert_problem_list(post(client, body))
    assert [item["loc"] for item in detail] == [["body", "continue_session"]]
