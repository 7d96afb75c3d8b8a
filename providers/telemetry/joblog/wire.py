"""A node's parsed job log (`NodeLog`), what was read of it (`NodeRead`) and a read's plan as JSON values, and back.

A worker's scan process reads a share of a request's job logs and hands what it parsed to the worker (the
provider's `job_log_share.py`). What crosses is JSON, never a pickle: each record is a list of its fields in their
declared order, each field coded by its declared type, and a node's lines stand once in a table its records refer
to by place (a rank's last line is often a record's line too: the two, equal, are decoded as one object). The
coding is derived from the records' own annotations when this module is imported, from a closed set of types: a
record given a field of another type fails here, at import, not in a request. Decoding refuses anything but what
encoding gives (`ValueError`): a wrong count of fields, a wrong type, a line's place outside the table, an unknown
enum value or CUDA error row.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import os
import re
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from providers.telemetry.joblog.cuda_errors import BY_ID, CudaErrorKind
from providers.telemetry.joblog.files import (
    MAX_NODE_BYTES,
    Bytes,
    JobLogPlan,
    LogFile,
    NodeRead,
    parse_file_name,
)
from providers.telemetry.joblog.nodes import is_safe_component
from providers.telemetry.joblog.records import (
    CudaError,
    DesyncReport,
    ElasticFailure,
    ExceptionKind,
    GroupRank,
    LogLine,
    NcclNetworkError,
    NetworkKind,
    NodeLog,
    PythonTraceback,
    RankSighting,
    SignalHit,
    WatchdogTimeout,
    WorkProgress,
)

#: a coder's context: encoding, the node's lines met so far (`_Lines`); decoding, the node's lines as decoded
Encode = Callable[[Any, Any], Any]
Decode = Callable[[Any, Any], Any]


class _Lines:
    """The lines of one node's log as they are encoded: each distinct line once, in a table, referred to by its place
    (a rank's last line is often a record's line too)."""

    def __init__(self) -> None:
        self.places: dict[tuple[int, str, datetime | None], int] = {}
        self.rows: list[list[Any]] = []

    def place(self, line: LogLine) -> int:
        key = (line.number, line.text, line.observed_at)
        place = self.places.get(key)
        if place is None:
            place = self.places[key] = len(self.rows)
            self.rows.append(_LINE_ROW[0](line, self))
        return place


def _same(value: Any, ctx: Any) -> Any:
    return value


def _exact(kind: type) -> Decode:
    def decode(value: Any, ctx: Any) -> Any:
        if type(value) is not kind:  # a bool is not an int here, nor an int a float
            raise ValueError(f"expected {kind.__name__}, got {type(value).__name__}")
        return value

    return decode


def _encode_time(value: datetime, ctx: Any) -> str:
    return value.isoformat()


@functools.lru_cache(maxsize=4096)
def _time(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        raise ValueError("a time without a zone")
    return moment


def _decode_time(value: Any, ctx: Any) -> datetime:
    if type(value) is not str:
        raise ValueError(f"expected a time, got {type(value).__name__}")
    return _time(value)


def _enum(kind: type[enum.Enum]) -> tuple[Encode, Decode]:
    def decode(value: Any, ctx: Any) -> Any:
        if type(value) is not str:
            raise ValueError(f"expected a {kind.__name__}, got {type(value).__name__}")
        return kind(value)  # ValueError for a value it does not have

    return (lambda member, ctx: member.value), decode


def _cuda_kind(value: Any, ctx: Any) -> CudaErrorKind:
    if type(value) is not str or value not in BY_ID:
        raise ValueError("not a CUDA error row of the table")
    return BY_ID[value]


def _line_place(line: LogLine, ctx: _Lines) -> int:
    return ctx.place(line)


def _line_at(value: Any, ctx: list[LogLine]) -> LogLine:
    if type(value) is not int or not 0 <= value < len(ctx):
        raise ValueError("not the place of one of the node's lines")
    return ctx[value]


_SCALARS: dict[str, tuple[Encode, Decode]] = {
    "str": (_same, _exact(str)),
    "int": (_same, _exact(int)),
    "bool": (_same, _exact(bool)),
    "datetime": (_encode_time, _decode_time),
    "ExceptionKind": _enum(ExceptionKind),
    "NetworkKind": _enum(NetworkKind),
    "CudaErrorKind": (lambda kind, ctx: kind.runtime_name, _cuda_kind),
}
#: the records in an order where each record's field types are coded before it
_RECORDS: tuple[type, ...] = (
    GroupRank, RankSighting, WatchdogTimeout, WorkProgress, DesyncReport, PythonTraceback, ElasticFailure,
    NcclNetworkError, CudaError, SignalHit, NodeLog, NodeRead,
)  # fmt: skip
#: a `LogLine` field holds the line's place in the node's table (`_Lines`)
_CODERS: dict[str, tuple[Encode, Decode]] = {**_SCALARS, "LogLine": (_line_place, _line_at)}
_TUPLE = re.compile(r"tuple\[(\w+), \.\.\.\]")
_DICT = re.compile(r"dict\[int, (\w+)\]")
_INT = _exact(int)


def _coder(annotation: str) -> tuple[Encode, Decode]:
    """The coding of a field declared `annotation`; KeyError for a type this module does not code."""
    if annotation in _CODERS:
        return _CODERS[annotation]
    if annotation.endswith(" | None"):
        encode, decode = _coder(annotation[: -len(" | None")])
        return (
            lambda value, ctx: None if value is None else encode(value, ctx),
            lambda value, ctx: None if value is None else decode(value, ctx),
        )
    if m := _TUPLE.fullmatch(annotation):
        encode, decode = _coder(m[1])
        return (
            lambda values, ctx: [encode(v, ctx) for v in values],
            lambda values, ctx: tuple([decode(v, ctx) for v in _list(values)]),
        )
    if m := _DICT.fullmatch(annotation):
        encode, decode = _coder(m[1])
        return (
            lambda items, ctx: [[key, encode(v, ctx)] for key, v in items.items()],
            lambda pairs, ctx: {_INT(key, ctx): decode(v, ctx) for key, v in (_pair(p) for p in _list(pairs))},
        )
    raise KeyError(annotation)


def _list(value: Any) -> list[Any]:
    if type(value) is not list:
        raise ValueError(f"expected a list, got {type(value).__name__}")
    return value


def _pair(value: Any) -> list[Any]:
    if len(_list(value)) != 2:
        raise ValueError("expected a pair")
    return value


#: fields of these types are checked in place, without a call each (most of a record's fields)
_PLAIN = {"str": str, "int": int, "bool": bool, "str | None": str, "int | None": int}


def _record(kind: type) -> tuple[Encode, Decode]:
    fields = dataclasses.fields(kind)
    names = [f.name for f in fields]
    types = [str(f.type) for f in fields]
    coders = [_coder(t) for t in types]
    encoders, decoders = [encode for encode, _ in coders], [decode for _, decode in coders]
    return _encoder(names, types, encoders), _decoder(kind, names, types, decoders)


def _written(body: list[str], env: dict[str, Any]) -> Callable[[Any, Any], Any]:
    """The function whose text `body` is, made from a record's own declaration (never from a message)."""
    exec("\n".join(body), env)  # noqa: S102 - a record's declaration written out once, at import
    return env["code"]  # type: ignore[no-any-return]


