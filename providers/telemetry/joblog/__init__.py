"""Attribution from a job's own logs: read each node's tail, parse it, conclude which node (or the job) failed.

The public API, in the order a provider uses it (see `docs/job-logs.md`):

- `scan_job_logs(root, workload_id, attempt_index, nodes, deadline, limits=..., resolver_factory=...)` reads and
  parses `<root>/<workload_id>/<attempt_index>/<node>.log*` into a `JobLogScan` (`read`: what was read or left
  out; `logs`: a `NodeLog` per node);
- `oom_killed_pid(kernel_message)` turns a kernel OOM-killer line into the pid an `OomKill` needs;
- `conclude(scope_nodes, scope_ranks, logs, oom_kills, max_evidence=...)` returns `JobLogConclusions`.

Nothing here imports the rest of the telemetry provider; it speaks `providers.base` types and its own
dataclasses.
"""

from providers.telemetry.joblog.files import (
    MAX_GZ_INFLATED_BYTES,
    MAX_NODE_BYTES,
    MAX_REQUEST_BYTES,
    JobLogRead,
    NodeRead,
    ReadLimits,
)
from providers.telemetry.joblog.nodes import NodeResolver, ResolverFactory, exact_resolver
from providers.telemetry.joblog.patterns import MAX_LINE_CHARS, oom_killed_pid
from providers.telemetry.joblog.records import NodeLog
from providers.telemetry.joblog.rules import conclude
from providers.telemetry.joblog.scan import JobLogScan, scan_job_logs
from providers.telemetry.joblog.work import SOURCE, JobConclusion, JobLogConclusions, NodeConclusion, OomKill

__all__ = [
    "MAX_GZ_INFLATED_BYTES",
    "MAX_LINE_CHARS",
    "MAX_NODE_BYTES",
    "MAX_REQUEST_BYTES",
    "SOURCE",
    "JobConclusion",
    "JobLogConclusions",
    "JobLogRead",
    "JobLogScan",
    "NodeConclusion",
    "NodeLog",
    "NodeRead",
    "NodeResolver",
    "OomKill",
    "ReadLimits",
    "ResolverFactory",
    "conclude",
    "exact_resolver",
    "oom_killed_pid",
    "scan_job_logs",
]
