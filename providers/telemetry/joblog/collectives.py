"""Job-log rules on collectives: ranks placed on nodes, and which rank fell behind its process group.

A rank that is behind (its process group's `last completed` work, or its timed-out `SeqNum`, lower than another
rank's; or named lagging by PyTorch's desync report), or a rank of `scope.ranks` that fell silent on a node where no
rank timed out while others did, points at the node its own lines place it on: `collective_hang`. Where the ranks
report the same numbers, no node is singled out: `collective_timeout` on the job's resources.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from providers.telemetry.joblog.records import (
    DesyncReport,
    GroupRank,
    LogLine,
)
from providers.telemetry.joblog.work import (
    P2P_OPS,
    Candidate,
    Item,
    Kept,
    Work,
    line_evidence,
    listing,
    said_evidence,
)

# ---------------------------------------------------------------- ranks to nodes


def place_ranks(work: Work) -> None:
    """A rank's own lines in a node's file, or torchelastic's `host` + `rank`, place it on that node.

    Ranks are taken a node's whole set at a time where none of them was seen before (the case of every rank of a
    large job but those its launcher's summary names again); only a node whose ranks met before is gone through rank
    by rank. `placement` and `ambiguous` keep the order in which ranks were first seen."""
    first: dict[int, str] = {}  # rank -> the node it was first seen on
    more: dict[int, set[str]] = {}  # rank -> every node it was seen on, for a rank seen on more than one
    for node, log in work.logs.items():
        ranks = log.ranks
        if first.keys().isdisjoint(ranks):
            first.update(dict.fromkeys(ranks, node))
        else:
            for rank in ranks:
                _sighted(first, more, rank, node)
        for failure in log.failures:
            if failure.rank is not None and failure.host_node is not None:
                _sighted(first, more, failure.rank, failure.host_node)
    if not more:
        work.placement.update(first)
        return
    for rank, node in first.items():
        if rank in more:
            work.ambiguous[rank] = more[rank]
        else:
            work.placement[rank] = node
    ranks = sorted(work.ambiguous)
    work.notes.append(
        f"{len(ranks)} rank(s) appear in more than one node's log and are placed on no node: {listing(ranks)}"
    )


def _sighted(first: dict[int, str], more: dict[int, set[str]], rank: int, node: str) -> None:
    seen = first.setdefault(rank, node)
    if seen != node:
        more.setdefault(rank, {seen}).add(node)


def global_rank(rank: int | None, group: GroupRank | None) -> int | None:
    """The global rank of a record: its `[rankN]:` prefix, or its default-process-group marker."""
    if rank is not None:
        return rank
    if group is not None and group.default_group:
        return group.rank
    return None


# ---------------------------------------------------------------- collectives


def collectives(work: Work) -> None:
    logs = work.logs
    if not any(log.timeouts or log.progress or log.desync for log in logs.values()):
        return
    # One pass over the records, the timeouts first: a record's global rank (`global_rank`) and its process group's
    # identity are read once, the rank counted among those that timed out and the record put among its group's.
    timed_out = work.timed_out
    unidentified = 0
    by_seq, by_progress = _Groups(), _Groups()
    for timeouts in (True, False):
        for node, log in logs.items():
            for record in log.timeouts if timeouts else log.progress:
                g, group = record.rank, record.group
                key = None if group is None else group.key
                if g is None and key == "default_pg":  # the default group's ranks are the global ranks
                    g = group.rank  # type: ignore[union-attr]
                if g is None:
                    unidentified += 1
                elif g not in timed_out:
                    timed_out[g] = (node, record.line)
                if not timeouts:
                    by_progress.add(group, g, key, (node, record))
                    continue
                if record.op in P2P_OPS:  # type: ignore[union-attr]
                    if g is not None:
                        work.p2p_ranks.add(g)
                    if key is not None:
                        work.p2p_groups.add(key)
                if record.seq is not None:  # type: ignore[union-attr]
                    by_seq.add(group, g, key, record, record.seq)  # type: ignore[union-attr]
    behind: dict[int, list[Item]] = {}
    _behind_by_progress(work, by_progress, behind)
    _behind_by_seq(work, by_seq, behind)
    _behind_by_desync(work, [d for log in logs.values() for d in log.desync], behind)
    silent = _silent(work, unidentified, behind)
    pointed = False
    for rank, items in sorted({**behind, **silent}.items()):
        node = work.placement.get(rank)
        if node is None:
            where = "is on more than one node" if rank in work.ambiguous else "is placed on no node by any log line"
            work.notes.append(f"rank {rank} is behind or silent in a collective but {where}: no node is named")
            continue
        own = work.logs[node].ranks.get(rank)
        extra = [Item(("last", rank), line_evidence(own.last))] if own is not None else []
        work.node(node, "collective_hang", [*items, *extra], _signals(items))
        pointed = True
    if not pointed:
        _timeout_items(work)


class _Groups:
    """Records of one kind by process group: `groups` maps a group's identity to its ranks' records (the latest of a
    rank wins); `unplaced` counts those whose group is named only by its per-process id; `unnamed` holds what
    the records with no group or no global rank give (their sequence numbers)."""

    def __init__(self) -> None:
        self.groups: dict[str, dict[int, Any]] = {}
        self.unplaced = 0
        self.unnamed: set[object] = set()

    def add(self, group: GroupRank | None, g: int | None, key: str | None, record: object,
            unnamed: object = None) -> None:  # fmt: skip
        if group is None or group.pg is None or g is None:
            self.unnamed.add(unnamed)
        elif key is None:
            self.unplaced += 1
        else:
            groups = self.groups
            if key in groups:
                groups[key][g] = record
            else:
                groups[key] = {g: record}


def _behind_by_progress(work: Work, progress: _Groups, behind: dict[int, list[Item]]) -> None:
    """Within one process group, a rank whose `last completed` work is lower than another's is behind."""
    _unplaced_note(work, progress.unplaced)
    for pg, ranks in progress.groups.items():
        if _mixes_p2p(work, pg, ranks):
            continue
        top = max(p.last_completed for _, p in ranks.values())
        ahead = next(p for _, p in ranks.values() if p.last_completed == top)
        for rank, (_, p) in ranks.items():
            if p.last_completed < top:
                said = (
                    f"rank {rank} completed work {p.last_completed} of process group {pg} while rank "
                    f"{global_rank(ahead.rank, ahead.group)} completed {top}: rank {rank} is behind"
                )
                behind.setdefault(rank, []).extend(
                    [Item(("said", rank, pg), said_evidence(said)), Item(("own", rank), line_evidence(p.line)),
                     Item(("ahead", pg), line_evidence(ahead.line))]
                )


