"""A 422 stays small however many problems the body holds: per location and in all, each text bounded.

Every request goes through the Flask test client as ADI sends it. The bodies come from tests/bounded_bodies.py:
each breaks a rule as many times as the default body limit (4 MiB) allows.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from app import create_app
from schemas.bounds import MAX_LOC_CHARS, MAX_MESSAGE_CHARS, MAX_PROBLEMS, MAX_PROBLEMS_PER_FIELD
from tests import bounded_bodies as shapes
from tests.contract.conftest import check_422, empty_outcome
from tests.fakes import FakeProvider

URL = "/v1/attribution"
MAX_BODY = 64 * 1024
MORE = re.compile(r"(\d+) more problems (?:at this location )?were found and are not listed")


@pytest.fixture
def provider() -> FakeProvider:
    return FakeProvider(fast=empty_outcome, slow=empty_outcome)


@pytest.fixture
def client(provider: FakeProvider) -> Any:
    app = create_app(provider=provider)
    app.config["TESTING"] = True
    return app.test_client()


def send(client: Any, data: bytes | dict[str, Any]) -> Any:
    raw = data if isinstance(data, bytes) else json.dumps(data, separators=(",", ":")).encode()
    return client.post(URL, data=raw, headers={"Content-Type": "application/json"})


def summary_count(entry: dict[str, Any]) -> int:
    assert entry["type"] == "too_many_errors", entry
    match = MORE.fullmatch(entry["msg"])
    assert match, entry
    return int(match.group(1))


def bounded(response: Any, provider: FakeProvider) -> list[dict[str, Any]]:
    """A 422 within every bound; returns its entries."""
    assert len(response.get_data()) < MAX_BODY
    detail = check_422(response, provider)
    assert len(detail) <= MAX_PROBLEMS + 1
    items: dict[tuple[Any, ...], int] = {}  # problems of array items, per array
    unknown: dict[tuple[Any, ...], int] = {}  # unknown keys, per object
    for entry in detail:
        assert len(entry["msg"]) <= MAX_MESSAGE_CHARS
        assert all(len(step) <= MAX_LOC_CHARS for step in entry["loc"] if isinstance(step, str))
        parent = tuple(entry["loc"][:-1])
        if isinstance(entry["loc"][-1], int):
            items[parent] = items.get(parent, 0) + 1
        elif entry["type"] == "extra_forbidden":
            unknown[parent] = unknown.get(parent, 0) + 1
    assert all(count <= MAX_PROBLEMS_PER_FIELD for count in [*items.values(), *unknown.values()])
    return detail


def accounted(detail: list[dict[str, Any]]) -> int:
    """How many problems the answer accounts for: those listed plus those its summaries count."""
    return sum(summary_count(e) if e["type"] == "too_many_errors" else 1 for e in detail)


@pytest.mark.parametrize("name", shapes.NAMES)
def test_every_shape_of_a_huge_bad_body_gets_a_small_422(client, provider, name):
    detail = bounded(send(client, shapes.shape_bytes(name)), provider)
    assert detail[0]["loc"][0] == "body"


def test_one_rank_repeated_at_the_bound_lists_16_duplicates_and_counts_the_rest(client, provider):
    detail = bounded(send(client, shapes.duplicated_ranks()), provider)
    assert len(detail) == MAX_PROBLEMS_PER_FIELD + 1
    for index, entry in enumerate(detail[:-1], start=1):
        assert entry == {
            "loc": ["body", "scope", "ranks", index],
            "msg": "Array items must be unique; this one repeats item 0",
            "type": "unique_items",
        }
    assert detail[-1]["loc"] == ["body", "scope", "ranks"]
    assert summary_count(detail[-1]) == shapes.MAX_RANKS - 1 - MAX_PROBLEMS_PER_FIELD
    assert accounted(detail) == shapes.MAX_RANKS - 1


@pytest.mark.parametrize(
    ("body", "bad", "msg"),
    [
        (shapes.ranks_of_the_wrong_type, shapes.MAX_RANKS, "Input should be a valid integer"),
        (shapes.ranks_out_of_range, shapes.MAX_RANKS, "Input should be greater than or equal to 0"),
    ],
)
def test_bad_ranks_at_the_bound_are_listed_16_and_counted(client, provider, body, bad, msg):
    detail = bounded(send(client, body()), provider)
    assert [e["loc"] for e in detail[:-1]] == [["body", "scope", "ranks", i] for i in range(MAX_PROBLEMS_PER_FIELD)]
    assert {e["msg"] for e in detail[:-1]} == {msg}
    assert accounted(detail) == bad


def test_a_huge_list_of_bad_node_names_is_listed_16_and_counted(client, provider):
    detail = bounded(send(client, shapes.bad_node_names()), provider)
    assert [e["loc"] for e in detail[:-1]] == [["body", "scope", "nodes", i] for i in range(MAX_PROBLEMS_PER_FIELD)]
    assert {e["type"] for e in detail[:-1]} == {"string_not_canonical"}
    assert detail[-1]["loc"] == ["body", "scope", "nodes"]
    assert accounted(detail) == shapes.MAX_NODES


def test_many_unknown_keys_list_the_first_16_in_input_order(client, provider):
    detail = bounded(send(client, shapes.many_unknown_keys(1000)), provider)
    assert [e["loc"] for e in detail[:-1]] == [["body", f"k{i}"] for i in range(MAX_PROBLEMS_PER_FIELD)]
    assert {e["type"] for e in detail[:-1]} == {"extra_forbidden"}
    assert detail[-1]["loc"] == ["body"]
    assert summary_count(detail[-1]) == 1000 - MAX_PROBLEMS_PER_FIELD


@pytest.mark.parametrize("where", ["top", "scope", "failure_context", "workload_context"])
def test_unknown_keys_are_bounded_in_every_object(client, provider, where):
    body = shapes.valid()
    target = body if where == "top" else body[where]
    target.update({f"x{i}": i for i in range(100)})
    detail = bounded(send(client, body), provider)
    loc = ["body"] if where == "top" else ["body", where]
    assert [e["loc"] for e in detail] == [[*loc, f"x{i}"] for i in range(16)] + [loc]
    assert summary_count(detail[-1]) == 100 - MAX_PROBLEMS_PER_FIELD


@pytest.mark.parametrize("bad", [MAX_PROBLEMS_PER_FIELD - 1, MAX_PROBLEMS_PER_FIELD])
def test_up_to_16_problems_in_a_field_are_all_listed_without_a_summary(client, provider, bad):
    body = shapes.valid()
    body["scope"]["ranks"] = [0] + [0] * bad
    detail = bounded(send(client, body), provider)
    assert [e["loc"] for e in detail] == [["body", "scope", "ranks", i] for i in range(1, bad + 1)]
    assert "too_many_errors" not in {e["type"] for e in detail}


def test_the_17th_problem_of_a_field_becomes_a_summary_of_one(client, provider):
    body = shapes.valid()
    body["scope"]["nodes"] = [""] * (MAX_PROBLEMS_PER_FIELD + 1)
    detail = bounded(send(client, body), provider)
    assert len(detail) == MAX_PROBLEMS_PER_FIELD + 1
    assert detail[-1] == {
        "loc": ["body", "scope", "nodes"],
        "msg": "1 more problems at this location were found and are not listed",
        "type": "too_many_errors",
    }


def test_every_field_at_once_lists_64_and_counts_every_other_problem(client, provider):
    body = shapes.every_field_at_once()
    detail = bounded(send(client, body), provider)
    assert len(detail) == MAX_PROBLEMS + 1
    assert detail[-1]["loc"] == ["body"]
    assert summary_count(detail[-1]) > 0
    # Fields and unknown keys of every object, each array item: every problem is listed or counted, none twice.
    scalars = 11  # schema_version, workload_id, the window's two bounds, ... continue_session: each wrong once
    unknown = sum(sum(1 for key in body[n] if key.startswith(f"{n}-")) for n in ("scope", "failure_context"))
    unknown += sum(1 for key in body["workload_context"] if key.startswith("workload_context-"))
    unknown += sum(1 for key in body if key.startswith("top-"))
    items = len(body["scope"]["nodes"]) + len(body["scope"]["ranks"])
    assert accounted(detail) == scalars + unknown + items
    # The first problems are those the request would get without any bound, in input order.
    assert detail[0] == {"loc": ["body", "schema_version"], "msg": "Input should be '0.1.0'", "type": "literal_error"}
    assert detail[2]["loc"] == ["body", "scope", "nodes", 0]


def test_unknown_keys_are_cut_in_loc_and_the_body_stays_small(client, provider):
    detail = bounded(send(client, shapes.long_unknown_keys()), provider)
    for entry in detail[:-1]:
        key = entry["loc"][-1]
        assert len(key) == MAX_LOC_CHARS and key.endswith("…")
        assert key.startswith(key[0]) and "\U0001f600" in key


def test_long_strings_are_refused_without_being_echoed(client, provider):
    response = send(client, shapes.long_strings())
    detail = bounded(response, provider)
    assert {tuple(e["loc"]) for e in detail} == {
        ("body", "workload_id"),
        ("body", "failure_context", "detection_signal"),
    }
    assert len(response.get_data()) < 1024


def test_a_duplicate_key_is_echoed_cut(client, provider):
    key = "k" * 100_000
    raw = b'{"' + key.encode() + b'": 1, "' + key.encode() + b'": 2}'
    (entry,) = bounded(send(client, raw), provider)
    assert entry["type"] == "json_invalid"
    assert entry["msg"].startswith("JSON object has a duplicate key 'kkk") and entry["msg"].endswith("…")
    assert len(entry["msg"]) == MAX_MESSAGE_CHARS


@pytest.mark.parametrize("name", ["too-many-values", "too-many-members"])
def test_a_body_with_more_values_than_any_valid_request_is_refused_before_parsing(client, provider, name):
    (entry,) = bounded(send(client, shapes.shape_bytes(name)), provider)
    assert entry["loc"] == ["body"]
    assert entry["type"] == "too_many_values"


@pytest.mark.parametrize("depth", [1025, 100_000])
def test_deep_nesting_is_refused_as_too_many_containers(client, provider, depth):
    body = shapes.encode(shapes.valid()).replace(b'"ranks":[0,1]', b'"ranks":' + b"[" * depth + b"]" * depth)
    (entry,) = bounded(send(client, body), provider)
    assert entry["type"] == "too_many_values"


def test_nesting_below_the_container_bound_is_checked_field_by_field(client, provider):
    (entry,) = bounded(send(client, shapes.deep_nesting(900)), provider)
    assert entry == {
        "loc": ["body", "scope", "nodes", 0],
        "msg": "Input should be a valid string",
        "type": "string_type",
    }


def test_the_largest_valid_request_is_not_refused_by_the_value_bound(client, provider):
    body = shapes.valid()
    body["scope"]["nodes"] = [f"n{i}" for i in range(shapes.MAX_NODES)]
    body["scope"]["ranks"] = list(range(shapes.MAX_RANKS))
    response = send(client, body)
    assert response.status_code == 200, response.get_data(as_text=True)[:300]
    assert len(provider.calls) == 1


def test_commas_and_brackets_inside_strings_are_not_counted_as_values(client, provider):
    # Node names made of the characters the quick count sees: the exact count leaves strings out.
    body = shapes.valid()
    body["scope"]["nodes"] = [f'n{i}"' + ",[{:" * 60 for i in range(shapes.MAX_NODES)]
    body["workload_id"] = "w\\" + ",[{" * 80
    response = send(client, body)
    assert response.status_code == 200, response.get_data(as_text=True)[:300]
    assert provider.calls[0][1].scope.nodes[0].endswith(",[{:")


def test_the_longest_possible_422_stays_under_64_kib(client, provider):
    # 65 entries whose loc holds a key of 64 characters that JSON escapes at 12 bytes each (a surrogate pair).
    body = shapes.valid()
    for target in (body, body["scope"], body["failure_context"], body["workload_context"]):
        target.update({f"{i:02d}" + "\U0001f600" * 100: 0 for i in range(MAX_PROBLEMS_PER_FIELD + 1)})
    response = send(client, body)
    detail = bounded(response, provider)
    assert len(detail) == MAX_PROBLEMS + 1
    keys = [e["loc"][-1] for e in detail if e["type"] == "extra_forbidden"]
    assert len(keys) == MAX_PROBLEMS - 3  # beside the summaries of the first three objects
    assert all(len(key) == MAX_LOC_CHARS for key in keys)
    assert accounted(detail) == 4 * (MAX_PROBLEMS_PER_FIELD + 1)
    assert len(response.get_data()) < MAX_BODY
