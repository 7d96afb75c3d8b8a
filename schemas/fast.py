"""A fast validity pre-check of a parsed request: the loaded request when every rule holds, else None.

`fast_load_text(raw, marks)` reads the body with orjson and answers only for requests that are certainly valid (no
duplicate key either); `fast_load(payload)` checks an already parsed payload the same way. Both answer only for
requests that are certainly valid, by the same rules as
`AttributionRequestSchema.load` (each scalar goes through the very field that marshmallow would call) and with the
same result; long node and rank lists are checked in bulk passes instead of item by item. When anything is off, or
merely not certain (a non-ASCII node name, say), it answers None and the caller loads the payload through the
schema, which finds and reports every problem: every 422 comes from that path.
"""

from __future__ import annotations

import re
from array import array
from itertools import islice
from operator import lt
from typing import Any

import orjson
from marshmallow import ValidationError

from schemas.request import AttributionRequestSchema

_request = AttributionRequestSchema()
_TOP = _request.fields
_SCOPE = _TOP["scope"].schema.fields
_FAILURE = _TOP["failure_context"].schema.fields
_WORKLOAD = _TOP["workload_context"].schema.fields

_TOP_REQUIRED = frozenset(name for name, f in _TOP.items() if f.required)
_TOP_KEYS = frozenset(_TOP)
_TOP_SCALARS = ("schema_version", "workload_id", "timeout_ms", "phase", "continue_session")
_SCOPE_KEYS = frozenset(_SCOPE)
_FAILURE_KEYS = frozenset(_FAILURE)
_WORKLOAD_KEYS = frozenset(_WORKLOAD)
assert _TOP_REQUIRED | {"continue_session"} == _TOP_KEYS
assert all(f.required for f in _FAILURE.values()) and all(f.required for f in _WORKLOAD.values())

_NODE = _SCOPE["nodes"].inner
_RANK = _SCOPE["ranks"].inner
assert _RANK.minimum >= 0  # `_increasing_ranks` relies on it
#: printable ASCII (space to tilde): a name of these alone, without surrounding space, is canonical
_PRINTABLE = bytes(range(0x20, 0x7F))


class _NotCertain(Exception):
    pass


def _scalar(fields: dict[str, Any], name: str, value: Any) -> Any:
    if value is None:
        raise _NotCertain
    return fields[name]._deserialize(value, name, None)


def _nodes(values: Any) -> list[str]:
    """Unique printable-ASCII names without surrounding space, within the length bounds, in bulk passes."""
    if type(values) is not list or len(values) > _SCOPE["nodes"].max_items:
        raise _NotCertain
    if not values:
        return []
    if set(map(type, values)) != {str}:
        raise _NotCertain
    lengths = list(map(len, values))
    if min(lengths) < _NODE.min_length or max(lengths) > _NODE.max_length:
        raise _NotCertain
    joined = "\n".join(values)
    if not joined.isascii():
        raise _NotCertain
    encoded = joined.encode("ascii")
    # Deleting every printable character leaves only the joining newlines: no name holds a control character
    # (a newline of its own included).
    if encoded.translate(None, _PRINTABLE) != b"\n" * (len(values) - 1):
        raise _NotCertain
    # A space at either end of a name (found at once when no name holds a space at all).
    if b" " in encoded and (joined[0] == " " or joined[-1] == " " or " \n" in joined or "\n " in joined):
        raise _NotCertain
    if len(set(values)) != len(values):
        raise _NotCertain
    return list(values)


def _increasing_ranks(values: list[Any]) -> bool:
    """True for a strictly increasing list of JSON integers within the bounds (how ranks usually come).

    Strictly increasing means unique, and puts the bounds at the ends. `array('q')` refuses floats, strings, None
    and integers past 64 bits, not bools; a bool equals 0 or 1, so in an increasing list from 0 up it can only be
    first or second.
    """
    try:
        if not all(map(lt, values, islice(values, 1, None))):
            return False
        array("q", values)
    except (TypeError, OverflowError):
        return False
    return (
        values[0] >= _RANK.minimum and values[-1] <= _RANK.maximum and all(type(value) is int for value in values[:2])
    )


#: `[0,1,2,...]` as orjson writes it, as many as a scope may hold ranks (about 1.8 MB)
_COUNTING = orjson.dumps(list(range(_SCOPE["ranks"].max_items)))
assert _RANK.maximum >= _SCOPE["ranks"].max_items - 1


def _counting(values: list[Any]) -> bool:
    """True when `values` is exactly 0, 1, ..., n - 1 as JSON integers (how a whole job's ranks come).

    orjson writes an integer as its digits and a bool, a float or anything else otherwise, so the list's text is a
    prefix of `_COUNTING` that ends before a separator only for those integers.
    """
    try:
        text = orjson.dumps(values)
    except orjson.JSONEncodeError:  # an integer past 64 bits
        return False
    end = len(text) - 1  # without the closing bracket
    return text[:end] == _COUNTING[:end] and _COUNTING[end : end + 1] in (b",", b"]")


