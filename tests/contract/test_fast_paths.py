"""The fast paths give exactly what the schema paths give: the request pre-check, the answer's bulk build and the
orjson encoder; every refusal still comes from the schema path with its own message."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timedelta, timezone
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from marshmallow import ValidationError

from app import create_app
from app.body import structure_marks
from app.mapping import response_data, response_json
from providers.base import (
    AllJobResources,
    AttributionOutcome,
    ErrorType,
    Evidence,
    Finding,
    NodeTarget,
    ProviderError,
)
from schemas.fast import fast_load, has_duplicate_keys, key_count, object_keys, string_colons
from schemas.fields import _RFC3339_COMMON, _parse_strictly, parse_timestamp
from schemas.request import AttributionRequestSchema
from schemas.response import AttributionResponseSchema
from tests.contract.conftest import check_200, check_422, echo_fast, make_client, post, valid_request
from tests.fakes import FakeProvider

REQUEST_SCHEMA = AttributionRequestSchema()
RESPONSE_SCHEMA = AttributionResponseSchema()
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ---------------------------------------------------------------- the request pre-check

NAME_CHARS = st.sampled_from(["a", "Z", "0", "-", ".", " ", "\n", "\t", "é", "e\u0301", "\u200b", "\ud800", "~"])
NAMES = st.one_of(
    st.sampled_from(
        ["a ", " a", "a\n", "\nb", "a\nb", "a\tb", "a\u200b", "\ud800", "é", "e\u0301", "", "worker-01", "a", "~"]
    ),
    st.lists(NAME_CHARS, max_size=6).map("".join),
    st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=8),
    st.just("x" * 253),
    st.just("x" * 254),
    st.integers(),
    st.none(),
)
RANKS = st.one_of(
    st.integers(min_value=-2, max_value=40),
    st.sampled_from([2147483647, 2147483648, True, False, 1.0, 0.5, None, "1"]),
)
TIMES = st.sampled_from(
    ["2026-09-09T11:00:00Z", "2026-09-09T13:00:00+02:00", "2026-09-09T12:30:00.123456789Z", "2026-09-09T11:00:00",
     "2026-09-09T12:30:00.123000000-01:00", "bad", 5, None]
)  # fmt: skip


@st.composite
def requests(draw: Any) -> Any:
    """Valid requests (ASCII and not) with, in most examples, one to three things changed that may break them."""
    body = valid_request()
    body["scope"]["nodes"] = draw(st.lists(st.text("abc-.~", min_size=1, max_size=4), max_size=8, unique=True))
    body["scope"]["ranks"] = draw(st.lists(st.integers(0, 2147483647), max_size=8, unique=True))
    if draw(st.booleans()):
        body["scope"].update({"start_time": "2026-09-09T11:00:00+01:00", "end_time": "2026-09-09T12:30:00.5Z"})
    if draw(st.booleans()):
        body.update(phase="slow", continue_session=draw(st.sampled_from(["as1.abc", "x" * 1024])))
    for _ in range(draw(st.integers(0, 3))):
        where = draw(st.sampled_from(["node", "rank", "time", "top", "key"]))
        if where == "node":
            nodes = body["scope"]["nodes"]
            nodes.insert(draw(st.integers(0, len(nodes))), draw(NAMES))
        elif where == "rank":
            ranks = body["scope"]["ranks"]
            ranks.insert(draw(st.integers(0, len(ranks))), draw(RANKS))
        elif where == "time":
            place = draw(
                st.sampled_from([("scope", "start_time"), ("scope", "end_time"), ("failure_context", "detected_at")])
            )
            body[place[0]][place[1]] = draw(TIMES)
        elif where == "top":
            name, value = draw(
                st.one_of(
                    st.tuples(st.sampled_from(["workload_id"]), NAMES),
                    st.tuples(st.just("timeout_ms"), st.sampled_from([1, 300000, 300001, 0, 10000.0, True, "10"])),
                    st.tuples(st.just("phase"), st.sampled_from(["fast", "slow", "FAST", None])),
                    st.tuples(st.just("continue_session"), st.sampled_from(["as1.abc", "", "é", "x" * 1025, 7])),
                    st.tuples(st.just("schema_version"), st.sampled_from(["0.1.0", "0.2.0", 1])),
                    st.tuples(st.just("extra"), st.just(1)),
                )
            )
            body[name] = value
        elif where == "key":
            part = draw(st.sampled_from(["failure_context", "workload_context"]))
            change = draw(st.sampled_from(["detection_signal", "workflow_id", "attempt_index", "extra"]))
            value = draw(st.one_of(NAMES, RANKS, st.sampled_from(["application_error", "A", "a" * 65])))
            if isinstance(body.get(part), dict):
                body[part][change] = value
    if draw(st.integers(0, 9)) == 0:
        part = draw(st.sampled_from(["scope", "failure_context", "workload_context"]))
        body[part] = draw(st.sampled_from([None, [], "x", {}]))
    if draw(st.integers(0, 9)) == 0:
        body.pop(draw(st.sampled_from(sorted(body))))
    return body


@SETTINGS
@given(requests())
def test_the_pre_check_answers_only_for_valid_requests_and_answers_as_the_schema(body):
    try:
        expected = REQUEST_SCHEMA.load(copy.deepcopy(body))
    except ValidationError:
        expected = None
    got = fast_load(copy.deepcopy(body))
    if got is not None:
        assert expected is not None, "the pre-check accepted what the schema refuses"
        assert got == expected


NEAR_MISSES = [" a", "a ", "a\n", "\na", "a\nb", "a\tb", "a \n", "", "x" * 254, "a\u200b", "\ud800", "é", "n1", 1, None]


@pytest.mark.parametrize("name", NEAR_MISSES)
@pytest.mark.parametrize("position", [0, 1, 3])
def test_each_node_name_is_judged_as_the_schema_judges_it_wherever_it_stands(name, position):
    nodes = ["n1", "n2", "n3"]
    nodes.insert(position, name)
    body = valid_request(scope={"nodes": nodes, "ranks": [0]})
    try:
        expected = REQUEST_SCHEMA.load(copy.deepcopy(body))
    except ValidationError:
        expected = None
    got = fast_load(copy.deepcopy(body))
    assert got is None if expected is None else got in (None, expected)


@pytest.mark.parametrize("rank", [-1, 2147483648, True, False, 1.0, None, "1", 0])
@pytest.mark.parametrize("position", [0, 1, 3])
def test_each_rank_is_judged_as_the_schema_judges_it_wherever_it_stands(rank, position):
    ranks = [0, 5, 9]
    ranks.insert(position, rank)
    _judged_as_the_schema_judges(ranks)


def _judged_as_the_schema_judges(ranks: list[Any]) -> None:
    body = valid_request(scope={"nodes": [], "ranks": ranks})
    try:
        expected = REQUEST_SCHEMA.load(copy.deepcopy(body))
    except ValidationError:
        expected = None
    got = fast_load(copy.deepcopy(body))
    assert got is None if expected is None else got == expected


@pytest.mark.parametrize(
    "ranks",
    [
        [False, 1, 2],
        [0, True, 2],
        [0, 1.5, 2],
        [0, 1, 2.0],
        [0, 1, 2**64],
        [0, 1, 2147483648],
        [-1, 0, 1],
        [0, 1, "2"],
        [0, 1, None],
        [2, 1, 0],
        [0, 2, 2],
    ],
)
def test_an_increasing_list_with_one_odd_rank_is_judged_as_the_schema_judges_it(ranks):
    """The bulk check's shortcut for strictly increasing ranks takes nothing the schema refuses."""
    _judged_as_the_schema_judges(ranks)


