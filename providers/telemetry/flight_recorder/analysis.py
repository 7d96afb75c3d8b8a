"""Which ranks the others waited for, from the ranks' flight-recorder dumps (rules only: nothing here reads a file).

Entries are matched across ranks by (group, collective sequence number), point to point by the group and the peer
its name gives; never by `record_id` or `pg_id`, which count per process. For each group and each member with a
dump: the newest collective it issued and its oldest unfinished one. A member waiting in a collective (its oldest
unfinished; on a backend without events, gloo, where every collective ends retired, its last one) waits for:

- the members that never issued that collective (their newest is older, or their dump holds none of the group),
- the members that issued it but have not finished an older one (behind in sequence: the waiter finished it),
- the members whose dump is missing (when every node folder was read), where the collective is unfinished and no
  member with a dump finished it (a collective every member feeds, finished by one, was reached by all).

A rank that is waited for and waits for no other rank is named (a rank stuck behind another is not the cause). A
rank with a dump that waits in a collective only for ranks without one is not named: it may be stuck behind them.
A rank without a dump that its peers wait for in a collective is named only when nothing the dumps show explains the
wait: not when it belongs (by the dumps' group tables) to a group with a rank that a named rank holds back (the
named rank itself, or one waiting for it, directly or through others with a dump, but not waiting in that group for
the ranks without a dump), for it may be waiting there too;
and not when another such rank shares a group with it and lies on another node (`linked`: either may wait for the
other; rules.py places them). A note says which ranks without a dump are not named and why. Point to point: a
pending send or recv waits for its peer when the peer holds no pending counterpart; one to a rank without a dump
neither names that rank nor makes the waiting rank a waiter. A collective whose operation, dtypes or (for
collectives of one shape on every rank) sizes differ between ranks at one sequence number is the job's code. When no
rank waits for another, the conclusions say so. Work is linear in the members of each group.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from providers.telemetry.digits import is_number
from providers.telemetry.flight_recorder.dumps import Dump, Entry

#: collectives whose tensors have the same shape on every rank (the others -- all_to_all, gather, scatter, the
#: uneven variants -- may differ by design, so only their operation and dtypes are compared)
SAME_SHAPE = frozenset(
    {
        "all_reduce", "allreduce", "broadcast", "reduce", "all_gather", "allgather", "_all_gather_base",
        "_allgather_base", "all_gather_into_tensor", "reduce_scatter", "_reduce_scatter_base",
        "reduce_scatter_tensor", "barrier",
    }
)  # fmt: skip
#: collectives that finish on a rank only once every member of the group took part (each member's data reaches
#: every other): a member that finished one shows that a member without a dump reached it too
EVERY_MEMBER = frozenset(
    {
        "all_reduce", "allreduce", "all_gather", "allgather", "_all_gather_base", "_allgather_base",
        "all_gather_into_tensor", "allgather_coalesced", "allgather_into_tensor_coalesced", "reduce_scatter",
        "_reduce_scatter_base", "reduce_scatter_tensor", "reduce_scatter_tensor_coalesced", "allreduce_coalesced",
        "all_to_all", "alltoall", "alltoall_base", "all_to_all_single", "barrier",
    }
)  # fmt: skip
#: ranks listed by name in one sentence at most (the rest are counted)
LISTED = 8
#: sentences of evidence per named rank at most (its groups with the most waiters first)
MAX_SENTENCES = 8


@dataclass
class Conclusions:
    #: rank -> evidence sentences, the ranks the others waited for (with a dump)
    named: dict[int, list[str]] = field(default_factory=dict)
    #: ranks without a dump that the others waited for and nothing the dumps show explains -> sentences
    missing: dict[int, list[str]] = field(default_factory=dict)
    #: rank of `missing` -> the least rank of `missing` it shares a group with, directly or through others of them
    #: (ranks of one such part may be waiting one behind another: named only when they all lie on one node)
    linked: dict[int, int] = field(default_factory=dict)
    #: sentences on collectives that differ between ranks at one sequence number
    mismatches: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: whether any rank holds an unfinished operation
    waiting: bool = False
    #: whether any rank waits for another (named or not)
    waits: bool = False


@dataclass
class _Member:
    """One rank's collectives of one group, as its dump's entries read give them."""

    issued: int | None = None
    last: Entry | None = None  # newest collective
    pending: Entry | None = None  # oldest unfinished collective
    by_seq: dict[int, Entry] = field(default_factory=dict)
    p2p_pending: list[Entry] = field(default_factory=list)

    @property
    def point(self) -> Entry | None:
        """Where it waits: its oldest unfinished collective; on gloo (every one ends retired), its last one."""
        if self.pending is not None:
            return self.pending
        if self.last is not None and self.last.state != "completed" and not self.last.op.startswith("nccl:"):
            return self.last
        return None


@dataclass
class _Waited:
    """Why and by whom a rank was waited for in one group."""

    group: str
    desc: str
    why: str  # not_reached, behind, missing, p2p, p2p_missing (a pending send or recv to a rank without a dump)
    seq: int | None
    op: str
    #: the members waiting there, in order (the point's list, shared by every rank waited for there; never the rank)
    waiters: list[int]


@dataclass
class _Point:
    """Where members wait: a collective of a group, or one pending send or recv; who waits there, and for whom.
    Waits are kept per point, not per pair of ranks, so that their number stays linear in the members."""

    waiters: list[int]
    p2p: bool
    group: str = ""
    targets: list[int] = field(default_factory=list)


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
    missing_ok = complete
    failed = set(unread)
    summaries = {rank: _summaries(d) for rank, d in dumps.items()}
    _shared_counters(dumps, summaries, out)
    members, descs = _members(dumps, summaries, set(job_ranks) | set(dumps))
    _mismatches(summaries, descs, out)
    waited: dict[int, list[_Waited]] = {}
    points: list[_Point] = []
    for group, ranks in members.items():
        _group(group, descs.get(group, ""), ranks, dumps, summaries, missing_ok, failed, waited, points)
    _p2p(members, dumps, summaries, missing_ok, failed, waited, points)
    out.waiting = any(m.pending is not None or m.p2p_pending for s in summaries.values() for m in s.values())
    if not waited:
        if dumps and not out.mismatches:
            out.notes.append(
                f"the flight-recorder dumps of {len(dumps)} rank(s) show no rank waiting for another"
                + (" (the unfinished collectives are ones every member of their group reached)" if out.waiting else "")
            )
        return out
    out.waits = True
    _name(waited, points, dumps, members, descs, out)
    return out


def _shared_counters(dumps: Mapping[int, Dump], summaries: Mapping[int, dict[str, _Member]], out: Conclusions) -> None:
    """Version 1.4 counts point-to-point operations with the collectives: in a group where some rank sent or received,
    the ranks' collective numbers need not line up, so its collectives are not compared (its sends and receives
    still are, by their peers)."""
    mixed = {
        group
        for rank, groups in summaries.items()
        if dumps[rank].version == "1.4"
        for group, m in groups.items()
        if m.p2p_pending or any(e.p2p and e.group == group for e in dumps[rank].entries)
    }
    if not mixed:
        return
    for groups in summaries.values():
        for group in mixed & groups.keys():
            m = groups[group]
            m.issued, m.last, m.pending, m.by_seq = None, None, None, {}
    out.notes.append(
        f"{len(mixed)} group(s) of version-1.4 dumps hold point-to-point operations, which that version numbers with "
        "the collectives: their collectives are not compared across ranks"
    )


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


def _group(
    group: str,
    desc: str,
    ranks: Sequence[int],
    dumps: Mapping[int, Dump],
    summaries: Mapping[int, dict[str, _Member]],
    missing_ok: bool,
    failed: set[int],
    waited: dict[int, list[_Waited]],
    found: list[_Point],
) -> None:
    """The waits of one group's members, in time linear in its members: the points its members wait at are few."""
    info: dict[int, _Member | None] = {}
    absent: list[int] = []
    for r in ranks:
        if r in dumps:
            info[r] = summaries[r].get(group)
        elif missing_ok and r not in failed:
            absent.append(r)
    points: dict[int, list[int]] = {}
    entry_at: dict[int, Entry] = {}
    pending_points: set[int] = set()
    for r, mine in info.items():
        point = mine.point if mine is not None else None
        if point is None or point.seq is None:
            continue
        points.setdefault(point.seq, []).append(r)
        entry_at.setdefault(point.seq, point)
        if mine is not None and mine.pending is not None:
            pending_points.add(point.seq)
    if not points:
        return
    top = max(points)
    top_pending = max(pending_points) if pending_points else None
    # The newest collective some member with a dump finished: one every member feeds, finished there, was reached by
    # every member, those without a dump too.
    finished = max(
        (
            m.pending.seq - 1 if m.pending is not None else m.issued  # type: ignore[operator]
            for m in info.values()
            if m is not None and (m.pending is not None or m.issued is not None)
        ),
        default=-1,
    )
    reached = {s for s in pending_points if s <= finished and _op(entry_at[s].op) in EVERY_MEMBER}
    at = {s: _Point(sorted(waiters), False, group) for s, waiters in points.items()}
    found.extend(at.values())
    latest = max(entry_at.values(), key=lambda e: e.created_ns or 0)
    for m, theirs in info.items():
        if theirs is None or theirs.issued is None:
            if _covers(dumps[m], latest):
                _add(waited, m, group, desc, "not_reached", at, lambda s: True, entry_at)
            continue
        issued = theirs.issued
        if issued < top:
            _add(waited, m, group, desc, "not_reached", at, lambda s, i=issued: i < s, entry_at)
        elif theirs.pending is not None and top_pending is not None and theirs.pending.seq < top_pending:  # type: ignore[operator]
            p = theirs.pending.seq
            _add(waited, m, group, desc, "behind", at, lambda s, p=p: s in pending_points and p < s, entry_at)
    # A rank without a dump is waited for only where its peers' collectives are unfinished (a gloo collective that
    # ended, retired well or by a timeout, says nothing about a member whose dump is not there), and not where a
    # member finished the collective (it ran with every member).
    for m in absent:
        _add(waited, m, group, desc, "missing", at, lambda s: s in pending_points and s not in reached, entry_at)


