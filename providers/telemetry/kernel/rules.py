"""Kernel rules: decoded kernel events into evidence against nodes or the job, and notes on what was not understood.

A rule never reads a file: the collector hands it what the sources read. What the kernel logs conclude is merged
with the other signals' conclusions at the provider's root (`providers/telemetry/merge.py`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

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


def _meaning(event: Event, source: str) -> EvidenceItem:
    """NVIDIA's words on an event, shown once before its lines."""
    assert event.category is not None and event.meaning is not None
    return EvidenceItem(event.observed_at, event.category, source, event.meaning, ("meaning", event.meaning))


def _items(events: list[Event], source: str) -> list[EvidenceItem]:
    """Each event's line, and before the first event each meaning belongs to, that meaning."""
    items: list[EvidenceItem] = []
    said: set[str] = set()
    for event in events:
        if event.meaning and event.meaning not in said:
            said.add(event.meaning)
            items.append(_meaning(event, source))
        items.append(_item(event, source))
    return items


@dataclass(slots=True)
class KernelConclusions:
    """What the kernel logs of one request say, before it is merged with the other signals (merge.py)."""

    #: evidence against each node (events that point at the node), per node
    node_items: dict[str, list[EvidenceItem]]
    #: events that point at the job (an application fault the driver saw), NVIDIA's meaning before their lines
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
    #: per node, the application faults NVIDIA reads by where they repeat (Xid 13, 31: decode.REPEAT_WORKFLOWS), by
    #: where they happened (the GPU, and for Xid 13 its GPC and TPC), each with its evidence (meaning first)
    repeats: dict[str, dict[str, list[EvidenceItem]]] = field(default_factory=dict)


def attribute(nodes: Sequence[str], collector: Collector, source: str) -> KernelConclusions:
    """Turn a filled collector into kernel conclusions. See docs/providers.md for every rule."""
    events = decoded_events(collector)
    node_events: dict[str, list[Event]] = {}
    job_events: list[Event] = []
    unknown: Counter[str] = Counter()
    statuses: Counter[str] = Counter()
    repeats: dict[str, dict[str, list[Event]]] = {}
    uncertain: set[str] = set(collector.unreadable_nodes) | collector.unread
    if collector.unreadable_combined:
        uncertain.update(nodes)
    for event in events:
        if event.points is Points.NODE:
            node_events.setdefault(event.host, []).append(event)
        elif event.points is Points.JOB:
            job_events.append(event)
            if event.repeat_key is not None:
                repeats.setdefault(event.host, {}).setdefault(event.repeat_key, []).append(event)
        elif event.points is Points.UNKNOWN:
            (statuses if event.kind == "nv_status" else unknown)[event.label] += 1
            uncertain.add(event.host)
    node_items = {node: _items(evs, source) for node, evs in node_events.items()}
    job_items = _items(job_events, source)
    notes: list[str] = []
    if unknown:
        notes.append(f"an Xid or SXid the catalogue does not know, or whose line it cannot decode, was seen: "
                     f"{_count_list(unknown)}")  # fmt: skip
    if statuses:
        notes.append(f"a driver status that names no cause by itself, or that the status table lacks, was seen "
                     f"(the node is not called clean): {_count_list(statuses)}")  # fmt: skip
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
        repeats={node: {where: _items(evs, source) for where, evs in by.items()} for node, by in repeats.items()},
    )


def _times(n: int) -> str:
    return "1 time" if n == 1 else f"{n} times"


def _count_list(counts: Counter[str]) -> str:
    return ", ".join(f"{label} ({_times(n)})" for label, n in sorted(counts.items()))
