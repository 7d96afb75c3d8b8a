"""Which ranks the others waited for, from the ranks' flight-recorder dumps (rules only: nothing here reads a file).

Entries are matched across ranks by (group, collective sequence number), point to point by the group and the peer
its name gives; never by `record_id` or `pg_id`, which count per process. For each group and each rank with a dump:
the newest collective it issued, its oldest unfinished one. A rank that waits in a collective waits for the members
of the group that never issued it (or issued it but have not finished an older one), and for those whose dump is
missing; a rank whose collectives all ended without completion (gloo) waits, in its last one, for the members that
issued fewer. Each such wait is an edge rank -> rank; the ranks named are those that are waited for and wait for no
one (a rank stuck behind another is not the cause). A collective whose operation, sizes or dtypes differ between
ranks at one sequence number is the job's code. When no rank waits, the dumps say so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from providers.telemetry.flight_recorder.dumps import Dump, Entry

#: collectives whose tensors have the same shape on every rank (the others -- all_to_all, gather, scatter, the
#: uneven variants -- may differ by design, so only their operation and dtypes are compared)
SAME_SHAPE = frozenset(
    {
        "all_reduce",
        "allreduce",
        "broadcast",
        "reduce",
        "all_gather",
        "allgather",
        "_all_gather_base",
        "_allgather_base",
        "all_gather_into_tensor",
        "reduce_scatter",
        "_reduce_scatter_base",
        "reduce_scatter_tensor",
        "barrier",
    }
)
#: ranks listed by name in one sentence at most (the rest are counted)
LISTED = 8


@dataclass(frozen=True)
class Wait:
    """`waiter` waits for `rank` in `group` at `seq`."""

    waiter: int
    rank: int
    group: str
    desc: str
    seq: int | None
    op: str
    why: str  # not_reached, behind, missing, p2p


@dataclass
class Conclusions:
    #: rank -> evidence sentences, the ranks the others waited for (with a dump)
    named: dict[int, list[str]] = field(default_factory=dict)
    #: ranks without a dump that the others waited for -> sentences
    missing: dict[int, list[str]] = field(default_factory=dict)
    #: sentences on collectives that differ between ranks at one sequence number
    mismatches: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: whether any rank waits in an unfinished collective
    waiting: bool = False


@dataclass
class _Member:
    issued: int | None = None
    pending: Entry | None = None  # oldest unfinished collective
    last: Entry | None = None  # newest collective
    by_seq: dict[int, Entry] = field(default_factory=dict)
    p2p_pending: list[Entry] = field(default_factory=list)


def _summaries(dump: Dump) -> dict[str, _Member]:
    out: dict[str, _Member] = {}
    for e in dump.entries:
        if not e.group:
            continue
        m = out.get(e.group)
        if m is None:
            m = out[e.group] = _Member()
        if e.p2p:
            if not e.done:
                m.p2p_pending.append(e)
            continue
        if e.seq is None:
            continue
        m.by_seq[e.seq] = e
        if m.issued is None or e.seq >= m.issued:
            m.issued = e.seq
            m.last = e
        if not e.done and (m.pending is None or e.seq < m.pending.seq):  # type: ignore[operator]
            m.pending = e
    return out


def _quoted(group: str, desc: str) -> str:
    return f'group "{group}"' + (f" ({desc})" if desc and desc != group else "")


def _listing(ranks: Sequence[int]) -> str:
    shown = ", ".join(map(str, ranks[:LISTED]))
    return shown + (f" and {len(ranks) - LISTED} more" if len(ranks) > LISTED else "")


def _op(op: str) -> str:
    return op.split(":", 1)[-1]


def analyse(
    dumps: Mapping[int, Dump], job_ranks: Iterable[int] = (), complete: bool = True, unread: Iterable[int] = ()
) -> Conclusions:
    """Conclusions from `dumps` (rank -> Dump). `job_ranks`: the job's ranks as the request names them (members of
    the default group of a backend that records no group table); `complete` False: some node folders were not read
    (the deadline came first), so a rank without a dump may have one there: it is neither blamed nor missing;
    `unread`: ranks whose dump could not be read, likewise."""
    out = Conclusions()
    failed: set[int] | None = set(unread) if complete else None
    summaries = {rank: _summaries(d) for rank, d in dumps.items()}
    members, descs = _members(dumps, summaries, set(job_ranks) | set(dumps))
    _mismatches(summaries, descs, out)
    waits: list[Wait] = []
    for group, ranks in members.items():
        waits.extend(_group_waits(group, descs.get(group, ""), ranks, dumps, summaries, failed))
    waits.extend(_p2p_waits(members, dumps, summaries, failed))
    out.waiting = any(m.pending is not None or m.p2p_pending for s in summaries.values() for m in s.values())
    if not waits:
        if dumps and not out.mismatches:
            out.notes.append(
                f"the flight-recorder dumps of {len(dumps)} rank(s) show no rank waiting for another"
                + (" (the unfinished collectives are ones every member of their group reached)" if out.waiting else "")
            )
        return out
    _name(waits, dumps, out)
    return out


def _members(
    dumps: Mapping[int, Dump], summaries: Mapping[int, dict[str, _Member]], everyone: set[int]
) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
    """Each group's members in group order, and its description: from the dumps' group tables; a group no table
    lists (gloo records none) has the ranks whose entries name it, the default group every rank of the job."""
    members: dict[str, tuple[int, ...]] = {}
    descs: dict[str, str] = {}
    for dump in dumps.values():
        for group, (desc, ranks) in dump.groups.items():
            if ranks and group not in members:
                members[group] = ranks
            if desc:
                descs.setdefault(group, desc)
    seen: dict[str, set[int]] = {}
    for rank, groups in summaries.items():
        for group in groups:
            seen.setdefault(group, set()).add(rank)
    for dump in dumps.values():
        for e in dump.entries:
            if e.desc:
                descs.setdefault(e.group, e.desc)
    for group, ranks in seen.items():
        if group not in members:
            default = descs.get(group) == "default_pg" or group == "default"
            members[group] = tuple(sorted(everyone if default else ranks))
    return members, descs


def _group_waits(
    group: str,
    desc: str,
    ranks: Sequence[int],
    dumps: Mapping[int, Dump],
    summaries: Mapping[int, dict[str, _Member]],
    unread: set[int] | None,
) -> list[Wait]:
    waits: list[Wait] = []
    info = {r: summaries[r].get(group) for r in ranks if r in dumps}
    for r, mine in info.items():
        if mine is None:
            continue
        if mine.pending is not None:
            point = mine.pending
        elif mine.last is not None and mine.last.state != "completed":
            # every entry ended without completion (gloo): the last one is where it stopped, well or not
            point = mine.last
        else:
            continue
        s = point.seq
        assert s is not None
        for m in ranks:
            if m == r:
                continue
            if m not in dumps:
                if unread is not None and m not in unread:
                    waits.append(Wait(r, m, group, desc, s, point.op, "missing"))
                continue
            theirs = info.get(m)
            if theirs is None or theirs.issued is None:
                if _covers(dumps[m], point):
                    waits.append(Wait(r, m, group, desc, s, point.op, "not_reached"))
            elif theirs.issued < s:
                waits.append(Wait(r, m, group, desc, s, point.op, "not_reached"))
            elif (
                mine.pending is not None and theirs.pending is not None and theirs.pending.seq < s  # type: ignore[operator]
            ):
                waits.append(Wait(r, m, group, desc, s, point.op, "behind"))
    return waits


def _covers(dump: Dump, point: Entry) -> bool:
    """Whether the entries read of `dump` reach back to when `point` was issued elsewhere, so that an entry of its
    group, had the rank issued one, would be among them."""
    if dump.whole:
        return True
    first = next((e.created_ns for e in dump.entries if e.created_ns is not None), None)
    return first is not None and point.created_ns is not None and first <= point.created_ns


def _peer(entry: Entry) -> tuple[str, int] | None:
    """A point-to-point entry's direction and group-local peer, from its name (`nccl:send 0->3`, `recv 3<-0`)."""
    name = _op(entry.op)
    kind, _, pair = name.partition(" ")
    for arrow in ("->", "<-"):
        a, sep, b = pair.partition(arrow)
        if sep and a.isdigit() and b.isdigit() and kind in ("send", "recv"):
            return kind, int(b)
    return None