def _add(
    waited: dict[int, list[_Waited]],
    rank: int,
    group: str,
    desc: str,
    why: str,
    at: Mapping[int, _Point],
    applies,
    entry_at: Mapping[int, Entry],
) -> None:
    """`rank` is waited for at every point `applies` to, by the members waiting there (never itself: a member waited
    for at a point has not reached it)."""
    for s, point in at.items():
        if not applies(s):
            continue
        point.targets.append(rank)
        waited.setdefault(rank, []).append(_Waited(group, desc, why, s, entry_at[s].op, point.waiters))


def _covers(dump: Dump, point: Entry) -> bool:
    """Whether the entries read of `dump` reach back to when `point` was issued elsewhere, so that an entry of its
    group, had the rank issued one, would be among them."""
    if dump.whole:
        return True
    first = next((e.created_ns for e in dump.entries if e.created_ns is not None), None)
    return first is not None and point.created_ns is not None and first <= point.created_ns


def _peer(entry: Entry) -> tuple[str, int] | None:
    """A point-to-point entry's direction and group-local peer, from its name (`nccl:send 0->3`, `recv 3<-0`)."""
    kind, _, pair = _op(entry.op).partition(" ")
    for arrow in ("->", "<-"):
        a, sep, b = pair.partition(arrow)
        if sep and is_number(a, 9) and is_number(b, 9) and kind in ("send", "recv"):
            return kind, int(b)
    return None


