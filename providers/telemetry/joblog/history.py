"""Earlier attempts of the same workload: node evidence in one attempt and an ambiguous signal on the same node in
another corroborate each other; nothing is blamed from history alone.

The job-log tree (`<root>/<workload_id>/<attempt_index>/...`) and Loki (a selector template holding
`{attempt_index}`) keep each attempt apart. When the current attempt's logs leave a node with an ambiguous signal
(a CUDA error NVIDIA gives no single cause for, an exit, a failed connect, ...) or name it by its own evidence, the
same node's logs of up to `MAX_EARLIER_ATTEMPTS` earlier attempts are read, newest first, within a share of the
request's byte bound and of the time left, and concluded on their own:

- ambiguous now, node evidence (a hardware, driver, link or fabric sign, or node state set apart from the other
  nodes) in an earlier attempt: the node is named, with the earlier conclusion's category, a sentence saying which
  attempts showed what, and both attempts' lines;
- node evidence now, an ambiguous signal of the same node in an earlier attempt: the earlier lines and a sentence join
  the node's evidence;
- node evidence in an earlier attempt alone (nothing of the node now) is never read: only the nodes the current
  attempt's logs hold a signal of are looked up, so nothing is blamed from history alone.

`corroborate` is pure; `with_history` reads and adds what it finds to the current attempt's result.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

from providers.base import (
    AttributionRequest,
    Deadline,
    Evidence,
    ProviderProcessingError,
    ProviderTimeoutError,
    TraceContext,
    cut_text,
)
from providers.telemetry.joblog.files import ReadLimits
from providers.telemetry.joblog.loki import ATTEMPT, LokiJobLogSource
from providers.telemetry.joblog.records import NodeLog
from providers.telemetry.joblog.rules import conclude
from providers.telemetry.joblog.scan import scan_job_logs
from providers.telemetry.joblog.signals import BY_ID, SignalMeaning
from providers.telemetry.joblog.source import FileJobLogSource, JobLogResult, resolver
from providers.telemetry.joblog.work import SOURCE, History, JobLogConclusions, NodeConclusion
from providers.telemetry.window import Window

#: earlier attempts read at most, newest first
MAX_EARLIER_ATTEMPTS = 3
#: the earlier attempts together read at most this share of the request's job-log byte bound (1/4)
EARLIER_BYTES_DIVISOR = 4
#: ... and use at most this share of the time left when they start
EARLIER_TIME_SHARE = 0.5
#: Loki: an earlier attempt's lines are looked for this far back from the current window's end
LOKI_EARLIER_LOOKBACK = timedelta(hours=24)


@dataclass(frozen=True)
class Earlier:
    """One earlier attempt's conclusions over the nodes read for it."""

    attempt: int
    conclusions: JobLogConclusions


def node_evidence(conclusion: NodeConclusion) -> bool:
    """Whether a node conclusion rests on a sign of the node itself (hardware, driver, link, fabric, or node state
    set apart from the scope's other nodes), not on a comparison of collectives or an exit."""
    return any(
        s in BY_ID and (BY_ID[s].meaning.names_node or BY_ID[s].meaning is SignalMeaning.NODE_STATE)
        for s in conclusion.signals
    )


def candidates(current: JobLogConclusions) -> tuple[str, ...]:
    """The nodes whose earlier attempts may say more: those with an ambiguous signal now, and those named now by
    their own evidence."""
    named = [c.node for c in current.nodes if node_evidence(c)]
    return tuple(dict.fromkeys([*current.unsettled, *named]))


def corroborate(current: JobLogConclusions, earlier: Sequence[Earlier], max_evidence: int) -> History:
    """Pure: what the earlier attempts' conclusions say of the current attempt's nodes."""
    named_now = {c.node: c for c in current.nodes}
    nodes: list[NodeConclusion] = []
    extra: dict[str, tuple[Evidence, ...]] = {}
    notes: list[str] = []
    for node in candidates(current):
        if node in current.unsettled and node not in named_now:
            shown = [(e.attempt, c) for e in earlier for c in e.conclusions.nodes
                     if c.node == node and node_evidence(c)]  # fmt: skip
            if not shown:
                continue
            attempt, before = shown[0]  # the newest
            ids = ", ".join(current.unsettled[node])
            said = (
                f"{node}: this attempt holds {ids}, which names no node by itself, and attempt {attempt} of the same "
                f"workload showed {before.category} on the same node ({', '.join(before.signals)}): the two attempts "
                "corroborate each other"
            )
            now = current.context.get(node, ())
            evidence = _bounded([Evidence(SOURCE, cut_text(said)), *now, *_marked(attempt, before.evidence)],
                                max_evidence)  # fmt: skip
            nodes.append(NodeConclusion(node, before.category, before.observed_at, evidence, before.signals))
        elif node in named_now and node_evidence(named_now[node]):
            seen = [(e.attempt, e.conclusions) for e in earlier if node in e.conclusions.unsettled]
            if not seen:
                continue
            attempt, before = seen[0]
            ids = ", ".join(before.unsettled[node])
            said = (
                f"{node}: attempt {attempt} of the same workload held {ids} on the same node, which this attempt's "
                f"{named_now[node].category} explains: the two attempts corroborate each other"
            )
            extra[node] = _bounded([Evidence(SOURCE, cut_text(said)), *_marked(attempt, before.context.get(node, ()))],
                                   max_evidence)  # fmt: skip
    return History(tuple(nodes), extra, tuple(notes), tuple(e.attempt for e in earlier))