def _behind_by_seq(work: Work, timeouts: _Groups, behind: dict[int, list[Item]]) -> None:
    """Within one named process group, a rank that timed out on an earlier `SeqNum` than another is behind."""
    _unplaced_note(work, timeouts.unplaced)
    for pg, ranks in timeouts.groups.items():
        if _mixes_p2p(work, pg, ranks):
            continue
        top = max(t.seq or 0 for t in ranks.values())
        ahead = next(t for t in ranks.values() if t.seq == top)
        for rank, t in ranks.items():
            if (t.seq or 0) < top:
                said = f"rank {rank} timed out on work {t.seq} of process group {pg}, another rank on work {top}"
                behind.setdefault(rank, []).extend(
                    [Item(("said-seq", rank, pg), said_evidence(said)), Item(("own", rank), line_evidence(t.line)),
                     Item(("ahead-seq", pg), line_evidence(ahead.line))]
                )
    if len(timeouts.unnamed) > 1:
        work.notes.append(
            "watchdog timeouts name different sequence numbers but not their process group (sequence numbers "
            "count per group): they single no rank out"
        )


def _unplaced_note(work: Work, count: int) -> None:
    if count:
        work.notes.append(
            f"{count} watchdog line(s) name their process group only by its per-process id (`[PG n Rank r]`), which "
            "is not the group's identity across ranks: they cannot be placed in a group and are not compared"
        )