def _counting_with(position: int, value: Any) -> list[Any]:
    ranks: list[Any] = list(range(1000))
    ranks[position] = value
    return ranks


@pytest.mark.parametrize(
    "ranks",
    [
        list(range(1000)),
        list(range(1, 1001)),
        *(_counting_with(p, v) for p in (0, 1, 500, 999) for v in (float(p), p + 1, p - 1, str(p), None)),
        _counting_with(1, True),
        _counting_with(0, False),
        _counting_with(999, 99),  # its text a prefix of the next rank's
        _counting_with(999, 2**64),
        _counting_with(999, 2147483648),
        [*range(1000), 1000.0],
        [*range(999), 999, 999],
    ],
)
def test_a_long_list_of_consecutive_ranks_with_one_odd_rank_is_judged_as_the_schema_judges_it(ranks):
    """The bulk check's shortcut for 0, 1, 2, ... compares the list's text: a rank that differs only in type, or a
    repeat or gap anywhere, takes the other paths."""
    _judged_as_the_schema_judges(ranks)


def test_colons_and_escapes_inside_strings_are_no_duplicate_key():
    """Names and times full of colons, some of them escaped, in small and large bodies: answered, never a 422."""
    for count in (3, 6000):
        nodes = [f"rack:{i}:node:{i}" for i in range(count)]
        text = json.dumps(valid_request(scope={"nodes": nodes, "ranks": [0, 1]}))
        text = text.replace('"rack:0:node:0"', '"rack\\u003a0:node\\u003A0"', 1)
        parsed = orjson.loads(text.encode())
        assert not has_duplicate_keys(text.encode(), structure_marks(text.encode()), object_keys(parsed),
                                      string_colons(parsed))  # fmt: skip
        provider = FakeProvider(fast=echo_fast)
        answer = check_200(post(make_client(provider), text))
        named = {t["name"] for t in answer["unattributed_targets"]}
        assert named | {a["target"]["name"] for a in answer["attributions"]} == set(nodes)


