"""Read one job attempt's logs and parse each node's tail: the entry point the provider calls."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from providers.base import Deadline
from providers.telemetry.joblog.files import JobLogRead, ReadLimits, TailSink, read_job_logs
from providers.telemetry.joblog.lines import NodeParser
from providers.telemetry.joblog.nodes import ResolverFactory, exact_resolver
from providers.telemetry.joblog.prefilter import feed_tail
from providers.telemetry.joblog.records import NodeLog


@dataclass(frozen=True)
class JobLogScan:
    """What was read (`read`) and what each node's tail holds (`logs`, one per scope node whose files were read)."""

    read: JobLogRead
    logs: dict[str, NodeLog]


def scan_job_logs(
    root: Path,
    workload_id: str,
    attempt_index: int,
    nodes: Sequence[str],
    deadline: Deadline,
    *,
    limits: ReadLimits | None = None,
    resolver_factory: ResolverFactory = exact_resolver,
) -> JobLogScan:
    """Read `<root>/<workload_id>/<attempt_index>/<node>.log*` for the scope's nodes and parse their tails.

    Node identity (file stems, torchelastic's `host`, NCCL peers) is decided by `resolver_factory(nodes)`. Raises
    `ProviderTimeoutError` when the deadline passes while the folder is listed, and `ProviderProcessingError` when
    a folder cannot be listed; nodes the deadline came before are left out (`read.late`).
    """
    resolve = resolver_factory(nodes)
    logs: dict[str, NodeLog] = {}

    def sink_for(node: str) -> TailSink:
        def read(pieces: list[bytes]) -> bool:
            parser = NodeParser(node, resolve)
            for data in pieces:
                feed_tail(parser, data)
            log = logs[node] = parser.result()
            return log.settled

        return read

    read = read_job_logs(root, workload_id, attempt_index, nodes, resolve, sink_for, deadline, limits)
    late = set(read.late)
    return JobLogScan(read, {node: log for node, log in logs.items() if node not in late})