def _ranks(values: Any) -> list[int]:
    """Unique JSON integers (never a bool or a float) within the bounds, in bulk passes."""
    if type(values) is not list or len(values) > _SCOPE["ranks"].max_items:
        raise _NotCertain
    if not values:
        return []
    if _counting(values) or _increasing_ranks(values):
        return list(values)
    if set(map(type, values)) != {int}:
        raise _NotCertain
    if min(values) < _RANK.minimum or max(values) > _RANK.maximum or len(set(values)) != len(values):
        raise _NotCertain
    return list(values)


def _object(value: Any, keys: frozenset[str], required: frozenset[str] | None = None) -> dict[str, Any]:
    if (
        type(value) is not dict
        or not value.keys() <= keys
        or not (keys if required is None else required) <= value.keys()
    ):
        raise _NotCertain
    return value


def _load(payload: Any) -> dict[str, Any]:
    top = _object(payload, _TOP_KEYS, _TOP_REQUIRED)
    data: dict[str, Any] = {name: _scalar(_TOP, name, top[name]) for name in _TOP_SCALARS if name in top}
    if (data["phase"] == "slow") != ("continue_session" in data):
        raise _NotCertain  # the session rule: required with `slow`, refused with `fast`

    scope_in = _object(top["scope"], _SCOPE_KEYS, frozenset({"nodes", "ranks"}))
    scope: dict[str, Any] = {"nodes": _nodes(scope_in["nodes"]), "ranks": _ranks(scope_in["ranks"])}
    for name in ("start_time", "end_time"):
        if name in scope_in:
            scope[name] = _scalar(_SCOPE, name, scope_in[name])
    if "start_time" in scope and "end_time" in scope and not scope["start_time"] < scope["end_time"]:
        raise _NotCertain
    data["scope"] = scope

    failure = _object(top["failure_context"], _FAILURE_KEYS)
    data["failure_context"] = {name: _scalar(_FAILURE, name, failure[name]) for name in _FAILURE_KEYS}
    workload = _object(top["workload_context"], _WORKLOAD_KEYS)
    data["workload_context"] = {name: _scalar(_WORKLOAD, name, workload[name]) for name in _WORKLOAD_KEYS}
    return data


def fast_load(payload: Any) -> dict[str, Any] | None:
    """What `AttributionRequestSchema().load(payload)` returns, when the payload is certainly valid; else None."""
    try:
        return _load(payload)
    except (_NotCertain, ValidationError):
        return None


def _objects(payload: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    """The four objects of a payload that `fast_load` accepted: the top, `scope`, `failure_context`,
    `workload_context` (it holds no other)."""
    return (payload, payload["scope"], payload["failure_context"], payload["workload_context"])


def object_keys(payload: dict[str, Any]) -> int:
    """How many object keys a payload that `fast_load` accepted holds."""
    return sum(map(len, _objects(payload)))


def string_colons(payload: dict[str, Any]) -> int:
    """How many `:` the strings of a payload that `fast_load` accepted hold (its keys, the schema's names, hold none).

    The values of its four objects (`_objects`) are scalars, these objects, or the two scope lists: `nodes` all
    strings, `ranks` all integers.
    """
    count = "".join(payload["scope"]["nodes"]).count(":")
    for part in _objects(payload):
        for value in part.values():
            if type(value) is str:
                count += value.count(":")
    return count


def fast_load_text(raw: bytes, marks: bytes) -> dict[str, Any] | None:
    """What `fast_load` gives for the JSON text `raw` as orjson reads it, when it holds no duplicate key; else None
    (orjson refuses it, it is not an object, or a key repeats). `marks`: the body's `,` `:` `[` `{` and
    backslashes, in order (app/body.py `structure_marks`)."""
    try:
        payload = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if type(payload) is not dict:
        return None
    data = fast_load(payload)
    if data is None or has_duplicate_keys(raw, marks, object_keys(payload), string_colons(payload)):
        return None
    return data


# Every JSON string, a key when a colon follows it. Outside strings valid JSON has no quote, so scanning from the
# start finds each string whole: a quote inside a string is always escaped.
_STRING_OR_KEY = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"([ \t\n\r]*:)?')


def key_count(raw: bytes) -> int:
    """How many object keys the valid JSON text `raw` holds, duplicates included."""
    marks = _STRING_OR_KEY.findall(raw)
    return len(marks) - marks.count(b"")


def has_duplicate_keys(raw: bytes, marks: bytes, parsed_keys: int, string_colons: int) -> bool:
    """True when the JSON text `raw` holds more object keys than the `parsed_keys` its parsed objects kept.

    orjson keeps the last of two equal keys without saying so. Each colon of the text is either a key's or inside a
    string, so without escapes the text's colons are the keys plus the colons of the parsed strings
    (`string_colons`): a dropped duplicate adds at least its own colon. An escape (`\\u003a` is a colon) makes that
    count unsure: the text's keys are then counted one by one.
    """
    if b"\\" in marks:
        return key_count(raw) != parsed_keys
    return marks.count(b":") != parsed_keys + string_colons