@pytest.mark.parametrize(
    "nodes, ranks", [([], []), (["worker-01"], [0]), ([f"n{i}" for i in range(5000)], list(range(70000)))]
)
def test_the_pre_check_accepts_valid_ascii_requests(nodes, ranks):
    body = valid_request(
        scope={
            "nodes": nodes,
            "ranks": ranks,
            "start_time": "2026-09-09T11:00:00+01:00",
            "end_time": "2026-09-09T12:30:00Z",
        }
    )
    got = fast_load(copy.deepcopy(body))
    assert got is not None and got == REQUEST_SCHEMA.load(body)


def test_a_slow_request_passes_the_pre_check_with_its_session():
    body = valid_request(phase="slow", continue_session="as1.x")
    assert fast_load(body) == REQUEST_SCHEMA.load(body)


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "b": {"c": [1, "x:", "\\":"], "d": "\\\\"}, "e" : {}}',
        '{\n  "k\\"": {"\\"": "\\":"}, "\\u0061": [{"z": null}]\n}',
        "[]",
        '"a"',
    ],
)
def test_the_key_count_counts_every_key_of_the_text(text):
    def count(value: Any) -> int:
        if isinstance(value, dict):
            return len(value) + sum(count(v) for v in value.values())
        return sum(count(v) for v in value) if isinstance(value, list) else 0

    assert key_count(text.encode()) == count(json.loads(text))


@pytest.mark.parametrize(
    "old, new, key",
    [
        ('"phase": "fast"', '"phase": "fast", "ph\\u0061se": "fast"', "phase"),
        ('"nodes": [', '"no\\u0064es": [], "nodes": [', "nodes"),
        ('"workload_id": "12345"', '"workload_id": "12345", "workload_id": "12345"', "workload_id"),
        # the dropped value holds colons of its own; an escaped colon elsewhere; a duplicate in a nested object
        ('"workload_id": "12345"', '"workload_id": "a:b:c", "workload_id": "12345"', "workload_id"),
        ('"nodes": [', '"nodes": ["x\\u003ay"], "nodes": [', "nodes"),
        ('"detected_at": ', '"detected_at": "2026-01-01T00:00:00Z", "detected_at": ', "detected_at"),
    ],
)
def test_a_duplicate_key_in_an_otherwise_valid_request_is_the_same_422(old, new, key):
    text = json.dumps(valid_request())
    assert old in text
    data = text.replace(old, new, 1)
    parsed = orjson.loads(data.encode())
    assert fast_load(parsed) is not None and key_count(data.encode()) == object_keys(parsed) + 1
    marks = structure_marks(data.encode())
    assert has_duplicate_keys(data.encode(), marks, object_keys(parsed), string_colons(parsed))
    provider = FakeProvider()
    (entry,) = check_422(post(make_client(provider), data), provider, count=1)
    assert entry == {"loc": ["body"], "msg": f"JSON object has a duplicate key {key!r}", "type": "json_invalid"}


# ---------------------------------------------------------------- timestamps

TIMESTAMP_PARTS = (
    ["0000", "0001", "2026", "2028", "9999", "\u0662\u0660\u0662\u0666"],
    ["-"],
    ["00", "01", "02", "12", "13"],
    ["-"],
    ["00", "01", "28", "29", "30", "31", "32"],
    ["T", "t", " "],
    ["00", "09", "19", "23", "24"],
    [":"],
    ["00", "59", "60"],
    [":"],
    ["00", "59", "60", "61"],
    ["", ".5", ".123456", ".1234567", ".123456000", ".0000001", ","],
    ["Z", "z", "+00:00", "-00:00", "+23:59", "-23:59", "+24:00", "+00:60", "-01:00", "+0100", "+05:30", ""],
)
TIMESTAMPS = st.one_of(
    st.tuples(*map(st.sampled_from, TIMESTAMP_PARTS)).map("".join),
    st.from_regex(_RFC3339_COMMON, fullmatch=True),
)


def _read(reader: Any, text: str) -> Any:
    try:
        value = reader(text)
    except ValidationError as exc:
        return ("refused", exc.messages)
    assert value.tzinfo is timezone.utc
    return value


@SETTINGS
@given(TIMESTAMPS)
def test_a_timestamp_is_read_as_the_strict_reading_reads_it(text):
    # The common shape goes to the C reader; whatever it reads, and every refusal with its message, must be what the
    # contract's own reading gives.
    assert _read(parse_timestamp, text) == _read(_parse_strictly, text)


