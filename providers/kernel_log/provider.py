"""KernelLogProvider: attributes a job failure to nodes from their kernel logs and epilog DCGM results."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from providers.base import (
    AttributionOutcome,
    AttributionRequest,
    CheckReport,
    Deadline,
    ErrorType,
    Provider,
    ProviderError,
    ProviderProcessingError,
    TraceContext,
)
from providers.kernel_log import check
from providers.kernel_log.answers import AnswerCache
from providers.kernel_log.dcgm import results as epilog
from providers.kernel_log.dcgm.rules import attribute_epilog
from providers.kernel_log.identity import NodeNames, scope_names
from providers.kernel_log.joblog.source import JobLogs, job_log_result
from providers.kernel_log.kernel.collect import Collector
from providers.kernel_log.kernel.rules import attribute
from providers.kernel_log.kernel.sources.facts import Proof
from providers.kernel_log.kernel.sources.files import FileSource
from providers.kernel_log.merge import merge, oom_kills
from providers.kernel_log.settings import Settings, parse_settings
from providers.kernel_log.window import Window, fast_window

log = logging.getLogger("attribution_adapter.kernel_log")

EPILOG_NOT_CONFIGURED = "epilog health-check logs are not configured"
SESSION_STATE_VERSION = 1

# ---------------------------------------------------------------- provider


class KernelLogProvider(Provider):
    """The open `kernel_log` provider: NVIDIA Xid/SXid, PCIe AER and GSP events from the nodes' kernel logs."""

    name = "kernel_log"
    version = "1"

    def __init__(self, settings: Settings, *, keep_answers: bool = True) -> None:
        """`keep_answers` False: every fast request scans (a benchmark of the scan itself sets it)."""
        self.settings = settings
        # Local files (and epilog files) are read with a deadline check between reads: the call keeps the deadline
        # and runs in the request's thread. Loki is a network backend: its calls go through the Adapter's pool.
        self.keeps_deadline = isinstance(settings.source, FileSource)
        # A fast answer over local files alone is kept while the files it read stay unchanged (answers.py); one
        # with job logs beside them is not (their files are not in the proof).
        self._answers: AnswerCache | None = None
        files = isinstance(settings.source, FileSource) and settings.source.cache.entries > 0
        if keep_answers and files and settings.job_logs is None:
            self._answers = AnswerCache()

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> KernelLogProvider:
        """Build the provider from the `ATTRIBUTION_*` options; ProviderConstructionError names what is wrong."""
        return cls(parse_settings(options))

    def fast(self, request: AttributionRequest, deadline: Deadline, trace: TraceContext | None) -> AttributionOutcome:
        """Classify the kernel lines of the scope's nodes around `detected_at`."""
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
        nodes = names.nodes
        proof = None if key is None else Proof()
        collector = self.collect(names, window, deadline, trace, proof)
        source = self.settings.source.evidence_source
        job = None
        if self.settings.job_logs is not None:
            try:
                job_logs = self.settings.job_logs.read(request, nodes, window, deadline, trace)
            except ProviderProcessingError as exc:
                # The kernel logs were read: their findings stand, and the answer says what is missing beside them.
                log.warning("job logs not read: %s", exc)
                job_logs = JobLogs({}, (f"the job logs could not be read ({exc}): no job-log evidence was used",))
            job = job_log_result(request, nodes, job_logs, oom_kills(collector, source), self.settings.max_evidence)
        outcome = merge(nodes, attribute(nodes, collector, source), self.settings.max_evidence, job)
        if proof is not None and not collector.unreadable_nodes and not collector.unreadable_combined:
            answers.put(key, proof, (outcome.attributions, outcome.unattributed_targets, outcome.error))  # type: ignore[union-attr,arg-type]
        return AttributionOutcome(
            attributions=outcome.attributions,
            unattributed_targets=outcome.unattributed_targets,
            error=outcome.error,
            session_state=state,
        )

    def collect(
        self,
        nodes: Sequence[str] | NodeNames,
        window: Window,
        deadline: Deadline,
        trace: TraceContext | None,
        proof: Proof | None = None,
    ) -> Collector:
        """Read the window's lines of `nodes` from the configured source (the benchmark calls this too); with a
        `proof` (the files source only), what was listed and read is recorded in it."""
        collector = Collector(nodes, window, zone=self.settings.time_zone)
        if proof is not None:
            self.settings.source.scan(collector, deadline, trace, proof=proof)  # type: ignore[call-arg]
        else:
            self.settings.source.scan(collector, deadline, trace)
        collector.finish()
        return collector

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
        return check.check(s.source, s.epilog_dir, s.time_zone, deadline, s.job_logs)


__all__ = ["KernelLogProvider", "Settings", "parse_settings", "fast_window"]
