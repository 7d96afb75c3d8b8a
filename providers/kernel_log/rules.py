"""Attribution rules: decoded kernel events and epilog results into findings, unattributed nodes and notes.

A rule never reads a file: the collector and the epilog reader hand it what they read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime

from providers.base import (
    AllJobResources,
    AttributionOutcome,
    ErrorType,
    Evidence,
    Finding,
    NodeTarget,
    ProviderError,
    Target,
)
from providers.kernel_log.catalogue import Points
from providers.kernel_log.collect import Collector
from providers.kernel_log.decode import Event, decode_records
from providers.kernel_log.epilog import NodeResults
from providers.kernel_log.evidence import EvidenceItem, finding, merge_per_node
from providers.kernel_log.joblog.rules import PRIMARY
from providers.kernel_log.joblogs import JobLogResult


def _missing_message(missing: int, total: int, what: str) -> str:
    return f"no {what} for {missing} of {total} nodes in the window"


def _times(n: int) -> str:
    return "1 time" if n == 1 else f"{n} times"


def _count_list(counts: Counter[str]) -> str:
    return ", ".join(f"{label} ({_times(n)})" for label, n in sorted(counts.items()))


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


def _outcome(findings: list[Finding], unattributed: Sequence[Target], notes: list[str]) -> AttributionOutcome:
    error = ProviderError(ErrorType.INSUFFICIENT_TELEMETRY, "; ".join(notes)) if notes else None
    return AttributionOutcome(attributions=tuple(findings), unattributed_targets=tuple(unattributed), error=error)


def attribute(
    nodes: Sequence[str],
    collector: Collector,
    max_evidence: int,
    source: str,
    job: JobLogResult | None = None,
) -> AttributionOutcome:
    """Turn a filled collector (and, when configured, the job-log conclusions) into an outcome.

    A node with a kernel event and job-log evidence gets one finding: the kernel event's category, the kernel
    evidence first and the job-log evidence after it. See docs/providers.md for every rule.
    """
    events = decoded_events(collector)
    node_items: dict[str, list[EvidenceItem]] = {}
    job_items: list[EvidenceItem] = []
    unknown: Counter[str] = Counter()
    uncertain: set[str] = set(collector.unreadable_nodes)
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
    job_read = job.read_nodes if job is not None else frozenset()
    kernel_read = collector.with_telemetry()
    with_logs = [n for n in nodes if n in kernel_read or n in job_read]
    if unknown:
        notes.append(f"an Xid or SXid the catalogue does not know, or whose line it cannot decode, was seen: "
                     f"{_count_list(unknown)}")  # fmt: skip
    readable_failed = len(collector.unreadable_nodes) + (1 if collector.unreadable_combined else 0)
    if readable_failed:
        if source == "loki":  # Loki is read per node: a query that failed or a name too long to send
            notes.append(f"the kernel logs of {readable_failed} node(s) could not be read from Loki")
        else:
            notes.append(f"{readable_failed} kernel log file group(s) could not be read")
    if job is not None:
        notes.extend(job.notes)
    if not with_logs:
        notes.insert(0, f"no kernel log lines for any of the {len(nodes)} nodes in the window")
        return _outcome([], [], notes)
    merged = merge_per_node(nodes, [node_items])
    findings = [finding(NodeTarget(node), items, max_evidence) for node, items in merged.items()]
    if job is not None:
        findings = merge_job_logs(nodes, findings, job, max_evidence)
    if not any(isinstance(f.target, NodeTarget) for f in findings):
        if job_items:
            findings = [_with_job_level(finding(AllJobResources(), job_items, max_evidence), job, max_evidence)]
        elif job is not None and job.conclusions.job is not None:
            whole = job.conclusions.job
            when = whole.observed_at or job.detected_at
            findings = [Finding(AllJobResources(), whole.category, when, whole.evidence[:max_evidence])]
    named = {f.target.name for f in findings if isinstance(f.target, NodeTarget)}
    if collector.truncated:
        # Part of the window was never read, so a node without a finding was not fully looked at.
        notes.insert(0, "the kernel log window was only partly read (Loki page limit reached)")
        return _outcome(findings, [], notes)
    unattributed = [NodeTarget(n) for n in with_logs if n not in named and n not in uncertain]
    missing = len(nodes) - len(kernel_read.intersection(nodes))
    if missing:
        notes.insert(0, _missing_message(missing, len(nodes), "kernel log lines"))
    return _outcome(findings, unattributed, notes)


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
    node finding, job-log conclusions that may follow another node's failure (`network`, `collective_hang`,
    `process_exit`) on other nodes are not findings: the kernel event is that other node's failure.
    """
    by_node = {f.target.name: f for f in kernel if isinstance(f.target, NodeTarget)}
    conclusions = {c.node: c for c in job.conclusions.nodes}
    context = job.conclusions.context
    out: list[Finding] = []
    for node in nodes:
        found = by_node.get(node)
        conclusion = conclusions.get(node)
        if found is not None:
            extra = (*(conclusion.evidence if conclusion else ()), *context.get(node, ()))
            evidence = _bounded(found.evidence, extra, max_evidence)
            out.append(Finding(found.target, found.error_category, _earliest(found.observed_at, evidence), evidence))
        elif conclusion is not None and (not by_node or conclusion.category in PRIMARY):
            when = conclusion.observed_at or job.detected_at
            out.append(Finding(NodeTarget(node), conclusion.category, when, conclusion.evidence[:max_evidence]))
    return out


def _with_job_level(found: Finding, job: JobLogResult | None, max_evidence: int) -> Finding:
    """The kernel's job-level finding with the job-log job conclusion's evidence after its own."""
    if job is None or job.conclusions.job is None:
        return found
    evidence = _bounded(found.evidence, job.conclusions.job.evidence, max_evidence)
    return Finding(found.target, found.error_category, _earliest(found.observed_at, evidence), evidence)


def attribute_epilog(nodes: Sequence[str], results: Mapping[str, NodeResults], max_evidence: int) -> AttributionOutcome:
    """Turn epilog DCGM results into an outcome: failed tests are findings, passing nodes unattributed."""
    unreadable = [n for n in nodes if n in results and results[n].unreadable]
    readable = [n for n in nodes if n in results and (results[n].failures or results[n].passed)]
    notes: list[str] = []
    if unreadable:
        notes.append(f"epilog health-check results of {len(unreadable)} node(s) could not be read")
    if not readable:
        notes.insert(0, f"no epilog health-check results for any of the {len(nodes)} nodes in the window")
        return _outcome([], [], notes)
    items = {
        node: [
            EvidenceItem(when, f.category, "dcgm", f"{f.test}: {f.message}", (f.test, f.entity))
            for when, f in results[node].failures
        ]
        for node in readable
    }
    merged = merge_per_node(nodes, [items])
    findings = [finding(NodeTarget(node), node_items, max_evidence) for node, node_items in merged.items()]
    unattributed = [
        NodeTarget(n) for n in readable if n not in merged and results[n].passed and not results[n].unreadable
    ]
    missing = sum(1 for n in nodes if n not in readable)
    if missing:
        notes.insert(0, _missing_message(missing, len(nodes), "epilog health-check results"))
    return _outcome(findings, unattributed, notes)