def _mixes_p2p(work: Work, pg: str, ranks: Mapping[int, object]) -> bool:
    """Whether a group's numbers may count point-to-point work, which ranks do not share: then none is compared."""
    if pg in work.p2p_groups or work.p2p_ranks.intersection(ranks):
        work.notes.append(
            f"process group {pg} timed out on point-to-point work, whose numbers ranks do not share: its ranks' "
            "numbers are not compared"
        )
        return True
    return False


def _behind_by_desync(work: Work, desync: list[DesyncReport], behind: dict[int, list[Item]]) -> None:
    """PyTorch's desync report names lagging ranks of its process group; those of the default group are global."""
    for report in desync:
        if report.group is None or not report.group.default_group:
            work.notes.append(
                f"a desync report names lagging rank(s) {listing(report.lagging)} of "
                f"{'an unnamed' if report.group is None else 'a non-default'} process group: their global ranks "
                "are unknown, so no node is named"
            )
            continue
        for rank in report.lagging:
            said = f"PyTorch's desync report names rank {rank} as lagging"
            behind.setdefault(rank, []).extend(
                [
                    Item(("said-desync", rank), said_evidence(said)),
                    Item(("desync", report.line.number), line_evidence(report.line)),
                ]
            )


def _silent(work: Work, unidentified: int, behind: Mapping[int, list[Item]]) -> dict[int, list[Item]]:
    """Ranks of `scope.ranks` that reported nothing while others timed out, on nodes where no rank timed out."""
    if not work.scope_ranks:
        return {}
    if unidentified:
        work.notes.append(
            "some watchdog lines carry no global rank (no `[rankN]:` prefix, no default-group marker): silent "
            "ranks cannot be told apart, so none is named"
        )
        return {}
    if not work.timed_out:
        return {}
    explained = _ranks_with_own_failure(work)
    nodes_timing_out = {node for node, _ in work.timed_out.values()}
    reporter_node, reporter_line = next(iter(work.timed_out.values()))
    silent: dict[int, list[Item]] = {}
    local_peers: list[int] = []
    unplaced: list[int] = []
    for rank in work.scope_ranks:
        if rank in work.timed_out or rank in explained or rank in behind:
            continue
        node = work.placement.get(rank)
        if node is None:
            unplaced.append(rank)
        elif node in nodes_timing_out:
            local_peers.append(rank)
        else:
            said = (
                f"rank {rank} on {node} reported no watchdog timeout and no error while {len(work.timed_out)} "
                "other rank(s) timed out; no rank on its node timed out"
            )
            silent[rank] = [
                Item(("said-silent", rank), said_evidence(said)),
                Item(("reporter",), line_evidence(reporter_line)),
            ]
    if unplaced:
        work.notes.append(
            f"{len(unplaced)} rank(s) of the scope reported no timeout and no log line places them on a node, so "
            f"they point at no node: {listing(unplaced)}"
        )
    if local_peers:
        lone = _lone_silent(work, local_peers, unplaced, explained)
        if lone is not None:
            silent.update(lone)
        else:
            work.notes.append(
                f"{len(local_peers)} rank(s) reported no timeout on nodes where other ranks did (their worker may have "
                f"been stopped before its own watchdog fired): not attributed: {listing(local_peers)}"
            )
    return silent


