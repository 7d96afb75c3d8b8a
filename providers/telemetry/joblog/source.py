"""Job-log sources (files; Loki in loki.py) and the result of the job-log rules that the provider merges.

A job's own logs (`providers/telemetry/joblog/`, described in `docs/job-logs.md`) are read beside the kernel logs
when `ATTRIBUTION_JOB_LOG_DIR` (files) or `ATTRIBUTION_LOKI_JOB_SELECTOR` (Loki) is set; without either the provider
answers from the kernel logs alone. `merge.merge` (at the provider's root) merges what this module hands it
with the kernel conclusions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol

from providers.base import AttributionRequest, Deadline, TraceContext
from providers.telemetry.identity import NodeNames
from providers.telemetry.joblog import (
    JobLogConclusions,
    NodeLog,
    OomKill,
    ReadLimits,
    conclude,
    scan_job_logs,
)
from providers.telemetry.joblog.nodes import NodeResolver
from providers.telemetry.joblog.scan import Partner
from providers.telemetry.joblog.work import History
from providers.telemetry.window import Window

#: notes of the job-log rules about precedence (what they kept as context, what they did not conclude because a
#: node was named): they say nothing about telemetry that was missing, so they are not part of the answer's error
_PRECEDENCE_NOTES = ("kept as context only", "conclusion is not made")


def resolver(nodes: Sequence[str]) -> NodeResolver:
    """The kernel logs' node identity (short names and FQDNs equated), so both kinds of log name nodes alike."""
    return NodeNames(nodes).node_for


@dataclass(frozen=True)
class JobLogs:
    """What one request's job logs gave: per-node tails, and sentences on what was not read."""

    logs: dict[str, NodeLog]
    notes: tuple[str, ...]
    #: scope nodes with job logs that the deadline came before: not read
    late: tuple[str, ...] = ()
    #: nodes read up to their bound without settling them (`files.NodeRead.undecided`): what decides for some rank
    #: of theirs may lie in older output
    undecided: tuple[str, ...] = ()


class JobLogSource(Protocol):
    def read(
        self, request: AttributionRequest, nodes: Sequence[str], window: Window, deadline: Deadline,
        trace: TraceContext | None,
    ) -> JobLogs: ...


@dataclass(frozen=True)
class FileJobLogSource:
    """`<root>/<workload_id>/<attempt_index>/<node>.log` (and rotated `.N`, `.N.gz`), each read from its end."""

    root: Path
    limits: ReadLimits = ReadLimits()

    def read(
        self, request: AttributionRequest, nodes: Sequence[str], window: Window, deadline: Deadline,
        trace: TraceContext | None, partner: Partner | None = None,
    ) -> JobLogs:
        """`partner`: another reader free to share the read (the worker's scan process), or None."""
        scan = scan_job_logs(
            self.root, request.workload_id, request.workload_context.attempt_index, nodes, deadline,
            limits=self.limits, resolver_factory=resolver, partner=partner,
        )
        undecided = tuple(n for n, r in scan.read.nodes.items() if r.undecided)
        return JobLogs(scan.logs, scan.read.notes, scan.read.late, undecided)


@dataclass(frozen=True)
class JobLogResult:
    """The job-log rules' conclusions for one request, with what `rules.attribute` needs besides them."""

    conclusions: JobLogConclusions
    #: scope nodes whose job log was read: they had telemetry, whatever it held
    read_nodes: frozenset[str]
    #: sentences on what was not read or not concluded for lack of telemetry (node names, ranks, counts only)
    notes: tuple[str, ...]
    #: a node conclusion whose lines carry no collector time is dated at the failure
    detected_at: datetime
    #: scope nodes whose job logs the deadline came before: what the logs read say of the job as a whole is not the
    #: whole job's
    late: frozenset[str] = frozenset()
    #: nodes whose job log was read and holds no record while another node's does, or that were read up to their
    #: bound without settling them: what the others say of the job as a whole may be about them
    quiet: frozenset[str] = frozenset()
    #: what earlier attempts of the workload corroborate (`history.with_history`)
    history: History = History()


def job_log_result(
    request: AttributionRequest, nodes: Sequence[str], job_logs: JobLogs, kills: Mapping[str, Sequence[OomKill]],
    max_evidence: int,
) -> JobLogResult:
    """Apply the job-log rules to what was read."""
    conclusions = conclude(nodes, list(request.scope.ranks), job_logs.logs, kills, max_evidence=max_evidence)
    notes = [*job_logs.notes, *(n for n in conclusions.notes if not any(p in n for p in _PRECEDENCE_NOTES))]
    detected = request.failure_context.detected_at
    reported = {node for node, log in job_logs.logs.items() if log.reported}
    quiet = frozenset(job_logs.logs).difference(reported) if reported else frozenset()
    quiet = quiet.union(job_logs.undecided)
    return JobLogResult(
        conclusions, frozenset(job_logs.logs), tuple(notes), detected, frozenset(job_logs.late), quiet
    )


__all__ = ["FileJobLogSource", "JobLogResult", "JobLogSource", "JobLogs", "job_log_result", "resolver"]
