"""The dumps' conclusions as evidence against scope nodes or the job: ranks placed on their nodes, notes otherwise.

A rank with a dump lies on the node whose folder holds it. A rank the others waited for that left no dump is placed
by the job logs' rank prefixes (the mapping the provider's wiring hands in: which ranks wrote on which node), or,
when exactly one node of the scope left no dump at all, on that node; the evidence says how. Such ranks that share a
group are named only when they lie on one node (one may be waiting behind another). A collective that
differs between ranks is the job's code. Nothing here reads a file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from providers.telemetry.evidence import EvidenceItem
from providers.telemetry.flight_recorder.analysis import Conclusions, analyse
from providers.telemetry.flight_recorder.source import DumpsRead
from providers.telemetry.identity import NodeNames

SOURCE = "flight_recorder"
#: the category of a node whose rank the others waited for (ranking.py: a rank fell behind its group)
HANG = "collective_hang"
#: the category of collectives that differ between ranks: the job's own code
MISMATCH = "application"
#: unread or unplaced ranks listed in a note at most (the rest are counted)
LISTED = 16


@dataclass
class FlightRecorderResult:
    """What the dumps of one request conclude, for the one merge (merge.py)."""

    #: scope node -> evidence against it
    node_items: dict[str, list[EvidenceItem]] = field(default_factory=dict)
    #: evidence against the job as a whole (collectives that differ between ranks)
    job_items: list[EvidenceItem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: scope nodes whose folder held a dump that was read
    read_nodes: frozenset[str] = frozenset()
    #: the dumps were read and show no rank waiting for another
    no_wait: bool = False


def _listing(items: Sequence[object]) -> str:
    shown = ", ".join(map(str, items[:LISTED]))
    return shown + (f" and {len(items) - LISTED} more" if len(items) > LISTED else "")


def _when(ns: int | None, fallback: datetime) -> datetime:
    if ns is None or not 0 < ns < 253402300800 * 10**9:
        return fallback
    return datetime.fromtimestamp(ns / 1e9, UTC)


def conclude(
    read: DumpsRead,
    nodes: Sequence[str],
    job_ranks: Iterable[int],
    rank_nodes: Mapping[int, str],
    detected_at: datetime,
) -> FlightRecorderResult:
    """Analyse the dumps read and place what they conclude on scope nodes (`rank_nodes`: the job logs' ranks per
    node, from the provider's wiring; may be empty)."""
    names = NodeNames(nodes)
    out = FlightRecorderResult()
    out.notes.extend(read.unreadable)
    if read.late:
        out.notes.append(
            f"the flight-recorder dumps of {len(read.late)} node folder(s) were not read before the deadline: "
            + _listing(sorted(read.late))
        )
    placed = {rank: names.node_for(folder) for rank, folder in read.node_of.items()}
    out.read_nodes = frozenset(n for n in placed.values() if n is not None)
    conclusions: Conclusions = analyse(read.dumps, job_ranks, complete=not read.late, unread=read.failed)
    for dump in read.dumps.values():
        for note in dump.notes:
            if note not in out.notes:
                out.notes.append(note)
    out.no_wait = not conclusions.waits and not conclusions.mismatches
    out.notes.extend(conclusions.notes)
    when = detected_at
    for text in conclusions.mismatches:
        out.job_items.append(EvidenceItem(when, MISMATCH, SOURCE, f"collectives differ between ranks at {text}"))
    if conclusions.mismatches:
        return out  # the job's code stopped it: a rank waiting at the mismatch is not the cause
    for rank, sentences in sorted(conclusions.named.items()):
        node = placed.get(rank)
        folder = read.node_of.get(rank)
        if node is None:
            out.notes.append(
                f"the flight-recorder dumps single out rank {rank}, whose dump lies in {folder}/, not a scope node"
            )
            continue
        stamp = _when(_last_created(read, rank), when)
        for text in sentences:
            out.node_items.setdefault(node, []).append(
                EvidenceItem(stamp, HANG, SOURCE, f"{text} (its dump lies in {folder}/)", ("fr", rank, text))
            )
    _place_missing(conclusions, read, names, nodes, rank_nodes, when, out)
    return out


def _last_created(read: DumpsRead, rank: int) -> int | None:
    span = read.dumps[rank].span
    return span[1] if span else None


def _place_missing(
    conclusions: Conclusions,
    read: DumpsRead,
    names: NodeNames,
    nodes: Sequence[str],
    rank_nodes: Mapping[int, str],
    when: datetime,
    out: FlightRecorderResult,
) -> None:
    if not conclusions.missing:
        return
    without = [n for n in nodes if n not in out.read_nodes]
    placed: dict[int, tuple[str, str]] = {}
    unplaced = []
    for rank in sorted(conclusions.missing):
        node = names.node_for(rank_nodes.get(rank))
        how = f"its node is the one whose job log holds its `[rank{rank}]:` lines"
        if node is None and len(without) == 1:
            node = without[0]
            how = "its node is the only scope node that left no flight-recorder dump"
        if node is None:
            unplaced.append(rank)
        else:
            placed[rank] = (node, how)
    # Ranks without a dump that share a group may be waiting one behind another: they are named when they all lie
    # on one node (the cause is there), never when they lie on several or some on no node known.
    where: dict[int, set[str | None]] = {}
    for rank in conclusions.missing:
        where.setdefault(conclusions.linked.get(rank, rank), set()).add(placed[rank][0] if rank in placed else None)
    spread = sorted(rank for rank in placed if len(where[conclusions.linked.get(rank, rank)]) > 1)
    for rank, (node, how) in sorted(placed.items()):
        if rank in spread:
            continue
        for text in conclusions.missing[rank]:
            out.node_items.setdefault(node, []).append(
                EvidenceItem(when, HANG, SOURCE, f"{text}; {how}", ("fr", rank, text))
            )
    if spread:
        out.notes.append(
            f"the flight-recorder dumps show their ranks waiting for rank(s) {_listing(spread)}, which wrote no dump "
            "and share a group with other such ranks not on their node (or on no node known): one may be waiting "
            "behind another, so none of them is named"
        )
    if unplaced:
        out.notes.append(
            f"the flight-recorder dumps show their ranks waiting for rank(s) {_listing(unplaced)}, which wrote no "
            "dump and whose node neither the job logs nor the dumps' folders tell"
        )
