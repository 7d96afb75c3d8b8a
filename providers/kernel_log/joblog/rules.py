"""Job-log rules: from what each node's job log shows to conclusions about nodes and about the job as a whole.

Pure functions of their inputs: the scope, the parsed tails (`lines.NodeLog`) and the kernel-side facts the rules
need (`OomKill`). Each rule, the public reports it was taken from and what it never concludes are described in
`docs/job-logs.md`. In short:

- a collective timeout where the ranks report the same sequence numbers singles no node out: `collective_timeout`
  on the job's resources;
- a rank that is behind (its process group's `last completed` work, or its timed-out `SeqNum`, lower than another
  rank's; or named lagging by PyTorch's desync report), or a rank of `scope.ranks` that fell silent on a node where
  no rank timed out while others did, points at the node its own lines place it on: `collective_hang`;
- torchelastic's root cause points at its node: `host_oom` when the node's kernel log shows the OOM killer took
  the SIGKILLed process, `process_killed` for another signal; a non-zero exit is the application's when the rank's
  traceback shows an application exception, and `process_exit` on the node when nothing says more;
- NCCL network warnings point at the reporting node (`network`), naming the peer;
- CUDA errors point at the node when NVIDIA's documentation gives a hardware, link or driver cause, and at the
  application when it gives a programming one.

A node's own failure (levels below) explains the symptoms other nodes see after it, so weaker conclusions on
other nodes are then kept as context only; job-level conclusions stand only where no node is named.
"""

from __future__ import annotations

import signal as signals
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from providers.base import MAX_EVIDENCE, Evidence, cut_text, shifted
from providers.kernel_log.joblog.cuda_errors import Meaning
from providers.kernel_log.joblog.lines import (
    CudaError,
    DesyncReport,
    ElasticFailure,
    ExceptionKind,
    GroupRank,
    LogLine,
    NetworkKind,
    NodeLog,
    PythonTraceback,
    WatchdogTimeout,
    WorkProgress,
)
from providers.kernel_log.ranking import CATEGORY_RANK

#: the evidence source of every job-log line
SOURCE = "joblog"
#: the OOM kill of a SIGKILLed rank is matched by pid, or by time: logged at most this long before the first
#: collector time on torchelastic's summary entry (torchelastic first stops the other workers, SIGTERM and up to
#: 30 s by default, then prints the summary) ...
OOM_KILL_BEFORE = timedelta(seconds=60)
#: ... and at most this long after it (the kernel's and the collector's clocks, and the order lines reach files)
OOM_KILL_AFTER = timedelta(seconds=5)

#: ProcessGroupNCCL's point-to-point work types: they are numbered by their own counter, which the group's
#: `last enqueued` / `last completed` numbers then mix with the collectives' (PyTorch's `pgStatus`)
P2P_OPS = frozenset({"SEND", "RECV", "RECVANYSOURCE"})
#: categories that show a node's own failure; the others may follow another node's failure
PRIMARY = frozenset({"gpu_memory", "nvlink", "gpu_unavailable", "gpu_driver", "host_oom", "process_killed"})


@dataclass(frozen=True)
class OomKill:
    """A kernel OOM-killer kill on a node, as the provider read it from that node's kernel log."""

    pid: int
    observed_at: datetime  # timezone-aware
    message: str  # the kernel line, shown as evidence
    source: str = "syslog"  # the kernel source's evidence token (`syslog` or `loki`)


@dataclass(frozen=True)
class NodeConclusion:
    node: str  # a node of scope.nodes, spelled as the scope spells it
    category: str
    observed_at: datetime | None  # the earliest collector time among its lines, None when none has one
    evidence: tuple[Evidence, ...]


@dataclass(frozen=True)
class JobConclusion:
    """A conclusion about the job's resources as a whole (`AllJobResources`)."""

    category: str  # `collective_timeout` or `application`
    observed_at: datetime | None
    evidence: tuple[Evidence, ...]


