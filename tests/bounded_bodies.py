"""Request bodies that break a rule in as many places as the body limit (4 MiB by default) allows.

Shared by tests/robustness/test_bounded_validation.py, tests/hostile/test_bounded_422.py and
bench/validation_memory.py: each is a 422 whose answer must stay small however many problems the body holds.
"""

from __future__ import annotations

import json
from typing import Any

LIMIT = 4 * 1024 * 1024  # ATTRIBUTION_MAX_BODY_BYTES by default
MAX_NODES = 16384
MAX_RANKS = 262144


def valid() -> dict[str, Any]:
    return {
        "schema_version": "0.1.0",
        "workload_id": "12345",
        "scope": {"nodes": ["worker-01", "worker-02"], "ranks": [0, 1]},
        "failure_context": {"detected_at": "2026-09-09T12:00:00Z", "detection_signal": "application_error"},
        "timeout_ms": 10000,
        "workload_context": {"workflow_id": "training-example", "attempt_index": 0},
        "phase": "fast",
    }


def encode(body: dict[str, Any]) -> bytes:
    data = json.dumps(body, separators=(",", ":")).encode()
    assert len(data) <= LIMIT, len(data)
    return data


def duplicated_ranks() -> dict[str, Any]:
    """The one value repeated at the bound: 262143 duplicates."""
    body = valid()
    body["scope"]["ranks"] = [7] * MAX_RANKS
    return body


def ranks_of_the_wrong_type() -> dict[str, Any]:
    body = valid()
    body["scope"]["ranks"] = ["r"] * MAX_RANKS
    return body


def ranks_out_of_range() -> dict[str, Any]:
    body = valid()
    body["scope"]["ranks"] = [-i - 1 for i in range(MAX_RANKS)]
    return body


def bad_node_names() -> dict[str, Any]:
    """Every node name of the bound too long to be valid, each one distinct."""
    body = valid()
    body["scope"]["nodes"] = [f" {i:06d}" + "n" * 200 for i in range(MAX_NODES)]
    return body


def many_unknown_keys(count: int = 1000) -> dict[str, Any]:
    """As many unknown keys as the member bound lets through to validation."""
    body = valid()
    body.update({f"k{i}": 0 for i in range(count)})
    return body


def long_unknown_keys() -> dict[str, Any]:
    """Twenty unknown keys of 16384 characters each, non-ASCII (escaped six bytes a character in JSON)."""
    body = valid()
    body.update({f"{i}" + "\U0001f600" * 16384: 0 for i in range(20)})
    return body


def long_strings() -> dict[str, Any]:
    body = valid()
    body["workload_id"] = "w" * (LIMIT // 2)
    body["failure_context"]["detection_signal"] = "S" * (LIMIT // 4)
    return body


def deep_nesting(depth: int = 900) -> dict[str, Any]:
    body = valid()
    nested: Any = []
    for _ in range(depth):
        nested = [nested]
    body["scope"]["nodes"] = nested
    return body


def every_field_at_once() -> dict[str, Any]:
    """Every field wrong, the arrays wrong item by item, unknown keys in every object."""
    body: dict[str, Any] = {
        "schema_version": "9.9.9",
        "workload_id": " x",
        "scope": {
            "nodes": [f" n{i}" for i in range(MAX_NODES)],
            "ranks": [-1] * 200000,
            "start_time": "2026-09-09T12:00:00",
            "end_time": "yesterday",
        },
        "failure_context": {"detected_at": 1, "detection_signal": "Bad Signal"},
        "timeout_ms": 0,
        "workload_context": {"workflow_id": "", "attempt_index": -1},
        "phase": "later",
        "continue_session": "\u00e9",
    }
    for name in ("scope", "failure_context", "workload_context"):
        body[name].update({f"{name}-{i}": i for i in range(200)})
    body.update({f"top-{i}": None for i in range(300)})
    return body


def too_many_members() -> dict[str, Any]:
    """Unknown keys of one character's worth of value, as many as fit: refused before the body is parsed."""
    return many_unknown_keys(270000)


def too_many_values() -> bytes:
    """Empty objects in an unknown field, as many as fit: refused before the body is parsed."""
    head = encode(valid())[:-1] + b',"padding":['
    count = (LIMIT - len(head) - 2) // 3
    return head + b",".join([b"{}"] * count) + b"]}"


SHAPES = {
    "duplicated-ranks": duplicated_ranks,
    "ranks-of-the-wrong-type": ranks_of_the_wrong_type,
    "ranks-out-of-range": ranks_out_of_range,
    "bad-node-names": bad_node_names,
    "many-unknown-keys": many_unknown_keys,
    "long-unknown-keys": long_unknown_keys,
    "long-strings": long_strings,
    "deep-nesting": deep_nesting,
    "every-field-at-once": every_field_at_once,
    "too-many-members": too_many_members,
}


def shape_bytes(name: str) -> bytes:
    return too_many_values() if name == "too-many-values" else encode(SHAPES[name]())


NAMES = [*SHAPES, "too-many-values"]