def _p2p_waits(
    members: Mapping[str, tuple[int, ...]],
    dumps: Mapping[int, Dump],
    summaries: Mapping[int, dict[str, _Member]],
    unread: set[int] | None,
) -> list[Wait]:
    waits: list[Wait] = []
    for r, groups in summaries.items():
        for group, mine in groups.items():
            ranks = members.get(group, ())
            for e in mine.p2p_pending:
                peer = _peer(e)
                if peer is None or peer[1] >= len(ranks) or r not in ranks:
                    continue
                kind, local = peer
                other = ranks[local]
                if other == r:
                    continue
                if other not in dumps:
                    if unread is not None and other not in unread:
                        waits.append(Wait(r, other, group, e.desc, e.p2p_seq, e.op, "missing"))
                    continue
                me = ranks.index(r)
                want = "recv" if kind == "send" else "send"
                theirs = summaries[other].get(group)
                matched = theirs is not None and any(
                    (p := _peer(x)) is not None and p == (want, me) for x in theirs.p2p_pending
                )
                if not matched and _covers(dumps[other], e):
                    waits.append(Wait(r, other, group, e.desc, e.p2p_seq, e.op, "p2p"))
    return waits


def _name(waits: list[Wait], dumps: Mapping[int, Dump], out: Conclusions) -> None:
    """The ranks waited for that wait for no one; a cycle of waits names no one."""
    waits_of: dict[int, list[Wait]] = {}
    waited: dict[int, list[Wait]] = {}
    for w in waits:
        waits_of.setdefault(w.waiter, []).append(w)
        waited.setdefault(w.rank, []).append(w)
    roots = sorted(r for r in waited if r not in waits_of)
    if not roots:
        out.notes.append(
            "in the flight-recorder dumps the ranks wait for each other in a circle (different ranks entered "
            "collectives in different orders?): no rank is singled out"
        )
        return
    with_dump = [r for r in roots if r in dumps]
    without = [r for r in roots if r not in dumps]
    for r in roots:
        sentences = _sentences(r, waited[r], dumps)
        if r in dumps:
            out.named[r] = sentences
        elif not with_dump:
            out.missing[r] = sentences
    if with_dump and without:
        out.notes.append(
            f"rank(s) {_listing(without)} wrote no flight-recorder dump and their peers wait for them too, but the "
            f"dumps single out rank(s) {_listing(with_dump)}, so they are not named"
        )


