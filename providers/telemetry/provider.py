"""TelemetryProvider, the open provider's wiring: each signal's reader and rules, then the one merge, per phase."""

from __future__ import annotations

import contextvars
import functools
import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from providers.base import (
    AttributionOutcome,
    AttributionRequest,
    CheckReport,
    Deadline,
    ErrorType,
    Provider,
    ProviderError,
    ProviderProcessingError,
    ProviderTimeoutError,
    TraceContext,
)
from providers.telemetry import check
from providers.telemetry.answers import AnswerCache, Key
from providers.telemetry.collection import collector_paused, one_large_at_a_time
from providers.telemetry.dcgm import results as epilog
from providers.telemetry.dcgm.rules import attribute_epilog
from providers.telemetry.flight_recorder import FlightRecorderResult, attempt_folder, conclude, read_dumps
from providers.telemetry.identity import NodeNames, scope_names
from providers.telemetry.job_log_share import serve_share
from providers.telemetry.joblog.history import with_history
from providers.telemetry.joblog.loki import LokiJobLogSource
from providers.telemetry.joblog.scan import Partner
from providers.telemetry.joblog.source import FileJobLogSource, JobLogs, job_log_result
from providers.telemetry.kernel.collect import Collector
from providers.telemetry.kernel.rules import attribute
from providers.telemetry.kernel.sources.facts import Proof
from providers.telemetry.kernel.sources.files import FileSource
from providers.telemetry.kernel.sources.journal import JournalSource
from providers.telemetry.kernel.sources.loki import LokiSource
from providers.telemetry.loki.fanout import Slots
from providers.telemetry.merge import merge, oom_kills
from providers.telemetry.scan_process import ScanProcess
from providers.telemetry.settings import Settings, parse_settings
from providers.telemetry.window import Window, fast_window

log = logging.getLogger("attribution_adapter.telemetry")

EPILOG_NOT_CONFIGURED = "epilog health-check logs are not configured"
#: the time kept between the provider's own deadline and the request's, to merge what was read and answer: this
#: share of the time left when the request starts, at most ANSWER_RESERVE_MAX_S
ANSWER_RESERVE_SHARE = 0.1
ANSWER_RESERVE_MAX_S = 0.5
#: the rules over a large scope take longer than that: about this long a node, kept back instead when it is more, up
#: to ANSWER_RESERVE_LARGE_SHARE of the time left (8 ranks a node, 16,384 nodes: the rules about 0.8 s, and the merge
#: and the answer's 16,384 targets after them; with 60 us a node such answers came up to 0.22 s late)
RULES_S_PER_NODE = 100e-6
ANSWER_RESERVE_LARGE_SHARE = 0.25
#: per-host files of a larger scope are read in parts of at most this many nodes, so that a deadline costs only the
#: part it came in the middle of
PART_NODES = 256
SESSION_STATE_VERSION = 1
#: a scope of kernel logs alone of at least this many nodes is split between a worker and its scan process (the
#: split costs a pipe's round trip and the collector's JSON: 1-2 ms over the slower half at 64 hosts, measured)
SPLIT_NODES = 32

# ---------------------------------------------------------------- deadline


def answer_by(deadline: Deadline, nodes: int = 0) -> Deadline:
    """The provider's own deadline: the request's, less the time kept to conclude, merge and answer for `nodes`."""
    left = deadline.remaining()
    reserve = min(left * ANSWER_RESERVE_SHARE, ANSWER_RESERVE_MAX_S)
    reserve = max(reserve, min(left * ANSWER_RESERVE_LARGE_SHARE, nodes * RULES_S_PER_NODE))
    return Deadline(deadline.expires_at - max(reserve, 0.0))


def scope_parts(nodes: Sequence[str], size: int = PART_NODES) -> list[list[str]]:
    """The scope in parts of at most `size` nodes, in scope order, nodes that share a short name in one part (so
    that each part's node identity is the whole scope's: identity.NodeNames)."""
    groups: dict[str, list[str]] = {}
    for node in nodes:
        groups.setdefault(node.lower().partition(".")[0], []).append(node)
    parts: list[list[str]] = [[]]
    for group in groups.values():
        if parts[-1] and len(parts[-1]) + len(group) > size:
            parts.append([])
        parts[-1].extend(group)
    return parts


