"""Kernel rules: decoded kernel events into evidence against nodes or the job, and notes on what was not understood.

A rule never reads a file: the collector hands it what the sources read. What the kernel logs conclude is merged
with the other signals' conclusions at the provider's root (`providers/telemetry/merge.py`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from providers.telemetry.evidence import EvidenceItem
from providers.telemetry.kernel.catalogue import Points
from providers.telemetry.kernel.collect import Collector
from providers.telemetry.kernel.decode import Event, decode_records


def decoded_events(collector: Collector) -> list[Event]:
    """Every decoded event of the collector's records; a line present in two files of one host counts once."""
    events: list[Event] = []
    seen: set[tuple[str, object, str]] = set()
    for node, records in collector.records.items():
        for event in decode_records(node, records):
            key = (node, event.observed_at, event.line)
            if key not in seen:
                seen.add(key)
                events.append(event)
    return events


def _item(event: Event, source: str) -> EvidenceItem:
    assert event.category is not None
    return EvidenceItem(event.observed_at, event.category, source, event.line, (event.kind, event.code, event.device))


@dataclass(slots=True)
class KernelConclusions:
    """What the kernel logs of one request say, before it is merged with the other signals (merge.py)."""

    #: evidence against each node (events that point at the node), per node
    node_items: dict[str, list[EvidenceItem]]
    #: events that point at the job (an application fault the driver saw)
    job_items: list[EvidenceItem]
    #: nodes whose kernel lines had telemetry in the window
    read: frozenset[str]
    #: nodes that cannot be called unattributed: a log left unread, an event nobody can decode
    uncertain: frozenset[str]
    #: part of the window was never read (Loki page limit): no node may be called unattributed
    truncated: bool
    #: scope nodes whose kernel logs the deadline came before: neither blamed nor cleared
    unread: frozenset[str]
    #: sentences on what was not understood or not read, in order
    notes: tuple[str, ...]


def attribute(nodes: Sequence[str], collector: Collector, source: str) -> KernelConclusions:
    """Turn a filled collector into kernel conclusions. See docs/providers.md for every rule."""
    events = decoded_events(collector)
    node_items: dict[str, list[EvidenceItem]] = {}
    job_items: list[EvidenceItem] = []
    unknown: Counter[str] = Counter()
    uncertain: set[str] = set(collector.unreadable_nodes) | collector.unread
    if collector.unreadable_combined:
        uncertain.update(nodes)
    for event in events:
        if event.points is Points.NODE:
            node_items.setdefault(event.host, []).append(_item(event, source))
        elif event.points is Points.JOB:
            job_items.append(_item(event, source))
        elif event.points is Points.UNKNOWN:
            unknown[event.label] += 1
            uncertain.add(event.host)
    notes: list[str] = []
    if unknown:
        notes.append(f"an Xid or SXid the catalogue does not know, or whose line it cannot decode, was seen: "
                     f"{_count_list(unknown)}")  # fmt: skip
    readable_failed = len(collector.unreadable_nodes) + (1 if collector.unreadable_combined else 0)
    if readable_failed:
        if source == "loki":  # Loki is read per node: a query that failed or a name too long to send
            notes.append(f"the kernel logs of {readable_failed} node(s) could not be read from Loki")
        else:
            notes.append(f"{readable_failed} kernel log file group(s) could not be read")
    if collector.unread:
        late = [n for n in nodes if n in collector.unread]
        shown = ", ".join(late[:8]) + (f" and {len(late) - 8} more" if len(late) > 8 else "")
        notes.append(
            f"the deadline came before the kernel logs of {len(late)} of {len(nodes)} nodes were read: {shown}"
        )
    return KernelConclusions(
        node_items=node_items,
        job_items=job_items,
        read=frozenset(collector.with_telemetry()),
        uncertain=frozenset(uncertain),
        truncated=collector.truncated,
        unread=frozenset(collector.unread),
        notes=tuple(notes),
    )


def _times(n: int) -> str:
    return "1 time" if n == 1 else f"{n} times"


def _count_list(counts: Counter[str]) -> str:
    return ", ".join(f"{label} ({_times(n)})" for label, n in sorted(counts.items()))