def _marked(attempt: int, evidence: Sequence[Evidence]) -> list[Evidence]:
    """An earlier attempt's lines, each saying which attempt it is from."""
    return [Evidence(e.source, cut_text(f"attempt {attempt}: {e.message}"), e.observed_at) for e in evidence]


def _bounded(evidence: Sequence[Evidence], limit: int) -> tuple[Evidence, ...]:
    out: list[Evidence] = []
    seen: set[str] = set()
    for e in evidence:
        if e.message not in seen and len(out) < limit:
            seen.add(e.message)
            out.append(e)
    return tuple(out)


# ---------------------------------------------------------------- reading


def earlier_limits(limits: ReadLimits, attempts: int) -> ReadLimits:
    """The byte bounds of one earlier attempt's read: together at most 1/EARLIER_BYTES_DIVISOR of the request's."""
    share = max(1, limits.request_bytes // EARLIER_BYTES_DIVISOR // max(1, attempts))
    return ReadLimits(node_bytes=min(limits.node_bytes, share), request_bytes=share)


def with_history(
    result: JobLogResult,
    source: object,
    request: AttributionRequest,
    window: Window,
    deadline: Deadline,
    trace: TraceContext | None,
    max_evidence: int,
) -> JobLogResult:
    """The current attempt's result with what its earlier attempts corroborate, read from `source` (the files or
    the Loki job-log source). Bounded: MAX_EARLIER_ATTEMPTS attempts, a share of the bytes and of the time left; what
    the deadline left unread is said."""
    attempt = request.workload_context.attempt_index
    nodes = candidates(result.conclusions)
    if attempt == 0 or not nodes:
        return result
    reader = _reader(source)
    if reader is None:
        return result  # a Loki selector without `{attempt_index}`: the attempts cannot be told apart
    attempts = list(range(attempt - 1, max(-1, attempt - 1 - MAX_EARLIER_ATTEMPTS), -1))
    until = Deadline(time.monotonic() + deadline.remaining() * EARLIER_TIME_SHARE)
    earlier: list[Earlier] = []
    notes: list[str] = []
    for index in attempts:
        try:
            if until.expired:
                raise ProviderTimeoutError("no time left")
            logs = reader(request, index, nodes, window, until, trace, len(attempts))
        except ProviderTimeoutError:
            notes.append(f"the time kept for earlier attempts ran out before attempt {index} was read")
            break
        except ProviderProcessingError:
            notes.append(f"the job logs of attempt {index} could not be read")
            continue
        if logs:
            earlier.append(Earlier(index, conclude(list(nodes), (), logs, max_evidence=max_evidence)))
    history = corroborate(result.conclusions, earlier, max_evidence)
    history = dataclasses.replace(history, notes=(*history.notes, *notes))
    return dataclasses.replace(result, history=history, notes=(*result.notes, *history.notes))


_Reader = Callable[[AttributionRequest, int, Sequence[str], Window, Deadline, "TraceContext | None", int],
                   Mapping[str, NodeLog]]  # fmt: skip


def _reader(source: object) -> _Reader | None:
    """How `source` reads one earlier attempt of some nodes, or None when its attempts cannot be told apart."""
    if isinstance(source, FileJobLogSource):

        def files(request: AttributionRequest, attempt: int, nodes: Sequence[str], window: Window,
                  deadline: Deadline, trace: TraceContext | None, attempts: int) -> Mapping[str, NodeLog]:  # fmt: skip
            limits = earlier_limits(source.limits, attempts)
            scan = scan_job_logs(source.root, request.workload_id, attempt, nodes, deadline, limits=limits,
                                 resolver_factory=resolver)  # fmt: skip
            return scan.logs

        return files
    if isinstance(source, LokiJobLogSource) and ATTEMPT in source.template:

        def loki(request: AttributionRequest, attempt: int, nodes: Sequence[str], window: Window,
                 deadline: Deadline, trace: TraceContext | None, attempts: int) -> Mapping[str, NodeLog]:  # fmt: skip
            earlier = dataclasses.replace(
                request,
                workload_context=dataclasses.replace(request.workload_context, attempt_index=attempt),
                scope=dataclasses.replace(request.scope, ranks=()),  # no silent ranks are looked for
            )
            bounded = dataclasses.replace(source, limits=earlier_limits(source.limits, attempts))
            since = Window(window.end - LOKI_EARLIER_LOOKBACK, window.end)
            return bounded.read(earlier, nodes, since, deadline, trace).logs

        return loki
    return None