def _p2p(
    members: Mapping[str, tuple[int, ...]],
    dumps: Mapping[int, Dump],
    summaries: Mapping[int, dict[str, _Member]],
    missing_ok: bool,
    failed: set[int],
    waited: dict[int, list[_Waited]],
    found: list[_Point],
) -> None:
    indexes: dict[str, dict[int, int]] = {}  # group -> rank -> its place in the group (made once per group)
    for r, groups in summaries.items():
        for group, mine in groups.items():
            if not mine.p2p_pending:
                continue
            ranks = members.get(group, ())
            index = indexes.get(group)
            if index is None:
                index = indexes[group] = {rank: i for i, rank in enumerate(ranks)}
            if r not in index:
                continue
            for e in mine.p2p_pending:
                peer = _peer(e)
                if peer is None or peer[1] >= len(ranks):
                    continue
                kind, local = peer
                other = ranks[local]
                if other == r:
                    continue
                if other not in dumps:
                    if missing_ok and other not in failed:
                        found.append(_Point([r], True, group, [other]))
                        waited.setdefault(other, []).append(_Waited(group, e.desc, "p2p_missing", e.p2p_seq, e.op, [r]))
                    continue
                want = ("recv" if kind == "send" else "send", index[r])
                theirs = summaries[other].get(group)
                if theirs is not None and any(_peer(x) == want for x in theirs.p2p_pending):
                    continue
                if _covers(dumps[other], e):
                    found.append(_Point([r], True, group, [other]))
                    waited.setdefault(other, []).append(_Waited(group, e.desc, "p2p", e.p2p_seq, e.op, [r]))