def _sentences(rank: int, waits: list[Wait], dumps: Mapping[int, Dump]) -> list[str]:
    """One sentence per (group, point) the rank was waited for at, most waiters first."""
    by_point: dict[tuple[str, int | None, str], list[Wait]] = {}
    for w in waits:
        by_point.setdefault((w.group, w.seq, w.why), []).append(w)
    out = []
    for (group, seq, why), ws in sorted(by_point.items(), key=lambda kv: -len(kv[1])):
        waiters = sorted({w.waiter for w in ws})
        peers = f"{len(waiters)} peers ({_listing(waiters)}) wait" if len(waiters) > 1 else f"rank {waiters[0]} waits"
        where = _quoted(group, ws[0].desc)
        op = _op(ws[0].op)
        if why == "missing":
            out.append(
                f"rank {rank} wrote no flight-recorder dump; {peers} in seq {seq} ({op}) of {where}, which includes it"
            )
        elif why == "p2p":
            out.append(
                f"rank {rank} has no matching point-to-point operation pending; {peers} in {op} "
                f"(p2p seq {seq}) of {where}"
            )
        elif why == "behind":
            pend = _oldest_pending(dumps[rank], group)
            last = f"last completed seq {pend.seq - 1}" if pend is not None and pend.seq else "is behind"
            out.append(f"rank {rank} {last} of {where}; {peers} in seq {seq} ({op}), past it")
        else:
            issued = _issued(dumps[rank], group)
            if issued is not None:
                out.append(f"rank {rank} last issued seq {issued} of {where}; {peers} in seq {seq} ({op})")
            else:
                out.append(f"rank {rank}'s dump holds no collective of {where}; {peers} in seq {seq} ({op})")
    return out


