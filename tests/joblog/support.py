"""Builders for the job-log tests: parsed tails, collector prefixes and job-log trees on disk."""

from __future__ import annotations

import gzip
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from providers.base import Deadline
from providers.telemetry.joblog.lines import parse_lines
from providers.telemetry.joblog.nodes import exact_resolver
from providers.telemetry.joblog.records import NodeLog


def loki_stamp(ns: int) -> str:
    """Loki's time `ns` as the Loki source writes it in front of a line (`loki._joined`), from the calendar: RFC 3339,
    UTC, the microseconds cut."""
    seconds, micro = divmod(ns // 1000, 1_000_000)
    return f"{datetime.fromtimestamp(seconds, tz=UTC):%Y-%m-%dT%H:%M:%S}.{micro:06d}Z"


#: a failure time for scenarios that need collector timestamps
T0 = datetime(2026, 9, 9, 11, 58, 0, 414640, tzinfo=UTC)


def parse(lines: Iterable[str], node: str = "node-a", nodes: Sequence[str] | None = None) -> NodeLog:
    """The parsed tail of one node's log, with `nodes` (default: just `node`) as the scope."""
    return parse_lines(node, list(lines), exact_resolver(nodes or (node,)))


def logs(by_node: Mapping[str, Iterable[str]], scope: Sequence[str] | None = None) -> dict[str, NodeLog]:
    """Parsed tails of several nodes of one scope."""
    nodes = list(scope or by_node)
    return {node: parse(lines, node, nodes) for node, lines in by_node.items()}


def cri(line: str, at: datetime = T0, stream: str = "stderr", host: str | None = None) -> str:
    """`line` as a Kubernetes CRI log file holds it (optionally with the host a collector inserts).

    The time has nanoseconds, as CRI writes it; they are cut to microseconds when read.
    """
    stamp = at.strftime("%Y-%m-%dT%H:%M:%S.%f") + "780Z"
    return f"{stamp} {host + ' ' if host else ''}{stream} F {line}"


def later(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def deadline(ms: int = 30_000) -> Deadline:
    return Deadline.after_ms(ms)


def write_tree(root: Path, files: Mapping[str, bytes | str | Iterable[str]], workload: str = "job-1", attempt: int = 0
               ) -> Path:
    """Write `<root>/<workload>/<attempt>/<name>` for each name; `.gz` names are compressed; returns the folder."""
    folder = root / workload / str(attempt)
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        if isinstance(content, str):
            data = content.encode()
        elif isinstance(content, bytes):
            data = content
        else:
            data = "".join(line + "\n" for line in content).encode()
        if name.endswith(".gz"):
            data = gzip.compress(data, mtime=0)
        (folder / name).write_bytes(data)
    return folder


def fixture_groups() -> list[tuple[str, tuple[str, ...]]]:
    """Every group of real lines of `fixtures.py` by its name, a single line as a group of one."""
    from tests.joblog import fixtures as fx

    out = []
    for name in sorted(vars(fx)):
        value = getattr(fx, name)
        if name.isupper() and isinstance(value, str):
            out.append((name, (value,)))
        elif name.isupper() and isinstance(value, tuple) and all(isinstance(v, str) for v in value):
            out.append((name, value))
    return out