def _name(
    waited: dict[int, list[_Waited]],
    points: list[_Point],
    dumps: Mapping[int, Dump],
    members: Mapping[str, tuple[int, ...]],
    descs: Mapping[str, str],
    out: Conclusions,
) -> None:
    """The ranks waited for that wait for no one; a circle of waits names no one.

    A rank with a dump that waits for no other rank with a dump, and in no collective for one without, is named. One
    that waits in a collective only for ranks without a dump is not: it may be stuck behind them. A rank without a
    dump that its peers wait for in a collective (a pending send or recv to it says too little) is named unless the
    dumps explain the wait: a rank held back by a named rank (the named rank, or one waiting for it through ranks
    with a dump) belongs to a group it belongs to, so it may be waiting there too. A healthy rank blocked behind the
    cause and a cause whose dump was not collected look alike in the dumps: only a rank nothing else explains is
    named. Work is linear in the points' waiters and targets.
    """
    waiters: set[int] = set()  # ranks with a dump waiting for another rank with a dump
    behind_missing: dict[int, list[list[int]]] = {}  # rank with a dump -> ranks without one it waits for (collectives)
    waited_at: dict[int, list[_Point]] = {}  # rank with a dump -> the points it is waited for at
    needed: set[int] = set()  # ranks without a dump waited for in a collective
    blocked: dict[str, set[int]] = {}  # group -> its members waiting there in a collective for ranks without a dump
    for point in points:
        present = [r for r in point.targets if r in dumps]
        if present:
            waiters.update(point.waiters)
            for r in present:
                waited_at.setdefault(r, []).append(point)
        if not point.p2p and len(present) < len(point.targets):
            gone = [r for r in point.targets if r not in dumps]
            needed.update(gone)
            blocked.setdefault(point.group, set()).update(point.waiters)
            for w in point.waiters:
                behind_missing.setdefault(w, []).append(gone)
    candidates = [r for r in waited if r in dumps and r not in waiters]
    roots = sorted(r for r in candidates if r not in behind_missing)
    for r in roots:
        out.named[r] = _sentences(r, waited[r], dumps)
    stuck = sorted(r for r in candidates if r in behind_missing)
    if stuck:
        without = sorted({m for r in stuck for gone in behind_missing[r] for m in gone})
        out.notes.append(
            f"rank(s) {_listing(stuck)}, which their peers wait for, are not named: they wait themselves in a "
            f"collective for rank(s) {_listing(without)}, which wrote no flight-recorder dump, and may be stuck behind "
            "them"
        )
    # The ranks a named rank holds back: it, and every rank with a dump that waits for one of them (-> that rank).
    held = {r: r for r in roots}
    todo = list(roots)
    seen: set[int] = set()  # points whose waiters are held already
    while todo:
        r = todo.pop()
        for point in waited_at.get(r, ()):
            if id(point) in seen:
                continue
            seen.add(id(point))
            for w in point.waiters:
                if w not in held:
                    held[w] = held[r]
                    todo.append(w)
    # A rank without a dump may be waiting, in a group of it, for a held rank there: not for one that waits there in a
    # collective the ranks without a dump have not finished (they cannot be past it).
    explained: dict[int, tuple[str, int]] = {}  # rank without a dump -> (its smallest such group, a rank held there)
    if held and needed:
        named = set(roots)
        for group, ranks in sorted(members.items(), key=lambda kv: len(kv[1])):
            holder = next((x for x in ranks if x in named), None)
            if holder is None:
                waiting = blocked.get(group, ())
                holder = next((x for x in ranks if x in held and x not in waiting), None)
            if holder is None:
                continue
            for m in ranks:
                if m in needed and m not in explained:
                    explained[m] = (group, holder)
    if explained:
        ranks = sorted(explained)
        m = ranks[0]
        group, holder = explained[m]
        how = "which the dumps name" if holder in out.named else f"which waits behind rank {held[holder]}"
        out.notes.append(
            f"rank(s) {_listing(ranks)} wrote no flight-recorder dump and are not named, though their peers wait for "
            f"them in a collective: each belongs to a group with a rank the dumps name ({_listing(roots)}) or one "
            f"waiting behind it, so it may be waiting there too (rank {m}: {_quoted(group, descs.get(group, ''))} "
            f"with rank {holder}, {how})"
        )
    for r in sorted(needed):
        if r not in explained:
            out.missing[r] = _sentences(r, [i for i in waited[r] if i.why == "missing"], dumps)
    out.linked = _linked(out.missing, members)
    if not out.named and not needed and not stuck:
        out.notes.append(
            "in the flight-recorder dumps the ranks wait for each other in a circle (different ranks entered "
            "collectives in different orders?): no rank is singled out"
        )


