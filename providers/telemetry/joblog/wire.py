"""A node's parsed job log (`NodeLog`) and what was read of it (`NodeRead`) as JSON values, and back.

A worker's scan process reads a share of a request's job logs and hands what it parsed to the worker (the
provider's `job_log_share.py`). What crosses is JSON, never a pickle: each record is a list of its fields in their
declared order, each field coded by its declared type. The coding is derived from the records' own annotations when
this module is imported, from a closed set of types: a record given a field of another type fails here, at import,
not in a request. Decoding refuses anything but what encoding gives (`ValueError`): a wrong count of fields, a wrong
type, an unknown enum value or CUDA error row.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from providers.telemetry.joblog.cuda_errors import BY_ID, CudaErrorKind
from providers.telemetry.joblog.files import NodeRead
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

Encode = Callable[[Any], Any]
Decode = Callable[[Any], Any]


def _same(value: Any) -> Any:
    return value


def _exact(kind: type) -> Decode:
    def decode(value: Any) -> Any:
        if type(value) is not kind:  # a bool is not an int here, nor an int a float
            raise ValueError(f"expected {kind.__name__}, got {type(value).__name__}")
        return value

    return decode


def _encode_time(value: datetime) -> str:
    return value.isoformat()


@functools.lru_cache(maxsize=4096)
def _time(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        raise ValueError("a time without a zone")
    return moment


def _decode_time(value: Any) -> datetime:
    if type(value) is not str:
        raise ValueError(f"expected a time, got {type(value).__name__}")
    return _time(value)


def _enum(kind: type[enum.Enum]) -> tuple[Encode, Decode]:
    def decode(value: Any) -> Any:
        if type(value) is not str:
            raise ValueError(f"expected a {kind.__name__}, got {type(value).__name__}")
        return kind(value)  # ValueError for a value it does not have

    return (lambda member: member.value), decode


def _cuda_kind(value: Any) -> CudaErrorKind:
    if type(value) is not str or value not in BY_ID:
        raise ValueError("not a CUDA error row of the table")
    return BY_ID[value]


_SCALARS: dict[str, tuple[Encode, Decode]] = {
    "str": (_same, _exact(str)),
    "int": (_same, _exact(int)),
    "bool": (_same, _exact(bool)),
    "datetime": (_encode_time, _decode_time),
    "ExceptionKind": _enum(ExceptionKind),
    "NetworkKind": _enum(NetworkKind),
    "CudaErrorKind": (lambda kind: kind.runtime_name, _cuda_kind),
}
_RECORDS: tuple[type, ...] = (
    LogLine, GroupRank, RankSighting, WatchdogTimeout, WorkProgress, DesyncReport, PythonTraceback, ElasticFailure,
    NcclNetworkError, CudaError, SignalHit, NodeLog, NodeRead,
)  # fmt: skip
_CODERS: dict[str, tuple[Encode, Decode]] = dict(_SCALARS)
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
            lambda value: None if value is None else encode(value),
            lambda value: None if value is None else decode(value),
        )
    if m := _TUPLE.fullmatch(annotation):
        encode, decode = _coder(m[1])
        return (
            lambda values: [encode(v) for v in values],
            lambda values: tuple(decode(v) for v in _list(values)),
        )
    if m := _DICT.fullmatch(annotation):
        encode, decode = _coder(m[1])
        return (
            lambda items: [[key, encode(v)] for key, v in items.items()],
            lambda pairs: {_INT(key): decode(v) for key, v in (_pair(p) for p in _list(pairs))},
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


def _record(kind: type) -> tuple[Encode, Decode]:
    fields = dataclasses.fields(kind)
    names = [f.name for f in fields]
    coders = [_coder(str(f.type)) for f in fields]
    encoders = [(name, None if encode is _same else encode) for name, (encode, _) in zip(names, coders, strict=True)]
    decoders = [decode for _, decode in coders]
    count = len(fields)

    def encode(obj: Any) -> list[Any]:
        return [getattr(obj, name) if e is None else e(getattr(obj, name)) for name, e in encoders]

    def decode(value: Any) -> Any:
        if len(_list(value)) != count:
            raise ValueError(f"a {kind.__name__} has {count} fields, not {len(value)}")
        return kind(*[d(v) for d, v in zip(decoders, value, strict=True)])

    return encode, decode


for _kind in _RECORDS:  # in an order where each record's field types are coded before it
    _CODERS[_kind.__name__] = _record(_kind)


def node_log_to_wire(log: NodeLog) -> list[Any]:
    """`log` as JSON values."""
    return _CODERS["NodeLog"][0](log)  # type: ignore[no-any-return]


def node_log_from_wire(value: Any) -> NodeLog:
    """The `NodeLog` `node_log_to_wire` gave; ValueError (or TypeError) for anything else."""
    return _CODERS["NodeLog"][1](value)  # type: ignore[no-any-return]


def node_read_to_wire(read: NodeRead) -> list[Any]:
    """`read` as JSON values."""
    return _CODERS["NodeRead"][0](read)  # type: ignore[no-any-return]


def node_read_from_wire(value: Any) -> NodeRead:
    """The `NodeRead` `node_read_to_wire` gave; ValueError (or TypeError) for anything else."""
    return _CODERS["NodeRead"][1](value)  # type: ignore[no-any-return]


__all__ = ["node_log_from_wire", "node_log_to_wire", "node_read_from_wire", "node_read_to_wire"]
