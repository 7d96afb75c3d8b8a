"""Job-log rules: from what each node's job log shows to conclusions about nodes and about the job as a whole.

Pure functions of their inputs: the scope, the parsed tails (`lines.NodeLog`) and the kernel-side facts the rules
need (`OomKill`). They follow one decision principle (`docs/job-logs.md` states it; the signal table,
`data/signals.csv`, gives each signal's meaning): node evidence points at its node; exits, signals, timeouts and
configuration errors point at nothing by themselves; the application's failures point at the job. In short:

- a collective timeout where the ranks of one process group (known by its GUID or name) report the same sequence
  numbers singles no node out: `collective_timeout` on the job's resources;
- a rank that is behind its group's others (`last completed` work or timed-out `SeqNum` lower, or named lagging by
  PyTorch's desync report), or a rank of `scope.ranks` that fell silent on a node where no rank timed out while
  others did, points at the node its own lines place it on: `collective_hang`;
- torchelastic's root cause is `host_oom` on its node when the node's kernel log shows the OOM killer took the
  SIGKILLed process, the application's when its traceback ends in an application exception, and otherwise a note:
  an exit or a signal names no node by itself;
- InfiniBand completion errors and port events point at the reporting node (`network`); closed sockets, failed
  connects and verbs calls are notes;
- every other line is read as its signal table row's meaning says (`_by_meaning`): a hardware, driver, link or
  fabric sign names the node that logged it; the job's own causes (its program, its configuration, the scheduler's
  action) are a conclusion on the job's resources with the lines as evidence; a sign that the node cannot run the
  job as it is names the nodes that show it while the scope's other nodes that reported do not, and is the job's
  configuration when every node that reported shows it; an ambiguous sign waits for the node's own kernel event
  and is a note without it; a consequence of another failure is a note;
- a traceback ending in an application exception points at the job.

A node's own failure (levels below) explains the symptoms other nodes see after it, and so does the job's own
cause, so weaker conclusions on other nodes are then kept as context only; job-level conclusions stand only where no
node is named.
"""

from __future__ import annotations

import signal as signals
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from functools import partial

from providers.base import MAX_EVIDENCE, Evidence, cut_text, shifted
from providers.telemetry.joblog.collectives import collectives, place_ranks
from providers.telemetry.joblog.records import (
    CudaError,
    ElasticFailure,
    ExceptionKind,
    NcclNetworkError,
    NetworkKind,
    NodeLog,
    PythonTraceback,
    SignalHit,
)
from providers.telemetry.joblog.signals import BY_ID, CHECK_SITE, Signal, SignalMeaning
from providers.telemetry.joblog.work import (
    JOB_CAUSES,
    NODE_STATE_CATEGORY,
    OOM_KILL_AFTER,
    OOM_KILL_BEFORE,
    PRIMARY,
    SOURCE,
    Candidate,
    Context,
    Item,
    JobConclusion,
    JobLogConclusions,
    NodeConclusion,
    OomKill,
    RankError,
    Work,
    line_evidence,
    listing,
    or_unknown,
    said_evidence,
)
from providers.telemetry.ranking import CATEGORY_RANK

#: signal table ids the rules name themselves
ROOT_CAUSE = "torchelastic_root_cause"
APP_EXCEPTION = "python_application_exception"
UNLISTED_CUDA = "cuda_error_unlisted"

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
    work = Work(
        scope_nodes=scope_nodes,
        scope_ranks=scope_ranks,
        logs={n: log for n, log in logs.items() if n in in_scope},
        oom_kills=oom_kills or {},
        max_evidence=max_evidence,
    )
    place_ranks(work)
    collectives(work)
    _root_causes(work)
    _tracebacks(work)
    _network(work)
    _cuda(work)
    _signal_lines(work)
    _node_state(work)
    silence = _silence(work)
    return replace(_decide(work), silence=silence)


# ---------------------------------------------------------------- torchelastic's root cause


def _root_causes(work: Work) -> None:
    for log in work.logs.values():
        for failure in log.failures:
            if failure.root:
                _root_cause(work, log, failure)