def _linked(missing: Mapping[int, list[str]], members: Mapping[str, tuple[int, ...]]) -> dict[int, int]:
    """For each rank of `missing`, the least rank of the part of `missing` it shares groups with, directly or through
    others of them (a union of the groups' shares, linear in the groups' members)."""
    parent = {r: r for r in missing}

    def find(r: int) -> int:
        while parent[r] != r:
            parent[r] = parent[parent[r]]
            r = parent[r]
        return r

    if len(missing) > 1:
        for ranks in members.values():
            first = None
            for r in ranks:
                if r in parent:
                    if first is None:
                        first = find(r)
                    else:
                        parent[find(r)] = first
    least: dict[int, int] = {}
    for r in sorted(missing):
        least.setdefault(find(r), r)
    return {r: least[find(r)] for r in missing}


def _sentences(rank: int, items: list[_Waited], dumps: Mapping[int, Dump]) -> list[str]:
    """One sentence per (group, point) the rank was waited for at, most waiters first."""
    out = []
    for w in sorted(items, key=lambda w: (-len(w.waiters), w.group, w.seq or 0))[:MAX_SENTENCES]:
        waiters = w.waiters  # (sorted when the point was made; the rank itself is never among them)
        peers = f"{len(waiters)} peers ({_listing(waiters)}) wait" if len(waiters) > 1 else f"rank {waiters[0]} waits"
        where = _quoted(w.group, w.desc)
        op = _op(w.op)
        if w.why == "missing":
            out.append(
                f"rank {rank} wrote no flight-recorder dump; {peers} in seq {w.seq} ({op}) of {where}, which "
                "includes it"
            )
        elif w.why == "p2p":
            seq = f" (p2p seq {w.seq})" if w.seq is not None else ""
            out.append(f"rank {rank} has no matching point-to-point operation pending; {peers} in {op}{seq} of {where}")
        elif w.why == "behind":
            pend = _summaries_of(dumps[rank], w.group).pending
            last = f"last completed seq {pend.seq - 1}" if pend is not None and pend.seq else "is behind"
            out.append(f"rank {rank} {last} of {where}; {peers} in seq {w.seq} ({op}), past it")
        else:
            issued = _summaries_of(dumps[rank], w.group).issued
            if issued is not None:
                out.append(f"rank {rank} last issued seq {issued} of {where}; {peers} in seq {w.seq} ({op})")
            else:
                out.append(f"rank {rank}'s dump holds no collective of {where}; {peers} in seq {w.seq} ({op})")
    return out