@pytest.mark.parametrize(
    "text",
    ["2026-09-09T12:00:00+00:60", "2026-09-09T12:00:00+24:00", "0001-01-01T00:00:00+00:01",
     "9999-12-31T23:59:59-00:01", "2026-02-29T00:00:00Z", "2028-02-29T23:59:59.999999-23:59",
     "2026-09-09T24:00:00Z", "2026-09-09T12:00:60Z", "2026-09-09T12:00:00.5Z", "2026-09-09T12:00:00-00:00"],
)  # fmt: skip
def test_the_edges_of_the_common_shape_are_read_as_the_strict_reading_reads_them(text):
    assert _read(parse_timestamp, text) == _read(_parse_strictly, text)


# ---------------------------------------------------------------- the answer, built in bulk

UTC_TIMES = st.datetimes(
    min_value=datetime(1970, 1, 2), max_value=datetime(2100, 1, 1), timezones=st.sampled_from(
        [timezone.utc, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8))]
    )
)  # fmt: skip
TOKENS = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True)
NODE_NAMES = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)
TARGETS = st.one_of(NODE_NAMES.map(NodeTarget), st.just(AllJobResources()))
EVIDENCE = st.builds(Evidence, TOKENS, st.text(max_size=40), st.one_of(st.none(), UTC_TIMES))
FINDINGS = st.builds(
    Finding,
    TARGETS,
    TOKENS,
    UTC_TIMES,
    st.lists(EVIDENCE, max_size=3).map(tuple),
    st.one_of(st.none(), st.floats(0, 1), st.sampled_from([0.0, 1.0, 1e-7, 0.1])),
)
ERRORS = st.one_of(
    st.none(), st.builds(ProviderError, st.sampled_from(list(ErrorType)), st.text(min_size=1, max_size=30))
)
OUTCOMES = st.builds(
    AttributionOutcome, st.lists(FINDINGS, max_size=4).map(tuple), st.lists(TARGETS, max_size=30).map(tuple), ERRORS
)


def _keys_in_order(value: Any) -> Any:
    if isinstance(value, dict):
        return [(k, _keys_in_order(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [_keys_in_order(v) for v in value]
    return value


@SETTINGS
@given(OUTCOMES, st.one_of(st.none(), st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=1)))
def test_the_bulk_answer_is_the_schema_dump(outcome, session_id):
    app = create_app(provider=FakeProvider())
    args = {
        "schema_version": "0.1.0",
        "service": {"name": "attribution-adapter", "version": "0.1.0", "provider": "fake"},
        "request_id": "0123abcd",
        "session_id": session_id,
    }
    expected = RESPONSE_SCHEMA.dump(response_data(outcome, **args))
    got = response_json(outcome, **args)
    assert _keys_in_order(got) == _keys_in_order(expected)
    assert json.dumps(got) == json.dumps(expected)  # key order included
    with app.app_context():
        assert app.json.dumps(got) == app.json.dumps(expected)
        assert json.loads(app.json.dumps(got)) == expected


def test_a_large_answer_through_the_client_is_the_schema_dump():
    nodes = [f"node-{i:05d}" for i in range(3000)]
    provider = FakeProvider(fast=echo_fast)
    body = check_200(post(make_client(provider), valid_request(scope={"nodes": nodes, "ranks": list(range(100))})))
    assert [t["name"] for t in body["unattributed_targets"]] == nodes[1:]
    assert body["attributions"][0]["target"] == {"type": "Node", "name": nodes[0]}


# ---------------------------------------------------------------- the JSON encoder


def test_the_encoder_writes_what_the_stdlib_would_read_back():
    app = create_app(provider=FakeProvider())
    value = {"b": "é ✓ \U0001f600", "a": [1, 2.5, 1e-7, None, True], "c": {"z": 1, "y": ""}}
    with app.app_context():
        text = app.json.dumps(value)
        assert json.loads(text) == value
        assert list(json.loads(text)) == ["a", "b", "c"]  # Flask's default: sorted keys
        response = app.json.response(value)
        assert response.get_data().endswith(b"\n") and json.loads(response.get_data()) == value
        # What orjson cannot write goes through the stdlib encoder.
        odd = {"s": "\ud800", "n": 2**70}
        assert json.loads(app.json.dumps(odd)) == odd
        assert json.loads(app.json.response(odd).get_data()) == odd


@pytest.mark.parametrize("duplicate", [False, True])
def test_a_large_body_is_read_as_strictly_as_a_small_one(duplicate):
    nodes = [f"node-{i:05d}" for i in range(6000)]
    text = json.dumps(valid_request(scope={"nodes": nodes, "ranks": []}))
    assert len(text) > 64 * 1024
    if duplicate:
        text = text.replace('"phase": "fast"', '"phase": "fast", "phase": "fast"', 1)
    provider = FakeProvider(fast=echo_fast)
    response = post(make_client(provider), text)
    if duplicate:
        (entry,) = check_422(response, provider, count=1)
        assert entry["msg"] == "JSON object has a duplicate key 'phase'"
    else:
        assert len(check_200(response)["unattributed_targets"]) == len(nodes) - 1