def _parts(annotation: str) -> tuple[str, bool, bool]:
    """(the coded type, whether the field is optional, whether it is a tuple of them) of a field's declaration."""
    optional = annotation.endswith(" | None")
    inner = annotation[: -len(" | None")] if optional else annotation
    m = _TUPLE.fullmatch(inner)
    return (m[1], optional, True) if m else (inner, optional, False)


def _encoder(names: list[str], types: list[str], encoders: list[Encode]) -> Encode:
    """A record's encoding written out for its fields: the list of its fields' values, each coded by its coder; a
    line, an optional value and a tuple's items coded in place (`_parts`), without a call of a coder each."""
    env: dict[str, Any] = {}
    body = ["def code(obj, ctx):"]
    values = []
    for i, (name, annotation, encode) in enumerate(zip(names, types, encoders, strict=True)):
        inner, optional, many = _parts(annotation)
        base = _coder(inner)[0]
        if many and optional:
            env[f"e{i}"] = encode
            values.append(f"e{i}(obj.{name}, ctx)")
            continue
        if base is _same:  # a str, an int or a bool, as it is
            values.append(f"list(obj.{name})" if many else f"obj.{name}")
            continue
        if inner == "LogLine":
            item = "ctx.place({})"
        elif inner == "datetime":
            item = "{}.isoformat()"
        else:
            env[f"e{i}"] = base
            item = f"e{i}({{}}, ctx)"
        if many:
            values.append(f"[{item.format('v')} for v in obj.{name}]")
        elif optional:
            body.append(f"    v{i} = obj.{name}")
            values.append(f"None if v{i} is None else {item.format(f'v{i}')}")
        else:
            values.append(item.format(f"obj.{name}"))
    body.append(f"    return [{', '.join(values)}]")
    return _written(body, env)


def _refused(kind: str, name: str, value: Any) -> None:
    raise ValueError(f"a {kind}'s field {name} holds a {type(value).__name__}")


