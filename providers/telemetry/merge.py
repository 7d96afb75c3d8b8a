"""The one place signals meet: kernel conclusions and job-log conclusions merged into one outcome per request.

The provider calls each signal's rules (`kernel.rules.attribute`, `joblog.source.job_log_result`), then `merge`,
once. A node with a kernel event and job-log evidence gets one finding: the kernel event's category, the kernel
evidence first and the job-log evidence after it. Where neither signal names a node by itself, the two are compared
within the job (`within_job`): an application fault NVIDIA reads by where it repeats (Xid 13, 31) repeating on one
GPU while one rank there alone raised the program's error that the job's other ranks, running the same code, did
not, names that node. See docs/providers.md for every rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from providers.base import AllJobResources, AttributionOutcome, Evidence, Finding, NodeTarget
from providers.telemetry.evidence import (
    EvidenceItem,
    finding,
    merge_per_node,
    missing_message,
    outcome,
    select_evidence,
)
from providers.telemetry.flight_recorder import FlightRecorderResult
from providers.telemetry.joblog import OomKill, oom_killed_pid
from providers.telemetry.joblog.source import JobLogResult
from providers.telemetry.joblog.work import PRIMARY, listing
from providers.telemetry.kernel.collect import Collector
from providers.telemetry.kernel.rules import KernelConclusions

#: job-level conclusions that say no rank was singled out: they hold only when every node's job log was read
UNSINGLED = frozenset({"collective_timeout"})


def merge(
    nodes: Sequence[str], kernel: KernelConclusions, max_evidence: int, job: JobLogResult | None = None,
    dumps: FlightRecorderResult | None = None,
) -> AttributionOutcome:
    """The kernel conclusions (and, when configured, the job-log and flight-recorder conclusions) as one outcome.

    A node the dumps name gets their evidence in its one finding (beside an Xid's, whose category ranks higher); a
    job-wide `collective_timeout` of the job logs becomes evidence of the nodes the dumps name; collectives that
    differ between ranks are the job's code (`application`) when no node is named.
    """
    notes = list(kernel.notes)
    job_read = job.read_nodes if job is not None else frozenset()
    fr_read = dumps.read_nodes if dumps is not None else frozenset()
    with_logs = [n for n in nodes if n in kernel.read or n in job_read or n in fr_read]
    at = len(notes)  # the job logs' notes go here once it is known which nodes a finding names
    if dumps is not None:
        notes.extend(dumps.notes)
    if not with_logs:
        notes.extend(job.notes if job is not None else ())
        notes.insert(0, f"no kernel log lines for any of the {len(nodes)} nodes in the window")
        return outcome([], [], notes)
    merged = merge_per_node(nodes, [kernel.node_items, dumps.node_items if dumps is not None else {}])
    findings = [finding(NodeTarget(node), items, max_evidence) for node, items in merged.items()]
    if job is not None:
        findings = merge_job_logs(nodes, findings, job, max_evidence)
        if dumps is not None and dumps.node_items:
            findings = _timeout_on_nodes(findings, set(dumps.node_items), job, max_evidence)
        named_now = {f.target.name for f in findings if isinstance(f.target, NodeTarget)}
        findings += within_job(nodes, kernel, job, named_now, max_evidence)
    if dumps is not None and dumps.job_items and any(isinstance(f.target, NodeTarget) for f in findings):
        notes.append(
            "the flight-recorder dumps show collectives that differ between ranks (the job's code), not concluded "
            "beside the node findings: " + "; ".join(i.message for i in dumps.job_items[:2])
        )
    if not any(isinstance(f.target, NodeTarget) for f in findings):
        if kernel.job_items or (dumps is not None and dumps.job_items):
            items = [*kernel.job_items, *(dumps.job_items if dumps is not None else ())]
            findings = [_with_job_level(finding(AllJobResources(), items, max_evidence), job, max_evidence)]
        elif job is not None and job.conclusions.job is not None:
            whole = job.conclusions.job
            if job.late and whole.category in UNSINGLED:
                # The nodes read single no one out, but the culprit may be among those the deadline came before.
                notes.append(
                    f"no rank of the nodes read is singled out ({whole.category}), but the job logs of "
                    f"{len(job.late)} node(s) were not read, so the job as a whole is not concluded"
                )
            elif job.quiet and whole.category in UNSINGLED:
                # Some nodes said nothing while the others timed out: the culprit may be among them.
                notes.append(
                    f"no rank of the nodes read is singled out ({whole.category}), but what was read of the job "
                    f"logs of {len(job.quiet)} node(s) holds no watchdog, progress or error line for some rank of "
                    f"theirs, so the job as a whole is not concluded: {listing(sorted(job.quiet))}"
                )
            else:
                when = whole.observed_at or job.detected_at
                findings = [Finding(AllJobResources(), whole.category, when, whole.evidence[:max_evidence])]
    named = {f.target.name for f in findings if isinstance(f.target, NodeTarget)}
    if job is not None:
        # A note on a node's signal that names no node by itself is settled once a finding names that node.
        settled = {n for node in named for n in job.conclusions.node_notes.get(node, ())}
        notes[at:at] = [n for n in job.notes if n not in settled]
        notes.extend(_unsettled_notes(job, named))
        if not findings and job.conclusions.silence:
            notes.append(
                f"the job logs of {job.conclusions.silence} node(s) were read and no failure signal in them was "
                "understood"
            )
    if kernel.truncated:
        # Part of the window was never read, so a node without a finding was not fully looked at.
        notes.insert(0, "the kernel log window was only partly read (Loki page limit reached)")
        return outcome(findings, [], notes)
    # A node whose job logs the deadline came before was not wholly looked at: neither blamed nor cleared.
    late = job.late if job is not None else frozenset()
    unattributed = [NodeTarget(n) for n in with_logs if n not in named and n not in kernel.uncertain and n not in late]
    # Nodes the deadline came before are said in their own note, not counted as without kernel lines.
    missing = len(nodes) - len(kernel.read.intersection(nodes)) - len(kernel.unread.difference(kernel.read))
    if missing:
        notes.insert(0, missing_message(missing, len(nodes), "kernel log lines"))
    return outcome(findings, unattributed, notes)


def _unsettled_notes(job: JobLogResult, named: set[str]) -> list[str]:
    """For each node whose job log holds an ambiguous signal and that no finding names: no kernel event settled it."""
    return [
        f"{node}: its job log holds {', '.join(ids)}, which name no node without the node's own kernel event, and "
        "no kernel event of the node in the window names it"
        for node, ids in job.conclusions.unsettled.items()
        if node not in named
    ]


def _bounded(first: Sequence[Evidence], then: Sequence[Evidence], limit: int) -> tuple[Evidence, ...]:
    """`first`, then the items of `then` whose text is not already there, at most `limit` in all."""
    out = list(first[:limit])
    seen = {e.message for e in out}
    for e in then:
        if len(out) >= limit:
            break
        if e.message not in seen:
            seen.add(e.message)
            out.append(e)
    return tuple(out)


def _earliest(first: datetime, evidence: Sequence[Evidence]) -> datetime:
    times = [e.observed_at for e in evidence if e.observed_at is not None]
    return min([first, *times])


def merge_job_logs(
    nodes: Sequence[str], kernel: list[Finding], job: JobLogResult, max_evidence: int
) -> list[Finding]:
    """Kernel node findings and job-log node conclusions as one finding per node, in scope order.

    A kernel finding keeps its category and takes the node's job-log evidence (its conclusion's, or its context
    lines) after its own. A node with only a job-log conclusion gets that conclusion's category. Beside a kernel
    node finding, job-log conclusions that may follow another node's failure (`network`, `collective_hang`) on
    other nodes are not findings: the kernel event is that other node's failure.
    """
    by_node = {f.target.name: f for f in kernel if isinstance(f.target, NodeTarget)}
    conclusions = {c.node: c for c in job.conclusions.nodes}
    context = job.conclusions.context
    history = job.history
    corroborated = {c.node: c for c in history.nodes}
    out: list[Finding] = []
    for node in nodes:
        found = by_node.get(node)
        conclusion = conclusions.get(node)
        earlier = history.extra.get(node, ())
        if found is not None:
            extra = (*(conclusion.evidence if conclusion else ()), *context.get(node, ()), *earlier)
            evidence = _bounded(found.evidence, extra, max_evidence)
            out.append(Finding(found.target, found.error_category, _earliest(found.observed_at, evidence), evidence))
        elif conclusion is not None and (not by_node or conclusion.category in PRIMARY):
            when = conclusion.observed_at or job.detected_at
            evidence = _bounded(conclusion.evidence, earlier, max_evidence)
            out.append(Finding(NodeTarget(node), conclusion.category, when, evidence))
        elif node in corroborated and node not in conclusions:
            # An ambiguous signal now, the node's own evidence in an earlier attempt (joblog/history.py).
            found_before = corroborated[node]
            now = [e.observed_at for e in context.get(node, ()) if e.observed_at is not None]
            when = min(now) if now else job.detected_at  # this attempt's lines, not the earlier attempt's
            out.append(Finding(NodeTarget(node), found_before.category, when, found_before.evidence[:max_evidence]))
    return out


#: the category of a node named by the comparison within the job: NVIDIA's workflows call a fault that repeats on one
#: GPU a possible hardware issue (RUN_DCGMEUD)
REPEATED_FAULT = "gpu_hardware"


def within_job(
    nodes: Sequence[str], kernel: KernelConclusions, job: JobLogResult, named: set[str], max_evidence: int
) -> list[Finding]:
    """The node whose one GPU repeats an application fault NVIDIA reads by where it repeats (Xid 31: the same GPU;
    Xid 13: the same GPC and TPC), while ranks there alone raised the program's error that the job's other ranks,
    running the same code, did not: NVIDIA's WORKFLOW_XID_13/31 call that a possible hardware issue. Faults on more
    than one GPU, or the error raised elsewhere too, are the application's (the kernel's job finding stands)."""
    places = [(node, where, items) for node, by in kernel.repeats.items() for where, items in by.items()]
    if len(places) != 1:
        return []
    node, where, items = places[0]
    events = [i for i in items if i.key is not None and i.key[0] != "meaning"]
    errors = job.conclusions.rank_errors
    if node in named or node not in nodes or len(events) < 2 or not errors:
        return []
    if any(e.node != node for e in errors):
        return []  # the program's error on other nodes too: the application
    raised = {e.rank for e in errors}
    placed = job.conclusions.placement
    if None in raised:
        others = sorted(n for n in job.read_nodes if n != node)  # unprefixed lines: the other nodes ran it
        if not others:
            return []
        compared = f"the job logs of {len(others)} other node(s) that ran the same code hold no such error"
    else:
        clean = sorted(r for r, n in placed.items() if r not in raised)
        if not clean:
            return []
        compared = f"{len(clean)} other rank(s) of the job running the same code did not raise it"
    who = ", ".join(f"rank {r}" for r in sorted(r for r in raised if r is not None)) or "a process"
    signals = ", ".join(sorted({e.signal for e in errors}))
    codes = sorted({i.key[1] for i in events if i.key is not None})
    said = (
        f"Xid {', '.join(str(c) for c in codes)} repeated {len(events)} times on {where} of {node} and on no other GPU "
        f"of the job, while {who} on {node} raised {signals} and {compared}: NVIDIA's Xid workflow reads application "
        "faults that repeat on the same GPU as a possible hardware issue (run DCGM diagnostics), faults spread over "
        "GPUs as the application"
    )
    first = min(i.observed_at for i in events)
    kernel_evidence = select_evidence(
        [EvidenceItem(first, REPEATED_FAULT, events[0].source, said, ("compared",)),
         *(EvidenceItem(i.observed_at, REPEATED_FAULT, i.source, i.message, i.key) for i in items)],
        max_evidence,
    )
    evidence = _bounded(kernel_evidence, [ev for e in errors for ev in e.evidence], max_evidence)
    return [Finding(NodeTarget(node), REPEATED_FAULT, _earliest(first, evidence), evidence)]


def _timeout_on_nodes(
    findings: list[Finding], named: set[str], job: JobLogResult, max_evidence: int
) -> list[Finding]:
    """The job logs' job-wide watchdog timeout as evidence of the nodes the dumps name: they say who was waited for."""
    whole = job.conclusions.job
    if whole is None or whole.category not in UNSINGLED:
        return findings
    out = []
    for f in findings:
        if isinstance(f.target, NodeTarget) and f.target.name in named:
            evidence = _bounded(f.evidence, whole.evidence, max_evidence)
            f = Finding(f.target, f.error_category, _earliest(f.observed_at, evidence), evidence)
        out.append(f)
    return out


def _with_job_level(found: Finding, job: JobLogResult | None, max_evidence: int) -> Finding:
    """The kernel's job-level finding with the job-log job conclusion's evidence after its own."""
    if job is None or job.conclusions.job is None:
        return found
    evidence = _bounded(found.evidence, job.conclusions.job.evidence, max_evidence)
    return Finding(found.target, found.error_category, _earliest(found.observed_at, evidence), evidence)


def oom_kills(collector: Collector, source: str) -> dict[str, list[OomKill]]:
    """The OOM killer's kills in each node's kernel records, for the job-log rules (kernel-tagged lines only: the
    collector keeps no other)."""
    kills: dict[str, list[OomKill]] = {}
    for node, records in collector.records.items():
        for record in records:
            for line in record.lines:
                pid = oom_killed_pid(line)
                if pid is not None:
                    kills.setdefault(node, []).append(OomKill(pid, record.observed_at, record.evidence, source))
    return kills
