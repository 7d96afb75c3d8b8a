"""The collector: where sources put the timestamped lines of scope nodes; it assembles them into kernel records."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from providers.telemetry.identity import NodeNames
from providers.telemetry.kernel.parse import (
    DEFAULT_CONTEXT,
    ParsedLine,
    Record,
    TimeContext,
    extend_record,
    new_record,
    starts_record,
)
from providers.telemetry.window import Window

#: the syslog tag / APP-NAME of kernel lines; other programs' lines are never classified (anyone can `logger`
#: a fake "NVRM: Xid" line from user space)
KERNEL_TAG = "kernel"
#: a record holds one of these or it cannot be a GPU, NVSwitch or PCIe event; others are counted, not kept.
#: Every decode rule (decode.py) matches text holding one of them: Xid and the GPU messages `NVRM: ...`, NVSwitch
#: `SXid (PCI:...)`, PCIe AER `PCIe Bus Error: severity=...`, GSP RPC timeouts `... GSP!`; "Killed process " keeps
#: the OOM killer's line, which decodes to no event: job-log rules match a SIGKILLed rank's pid to it. The one list:
#: the byte prefilter the file source runs on a block before parsing (`sources/blocks.keyword_lines`) is built from
#: it; append here, nowhere else.
KEYWORDS = ("NVRM", "SXid", "PCIe Bus Error", "GSP", "Killed process ")


#: one search for any of KEYWORDS in a text
_KEYWORD = re.compile("|".join(re.escape(k) for k in KEYWORDS))


@dataclass
class Collector:
    """Receives lines of in-scope hosts from a source and keeps what attribution needs: coverage and records."""

    nodes: Iterable[str]  # or their NodeNames, already built
    window: Window
    zone: object = UTC  # a tzinfo: the zone of log formats that carry none
    lines_in_window: dict[str, int] = field(default_factory=dict)
    seen_before: set[str] = field(default_factory=set)
    seen_after: set[str] = field(default_factory=set)
    #: kernel records of each node (only those that can hold a GPU/NVSwitch/PCIe event), per origin in read order
    records: dict[str, list[Record]] = field(default_factory=dict)
    #: scope nodes with a log file that could not be read, and whether a combined (many-host) file failed
    unreadable_nodes: set[str] = field(default_factory=set)
    unreadable_combined: bool = False
    bytes_read: int = 0
    truncated: bool = False
    #: scope nodes whose logs the deadline came before: not read, so neither blamed nor cleared
    unread: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.names = self.nodes if isinstance(self.nodes, NodeNames) else NodeNames(self.nodes)
        self.nodes = self.names.nodes
        self.time_context = TimeContext(zone=self.zone, anchor=self.window.middle)  # type: ignore[arg-type]
        self._open: dict[tuple[str, str | None], Record | None] = {}

    def node_for(self, host: str | None) -> str | None:
        """The scope node a hostname names, or None (see identity.NodeNames for the rule)."""
        return self.names.node_for(host)

    def add(
        self, node: str, observed_at: datetime, message: str, raw: str, tag: str | None, origin: str | None = None
    ) -> None:
        """Take one line of the scope node `node` (any time; lines outside the window only show coverage)."""
        self.add_parsed(node, ParsedLine(observed_at, None, tag, message), raw, origin)

    def add_parsed(
        self, node: str, parsed: ParsedLine, raw: str, origin: str | None = None, reaches_back: bool = True
    ) -> None:
        """Take one parsed line; a line repeating the open record's kernel stamp continues that record.
        `reaches_back` False: a line before the window does not show the node's log reaching back before it."""
        key = (node, origin)
        current = self._open.get(key)
        if current is not None:
            if not starts_record(current, parsed):
                extend_record(current, parsed.message, raw)
                return
            del self._open[key]
            self._keep(node, current)
        observed_at = parsed.observed_at
        if observed_at < self.window.start:
            if reaches_back:
                self.seen_before.add(node)
            return
        if observed_at > self.window.end:
            self.seen_after.add(node)
            return
        self.lines_in_window[node] = self.lines_in_window.get(node, 0) + 1
        tag = parsed.tag
        if tag is not None and tag != KERNEL_TAG and tag.lower() != KERNEL_TAG:
            return
        self._open[key] = new_record(parsed, raw)

    def add_heads(self, node: str, before: int, inside: int, after: int) -> None:
        """Count lines of `node` that each start a record holding no keyword: `before`, `inside` and `after` the
        window. The same as feeding them one by one through add_parsed, for lines known not to continue a record."""
        if before:
            self.seen_before.add(node)
        if inside:
            self.lines_in_window[node] = self.lines_in_window.get(node, 0) + inside
        if after:
            self.seen_after.add(node)

    def open_record(self, node: str, origin: str | None = None) -> Record | None:
        """The record of `node` from `origin` that a next line may continue, or None."""
        return self._open.get((node, origin))

    def reopen(self, node: str, parsed: ParsedLine, raw: str, origin: str | None = None) -> None:
        """Open the record a line inside the window starts, the line already counted (add_heads) and no record of
        `origin` open: what add_parsed does with it once counted (a source that left it unparsed until a next line
        could continue it)."""
        tag = parsed.tag
        if tag is not None and tag != KERNEL_TAG and tag.lower() != KERNEL_TAG:
            return
        self._open[(node, origin)] = new_record(parsed, raw)

    def add_continuation(self, node: str, text: str, origin: str | None = None) -> None:
        """Take a line with no stamp that continues the previous line of the same origin (dmesg, journalctl)."""
        current = self._open.get((node, origin))
        if current is not None:
            extend_record(current, text.strip(), text)

    def end_origin(self, node: str, origin: str | None = None) -> None:
        """A file (or stream) ended: its open record is complete."""
        self._close((node, origin))

    def finish(self) -> None:
        """Close every open record; call once the source has fed everything."""
        for key in list(self._open):
            self._close(key)

    def _close(self, key: tuple[str, str | None]) -> None:
        record = self._open.pop(key, None)
        if record is not None:
            self._keep(key[0], record)

    def _keep(self, node: str, record: Record) -> None:
        """A record is complete: kept when it holds a keyword."""
        if any(map(_KEYWORD.search, record.lines)):
            self.records.setdefault(node, []).append(record)

    def mark_unreadable(self, node: str | None) -> None:
        """A log file of `node` (None: a combined file of many hosts) could not be read."""
        if node is None:
            self.unreadable_combined = True
        else:
            self.unreadable_nodes.add(node)

    def absorb(self, other: Collector) -> None:
        """Take what a finished collector of other scope nodes (a part of this scope, read on its own) holds."""
        for node, count in other.lines_in_window.items():
            self.lines_in_window[node] = self.lines_in_window.get(node, 0) + count
        self.seen_before |= other.seen_before
        self.seen_after |= other.seen_after
        for node, records in other.records.items():
            self.records.setdefault(node, []).extend(records)
        self.unreadable_nodes |= other.unreadable_nodes
        self.unreadable_combined = self.unreadable_combined or other.unreadable_combined
        self.bytes_read += other.bytes_read
        self.truncated = self.truncated or other.truncated
        self.unread |= other.unread

    def to_wire(self) -> dict[str, Any]:
        """What a finished collector holds, as JSON values (a kernel-log scan made in another process sends it)."""
        return {
            "lines_in_window": self.lines_in_window,
            "seen_before": list(self.seen_before),
            "seen_after": list(self.seen_after),
            "records": {
                node: [[r.observed_at.isoformat(), r.tag, r.lines, r.raw, r.mono] for r in records]
                for node, records in self.records.items()
            },
            "unreadable_nodes": list(self.unreadable_nodes),
            "unreadable_combined": self.unreadable_combined,
            "bytes_read": self.bytes_read,
            "truncated": self.truncated,
            "unread": list(self.unread),
        }

    @classmethod
    def from_wire(cls, nodes: Iterable[str], window: Window, zone: object, wire: dict[str, Any]) -> Collector:
        """The finished collector `to_wire` gave, for the same nodes and window; KeyError, TypeError or ValueError
        when `wire` is not what `to_wire` makes."""
        collector = cls(nodes, window, zone=zone)
        collector.lines_in_window = {str(node): int(count) for node, count in wire["lines_in_window"].items()}
        collector.seen_before = set(map(str, wire["seen_before"]))
        collector.seen_after = set(map(str, wire["seen_after"]))
        collector.records = {
            str(node): [
                Record(datetime.fromisoformat(at), tag, list(lines), list(raw), mono)
                for at, tag, lines, raw, mono in records
            ]
            for node, records in wire["records"].items()
        }
        collector.unreadable_nodes = set(map(str, wire["unreadable_nodes"]))
        collector.unreadable_combined = bool(wire["unreadable_combined"])
        collector.bytes_read = int(wire["bytes_read"])
        collector.truncated = bool(wire["truncated"])
        collector.unread = set(map(str, wire["unread"]))
        return collector

    def with_telemetry(self) -> set[str]:
        """The nodes that had telemetry: a line of theirs fell in the window, or their log was seen to span it."""
        return self.lines_in_window.keys() | (self.seen_before & self.seen_after)


__all__ = ["Collector", "KERNEL_TAG", "DEFAULT_CONTEXT"]