@dataclass(frozen=True)
class JobLogConclusions:
    nodes: tuple[NodeConclusion, ...]  # at most one per node, in scope order
    job: JobConclusion | None  # only when no node conclusion stands
    #: per node, job-log lines that point at nothing by themselves (a CUDA error NVIDIA gives no cause for, a
    #: symptom another node's failure explains): evidence to show beside a kernel finding on that node, never a
    #: finding of their own
    context: dict[str, tuple[Evidence, ...]]
    #: rank -> the one scope node its lines place it on
    placement: dict[int, str]
    #: ranks whose lines appear in more than one node's file: placed nowhere
    ambiguous_ranks: tuple[int, ...]
    #: sentences on what was not concluded and why; node names and ranks only, never log text
    notes: tuple[str, ...]


# ---------------------------------------------------------------- working types


@dataclass(frozen=True)
class _Item:
    key: tuple[object, ...]  # items with the same key show the same event: one of them is shown first
    evidence: Evidence


@dataclass
class _Candidate:
    category: str
    items: list[_Item] = field(default_factory=list)


def _line(line: LogLine) -> Evidence:
    return Evidence(SOURCE, cut_text(line.text), line.observed_at)


def _said(message: str) -> Evidence:
    """A sentence the rules write (what the lines show together), not a log line."""
    return Evidence(SOURCE, cut_text(message))


