"""`AttributionRequest`: every field's type, bounds and rule (docs/contract.md, "Request").

An invalid request is a 422 in the FastAPI shape with one entry per problem and `loc` naming the path; the
provider is never called. A valid one reaches the provider with exactly the value sent.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from tests.contract.conftest import (
    WINDOW,
    check_200,
    check_422,
    one_problem,
    post,
    valid_request,
    with_value,
    without,
)

EMOJI = "\U0001f600"  # an astral code point: one character, two UTF-16 units

# ---------------------------------------------------------------- canonical strings

NOT_CANONICAL = [
    pytest.param(" worker", id="leading-space"),
    pytest.param("worker ", id="trailing-space"),
    pytest.param("\tworker", id="leading-tab"),
    pytest.param("worker\n", id="trailing-newline"),
    pytest.param("worker\u00a0", id="trailing-nbsp"),
    pytest.param("\u3000worker", id="leading-ideographic-space"),
    pytest.param("wor\x00ker", id="Cc-nul"),
    pytest.param("wor\x1bker", id="Cc-escape"),
    pytest.param("wor\x7fker", id="Cc-del"),
    pytest.param("w\u00e9r\x85ker", id="Cc-nel-in-non-ascii"),
    pytest.param("wor\u200bker", id="Cf-zero-width-space"),
    pytest.param("wor\u202eker", id="Cf-bidi-override"),
    pytest.param("\ufeffworker", id="Cf-bom"),
    pytest.param("wor\ud800ker", id="Cs-lone-high-surrogate"),
    pytest.param("worker\udc00", id="Cs-lone-low-surrogate"),
    pytest.param("wor\ue000ker", id="Co-private-use"),
    pytest.param("wor\U000f0000ker", id="Co-supplementary-private-use"),
    pytest.param("wor\u0378ker", id="Cn-unassigned"),
    pytest.param("worker\uffff", id="Cn-noncharacter"),
    pytest.param("cafe\u0301", id="not-NFC-combining-accent"),
    pytest.param("\u212bngstrom", id="not-NFC-angstrom-sign"),
]

CANONICAL_OK = [
    pytest.param("a", id="one-char"),
    pytest.param("worker 01", id="inner-space"),
    pytest.param("caf\u00e9", id="NFC-precomposed"),
    pytest.param("\u8282\u70b9-7", id="cjk"),
    pytest.param(EMOJI * 3, id="astral"),
]

CANONICAL_FIELDS = [
    pytest.param(("workload_id",), 256, id="workload_id"),
    pytest.param(("workload_context", "workflow_id"), 256, id="workflow_id"),
    pytest.param(("scope", "nodes", 0), 253, id="node"),
]


def _sent(provider, path):
    """The value the provider received at `path` of the request."""
    request = provider.calls[-1][1]
    if path == ("workload_id",):
        return request.workload_id
    if path == ("workload_context", "workflow_id"):
        return request.workload_context.workflow_id
    if path == ("scope", "nodes", 0):
        return request.scope.nodes[0]
    raise AssertionError(path)


@pytest.mark.parametrize(("path", "limit"), CANONICAL_FIELDS)
@pytest.mark.parametrize("value", NOT_CANONICAL)
def test_non_canonical_string_is_422(client, provider, path, limit, value):
    response = post(client, with_value(valid_request(), path, value))
    one_problem(response, provider, ["body", *path], "string_not_canonical")


@pytest.mark.parametrize(("path", "limit"), CANONICAL_FIELDS)
@pytest.mark.parametrize("value", CANONICAL_OK)
def test_canonical_string_is_accepted(client, provider, path, limit, value):
    check_200(post(client, with_value(valid_request(), path, value)))
    assert _sent(provider, path) == value


@pytest.mark.parametrize(("path", "limit"), CANONICAL_FIELDS)
@pytest.mark.parametrize("char", ["a", EMOJI], ids=["ascii", "astral"])
@pytest.mark.parametrize("raw_utf8", [False, True], ids=["escaped", "raw-utf8"])
def test_length_limit_counts_code_points(client, provider, path, limit, char, raw_utf8):
    at_limit = with_value(valid_request(), path, char * limit)
    data = json.dumps(at_limit, ensure_ascii=not raw_utf8).encode()
    check_200(post(client, data))
    assert _sent(provider, path) == char * limit

    provider.calls.clear()
    over = json.dumps(with_value(valid_request(), path, char * (limit + 1)), ensure_ascii=not raw_utf8).encode()
    one_problem(post(client, over), provider, ["body", *path], "string_too_long")


@pytest.mark.parametrize(("path", "limit"), CANONICAL_FIELDS)
def test_empty_string_is_422(client, provider, path, limit):
    one_problem(post(client, with_value(valid_request(), path, "")), provider, ["body", *path], "string_too_short")


# ---------------------------------------------------------------- schema_version


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("0.1.1", "literal_error"),
        ("0.1", "literal_error"),
        ("1.0.0", "literal_error"),
        ("0.2.0", "literal_error"),
        ("", "literal_error"),
        (" 0.1.0", "literal_error"),
        ("0.1.0 ", "literal_error"),
        ("v0.1.0", "literal_error"),
        (0.1, "string_type"),
        (1, "string_type"),
        (["0.1.0"], "string_type"),
    ],
)
def test_schema_version_must_be_exactly_0_1_0(client, provider, value, kind):
    one_problem(post(client, valid_request(schema_version=value)), provider, ["body", "schema_version"], kind)


# ---------------------------------------------------------------- integers


INT_FIELDS = [
    pytest.param(("timeout_ms",), 1, 300000, id="timeout_ms"),
    pytest.param(("workload_context", "attempt_index"), 0, 2147483647, id="attempt_index"),
    pytest.param(("scope", "ranks", 0), 0, 2147483647, id="rank"),
]


@pytest.mark.parametrize(("path", "low", "high"), INT_FIELDS)
def test_integer_bounds_are_inclusive(client, provider, path, low, high):
    for value in (low, high):
        body = with_value(valid_request(), path, value)
        if path[0] == "scope":
            body["scope"]["ranks"] = [value]
        check_200(post(client, body))
    assert len(provider.calls) == 2


@pytest.mark.parametrize(("path", "low", "high"), INT_FIELDS)
@pytest.mark.parametrize("side", ["below", "above", "far-above"])
def test_integer_out_of_bounds_is_422(client, provider, path, low, high, side):
    value = {"below": low - 1, "above": high + 1, "far-above": 10**30}[side]
    kind = "greater_than_equal" if side == "below" else "less_than_equal"
    one_problem(post(client, with_value(valid_request(), path, value)), provider, ["body", *path], kind)


@pytest.mark.parametrize(("path", "low", "high"), INT_FIELDS)
@pytest.mark.parametrize(
    "value",
    [
        pytest.param("1", id="string"),
        pytest.param(True, id="true"),
        pytest.param(False, id="false"),
        pytest.param(1.0, id="1.0"),
        pytest.param(1.5, id="1.5"),
        pytest.param([1], id="array"),
        pytest.param({"v": 1}, id="object"),
    ],
)
def test_integer_fields_are_strict(client, provider, path, low, high, value):
    one_problem(post(client, with_value(valid_request(), path, value)), provider, ["body", *path], "int_type")


@pytest.mark.parametrize("literal", ["1e3", "1E3", "1000.0", "1.0e3", "-0.0"])
def test_number_with_fraction_or_exponent_is_not_an_integer(client, provider, literal):
    data = json.dumps(valid_request(timeout_ms=123456789)).replace("123456789", literal)
    one_problem(post(client, data), provider, ["body", "timeout_ms"], "int_type")


# ---------------------------------------------------------------- strings given the wrong JSON type


STRING_FIELDS = [
    ("schema_version",),
    ("workload_id",),
    ("failure_context", "detected_at"),
    ("failure_context", "detection_signal"),
    ("workload_context", "workflow_id"),
    ("phase",),
    ("scope", "nodes", 0),
    ("scope", "start_time"),
    ("scope", "end_time"),
]


@pytest.mark.parametrize("path", STRING_FIELDS, ids=lambda p: ".".join(map(str, p)))
@pytest.mark.parametrize("value", [12345, 1.5, True, ["x"], {"x": "y"}], ids=["int", "float", "bool", "array", "obj"])
def test_string_fields_are_strict(client, provider, path, value):
    entry = one_problem(post(client, with_value(valid_request(), path, value)), provider, ["body", *path])
    assert entry["type"] in ("string_type", "datetime_parsing")


def test_continue_session_is_strict(client, provider):
    one_problem(
        post(client, valid_request(phase="slow", continue_session=12345)), provider, ["body", "continue_session"]
    )


@pytest.mark.parametrize(
    ("path", "value", "kind"),
    [
        (("scope",), ["worker-01"], "dict_type"),
        (("scope",), "worker-01", "dict_type"),
        (("failure_context",), "application_error", "dict_type"),
        (("workload_context",), [], "dict_type"),
        (("scope", "nodes"), "worker-01", "list_type"),
        (("scope", "nodes"), {"0": "worker-01"}, "list_type"),
        (("scope", "ranks"), 0, "list_type"),
        (("scope", "ranks"), "0,1", "list_type"),
    ],
)
def test_objects_and_arrays_are_strict(client, provider, path, value, kind):
    one_problem(post(client, with_value(valid_request(), path, value)), provider, ["body", *path], kind)


# ---------------------------------------------------------------- null and missing


NULLABLE_NOWHERE = [
    ("schema_version",),
    ("workload_id",),
    ("scope",),
    ("failure_context",),
    ("timeout_ms",),
    ("workload_context",),
    ("phase",),
    ("scope", "nodes"),
    ("scope", "ranks"),
    ("scope", "start_time"),
    ("scope", "end_time"),
    ("failure_context", "detected_at"),
    ("failure_context", "detection_signal"),
    ("workload_context", "workflow_id"),
    ("workload_context", "attempt_index"),
    ("scope", "nodes", 1),
    ("scope", "ranks", 1),
]


@pytest.mark.parametrize("path", NULLABLE_NOWHERE, ids=lambda p: ".".join(map(str, p)))
def test_null_is_422(client, provider, path):
    one_problem(post(client, with_value(valid_request(), path, None)), provider, ["body", *path])


def test_null_continue_session_is_422(client, provider):
    one_problem(
        post(client, valid_request(phase="slow", continue_session=None)), provider, ["body", "continue_session"]
    )


REQUIRED = [
    ("schema_version",),
    ("workload_id",),
    ("scope",),
    ("failure_context",),
    ("timeout_ms",),
    ("workload_context",),
    ("phase",),
    ("scope", "nodes"),
    ("scope", "ranks"),
    ("failure_context", "detected_at"),
    ("failure_context", "detection_signal"),
    ("workload_context", "workflow_id"),
    ("workload_context", "attempt_index"),
]


@pytest.mark.parametrize("path", REQUIRED, ids=lambda p: ".".join(p))
def test_missing_required_field_is_422(client, provider, path):
    one_problem(post(client, without(valid_request(), path)), provider, ["body", *path], "missing")


def test_empty_object_lists_every_missing_field(client, provider):
    detail = check_422(post(client, {}), provider, count=7)
    assert {tuple(e["loc"]) for e in detail} == {("body", p[0]) for p in REQUIRED if len(p) == 1}
    assert {e["type"] for e in detail} == {"missing"}


# ---------------------------------------------------------------- unknown fields


@pytest.mark.parametrize(
    "parent",
    [(), ("scope",), ("failure_context",), ("workload_context",)],
    ids=["top", "scope", "failure_context", "workload_context"],
)
@pytest.mark.parametrize("name", ["extra", "Schema_Version", "", "\ud800", "nodes "])
def test_unknown_field_at_any_depth_is_422(client, provider, parent, name):
    response = post(client, with_value(valid_request(), (*parent, name), "x"))
    one_problem(response, provider, ["body", *parent, name], "extra_forbidden")


def test_known_field_at_the_wrong_depth_is_unknown(client, provider):
    body = with_value(valid_request(), ("scope", "workload_id"), "12345")
    one_problem(post(client, body), provider, ["body", "scope", "workload_id"], "extra_forbidden")


# ---------------------------------------------------------------- several problems


def test_one_entry_per_problem(client, provider):
    body = valid_request(workload_id=12345, timeout_ms=0, phase="medium")
    detail = check_422(post(client, body), provider, count=3)
    assert {tuple(e["loc"]): e["type"] for e in detail} == {
        ("body", "workload_id"): "string_type",
        ("body", "timeout_ms"): "greater_than_equal",
        ("body", "phase"): "literal_error",
    }


def test_problems_at_several_depths_are_each_reported(client, provider):
    body = valid_request(schema_version="9")
    body["scope"]["nodes"] = ["worker-01", "worker-02", "worker-03", " worker-04", "worker-01"]
    body["scope"]["ranks"] = [0, -1]
    body["failure_context"]["detection_signal"] = "Application"
    body["workload_context"]["surprise"] = True
    detail = check_422(post(client, body), provider, count=6)
    assert {tuple(e["loc"]) for e in detail} == {
        ("body", "schema_version"),
        ("body", "scope", "nodes", 3),
        ("body", "scope", "nodes", 4),
        ("body", "scope", "ranks", 1),
        ("body", "failure_context", "detection_signal"),
        ("body", "workload_context", "surprise"),
    }


# ---------------------------------------------------------------- scope.nodes and scope.ranks


def test_nodes_and_ranks_may_be_empty(client, provider):
    body = check_200(post(client, with_value(valid_request(), ("scope",), {"nodes": [], "ranks": []})))
    assert provider.calls[0][1].scope.nodes == () and provider.calls[0][1].scope.ranks == ()
    assert body["attributions"] == [] and body["unattributed_targets"] == []


def test_node_item_loc_names_its_index(client, provider):
    body = with_value(valid_request(), ("scope", "nodes"), ["a", "b", "c", "", "e"])
    one_problem(post(client, body), provider, ["body", "scope", "nodes", 3], "string_too_short")


@pytest.mark.parametrize(
    ("field", "items", "index"),
    [
        ("nodes", ["a", "b", "a"], 2),
        ("nodes", ["worker-01", "worker-02", "worker-03", "worker-02"], 3),
        ("nodes", ["caf\u00e9", "x", "caf\u00e9"], 2),
        ("ranks", [0, 1, 0], 2),
        ("ranks", [7, 3, 5, 3], 3),
    ],
)
def test_duplicate_items_are_422(client, provider, field, items, index):
    body = with_value(valid_request(), ("scope", field), items)
    one_problem(post(client, body), provider, ["body", "scope", field, index], "unique_items")


@pytest.mark.parametrize(("field", "limit"), [("nodes", 16384), ("ranks", 262144)])
def test_array_item_limits(field, limit):
    from tests.contract.conftest import empty_outcome, make_client
    from tests.fakes import FakeProvider

    provider = FakeProvider(fast=empty_outcome)
    client = make_client(provider)

    def items(count):
        return [f"n{i}" for i in range(count)] if field == "nodes" else list(range(count))

    check_200(post(client, with_value(valid_request(), ("scope", field), items(limit))))
    assert len(getattr(provider.calls[0][1].scope, field)) == limit

    provider.calls.clear()
    response = post(client, with_value(valid_request(), ("scope", field), items(limit + 1)))
    one_problem(response, provider, ["body", "scope", field], "too_long")


# ---------------------------------------------------------------- timestamps


TIMESTAMP_PATHS = [("failure_context", "detected_at"), ("scope", "start_time"), ("scope", "end_time")]


@pytest.mark.parametrize("path", TIMESTAMP_PATHS, ids=lambda p: p[1])
@pytest.mark.parametrize("value", ["2026-09-09T12:00:00", "2026-09-09T12:00:00.123456", "2026-09-09T12:00"])
def test_timestamp_without_offset_is_422(client, provider, path, value):
    one_problem(post(client, with_value(valid_request(), path, value)), provider, ["body", *path])


@pytest.mark.parametrize(
    "value",
    [
        "2026-09-09",
        "12:00:00Z",
        "2026-09-09T12:00:00+0530",
        "2026-09-09T12:00:00+05",
        "2026-13-01T00:00:00Z",
        "2026-02-30T00:00:00Z",
        "2026-09-09T25:00:00Z",
        "2026-09-09T12:61:00Z",
        "2026-09-09T12:00:00+24:00",
        "2026-09-09T12:00:00Z ",
        " 2026-09-09T12:00:00Z",
        "2026-09-09T12:00:00Zjunk",
        "2026-09-09T12:00:00ZZ",
        "09/09/2026 12:00",
        "yesterday",
        "",
    ],
)
def test_malformed_timestamp_is_422(client, provider, value):
    path = ("failure_context", "detected_at")
    one_problem(post(client, with_value(valid_request(), path, value)), provider, ["body", *path])


@pytest.mark.parametrize(
    ("sent", "utc"),
    [
        ("2026-09-09T12:00:00Z", datetime(2026, 9, 9, 12, 0, tzinfo=timezone.utc)),
        ("2026-09-09t12:00:00z", datetime(2026, 9, 9, 12, 0, tzinfo=timezone.utc)),
        ("2026-09-09T12:00:00+00:00", datetime(2026, 9, 9, 12, 0, tzinfo=timezone.utc)),
        ("2026-09-09T12:00:00+05:30", datetime(2026, 9, 9, 6, 30, tzinfo=timezone.utc)),
        ("2026-09-09T12:00:00-07:00", datetime(2026, 9, 9, 19, 0, tzinfo=timezone.utc)),
        ("2026-09-09T01:00:00+05:30", datetime(2026, 9, 8, 19, 30, tzinfo=timezone.utc)),
        ("2026-09-09T12:00:00.5Z", datetime(2026, 9, 9, 12, 0, 0, 500000, tzinfo=timezone.utc)),
        ("2026-09-09T12:00:00.123456+01:00", datetime(2026, 9, 9, 11, 0, 0, 123456, tzinfo=timezone.utc)),
    ],
)
def test_any_offset_is_converted_to_utc_and_emitted_with_z(client, provider, sent, utc):
    body = check_200(post(client, with_value(valid_request(), ("failure_context", "detected_at"), sent)))
    received = provider.calls[0][1].failure_context.detected_at
    assert received == utc
    assert received.utcoffset().total_seconds() == 0
    observed = body["attributions"][0]["observed_at"]
    assert observed.endswith("Z")
    assert datetime.fromisoformat(observed.replace("Z", "+00:00")) == utc


def test_offset_example_from_the_brief(client, provider):
    body = check_200(
        post(client, with_value(valid_request(), ("failure_context", "detected_at"), "2026-09-09T12:00:00+05:30"))
    )
    assert body["attributions"][0]["observed_at"] == "2026-09-09T06:30:00Z"


def test_window_bounds_reach_the_provider_in_utc(client, provider):
    window = {"start_time": "2026-09-09T16:00:00+05:30", "end_time": "2026-09-09T03:45:00-07:00"}
    check_200(post(client, with_value(valid_request(), ("scope",), {"nodes": ["a"], "ranks": [], **window})))
    scope = provider.calls[0][1].scope
    assert scope.start_time == datetime(2026, 9, 9, 10, 30, tzinfo=timezone.utc)
    assert scope.end_time == datetime(2026, 9, 9, 10, 45, tzinfo=timezone.utc)


# ---------------------------------------------------------------- the window: start_time < end_time


@pytest.mark.parametrize(
    ("start", "end"),
    [
        pytest.param("2026-09-09T12:00:00Z", "2026-09-09T12:00:00Z", id="equal"),
        pytest.param("2026-09-09T12:00:00Z", "2026-09-09T17:30:00+05:30", id="equal-across-offsets"),
        pytest.param("2026-09-09T12:00:01Z", "2026-09-09T12:00:00Z", id="reversed"),
        pytest.param("2026-09-09T06:00:00-05:00", "2026-09-09T10:00:00Z", id="reversed-though-lexically-earlier"),
    ],
)
def test_start_not_before_end_is_422(client, provider, start, end):
    body = with_value(valid_request(), ("scope",), {"nodes": ["a"], "ranks": [], "start_time": start, "end_time": end})
    (entry,) = check_422(post(client, body), provider, count=1)
    assert entry["loc"][:2] == ["body", "scope"]


@pytest.mark.parametrize(
    "window",
    [
        pytest.param(WINDOW, id="ordered"),
        pytest.param(
            {"start_time": "2026-09-09T12:00:00+05:30", "end_time": "2026-09-09T07:00:00Z"},
            id="ordered-though-lexically-later",
        ),
        pytest.param({"start_time": "2026-09-09T12:00:00Z"}, id="start-only"),
        pytest.param({"end_time": "2026-09-09T12:00:00Z"}, id="end-only"),
    ],
)
def test_valid_windows_are_accepted(client, provider, window):
    check_200(post(client, with_value(valid_request(), ("scope",), {"nodes": ["a"], "ranks": [], **window})))
    assert len(provider.calls) == 1


# ---------------------------------------------------------------- detection_signal


@pytest.mark.parametrize("value", ["a", "application_error", "gpu_xid_79", "a" + "b" * 63, "x9_", "a_"])
def test_detection_signal_open_token_is_accepted(client, provider, value):
    check_200(post(client, with_value(valid_request(), ("failure_context", "detection_signal"), value)))
    assert provider.calls[0][1].failure_context.detection_signal == value


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("", id="empty"),
        pytest.param("A", id="upper"),
        pytest.param("Application_error", id="capital"),
        pytest.param("1abc", id="leading-digit"),
        pytest.param("_abc", id="leading-underscore"),
        pytest.param("a" * 65, id="65-chars"),
        pytest.param("application-error", id="hyphen"),
        pytest.param("application error", id="space"),
        pytest.param("application_error\n", id="trailing-newline"),
        pytest.param("\napplication_error", id="leading-newline"),
        pytest.param("appl\u0131cation", id="dotless-i"),
        pytest.param("\uff41pplication", id="fullwidth-a"),
    ],
)
def test_detection_signal_outside_the_pattern_is_422(client, provider, value):
    path = ("failure_context", "detection_signal")
    one_problem(post(client, with_value(valid_request(), path, value)), provider, ["body", *path])


# ---------------------------------------------------------------- phase and continue_session


@pytest.mark.parametrize("value", ["FAST", "Fast", "slow ", "medium", "", "fast\n"])
def test_phase_is_fast_or_slow(client, provider, value):
    one_problem(post(client, valid_request(phase=value)), provider, ["body", "phase"], "literal_error")


def test_continue_session_is_required_for_slow(client, provider):
    one_problem(post(client, valid_request(phase="slow")), provider, ["body", "continue_session"], "missing")


def test_continue_session_is_rejected_for_fast(client, provider):
    session = check_200(post(client, valid_request()))["attribution_session_id"]
    provider.calls.clear()
    response = post(client, valid_request(phase="fast", continue_session=session))
    one_problem(response, provider, ["body", "continue_session"])


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        pytest.param("", "string_too_short", id="empty"),
        pytest.param("a" * 1025, "string_too_long", id="1025-chars"),
        pytest.param("as1.abc\t", None, id="tab"),
        pytest.param("as1.abc\n", None, id="newline"),
        pytest.param("as1.\x7f", None, id="del"),
        pytest.param("as1.\x00", None, id="nul"),
        pytest.param("as1.caf\u00e9", None, id="non-ascii"),
        pytest.param("as1.\u00a0", None, id="nbsp"),
        pytest.param("as1.\ud800", None, id="lone-surrogate"),
    ],
)
def test_continue_session_is_1_to_1024_printable_ascii(client, provider, value, kind):
    body = valid_request(phase="slow", continue_session=value)
    body["scope"].update(WINDOW)
    one_problem(post(client, body), provider, ["body", "continue_session"], kind)


@pytest.mark.parametrize("value", ["a" * 1024, " ", "~", "as1.!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"])
def test_printable_ascii_continue_session_is_accepted_as_input(client, provider, value):
    """Well-formed input, but not a session: 200 `no_attribution_available`, never a 422 or a 500."""
    body = valid_request(phase="slow", continue_session=value)
    body["scope"].update(WINDOW)
    result = check_200(post(client, body))
    assert result["error"]["type"] == "no_attribution_available"
    assert result["attribution_session_id"] == value
    assert provider.calls == []


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("2026-12-31T23:59:60Z", "Leap seconds"),
        ("2026-09-09T12:00:00.123456789Z", "finer than microseconds"),
        ("0001-01-01T00:30:00+01:00", "out of range"),
        ("9999-12-31T23:30:00-01:00", "out of range"),
    ],
)
def test_timestamps_that_cannot_be_kept_exactly_are_422_with_the_reason(client, provider, value, needle):
    path = ("failure_context", "detected_at")
    problem = one_problem(post(client, with_value(valid_request(), path, value)), provider, ["body", *path])
    assert needle in problem["msg"] and problem["type"] == "datetime_parsing"


@pytest.mark.parametrize(
    ("sent", "utc"),
    [
        ("2026-09-09T12:00:00.123456000Z", datetime(2026, 9, 9, 12, 0, 0, 123456, tzinfo=timezone.utc)),
        ("2026-09-09T12:00:00-00:00", datetime(2026, 9, 9, 12, 0, tzinfo=timezone.utc)),
    ],
)
def test_nanosecond_zeros_and_unknown_local_offset_lose_nothing(client, provider, sent, utc):
    check_200(post(client, with_value(valid_request(), ("failure_context", "detected_at"), sent)))
    assert provider.calls[0][1].failure_context.detected_at == utc