def _decoder(kind: type, names: list[str], types: list[str], decoders: list[Decode]) -> Decode:
    """`kind`'s decoding written out for its fields, as `dataclasses` writes a record's `__init__`: the list's
    length, each plain field's type checked in place (a bool is not an int, nor an int a float; None only where the
    field is optional), each line's place looked up and each tuple's items and optional value decoded in place
    (`_parts`), each other field decoded by its coder, then the record. The text is made here from the record's own
    declaration (field numbers, type names, the messages' names by `repr`), never from a message."""
    count = len(names)
    fields = [f"f{i}" for i in range(count)]
    env: dict[str, Any] = {"kind": kind, "_refused": _refused, "_line_at": _line_at}
    body = [
        "def code(value, ctx):",
        f"    if type(value) is not list or len(value) != {count}:",
        f"        raise ValueError({f'a {kind.__name__} is a list of {count} fields'!r})",
        f"    {', '.join(fields)}, = value",
    ]
    args = []
    for i, (name, annotation, decode) in enumerate(zip(names, types, decoders, strict=True)):
        if annotation in _PLAIN:
            check = f"type(f{i}) is not {_PLAIN[annotation].__name__}"
            if annotation.endswith(" | None"):
                check += f" and f{i} is not None"
            body += [f"    if {check}:", f"        _refused({kind.__name__!r}, {name!r}, f{i})"]
            args.append(f"f{i}")
            continue
        inner, optional, many = _parts(annotation)
        if many and optional:
            env[f"d{i}"] = decode
            args.append(f"d{i}(f{i}, ctx)")
            continue
        if inner == "LogLine":  # `_line_at`'s check in place, `_line_at` itself refusing any other value
            item = "(ctx[{0}] if type({0}) is int and 0 <= {0} < len(ctx) else _line_at({0}, ctx))"
        else:
            env[f"d{i}"] = _coder(inner)[1]
            item = f"d{i}({{0}}, ctx)"
        if many:
            body += [f"    if type(f{i}) is not list:", f"        _refused({kind.__name__!r}, {name!r}, f{i})"]
            args.append(f"tuple([{item.format('v')} for v in f{i}])")
        elif optional:
            args.append(f"None if f{i} is None else {item.format(f'f{i}')}")
        else:
            args.append(item.format(f"f{i}"))
    body.append(f"    return kind({', '.join(args)})")
    return _written(body, env)


_LINE_ROW = _record(LogLine)  # a row of a node's line table
for _kind in _RECORDS:
    _CODERS[_kind.__name__] = _record(_kind)


def node_log_to_wire(log: NodeLog) -> list[Any]:
    """`log` as JSON values: its lines' table, then its fields."""
    lines = _Lines()
    fields = _CODERS["NodeLog"][0](log, lines)
    return [lines.rows, fields]


def node_log_from_wire(value: Any) -> NodeLog:
    """The `NodeLog` `node_log_to_wire` gave; ValueError (or TypeError) for anything else."""
    rows, fields = _pair(value)
    lines = [_LINE_ROW[1](row, None) for row in _list(rows)]
    return _CODERS["NodeLog"][1](fields, lines)  # type: ignore[no-any-return]


def node_read_to_wire(read: NodeRead) -> list[Any]:
    """`read` as JSON values."""
    return _CODERS["NodeRead"][0](read, None)  # type: ignore[no-any-return]


def node_read_from_wire(value: Any) -> NodeRead:
    """The `NodeRead` `node_read_to_wire` gave; ValueError (or TypeError) for anything else."""
    return _CODERS["NodeRead"][1](value, None)  # type: ignore[no-any-return]


def plan_to_wire(plan: JobLogPlan) -> dict[str, Any]:
    """What another reader needs of a found plan, as JSON values: the attempt's folder, the nodes with files in
    order, each node's file names (newest first) and byte share, and the node bound."""
    return {
        "folder": plan.folder,
        "nodes": [[node, plan.shares[node], [f.order[1] for f in plan.groups[node]]] for node in plan.order],
        "node_bytes": plan.node_bytes,
    }


def plan_from_wire(root: Path, value: Any, scope: Sequence[str], budget: Bytes, reserve: Bytes) -> JobLogPlan:
    """The plan `plan_to_wire` gave, its bytes taken from `budget` and `reserve`; ValueError for anything else (a
    folder or file name that is not the job-log layout's, a node not of `scope`, a share out of bounds)."""
    try:
        folder, entries, node_bytes = value["folder"], value["nodes"], value["node_bytes"]
        parts = folder.split("/")
        if len(parts) != 2 or not all(is_safe_component(p) for p in parts) or not parts[1].isdigit():
            raise ValueError("not an attempt's folder")
        if type(node_bytes) is not int or not 1 <= node_bytes <= MAX_NODE_BYTES:
            raise ValueError("a node bound out of bounds")
        wanted = set(scope)
        attempt_dir = root / folder
        where = str(attempt_dir)
        groups: dict[str, list[LogFile]] = {}
        shares: dict[str, int] = {}
        for node, share, names in entries:
            if node not in wanted or node in groups or type(share) is not int or not 0 <= share <= node_bytes:
                raise ValueError("a node or share the plan cannot hold")
            files = []
            for name in names:
                parsed = parse_file_name(name) if type(name) is str and is_safe_component(name) else None
                if parsed is None:
                    raise ValueError("not a job-log file name")
                files.append(LogFile(os.path.join(where, name), f"{folder}/{name}", parsed[2], (parsed[1], name)))
            if not files:
                raise ValueError("a node without files")
            groups[node], shares[node] = files, share
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a job-log plan: {exc!r}") from exc
    order = tuple(groups)
    scope = tuple(scope)
    return JobLogPlan(
        True, scope, (), (), folder, attempt_dir, groups, order, shares, node_bytes, budget, reserve
    )  # fmt: skip


__all__ = [
    "node_log_from_wire", "node_log_to_wire", "node_read_from_wire", "node_read_to_wire", "plan_from_wire",
    "plan_to_wire",
]  # fmt: skip