def _root_cause(work: Work, log: NodeLog, failure: ElasticFailure) -> None:
    rank = failure.rank
    summary = _summary_item(failure)
    node = failure.host_node
    if node is None:
        if rank is not None and rank in work.placement:
            node = work.placement[rank]
        else:
            work.notes.append(
                f"torchelastic's root cause (rank {or_unknown(rank)}) names a host that is not a scope node and no log "
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
    if name == "SIGKILL":
        kill = _oom_kill(work.oom_kills.get(node, ()), failure)
        if kill is not None:
            said = (
                f"torchelastic's root cause: rank {or_unknown(rank)} on {node} got SIGKILL (pid {failure.pid}); "
                f"the node's kernel log shows the OOM killer killing pid {kill.pid}"
            )
            work.node(node, "host_oom", [
                Item(("said-oom", rank), said_evidence(said)), summary,
                Item(("oom", kill.pid), Evidence(kill.source, cut_text(kill.message), kill.observed_at)),
            ], signals=[ROOT_CAUSE])
            return
    if name is not None and name != "SIGABRT":
        # A signal is not evidence against a node: a scheduler's SIGTERM, a SIGKILL the kernel log does not explain,
        # a SIGBUS from a container's small /dev/shm all look alike. The node's own kernel event decides.
        _left_to_the_kernel(
            work, node, summary,
            f"torchelastic's root cause: rank {or_unknown(rank)} on {node} was ended by {_signal_number(name)}; a "
            "signal names no node by itself",
        )
        return
    # A non-zero exit (or SIGABRT, which a process raises itself): its traceback says more, if there is one.
    traceback = _root_traceback(log, failure)
    if traceback is not None:
        kind, items = traceback
        if kind is ExceptionKind.APPLICATION:
            said = f"torchelastic's root cause: rank {or_unknown(rank)} on {node} exited after an application exception"
            work.job.append(Candidate(
                "application", [Item(("said-app", rank), said_evidence(said)), summary, *items],
                (ROOT_CAUSE, APP_EXCEPTION),
            ))
            return
        if kind is ExceptionKind.CUDA:
            work.add_context(node, [summary, *items])  # the CUDA rule speaks for it
            return
        if kind is ExceptionKind.COMMUNICATION:
            work.note(
                f"torchelastic's root cause rank {or_unknown(rank)} on {node} failed in communication, which follows "
                "another failure: not attributed to its node by itself",
                ROOT_CAUSE, node,
            )
            work.add_context(node, [summary, *items])
            return
    code = "SIGABRT" if name == "SIGABRT" else f"exit code {or_unknown(failure.exitcode)}"
    _left_to_the_kernel(
        work, node, summary,
        f"torchelastic's root cause: rank {or_unknown(rank)} on {node} ended with {code} and no traceback says why; "
        "an exit names no node by itself",
    )


def _left_to_the_kernel(work: Work, node: str, summary: Item, said: str) -> None:
    """A root cause that names no node by itself: kept as the node's context, said, and left for the node's own
    kernel event to settle."""
    work.add_context(node, [summary])
    work.unsettled.setdefault(node, []).append(ROOT_CAUSE)
    work.note(said, ROOT_CAUSE, node)


def _summary_item(failure: ElasticFailure) -> Item:
    """The summary entry as one line of evidence, made when it is read (`Item.later`)."""
    return Item.later(("elastic", failure.rank, failure.pid), partial(_summary_evidence, failure))


def _summary_evidence(failure: ElasticFailure) -> Evidence:
    text = " | ".join(" ".join(line.text.split()) for line in failure.lines)
    heading = "Root Cause (first observed failure)" if failure.root else "Failure"
    return Evidence(SOURCE, cut_text(f"{heading}: {text}"), failure.reported_at)


def _signal_name(exitcode: int | None) -> str | None:
    if exitcode is None or exitcode >= 0:
        return None
    try:
        return signals.Signals(-exitcode).name
    except ValueError:
        return f"signal {-exitcode}"


def _signal_number(name: str) -> str:
    """`signal 9` for SIGKILL (a note names no log text)."""
    try:
        return f"signal {signals.Signals[name].value}"
    except KeyError:
        return name if name.startswith("signal ") else "a signal"


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


def _root_traceback(log: NodeLog, failure: ElasticFailure) -> tuple[ExceptionKind, list[Item]] | None:
    """The root cause's traceback: the one in the summary, else the rank's own, else one of its node's workers."""
    if failure.traceback_exception is not None and failure.traceback_kind is not None:
        return failure.traceback_kind, []
    own = [t for t in log.tracebacks if failure.rank is not None and t.rank == failure.rank]
    unprefixed = [t for t in log.tracebacks if t.rank is None and t.kind is not ExceptionKind.LAUNCHER]
    chosen: PythonTraceback | None = (own or unprefixed or [None])[-1]
    if chosen is None:
        return None
    return chosen.kind, _traceback_items(chosen)


def _traceback_items(t: PythonTraceback) -> list[Item]:
    items = [Item(("tb-first", t.rank, t.first.number), line_evidence(t.first))]
    if t.last_frame:
        items.append(Item(("tb-frame", t.rank, t.line.number), Evidence(SOURCE, cut_text(t.last_frame))))
    items.append(Item(("tb", t.exception), line_evidence(t.line)))
    return items


# ---------------------------------------------------------------- NCCL network warnings


_NETWORK_WORDS = {
    NetworkKind.IB_COMPLETION: "an InfiniBand work completion with an error status",
    NetworkKind.ASYNC_EVENT: "an InfiniBand port error or fatal device event",
    NetworkKind.PEER_CLOSED: "a connection closed or reset by its peer",
    NetworkKind.CONNECT: "a failed connection to a peer",
    NetworkKind.VERBS_CALL: "a failed InfiniBand verbs call",
}


def _network(work: Work) -> None:
    """Each NCCL network warning as the row it carries says: the row its format matched, or the row of the status or
    event its code names when that code decides (`records.NcclNetworkError.signal`); the family's row otherwise."""
    for node, log in work.logs.items():
        if not log.network:
            continue
        link = [e for e in log.network if _net_row(e).meaning.names_node]
        other = [e for e in log.network if not _net_row(e).meaning.names_node]
        for ident in sorted({_net_row(e).id for e in other}):
            signal = BY_ID[ident]
            errors = [e for e in other if _net_row(e).id == ident]
            items = [Item(("net", e.kind, e.peer, e.status), line_evidence(e.line)) for e in errors]
            said = f"{node}: NCCL reported {_NETWORK_WORDS[errors[0].kind]} ({signal.meaning})"
            _by_meaning(work, node, signal, items, said, f"{said}: it names no node by itself")
        if not link:
            continue
        kinds = sorted({_NETWORK_WORDS[e.kind] for e in link})
        items = [Item(("said-net",), said_evidence(f"NCCL on {node} reported {', '.join(kinds)}"))]
        named: set[str] = set()
        for err in link:
            if err.peer and err.peer not in named:
                # Each peer once, its statement beside the first line that names it.
                named.add(err.peer)
                where = f"the scope node {err.peer_node}" if err.peer_node else "not matched to a scope node"
                status = f", status {err.status}" if err.status is not None else ""
                said = f"the line names the peer {err.peer} ({where}){status}"
                items.append(Item(("said-peer", err.peer), said_evidence(said)))
            items.append(Item(("net", err.kind, err.peer, err.status), line_evidence(err.line)))
        categories = sorted({_net_row(e).category or "network" for e in link}, key=_rank)
        work.node(node, categories[0], items, signals=sorted({_net_row(e).id for e in link}))


def _net_row(err: NcclNetworkError) -> Signal:
    return BY_ID[err.signal or err.kind.value]


def _rank(category: str) -> int:
    return -CATEGORY_RANK.get(category, 0)


# ---------------------------------------------------------------- CUDA errors


def _cuda(work: Work) -> None:
    """Each CUDA error as its row's meaning says (NVIDIA's description of the error decides the row)."""
    for node, log in work.logs.items():
        by_kind: dict[str, list[CudaError]] = {}
        for err in log.cuda:
            by_kind.setdefault(_cuda_row(err), []).append(err)
        for name, errors in by_kind.items():
            signal = BY_ID[name]
            if signal.meaning is SignalMeaning.APPLICATION:
                _rank_errors(work, node, signal, errors)
            if signal.meaning in (SignalMeaning.AMBIGUOUS, SignalMeaning.CONSEQUENCE):
                items = [Item(("cuda", e.text), line_evidence(e.line)) for e in errors]
                note = (f"{node}: a CUDA error NVIDIA gives no single cause for ({name}) was reported; only the node's "
                        "own kernel event in the window (Xid, NVSwitch) settles it")
                _by_meaning(work, node, signal, items, "", note)
                continue
            items = []
            for who in dict.fromkeys(_who(e, node) for e in errors):
                if signal.catalogue == CHECK_SITE:
                    texts = ", ".join(dict.fromkeys(f"'{e.text}'" for e in errors if _who(e, node) == who))
                    said = f"{who} reported CUDA's {texts} from NCCL's check site {name}: per NCCL, {signal.says}"
                else:
                    said = f"{who} reported {name}: per NVIDIA, {signal.says}"
                items.append(Item(("said-cuda", name, who), said_evidence(said)))
            items += [Item(("cuda", e.text), line_evidence(e.line)) for e in errors]
            _by_meaning(work, node, signal, items, None, None)


def _cuda_row(err: CudaError) -> str:
    """The row a CUDA error is read as: its code's, or, when NVIDIA gives that code no single cause, the row of the
    NCCL check site that warned of it (whose failures NCCL's own text explains)."""
    name = err.kind.runtime_name if err.kind is not None else UNLISTED_CUDA
    if err.site is not None and BY_ID[name].meaning in (SignalMeaning.AMBIGUOUS, SignalMeaning.CONSEQUENCE):
        return err.site
    return name


def _rank_errors(work: Work, node: str, signal: Signal, errors: list[CudaError]) -> None:
    """The program's errors per rank, for the comparison within the job the provider makes with the kernel logs."""
    by_rank: dict[int | None, list[CudaError]] = {}
    for err in errors:
        rank = err.rank if err.rank is not None else (err.group.rank if err.group and err.group.default_group else None)
        by_rank.setdefault(rank, []).append(err)
    for rank, errs in by_rank.items():
        work.rank_errors.append(RankError(node, rank, signal.id, tuple(line_evidence(e.line) for e in errs)))


def _who(err: CudaError, node: str) -> str:
    return f"rank {err.rank} on {node}" if err.rank is not None else f"a process on {node}"


# ---------------------------------------------------------------- tracebacks and other signal lines


def _tracebacks(work: Work) -> None:
    """A Python traceback that ends in an application exception is the application's, wherever it was printed."""
    for node, log in work.logs.items():
        seen: set[str] = set()
        for t in log.tracebacks:
            if t.kind is not ExceptionKind.APPLICATION or t.exception in seen:
                continue
            seen.add(t.exception)
            head = t.exception.split(":", 1)[0].strip()
            said = f"{'rank ' + str(t.rank) if t.rank is not None else 'a process'} on {node} raised {head}"
            work.job.append(
                Candidate("application", [Item(("said-tb", node, head), said_evidence(said)), *_traceback_items(t)],
                          (APP_EXCEPTION,))
            )


def _signal_lines(work: Work) -> None:
    """Lines read by their markers alone: each signal as its table row says."""
    for node, log in work.logs.items():
        by_signal: dict[str, list[SignalHit]] = {}
        for hit in log.signals:
            by_signal.setdefault(hit.signal, []).append(hit)
        for ident, hits in by_signal.items():
            signal = BY_ID[ident]
            items = [Item(("signal", ident, h.line.text), line_evidence(h.line)) for h in hits]
            said = f"{node}: {ident}: {signal.says}"
            note = f"{node}: {_MEANING_WORDS.get(signal.meaning, '')} ({ident}): it names no node by itself"
            _by_meaning(work, node, signal, items, said, note)


_MEANING_WORDS = {
    SignalMeaning.AMBIGUOUS: "a failure with no single cause was reported",
    SignalMeaning.CONSEQUENCE: "a failure that follows another one was reported",
}

#: the category of a conclusion on the job's resources, per meaning
_JOB_CATEGORY = {
    SignalMeaning.APPLICATION: "application",
    SignalMeaning.CONFIGURATION: "configuration",
    SignalMeaning.SCHEDULER: "scheduler",
}


def _by_meaning(work: Work, node: str, signal: Signal, items: list[Item], said: str | None, note: str | None) -> None:
    """One signal's lines of one node, as the row's meaning says. `said` is the sentence put before the lines of a
    conclusion (None: `items` hold their sentences already); `note` is what is said when the lines name nothing."""
    meaning = signal.meaning
    head = [Item(("said-signal", signal.id, node), said_evidence(said))] if said else []
    if meaning.names_node:
        assert signal.category is not None  # the table's loader checks it
        work.node(node, signal.category, [*head, *items], signals=[signal.id])
    elif meaning in _JOB_CATEGORY:
        work.job.append(Candidate(_JOB_CATEGORY[meaning], [*head, *items], (signal.id,)))
    elif meaning is SignalMeaning.NODE_STATE:
        work.node_state.setdefault(node, []).append((signal.id, [*head, *items]))
    else:
        work.add_context(node, items)
        if meaning is SignalMeaning.AMBIGUOUS:
            work.unsettled.setdefault(node, []).append(signal.id)
        work.note(note or f"{node}: {signal.id}: it names no node by itself", signal.id, node)


# ---------------------------------------------------------------- node state, compared across the scope


def _node_state(work: Work) -> None:
    """Signs that a node cannot run the job as it is (a required daemon not running, a GPU that needs a reset, a
    driver older than the job's runtime, no usable device) name the nodes that show them while the scope's other
    nodes whose logs were read do not; shown by every one of several nodes that reported, they are the job's
    configuration. The evidence says which.

    A node that is the only one whose log was read (a job of one node, or the others wrote nothing) has no other node
    to compare with: a sign of its own stack (its driver, a daemon, its fabric or NIC: every category but
    `gpu_unavailable`) names it, since no setting of the job brings a daemon down or leaves a GPU needing a reset; a
    sign that no device could be used (`gpu_unavailable`) is what a job that asked for no GPU, or for more than the
    node has, sees too, so it stays the job's configuration."""
    if not work.node_state:
        return
    read = [n for n in work.scope_nodes if n in work.logs and work.logs[n].lines]
    showing = [n for n in work.scope_nodes if n in work.node_state]
    others = [n for n in read if n not in work.node_state]
    for node in showing:
        work.add_context(node, [i for _, items in work.node_state[node] for i in items])
    if others:
        for node in showing:
            ids = _state_ids(work, [node])
            said = (
                f"{node} shows that it cannot run the job as it is ({', '.join(ids)}) while {len(others)} other "
                f"node(s) of the job whose logs were read do not ({listing(others, 4)}): the node's state, not the "
                "job's configuration"
            )
            _name_state(work, node, ids, said)
        return
    ids = _state_ids(work, showing)
    if len(showing) == 1:
        node = showing[0]
        alone = "the job's only node" if len(work.scope_nodes) == 1 else "the only node of the job whose log was read"
        own = [i for i in ids if (BY_ID[i].category or NODE_STATE_CATEGORY) != NODE_STATE_CATEGORY]
        if own:
            said = (
                f"{node}, {alone}, shows that its own stack cannot run the job as it is ({', '.join(own)}): a driver, "
                "daemon, fabric or NIC state of the node, which no setting of the job produces"
            )
            _name_state(work, node, own, said)
            return
        said = (
            f"{node}, {alone}, found no device it could use ({', '.join(ids)}); a job that asked for no GPU, or for "
            "more than the node has, sees the same: the job's configuration or environment"
        )
    else:
        said = (
            f"every node of the job whose log was read ({len(showing)}: {listing(showing, 4)}) shows that it cannot "
            f"run the job as it is ({', '.join(ids)}): the same on all of them, so it is the job's configuration or "
            "environment"
        )
    items = [Item(("said-state",), said_evidence(said))]
    items += [i for node in showing for _, its in work.node_state[node] for i in its]
    work.job.append(Candidate("configuration", items, tuple(ids)))


def _state_ids(work: Work, nodes: Iterable[str]) -> list[str]:
    """The node-state signals the nodes show, each once, in the order first seen."""
    return list(dict.fromkeys(ident for node in nodes for ident, _ in work.node_state[node]))


def _name_state(work: Work, node: str, ids: list[str], said: str) -> None:
    """A node finding from its node-state signs, the comparison first in its evidence."""
    categories = sorted({BY_ID[i].category or NODE_STATE_CATEGORY for i in ids}, key=_rank)
    items = [Item(("said-state", node), said_evidence(said))]
    items += [i for ident, its in work.node_state[node] if ident in ids for i in its]
    work.node(node, categories[0], items, signals=ids)


def _silence(work: Work) -> int:
    """How many nodes' job logs held lines when nothing in any of them was understood (0 otherwise)."""
    if work.nodes or work.job or work.context or work.noted:
        return 0
    return sum(1 for log in work.logs.values() if log.lines)


# ---------------------------------------------------------------- deciding


def _decide(work: Work) -> JobLogConclusions:
    """A node's own failure explains what other nodes see after it, and so does the job's own cause (its program,
    its configuration, the scheduler's action); job-level conclusions stand alone."""
    primary = {n for n, cands in work.nodes.items() if any(c.category in PRIMARY for c in cands)}
    causes = sorted({c.category for c in work.job if c.category in JOB_CAUSES}, key=_rank)
    if primary or causes:
        for node in list(work.nodes):
            if node not in primary:
                dropped = work.nodes.pop(node)
                work.add_context(node, [i for c in dropped for i in c.items])
                names = ", ".join(sorted({c.category for c in dropped}))
                because = "another node shows its own failure" if primary else f"the job's {causes[0]} failed"
                work.notes.append(f"{node}: {names} kept as context only: {because}")
    nodes = tuple(
        _node_conclusion(work, node, work.nodes[node]) for node in work.scope_nodes if node in work.nodes
    )
    job: JobConclusion | None = None
    job_candidates = work.job
    if job_candidates and not nodes:
        # The highest-ranked of the job's causes (the configuration explains what the program then does, ...).
        category = min((c.category for c in job_candidates), key=_rank)
        items = [i for c in job_candidates if c.category == category for i in c.items]
        evidence = _bounded(items, work.max_evidence)
        job = JobConclusion(category, _earliest(evidence), evidence)
    elif job_candidates:
        work.notes.append(
            f"the job-level {'/'.join(sorted({c.category for c in job_candidates}))} conclusion is not made: "
            "a node is named"
        )
    named = {n.node for n in nodes}
    context = {node: items for node, items in work.context.items() if node not in named}
    for n in nodes:
        # A named node's own context is part of its finding's story; keep it beside the finding for the merge.
        if n.node in work.context:
            context[n.node] = work.context[n.node]
    decided = [s for n in nodes for c in work.nodes[n.node] for s in c.signals]  # in scope order
    if job is not None:
        decided += [s for c in job_candidates if c.category == job.category for s in c.signals]
    return JobLogConclusions(
        nodes=nodes,
        job=job,
        context=Context(context, partial(_bounded, limit=work.max_evidence)),
        placement=dict(work.placement),
        ambiguous_ranks=tuple(sorted(work.ambiguous)),
        notes=tuple(dict.fromkeys(work.notes)),
        unsettled={n: tuple(dict.fromkeys(ids)) for n, ids in work.unsettled.items() if n not in named},
        decided_by=tuple(dict.fromkeys(decided)),
        noted=tuple(dict.fromkeys(work.noted)),
        rank_errors=tuple(work.rank_errors),
        node_notes={n: tuple(dict.fromkeys(notes)) for n, notes in work.node_notes.items()},
    )


def _node_conclusion(work: Work, node: str, candidates: list[Candidate]) -> NodeConclusion:
    ordered = sorted(candidates, key=lambda c: _rank(c.category))
    evidence = _bounded([i for c in ordered for i in c.items], work.max_evidence)
    signals = tuple(dict.fromkeys(s for c in ordered for s in c.signals))
    return NodeConclusion(node, ordered[0].category, _earliest(evidence), evidence, signals)


def _bounded(items: list[Item], limit: int) -> tuple[Evidence, ...]:
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