@dataclass
class _Work:
    scope_nodes: Sequence[str]
    scope_ranks: Sequence[int]
    logs: Mapping[str, NodeLog]
    oom_kills: Mapping[str, Sequence[OomKill]]
    max_evidence: int
    placement: dict[int, str] = field(default_factory=dict)
    ambiguous: dict[int, set[str]] = field(default_factory=dict)
    nodes: dict[str, list[_Candidate]] = field(default_factory=dict)
    job: list[_Candidate] = field(default_factory=list)
    context: dict[str, list[_Item]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    timed_out: dict[int, tuple[str, LogLine]] = field(default_factory=dict)  # global rank -> (node, a line)
    #: global ranks and process groups that timed out on point-to-point work: their numbers are not compared
    p2p_ranks: set[int] = field(default_factory=set)
    p2p_groups: set[str] = field(default_factory=set)

    def node(self, node: str, category: str, items: Iterable[_Item]) -> None:
        self.nodes.setdefault(node, []).append(_Candidate(category, list(items)))

    def add_context(self, node: str, items: Iterable[_Item]) -> None:
        self.context.setdefault(node, []).extend(items)


# ---------------------------------------------------------------- entry point


def conclude(
    scope_nodes: Sequence[str],
    scope_ranks: Sequence[int],
    logs: Mapping[str, NodeLog],
    oom_kills: Mapping[str, Sequence[OomKill]] | None = None,
    *,
    max_evidence: int = MAX_EVIDENCE,
) -> JobLogConclusions:
    """Conclusions from the parsed job-log tails of one attempt.

    `logs` maps scope nodes to their parsed tails (other keys are ignored); `oom_kills` maps scope nodes to the
    OOM-killer kills their kernel log shows in the window. At most `max_evidence` (1..32) items per conclusion.
    """
    if not 1 <= max_evidence <= MAX_EVIDENCE:
        raise ValueError(f"max_evidence must be between 1 and {MAX_EVIDENCE}")
    in_scope = set(scope_nodes)
    work = _Work(
        scope_nodes=scope_nodes,
        scope_ranks=scope_ranks,
        logs={n: log for n, log in logs.items() if n in in_scope},
        oom_kills=oom_kills or {},
        max_evidence=max_evidence,
    )
    _place_ranks(work)
    _collectives(work)
    _root_causes(work)
    _network(work)
    _cuda(work)
    return _decide(work)


# ---------------------------------------------------------------- ranks to nodes


def _place_ranks(work: _Work) -> None:
    """A rank's own lines in a node's file, or torchelastic's `host` + `rank`, place it on that node."""
    seen: dict[int, set[str]] = {}
    for node, log in work.logs.items():
        for rank in log.ranks:
            seen.setdefault(rank, set()).add(node)
        for failure in log.failures:
            if failure.rank is not None and failure.host_node is not None:
                seen.setdefault(failure.rank, set()).add(failure.host_node)
    for rank, nodes in seen.items():
        if len(nodes) == 1:
            work.placement[rank] = next(iter(nodes))
        else:
            work.ambiguous[rank] = nodes
    if work.ambiguous:
        ranks = sorted(work.ambiguous)
        work.notes.append(
            f"{len(ranks)} rank(s) appear in more than one node's log and are placed on no node: {_list(ranks)}"
        )


def _global(rank: int | None, group: GroupRank | None) -> int | None:
    """The global rank of a record: its `[rankN]:` prefix, or its default-process-group marker."""
    if rank is not None:
        return rank
    if group is not None and group.default_group:
        return group.rank
    return None


# ---------------------------------------------------------------- collectives


def _collectives(work: _Work) -> None:
    timeouts = [(n, t) for n, log in work.logs.items() for t in log.timeouts]
    progress = [(n, p) for n, log in work.logs.items() for p in log.progress]
    desync = [(n, d) for n, log in work.logs.items() for d in log.desync]
    if not (timeouts or progress or desync):
        return
    for _, t in timeouts:
        if t.op in P2P_OPS:
            g = _global(t.rank, t.group)
            if g is not None:
                work.p2p_ranks.add(g)
            if t.group is not None and t.group.pg is not None:
                work.p2p_groups.add(t.group.pg)
    unidentified = 0
    for node, rec in [*timeouts, *progress]:
        g = _global(rec.rank, rec.group)
        if g is None:
            unidentified += 1
        elif g not in work.timed_out:
            work.timed_out[g] = (node, rec.line)
    behind: dict[int, list[_Item]] = {}
    _behind_by_progress(work, progress, behind)
    _behind_by_seq(work, timeouts, behind)
    _behind_by_desync(work, desync, behind)
    silent = _silent(work, unidentified, behind)
    pointed = False
    for rank, items in sorted({**behind, **silent}.items()):
        node = work.placement.get(rank)
        if node is None:
            where = "is on more than one node" if rank in work.ambiguous else "is placed on no node by any log line"
            work.notes.append(f"rank {rank} is behind or silent in a collective but {where}: no node is named")
            continue
        own = work.logs[node].ranks.get(rank)
        extra = [_Item(("last", rank), _line(own.last))] if own is not None else []
        work.node(node, "collective_hang", [*items, *extra])
        pointed = True
    if not pointed:
        _timeout_items(work, timeouts, progress)


def _behind_by_progress(
    work: _Work, progress: list[tuple[str, WorkProgress]], behind: dict[int, list[_Item]]
) -> None:
    """Within one process group, a rank whose `last completed` work is lower than another's is behind."""
    groups: dict[str, dict[int, tuple[str, WorkProgress]]] = {}
    for node, p in progress:
        g = _global(p.rank, p.group)
        if p.group is None or p.group.pg is None or g is None:
            continue
        groups.setdefault(p.group.pg, {})[g] = (node, p)  # the latest line of each rank wins
    for pg, ranks in groups.items():
        if _mixes_p2p(work, pg, ranks):
            continue
        top = max(p.last_completed for _, p in ranks.values())
        ahead = next(p for _, p in ranks.values() if p.last_completed == top)
        for rank, (_, p) in ranks.items():
            if p.last_completed < top:
                said = (
                    f"rank {rank} completed work {p.last_completed} of process group {pg} while rank "
                    f"{_global(ahead.rank, ahead.group)} completed {top}: rank {rank} is behind"
                )
                behind.setdefault(rank, []).extend(
                    [_Item(("said", rank, pg), _said(said)), _Item(("own", rank), _line(p.line)),
                     _Item(("ahead", pg), _line(ahead.line))]
                )


def _behind_by_seq(work: _Work, timeouts: list[tuple[str, WatchdogTimeout]], behind: dict[int, list[_Item]]) -> None:
    """Within one named process group, a rank that timed out on an earlier `SeqNum` than another is behind."""
    groups: dict[str, dict[int, WatchdogTimeout]] = {}
    unnamed: set[int] = set()
    for _, t in timeouts:
        if t.seq is None:
            continue
        g = _global(t.rank, t.group)
        if t.group is None or t.group.pg is None or g is None:
            unnamed.add(t.seq)
            continue
        groups.setdefault(t.group.pg, {})[g] = t
    for pg, ranks in groups.items():
        if _mixes_p2p(work, pg, ranks):
            continue
        top = max(t.seq or 0 for t in ranks.values())
        ahead = next(t for t in ranks.values() if t.seq == top)
        for rank, t in ranks.items():
            if (t.seq or 0) < top:
                said = f"rank {rank} timed out on work {t.seq} of process group {pg}, another rank on work {top}"
                behind.setdefault(rank, []).extend(
                    [_Item(("said-seq", rank, pg), _said(said)), _Item(("own", rank), _line(t.line)),
                     _Item(("ahead-seq", pg), _line(ahead.line))]
                )
    if len(unnamed) > 1:
        work.notes.append(
            "watchdog timeouts name different sequence numbers but not their process group (sequence numbers "
            "count per group): they single no rank out"
        )


def _mixes_p2p(work: _Work, pg: str, ranks: Mapping[int, object]) -> bool:
    """Whether a group's numbers may count point-to-point work, which ranks do not share: then none is compared."""
    if pg in work.p2p_groups or work.p2p_ranks.intersection(ranks):
        work.notes.append(
            f"process group {pg} timed out on point-to-point work, whose numbers ranks do not share: its ranks' "
            "numbers are not compared"
        )
        return True
    return False


def _behind_by_desync(work: _Work, desync: list[tuple[str, DesyncReport]], behind: dict[int, list[_Item]]) -> None:
    """PyTorch's desync report names lagging ranks of its process group; those of the default group are global."""
    for _, report in desync:
        if report.group is None or not report.group.default_group:
            work.notes.append(
                f"a desync report names lagging rank(s) {_list(report.lagging)} of "
                f"{'an unnamed' if report.group is None else 'a non-default'} process group: their global ranks "
                "are unknown, so no node is named"
            )
            continue
        for rank in report.lagging:
            said = f"PyTorch's desync report names rank {rank} as lagging"
            behind.setdefault(rank, []).extend(
                [_Item(("said-desync", rank), _said(said)), _Item(("desync", report.line.number), _line(report.line))]
            )


def _silent(work: _Work, unidentified: int, behind: Mapping[int, list[_Item]]) -> dict[int, list[_Item]]:
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
    silent: dict[int, list[_Item]] = {}
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
            silent[rank] = [_Item(("said-silent", rank), _said(said)), _Item(("reporter",), _line(reporter_line))]
    if unplaced:
        work.notes.append(
            f"{len(unplaced)} rank(s) of the scope reported no timeout and no log line places them on a node, so "
            f"they point at no node: {_list(unplaced)}"
        )
    if local_peers:
        work.notes.append(
            f"{len(local_peers)} rank(s) reported no timeout on nodes where other ranks did (their worker may have "
            f"been stopped before its own watchdog fired): not attributed: {_list(local_peers)}"
        )
    return silent


def _ranks_with_own_failure(work: _Work) -> set[int]:
    """Ranks whose own lines show another failure (the rules for that failure speak for them)."""
    ranks: set[int] = set()
    for log in work.logs.values():
        ranks.update(e.rank for e in log.cuda if e.rank is not None)
        ranks.update(t.rank for t in log.tracebacks if t.rank is not None)
        ranks.update(f.rank for f in log.failures if f.root and f.rank is not None)
    return ranks


def _timeout_items(
    work: _Work, timeouts: list[tuple[str, WatchdogTimeout]], progress: list[tuple[str, WorkProgress]]
) -> None:
    """No rank is singled out: the collective timeout is the job's, with its lines as evidence."""
    seqs = sorted({t.seq for _, t in timeouts if t.seq is not None})
    ranks = sorted(work.timed_out)
    said = (
        f"{len(ranks) or 'some'} rank(s) timed out in a collective"
        + (f" (sequence number {_list(seqs)})" if seqs else "")
        + "; no rank is behind the others, so no node is singled out"
    )
    items = [_Item(("said-timeout",), _said(said))]
    items += [_Item(("timeout", t.op, t.seq), _line(t.line)) for _, t in timeouts]
    items += [
        _Item(("progress", p.group.pg if p.group else None, p.work, p.last_enqueued, p.last_completed), _line(p.line))
        for _, p in progress
    ]
    work.job.append(_Candidate("collective_timeout", items))


# ---------------------------------------------------------------- torchelastic's root cause


def _root_causes(work: _Work) -> None:
    for log in work.logs.values():
        for failure in log.failures:
            if failure.root:
                _root_cause(work, log, failure)


def _root_cause(work: _Work, log: NodeLog, failure: ElasticFailure) -> None:
    rank = failure.rank
    summary = _summary_item(failure)
    node = failure.host_node
    if node is None:
        if rank is not None and rank in work.placement:
            node = work.placement[rank]
        else:
            work.notes.append(
                f"torchelastic's root cause (rank {_maybe(rank)}) names a host that is not a scope node and no log "
                "line places the rank: no node is named"
            )
            return
    elif rank is not None and rank in work.ambiguous:
        work.notes.append(f"torchelastic's root cause rank {rank} appears on more than one node: no node is named")
        return
    if rank is not None and rank in work.timed_out:
        # The watchdog timed out and took the process down: the collective rules decide who is behind.
        work.add_context(node, [summary])
        return
    name = failure.signal or _signal_name(failure.exitcode)
    if name is not None and name != "SIGABRT":
        if name == "SIGKILL":
            kill = _oom_kill(work.oom_kills.get(node, ()), failure)
            if kill is not None:
                said = (
                    f"torchelastic's root cause: rank {_maybe(rank)} on {node} got SIGKILL (pid {failure.pid}); the "
                    f"node's kernel log shows the OOM killer killing pid {kill.pid}"
                )
                work.node(node, "host_oom", [
                    _Item(("said-oom", rank), _said(said)), summary,
                    _Item(("oom", kill.pid), Evidence(kill.source, cut_text(kill.message), kill.observed_at)),
                ])
                return
        said = f"torchelastic's root cause: rank {_maybe(rank)} on {node} was ended by {name}"
        work.node(node, "process_killed", [_Item(("said-signal", rank), _said(said)), summary])
        return
    # A non-zero exit (or SIGABRT, which a process raises itself): its traceback says more, if there is one.
    traceback = _root_traceback(log, failure)
    if traceback is not None:
        kind, items = traceback
        if kind is ExceptionKind.APPLICATION:
            said = f"torchelastic's root cause: rank {_maybe(rank)} on {node} exited after an application exception"
            work.job.append(_Candidate("application", [_Item(("said-app", rank), _said(said)), summary, *items]))
            return
        if kind is ExceptionKind.CUDA:
            work.add_context(node, [summary, *items])  # the CUDA rule speaks for it
            return
        if kind is ExceptionKind.COMMUNICATION:
            work.notes.append(
                f"torchelastic's root cause rank {_maybe(rank)} on {node} failed in communication, which follows "
                "another failure: not attributed to its node by itself"
            )
            work.add_context(node, [summary, *items])
            return
    code = "SIGABRT" if name == "SIGABRT" else f"exit code {_maybe(failure.exitcode)}"
    said = f"torchelastic's root cause: rank {_maybe(rank)} on {node} ended with {code} and no traceback says why"
    work.node(node, "process_exit", [_Item(("said-exit", rank), _said(said)), summary])


def _summary_item(failure: ElasticFailure) -> _Item:
    text = " | ".join(" ".join(line.text.split()) for line in failure.lines)
    heading = "Root Cause (first observed failure)" if failure.root else "Failure"
    observed = failure.reported_at
    return _Item(("elastic", failure.rank, failure.pid), Evidence(SOURCE, cut_text(f"{heading}: {text}"), observed))


def _signal_name(exitcode: int | None) -> str | None:
    if exitcode is None or exitcode >= 0:
        return None
    try:
        return signals.Signals(-exitcode).name
    except ValueError:
        return f"signal {-exitcode}"


def _oom_kill(kills: Sequence[OomKill], failure: ElasticFailure) -> OomKill | None:
    """The kernel's OOM kill of this process: the same pid, or (the pids of a container and of the host differ)
    a kill shortly before torchelastic's summary was stamped."""
    for kill in kills:
        if failure.pid is not None and kill.pid == failure.pid:
            return kill
    reported = failure.reported_at
    if reported is None:
        return None
    for kill in sorted(kills, key=lambda k: k.observed_at):
        if shifted(reported, -OOM_KILL_BEFORE) <= kill.observed_at <= shifted(reported, OOM_KILL_AFTER):
            return kill
    return None


def _root_traceback(log: NodeLog, failure: ElasticFailure) -> tuple[ExceptionKind, list[_Item]] | None:
    """The root cause's traceback: the one in the summary, else the rank's own, else one of its node's workers."""
    if failure.traceback_exception is not None and failure.traceback_kind is not None:
        return failure.traceback_kind, []
    own = [t for t in log.tracebacks if failure.rank is not None and t.rank == failure.rank]
    unprefixed = [t for t in log.tracebacks if t.rank is None and t.kind is not ExceptionKind.LAUNCHER]
    chosen: PythonTraceback | None = (own or unprefixed or [None])[-1]
    if chosen is None:
        return None
    return chosen.kind, _traceback_items(chosen)


def _traceback_items(t: PythonTraceback) -> list[_Item]:
    items = [_Item(("tb-first", t.rank, t.first.number), _line(t.first))]
    if t.last_frame:
        items.append(_Item(("tb-frame", t.rank, t.line.number), Evidence(SOURCE, cut_text(t.last_frame))))
    items.append(_Item(("tb", t.exception), _line(t.line)))
    return items


# ---------------------------------------------------------------- NCCL network warnings


_NETWORK_WORDS = {
    NetworkKind.IB_COMPLETION: "an InfiniBand work completion with an error status",
    NetworkKind.PEER_CLOSED: "a connection closed or reset by its peer",
    NetworkKind.CONNECT: "a failed connection to a peer",
    NetworkKind.VERBS_CALL: "a failed InfiniBand verbs call",
}


def _network(work: _Work) -> None:
    for node, log in work.logs.items():
        if not log.network:
            continue
        kinds = sorted({_NETWORK_WORDS[e.kind] for e in log.network})
        items = [_Item(("said-net",), _said(f"NCCL on {node} reported {', '.join(kinds)}"))]
        named: set[str] = set()
        for err in log.network:
            if err.peer and err.peer not in named:
                # Each peer once, its statement beside the first line that names it.
                named.add(err.peer)
                where = f"the scope node {err.peer_node}" if err.peer_node else "not matched to a scope node"
                status = f", status {err.status}" if err.status is not None else ""
                said = f"the line names the peer {err.peer} ({where}){status}"
                items.append(_Item(("said-peer", err.peer), _said(said)))
            items.append(_Item(("net", err.kind, err.peer, err.status), _line(err.line)))
        work.node(node, "network", items)


# ---------------------------------------------------------------- CUDA errors


def _cuda(work: _Work) -> None:
    for node, log in work.logs.items():
        by_meaning: dict[Meaning, list[CudaError]] = {}
        for err in log.cuda:
            meaning = err.kind.meaning if err.kind is not None else Meaning.UNKNOWN
            by_meaning.setdefault(meaning, []).append(err)
        for err_list in _by_category(by_meaning.get(Meaning.NODE, [])).values():
            kind = err_list[0].kind
            assert kind is not None and kind.category is not None
            said = f"{_who(err_list[0], node)} reported {kind.runtime_name}: per NVIDIA, {kind.reason}"
            items = [_Item(("said-cuda", kind.runtime_name), _said(said))]
            items += [_Item(("cuda", e.text), _line(e.line)) for e in err_list]
            work.node(node, kind.category, items)
        app = by_meaning.get(Meaning.APPLICATION, [])
        if app:
            items = []
            for err in app:
                kind = err.kind
                assert kind is not None
                said = f"{_who(err, node)} reported {kind.runtime_name}: per NVIDIA, {kind.reason}"
                items += [_Item(("said-cuda", kind.runtime_name, node), _said(said)),
                          _Item(("cuda", err.text), _line(err.line))]
            work.job.append(_Candidate("application", items))
        unknown = by_meaning.get(Meaning.UNKNOWN, [])
        if unknown:
            work.add_context(node, [_Item(("cuda", e.text), _line(e.line)) for e in unknown])


def _by_category(errors: list[CudaError]) -> dict[str, list[CudaError]]:
    out: dict[str, list[CudaError]] = {}
    for err in errors:
        assert err.kind is not None and err.kind.category is not None
        out.setdefault(err.kind.category, []).append(err)
    return out


def _who(err: CudaError, node: str) -> str:
    return f"rank {err.rank} on {node}" if err.rank is not None else f"a process on {node}"


# ---------------------------------------------------------------- deciding


def _decide(work: _Work) -> JobLogConclusions:
    """A node's own failure explains what other nodes see after it; job-level conclusions stand alone."""
    primary = {n for n, cands in work.nodes.items() if any(c.category in PRIMARY for c in cands)}
    has_app = any(c.category == "application" for c in work.job)
    if primary or has_app:
        for node in list(work.nodes):
            if node not in primary:
                dropped = work.nodes.pop(node)
                work.add_context(node, [i for c in dropped for i in c.items])
                names = ", ".join(sorted({c.category for c in dropped}))
                because = "another node shows its own failure" if primary else "the application failed"
                work.notes.append(f"{node}: {names} kept as context only: {because}")
    nodes = tuple(
        _node_conclusion(work, node, work.nodes[node]) for node in work.scope_nodes if node in work.nodes
    )
    job: JobConclusion | None = None
    job_candidates = [c for c in work.job if c.category == "application"] or work.job
    if job_candidates and not nodes:
        category = job_candidates[0].category
        items = [i for c in job_candidates if c.category == category for i in c.items]
        evidence = _bounded(items, work.max_evidence)
        job = JobConclusion(category, _earliest(evidence), evidence)
    elif job_candidates:
        work.notes.append(
            f"the job-level {'/'.join(sorted({c.category for c in job_candidates}))} conclusion is not made: "
            "a node is named"
        )
    context = {
        node: _bounded(items, work.max_evidence)
        for node, items in work.context.items()
        if node not in {n.node for n in nodes}
    }
    for n in nodes:
        # A named node's own context is part of its finding's story; keep it beside the finding for the merge.
        if n.node in work.context:
            context[n.node] = _bounded(work.context[n.node], work.max_evidence)
    return JobLogConclusions(
        nodes=nodes,
        job=job,
        context=context,
        placement=dict(work.placement),
        ambiguous_ranks=tuple(sorted(work.ambiguous)),
        notes=tuple(dict.fromkeys(work.notes)),
    )


def _node_conclusion(work: _Work, node: str, candidates: list[_Candidate]) -> NodeConclusion:
    ordered = sorted(candidates, key=lambda c: -CATEGORY_RANK.get(c.category, 0))
    evidence = _bounded([i for c in ordered for i in c.items], work.max_evidence)
    return NodeConclusion(node, ordered[0].category, _earliest(evidence), evidence)


def _bounded(items: list[_Item], limit: int) -> tuple[Evidence, ...]:
    """At most `limit` items: one per distinct event first (in order), then the repeats; no text twice."""
    first: list[Evidence] = []
    rest: list[Evidence] = []
    keys: set[tuple[object, ...]] = set()
    texts: set[str] = set()
    for item in items:
        if item.evidence.message in texts:
            continue
        texts.add(item.evidence.message)
        if item.key in keys:
            rest.append(item.evidence)
        else:
            keys.add(item.key)
            first.append(item.evidence)
    return tuple((first + rest)[:limit])


def _earliest(evidence: Iterable[Evidence]) -> datetime | None:
    times = [e.observed_at for e in evidence if e.observed_at is not None]
    return min(times) if times else None


def _list(values: Iterable[object], limit: int = 16) -> str:
    values = list(values)
    shown = ", ".join(str(v) for v in values[:limit])
    return shown + (f" and {len(values) - limit} more" if len(values) > limit else "")


def _maybe(value: object) -> str:
    return "?" if value is None else str(value)