def _oldest_pending(dump: Dump, group: str) -> Entry | None:
    best = None
    for e in dump.entries:
        if e.group == group and not e.p2p and not e.done and e.seq is not None and (best is None or e.seq < best.seq):
            best = e
    return best


def _issued(dump: Dump, group: str) -> int | None:
    seqs = [e.seq for e in dump.entries if e.group == group and e.seq is not None]
    return max(seqs) if seqs else None


def _mismatches(summaries: Mapping[int, dict[str, _Member]], descs: Mapping[str, str], out: Conclusions) -> None:
    """Collectives that differ between ranks at one (group, sequence number): at each rank's oldest unfinished and
    newest collective, where a mismatch stops a job."""
    points: dict[str, set[int]] = {}
    for groups in summaries.values():
        for group, m in groups.items():
            for e in (m.pending, m.last):
                if e is not None and e.seq is not None:
                    points.setdefault(group, set()).add(e.seq)
    for group in sorted(points):
        for seq in sorted(points[group]):
            seen = [(r, g[group].by_seq[seq]) for r, g in summaries.items() if group in g and seq in g[group].by_seq]
            if len(seen) < 2:
                continue
            problem = _differs(seen)
            if problem:
                out.mismatches.append(f"seq {seq} of {_quoted(group, descs.get(group, ''))}: {problem}")


def _differs(seen: list[tuple[int, Entry]]) -> str | None:
    def variants(key) -> dict[object, list[int]]:
        found: dict[object, list[int]] = {}
        for rank, e in seen:
            value = key(e)
            if value is not None:
                found.setdefault(value, []).append(rank)
        return found

    def say(what: str, found: dict[object, list[int]], show) -> str:
        parts = [
            f"{show(v)} on rank(s) {_listing(sorted(rs))}"
            for v, rs in sorted(found.items(), key=lambda kv: -len(kv[1]))
        ]
        return f"{what} differ: " + "; ".join(parts)

    ops = variants(lambda e: _op(e.op))
    if len(ops) > 1:
        return say("operations", ops, str)
    op = next(iter(ops), "")
    dtypes = variants(lambda e: (e.input_dtypes, e.output_dtypes) if e.input_dtypes else None)
    if len(dtypes) > 1:
        return say(f"{op} dtypes", dtypes, lambda v: "/".join(v[0]) + " -> " + "/".join(v[1]))
    if op in SAME_SHAPE:
        sizes = variants(lambda e: (e.input_sizes, e.output_sizes) if e.input_sizes is not None else None)
        if len(sizes) > 1:
            return say(f"{op} sizes", sizes, lambda v: _shape(v[0]) + " -> " + _shape(v[1]))
    return None


def _shape(sizes: tuple[tuple[int, ...], ...] | None) -> str:
    if not sizes:
        return "[]"
    return ", ".join("[" + "x".join(map(str, s)) + "]" for s in sizes[:4]) + (" ..." if len(sizes) > 4 else "")