def _lone_silent(
    work: Work, local_peers: list[int], unplaced: list[int], explained: set[int]
) -> dict[int, list[Item]] | None:
    """The one rank of the scope that reported nothing while every other rank of the scope timed out, on a node where
    those beside it timed out too, and whose own last line came before the collective they waited in began: it
    never reached that collective. None when that is not so (several ranks silent: the launcher may have stopped
    them before their watchdog fired; a rank with its own failure; lines without collector times)."""
    if len(local_peers) != 1 or unplaced or explained.intersection(work.scope_ranks):
        return None
    rank = local_peers[0]
    node = work.placement[rank]
    peers = [r for r in work.scope_ranks if r != rank]
    beside = [r for r in peers if work.placement.get(r) == node]
    if len(beside) < 2 or any(r not in work.timed_out for r in peers):
        return None
    own = work.logs[node].ranks.get(rank)
    waits = [t for t in work.logs[node].timeouts
             if global_rank(t.rank, t.group) in beside and t.line.observed_at is not None]  # fmt: skip
    if own is None or own.last.observed_at is None or not waits:
        work.notes.append(
            f"rank {rank} on {node} is the only rank of the scope with no timeout while the others timed out, but its "
            "lines and theirs carry no collector time to tell whether it fell silent before their collective began: "
            "not attributed"
        )
        return None
    began = min(t.line.observed_at - timedelta(milliseconds=t.ran_ms) for t in waits if t.line.observed_at is not None)
    if own.last.observed_at >= began:
        work.notes.append(
            f"rank {rank} on {node} reported no timeout while the other ranks timed out, but it wrote lines after "
            "their collective began (it was running, not stuck): not attributed"
        )
        return None
    first = min(waits, key=lambda t: t.line.observed_at or began)
    said = (
        f"rank {rank} on {node} is the only rank of the job that reported no watchdog timeout while the other "
        f"{len(peers)} timed out ({len(beside)} of them beside it on {node}); its last line was written before the "
        "collective they waited in began, so it never reached that collective"
    )
    return {rank: [Item(("said-silent", rank), said_evidence(said)), Item(("reporter",), line_evidence(first.line))]}


def _ranks_with_own_failure(work: Work) -> set[int]:
    """Ranks whose own lines show another failure (the rules for that failure speak for them)."""
    logs = work.logs.values()
    ranks = {e.rank for log in logs for e in log.cuda if e.rank is not None}
    ranks.update(t.rank for log in logs for t in log.tracebacks if t.rank is not None)
    ranks.update(f.rank for log in logs for f in log.failures if f.root and f.rank is not None)
    return ranks


def _timeout_items(work: Work) -> None:
    """No rank is singled out: the collective timeout is the job's, with its lines as evidence."""
    timeouts = [t for log in work.logs.values() for t in log.timeouts]
    progress = [p for log in work.logs.values() for p in log.progress]
    seqs = sorted({t.seq for t in timeouts if t.seq is not None})
    ranks = sorted(work.timed_out)
    said = (
        f"{len(ranks) or 'some'} rank(s) timed out in a collective"
        + (f" (sequence number {listing(seqs)})" if seqs else "")
        + "; no rank is behind the others, so no node is singled out"
    )
    # Bounded as it goes: with every rank of a large job timing out, one Item a line would be most of the rules' cost.
    kept = Kept(work.max_evidence)
    kept.add(("said-timeout",), LogLine(said, None, 0))
    for t in timeouts:
        kept.add(("timeout", t.op, t.seq), t.line)
    for p in progress:
        kept.add(("progress", p.group.key if p.group else None, p.work, p.last_enqueued, p.last_completed), p.line)
    signals = ("torch_watchdog_timeout",) * bool(timeouts) + ("torch_watchdog_progress",) * bool(progress)
    work.job.append(Candidate("collective_timeout", kept.items(), signals))


#: the signal table row each kind of collective evidence comes from
_SIGNAL_OF = {
    "timeout": "torch_watchdog_timeout",
    "said-seq": "torch_watchdog_timeout",
    "said-silent": "torch_watchdog_timeout",
    "said": "torch_watchdog_progress",
    "progress": "torch_watchdog_progress",
    "said-desync": "torch_desync_report",
}


def _signals(items: list[Item]) -> tuple[str, ...]:
    """The signal table ids a collective conclusion's evidence was read from."""
    return tuple(dict.fromkeys(_SIGNAL_OF[i.key[0]] for i in items if i.key[0] in _SIGNAL_OF))