def _combined(source: FileSource) -> bool:
    """Whether the log directory holds a file of many hosts: each part of a scope would read it again, so such a
    tree is read in one go (`FileSource.holds_combined`, worked out once for each listing its cache keeps)."""
    try:
        return source.holds_combined()
    except OSError:
        return True  # the scan itself will say what is wrong


# ---------------------------------------------------------------- provider


class TelemetryProvider(Provider):
    """The open `telemetry` provider: the nodes' kernel logs (NVIDIA Xid/SXid, NVLink, PCIe AER and GSP events) and
    the job's own logs for `fast`, their epilog DCGM results for `slow`."""

    name = "telemetry"
    #: the name the provider had before it was `telemetry`, kept in its session ids: a session issued by a replica of
    #: either release continues on the other during a rolling upgrade (docs/providers.md, "Upgrading")
    session_identity = "kernel_log"
    version = "1"

    def __init__(self, settings: Settings, *, keep_answers: bool = True) -> None:
        """`keep_answers` False: every fast request scans (a benchmark of the scan itself sets it)."""
        self.settings = settings
        # Local files (and epilog files) are read with a deadline check between reads: the call keeps the deadline
        # and runs in the request's thread. Loki is a network backend: its calls go through the Adapter's pool.
        self.keeps_deadline = isinstance(settings.source, (FileSource, JournalSource))
        # A fast answer over local files alone is kept while the files it read stay unchanged (answers.py); one
        # with job logs beside them is not (their files are not in the proof).
        self._answers: AnswerCache | None = None
        files = isinstance(settings.source, FileSource) and settings.source.cache.entries > 0
        if keep_answers and files and settings.job_logs is None and settings.flight_recorder_dir is None:
            self._answers = AnswerCache()
        #: the kernel-log scan process of a server's worker (scan_process.py), started by `after_fork`
        self._scans = ScanProcess()

    def after_fork(self, descriptors: Sequence[int] = ()) -> None:
        """In a server's worker, forked with one thread: start its kernel-log scan process when
        ATTRIBUTION_KERNEL_LOG_SCAN_PROCESS is 1 and the kernel logs are local files (or journal files) read beside
        job-log files, or kernel-log files read alone (a large scope is then split between the two)."""
        s = self.settings
        jobs = s.job_logs
        beside = self.keeps_deadline and isinstance(jobs, FileJobLogSource)
        alone = isinstance(s.source, FileSource) and jobs is None
        if s.scan_process and (beside or alone) and not self._scans.pid:
            # the process reads a share of the job-log files after its scan
            share = functools.partial(serve_share, jobs) if isinstance(jobs, FileJobLogSource) else None
            self._scans.start(
                lambda names, window, deadline, proof: self.collect(names, window, deadline, None, proof), descriptors,
                share,
            )

    def close(self) -> None:
        """The worker stops: its scan process ends with it."""
        self._scans.close()

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> TelemetryProvider:
        """Build the provider from the `ATTRIBUTION_*` options; ProviderConstructionError names what is wrong."""
        return cls(parse_settings(options))

    def fast(self, request: AttributionRequest, deadline: Deadline, trace: TraceContext | None) -> AttributionOutcome:
        """Classify the kernel lines and job logs of the scope's nodes around `detected_at`, within the deadline."""
        state = {"v": SESSION_STATE_VERSION}
        if not request.scope.nodes:
            return AttributionOutcome(
                error=ProviderError(
                    ErrorType.INSUFFICIENT_TELEMETRY, "the scope names no nodes, so no kernel log was read"
                ),
                session_state=state,
            )
        window = fast_window(request, self.settings.lookback, self.settings.grace)
        if window is None:
            return AttributionOutcome(
                error=ProviderError(
                    ErrorType.INSUFFICIENT_TELEMETRY, "the failure time lies outside the scope's time range"
                ),
                session_state=state,
            )
        answers = self._answers
        key = None if answers is None else answers.key(request.scope.nodes, window)
        if key is not None:
            kept = answers.get(key)  # type: ignore[union-attr]
            if kept is not None:
                return AttributionOutcome(*kept, session_state=state)
        names = scope_names(request.scope.nodes)
        # The provider's own deadline comes a little before the request's: what was read by then is merged and
        # answered in time, instead of the caller getting a bare `timeout` that throws it away.
        work = answer_by(deadline, len(names.nodes))
        with one_large_at_a_time(len(names.nodes), work), collector_paused():
            return self._fast(request, window, key, names, work, trace, state)

    def _fast(
        self, request: AttributionRequest, window: Window, key: Key | None, names: NodeNames, work: Deadline,
        trace: TraceContext | None, state: dict[str, int],
    ) -> AttributionOutcome:
        """`fast`'s reading and rules, one large request at a time, the garbage collector paused (`collection.py`)."""
        proof = None if key is None else Proof()
        answers = self._answers
        nodes = names.nodes
        job_logs: JobLogs | None = None
        if isinstance(self.settings.source, LokiSource) and isinstance(self.settings.job_logs, LokiJobLogSource):
            collector, job_logs = self._both_from_loki(request, names, window, work, trace)
        elif self.settings.job_logs is not None:  # (no answer is kept beside job logs: no proof)
            # the kernel logs scanned by the worker's scan process, when it has one and it is free, meanwhile; the
            # process then reads a share of the job-log files (job_log_share.py)
            files = isinstance(self.settings.job_logs, FileJobLogSource)
            with self._scans.asked(names, window, work, job_logs=files) as pending:
                scanned = None
                if pending is None:
                    scanned = self.collect(names, window, work, trace)
                partner = None if pending is None else pending.partner()
                job_logs = self._job_logs(request, nodes, window, work, trace, partner=partner)
                if pending is not None:
                    scanned = pending.collector(self.settings.time_zone)
            collector = scanned if scanned is not None else self.collect(names, window, work, trace)
        else:
            collector = self._kernel_only(names, window, work, trace, proof)
        source = self.settings.source.evidence_source
        job = None
        if job_logs is not None:
            job = job_log_result(request, nodes, job_logs, oom_kills(collector, source), self.settings.max_evidence)
            # Earlier attempts of the workload, for the nodes this attempt holds a signal of (joblog/history.py).
            job = with_history(job, self.settings.job_logs, request, window, work, trace, self.settings.max_evidence)
        dumps = self._flight_recorder(request, nodes, work, job_logs)
        outcome = merge(nodes, attribute(nodes, collector, source), self.settings.max_evidence, job, dumps)
        complete = not (collector.unreadable_nodes or collector.unreadable_combined or collector.unread)
        if proof is not None and complete:
            answers.put(key, proof, (outcome.attributions, outcome.unattributed_targets, outcome.error))  # type: ignore[union-attr,arg-type]
        return AttributionOutcome(
            attributions=outcome.attributions,
            unattributed_targets=outcome.unattributed_targets,
            error=outcome.error,
            session_state=state,
        )

    def _kernel_only(
        self, names: NodeNames, window: Window, work: Deadline, trace: TraceContext | None, proof: Proof | None
    ) -> Collector:
        """The kernel logs alone: a scope of SPLIT_NODES nodes or more over per-host files is scanned half here and
        half by the worker's scan process when it is free (each half whole groups of names, as `scope_parts` keeps
        them, so each half's node identity is the scope's); else here. Nodes of a half read by neither by the
        deadline are named unread; with none read, the answer is the kernel logs' timeout, as `collect`'s."""
        halves = self._halves(names)
        if halves is None:
            return self.collect(names, window, work, trace, proof)
        mine, theirs = halves
        with self._scans.asked(theirs, window, work, proof is not None) as pending:
            if pending is None:
                return self.collect(names, window, work, trace, proof)
            whole = Collector(names, window, zone=self.settings.time_zone)
            whole.absorb(self._collect_or_unread(mine, window, work, trace, proof))
            try:
                other = pending.collector(self.settings.time_zone, proof)
            except ProviderTimeoutError:
                other = self._unread(theirs, window)
        # other None: the process failed or is gone, and its half is read here
        whole.absorb(other if other is not None else self._collect_or_unread(theirs, window, work, trace, proof))
        if len(whole.unread) == len(names.nodes):
            raise ProviderTimeoutError("reading the kernel logs did not finish in time")
        return whole

    def _collect_or_unread(
        self, nodes: NodeNames, window: Window, work: Deadline, trace: TraceContext | None, proof: Proof | None
    ) -> Collector:
        """`collect`, or a collector naming every node unread when nothing was read by the deadline."""
        try:
            return self.collect(nodes, window, work, trace, proof)
        except ProviderTimeoutError:
            return self._unread(nodes, window)

    def _unread(self, nodes: NodeNames, window: Window) -> Collector:
        """A finished collector of `nodes` that names each of them unread (the deadline came before their logs)."""
        collector = Collector(nodes, window, zone=self.settings.time_zone)
        collector.unread.update(nodes.nodes)
        collector.finish()
        return collector

    def _halves(self, names: NodeNames) -> tuple[NodeNames, NodeNames] | None:
        """The scope in two halves for the worker and its scan process, or None: no process, a scope of fewer than
        SPLIT_NODES nodes, or a tree with a file of many hosts (each half would read it)."""
        source = self.settings.source
        if not self._scans.pid or len(names.nodes) < SPLIT_NODES or not isinstance(source, FileSource):
            return None
        if _combined(source):
            return None
        groups = scope_parts(names.nodes, 1)  # one group of names sharing a short name each
        if len(groups) < 2:
            return None
        first: list[str] = []
        for group in groups:
            if len(first) >= len(names.nodes) // 2:
                break
            first.extend(group)
        kept = set(first)
        return NodeNames(first), NodeNames([n for n in names.nodes if n not in kept])

    def _flight_recorder(
        self, request: AttributionRequest, nodes: Sequence[str], deadline: Deadline, job_logs: JobLogs | None
    ) -> FlightRecorderResult | None:
        """The flight-recorder dumps of the request's attempt, concluded; the job logs' ranks per node (the `[rankN]:`
        prefixes their lines carry) place a rank that left no dump."""
        root = self.settings.flight_recorder_dir
        if root is None:
            return None
        folder = attempt_folder(root, request.workload_id, request.workload_context.attempt_index)
        if folder is None:
            return FlightRecorderResult(notes=["the workload id cannot name a flight-recorder folder"])
        read = read_dumps(folder, deadline, max_file_bytes=self.settings.flight_recorder_max_file_bytes)
        if not read.found:
            return None  # a job that did not hang leaves no dumps: nothing to say
        ranks = {
            rank: node
            for node, log in (job_logs.logs.items() if job_logs is not None else ())
            for rank, seen in log.ranks.items()
            if not seen.marker_only
        }
        return conclude(read, nodes, request.scope.ranks, ranks, request.failure_context.detected_at)

    def _job_logs(
        self, request: AttributionRequest, nodes: Sequence[str], window: Window, deadline: Deadline,
        trace: TraceContext | None, slots: Slots | None = None, partner: Partner | None = None,
    ) -> JobLogs:
        source = self.settings.job_logs
        assert source is not None
        try:
            if partner is not None:
                return source.read(request, nodes, window, deadline, trace, partner=partner)  # type: ignore[call-arg]
            if slots is not None:
                return source.read(request, nodes, window, deadline, trace, slots)  # type: ignore[call-arg]
            return source.read(request, nodes, window, deadline, trace)
        except ProviderProcessingError as exc:
            # The kernel logs were read: their findings stand, and the answer says what is missing beside them.
            log.warning("job logs not read: %s", exc)
            return JobLogs({}, (f"the job logs could not be read ({exc}): no job-log evidence was used",))

    def _both_from_loki(
        self, request: AttributionRequest, names: NodeNames, window: Window, deadline: Deadline,
        trace: TraceContext | None,
    ) -> tuple[Collector, JobLogs]:
        """The kernel logs and the job logs read from Loki at once, their queries together within
        `ATTRIBUTION_LOKI_CONCURRENCY` (the kernel logs on a thread of their own, the job logs on this one).

        When the deadline came before any kernel log was read but job logs were, what the job logs say stands and
        every node's kernel logs are named unread; with nothing read at all, the answer is the kernel logs' timeout.
        """
        slots = Slots(self.settings.source.concurrency)  # type: ignore[attr-defined]
        context = contextvars.copy_context()  # the request's log context, on the kernel logs' thread too
        with ThreadPoolExecutor(1, thread_name_prefix="loki-kernel") as kernel_reader:
            kernel = kernel_reader.submit(context.run, self.collect, names, window, deadline, trace, None, slots)
            try:
                job_logs = self._job_logs(request, names.nodes, window, deadline, trace, slots)
            except BaseException:
                kernel.result()  # a failure of the kernel logs is the answer's, as when they were read first
                raise
            try:
                return kernel.result(), job_logs
            except ProviderTimeoutError:
                if not job_logs.logs:
                    raise
                return self._unread(names, window), job_logs

    def collect(
        self,
        nodes: Sequence[str] | NodeNames,
        window: Window,
        deadline: Deadline,
        trace: TraceContext | None,
        proof: Proof | None = None,
        slots: Slots | None = None,
    ) -> Collector:
        """Read the window's lines of `nodes` from the configured source (the benchmark calls this too); with a
        `proof` (the files source only), what was listed and read is recorded in it; with `slots` (the Loki source
        only), each query holds one of them.

        A large scope over per-host files is read in parts (`scope_parts`): when the deadline comes in the middle of
        a part, the parts read before it stand and the nodes of the others are named `unread`.
        """
        names = nodes if isinstance(nodes, NodeNames) else NodeNames(nodes)
        source = self.settings.source
        large = isinstance(source, FileSource) and len(names.nodes) > PART_NODES
        parts = scope_parts(names.nodes, PART_NODES) if large else []
        if len(parts) <= 1 or _combined(source):  # type: ignore[arg-type]
            collector = Collector(names, window, zone=self.settings.time_zone)
            self._scan(collector, deadline, trace, proof, slots)
            return collector
        whole = Collector(names, window, zone=self.settings.time_zone)
        for part in parts:
            if deadline.expired:
                whole.unread.update(part)
                continue
            read = Collector(part, window, zone=self.settings.time_zone)
            try:
                self._scan(read, deadline, trace, proof)
            except ProviderTimeoutError:
                whole.unread.update(part)  # cut in the middle: none of this part's lines are used
                continue
            whole.absorb(read)
        if len(whole.unread) == len(names.nodes):
            raise ProviderTimeoutError("reading the kernel logs did not finish in time")
        return whole

    def _scan(
        self, collector: Collector, deadline: Deadline, trace: TraceContext | None, proof: Proof | None,
        slots: Slots | None = None,
    ) -> None:
        if proof is not None:
            self.settings.source.scan(collector, deadline, trace, proof=proof)  # type: ignore[call-arg]
        elif slots is not None:
            self.settings.source.scan(collector, deadline, trace, slots)  # type: ignore[call-arg]
        else:
            self.settings.source.scan(collector, deadline, trace)
        collector.finish()

    def slow(
        self,
        request: AttributionRequest,
        session_state: Mapping[str, str | int],
        deadline: Deadline,
        trace: TraceContext | None,
    ) -> AttributionOutcome:
        """Read the epilog DCGM results of the scope's nodes inside `scope.start_time`..`end_time`."""
        # Nothing from the fast pass is needed: the window and nodes come with the request, so any worker or
        # replica can serve this call.
        if self.settings.epilog_dir is None:
            return AttributionOutcome(error=ProviderError(ErrorType.INSUFFICIENT_TELEMETRY, EPILOG_NOT_CONFIGURED))
        nodes = scope_names(request.scope.nodes).nodes
        if not nodes:
            return AttributionOutcome(
                error=ProviderError(ErrorType.INSUFFICIENT_TELEMETRY, "the scope names no nodes, so no epilog was read")
            )
        start, end = request.scope.start_time, request.scope.end_time
        if start is None or end is None:  # the app never calls slow without both; answer sanely anyway
            return AttributionOutcome(
                error=ProviderError(ErrorType.NO_ATTRIBUTION_AVAILABLE, "the epilog window needs a start and end time")
            )
        results = epilog.read_epilog(self.settings.epilog_dir, nodes, start, end, deadline)
        return attribute_epilog(nodes, results, self.settings.max_evidence)

    def check(self, deadline: Deadline) -> CheckReport:
        """Whether the log source and the epilog directory can be read, and what they hold (see check.py)."""
        s = self.settings
        return check.check(s.source, s.epilog_dir, s.time_zone, deadline, s.job_logs, s.flight_recorder_dir)


__all__ = ["TelemetryProvider", "Settings", "parse_settings", "fast_window"]
