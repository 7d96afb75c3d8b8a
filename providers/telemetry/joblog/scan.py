"""Read one job attempt's logs and parse each node's tail: the entry point the provider calls."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from providers.base import Deadline
from providers.telemetry.joblog.files import (
    JobLogPlan,
    JobLogRead,
    NodeRead,
    ReadLimits,
    TailSink,
    plan_job_logs,
    read_planned,
)
from providers.telemetry.joblog.lines import NodeParser
from providers.telemetry.joblog.nodes import NodeResolver, ResolverFactory, exact_resolver
from providers.telemetry.joblog.prefilter import feed_tail
from providers.telemetry.joblog.records import NodeLog


@dataclass(frozen=True)
class JobLogScan:
    """What was read (`read`) and what each node's tail holds (`logs`, one per scope node whose files were read)."""

    read: JobLogRead
    logs: dict[str, NodeLog]


class Share(Protocol):
    """A plan's nodes read by this reader and another one (a worker's scan process) together: this one claims parts
    of `plan.order` from its start, the other from its end, and hands over what it read and parsed."""

    def claim(self) -> range | None:
        """The next part of `plan.order` for this reader, or None when every node is claimed."""

    def receive(self, reads: dict[str, NodeRead], logs: dict[str, NodeLog], late: list[str]) -> None:
        """Add what the other reader handed over so far (without waiting)."""

    def finish(
        self, reads: dict[str, NodeRead], logs: dict[str, NodeLog], late: list[str], deadline: Deadline
    ) -> list[range]:
        """Wait for the rest of the other reader's parts (until `deadline` and a grace at most) and add them; the
        parts it claimed and did not hand over, for this reader to read."""

    def abandon(self, deadline: Deadline) -> None:
        """Give the plan up before `finish` (this reader failed): the other claims nothing more, and what it still
        hands over is dropped."""


class Partner(Protocol):
    """Another reader for a plan (`begin`), or None when there is none free."""

    def begin(self, plan: JobLogPlan) -> Share | None: ...


def sinks(resolve: NodeResolver, logs: dict[str, NodeLog]) -> Callable[[str], TailSink]:
    """Sinks that parse each node's tail into `logs[node]` (a tail handed over again replaces it)."""

    def sink_for(node: str) -> TailSink:
        def read(pieces: list[bytes]) -> bool:
            parser = NodeParser(node, resolve)
            for data in pieces:
                feed_tail(parser, data)
            log = logs[node] = parser.result()
            return log.settled

        return read

    return sink_for


def scan_job_logs(
    root: Path,
    workload_id: str,
    attempt_index: int,
    nodes: Sequence[str],
    deadline: Deadline,
    *,
    limits: ReadLimits | None = None,
    resolver_factory: ResolverFactory = exact_resolver,
    partner: Partner | None = None,
) -> JobLogScan:
    """Read `<root>/<workload_id>/<attempt_index>/<node>.log*` for the scope's nodes and parse their tails.

    Node identity (file stems, torchelastic's `host`, NCCL peers) is decided by `resolver_factory(nodes)`. Raises
    `ProviderTimeoutError` when the deadline passes while the folder is listed, and `ProviderProcessingError` when
    a folder cannot be listed; nodes the deadline came before are left out (`read.late`). With a `partner` free to
    share the read, each reads part of the nodes (`Share`); what they read together is what one would have read.
    """
    resolve = resolver_factory(nodes)
    logs: dict[str, NodeLog] = {}
    sink_for = sinks(resolve, logs)
    plan = plan_job_logs(root, workload_id, attempt_index, nodes, resolve, deadline, limits)
    reads: dict[str, NodeRead] = {}
    late: list[str] = []
    share = partner.begin(plan) if partner is not None and len(plan.order) > 1 else None
    if share is None:
        read_planned(plan, range(len(plan.order)), sink_for, deadline, reads, late)
    else:
        try:
            while (part := share.claim()) is not None:
                read_planned(plan, part, sink_for, deadline, reads, late)
                share.receive(reads, logs, late)
            missing = share.finish(reads, logs, late, deadline)
        except BaseException:
            share.abandon(deadline)  # the other reader must not go on sending parts nobody reads
            raise
        for part in missing:
            read_planned(plan, part, sink_for, deadline, reads, late)
    read = plan.outcome(reads, late)
    left_out = set(read.late)
    return JobLogScan(read, {node: log for node, log in logs.items() if node not in left_out})