def _summaries_of(dump: Dump, group: str) -> _Member:
    return _summaries(dump).get(group) or _Member()


def _mismatches(summaries: Mapping[int, dict[str, _Member]], descs: Mapping[str, str], out: Conclusions) -> None:
    """Collectives that differ between ranks at one (group, sequence number): at each rank's oldest unfinished and
    newest collective, where a mismatch stops a job."""
    points: dict[str, set[int]] = {}
    for groups in summaries.values():
        for group, m in groups.items():
            for e in (m.pending, m.last):
                if e is not None and e.seq is not None:
                    points.setdefault(group, set()).add(e.seq)
    # Each rank's entries at those points, in one pass over what was read (never the ranks once per point).
    at: dict[tuple[str, int], list[tuple[int, Entry]]] = {}
    for r, groups in summaries.items():
        for group, m in groups.items():
            wanted = points.get(group)
            if not wanted:
                continue
            by_seq = m.by_seq
            for seq in wanted if len(wanted) <= len(by_seq) else by_seq:
                e = by_seq.get(seq) if seq in wanted else None
                if e is not None:
                    at.setdefault((group, seq), []).append((r, e))
    for group in sorted(points):
        for seq in sorted(points[group]):
            seen = at.get((group, seq), [])
            if len(seen) < 2:
                continue
            if len({(e.op, e.input_dtypes, e.output_dtypes, e.input_sizes, e.output_sizes) for _, e in seen}) == 1:
                continue  # every rank recorded the same: nothing differs
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
        ordered = sorted(found.items(), key=lambda kv: -len(kv[1]))
        return f"{what} differ: " + "; ".join(f"{show(v)} on rank(s) {_listing(sorted(rs))}" for v, rs in ordered)

    ops = variants(lambda e: _op(e.op))
    if len(ops) > 1:
        return say("operations", ops, str)
    op = next(iter(ops), "")
    dtypes = variants(lambda e: (e.input_dtypes, e.output_dtypes) if e.input_dtypes else None)
    if len(dtypes) > 1:
        return say(f"{op} dtypes", dtypes, lambda v: "/".join(v[0]) + " -> " + "/".join(v[1] or ()))
    if op in SAME_SHAPE:
        sizes = variants(lambda e: (e.input_sizes, e.output_sizes) if e.input_sizes is not None else None)
        if len(sizes) > 1:
            return say(f"{op} sizes", sizes, lambda v: _shape(v[0]) + " -> " + _shape(v[1]))
    return None


def _shape(sizes: tuple[tuple[int, ...], ...] | None) -> str:
    if not sizes:
        return "[]"
    return ", ".join("[" + "x".join(map(str, s)) + "]" for s in sizes[:4]) + (" ..." if len(sizes) > 4 else "")
