"""KernelLogProvider: attributes a job failure to nodes from their kernel logs and epilog DCGM results."""

from __future__ import annotations

import logging
import re
import zoneinfo
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, timedelta, tzinfo
from pathlib import Path

from providers.base import (
    MAX_EVIDENCE,
    AttributionOutcome,
    AttributionRequest,
    CheckReport,
    Deadline,
    ErrorType,
    Provider,
    ProviderConstructionError,
    ProviderError,
    ProviderProcessingError,
    TraceContext,
)
from providers.kernel_log import check
from providers.kernel_log.answers import AnswerCache
from providers.kernel_log.dcgm import results as epilog
from providers.kernel_log.dcgm.rules import attribute_epilog
from providers.kernel_log.identity import NodeNames, scope_names
from providers.kernel_log.joblog import MAX_NODE_BYTES, MAX_REQUEST_BYTES, ReadLimits
from providers.kernel_log.joblog.loki import LokiJobLogSource, template_problem
from providers.kernel_log.joblog.source import FileJobLogSource, JobLogs, JobLogSource, job_log_result
from providers.kernel_log.kernel.collect import Collector
from providers.kernel_log.kernel.rules import attribute
from providers.kernel_log.kernel.sources import LogSource
from providers.kernel_log.kernel.sources.facts import Proof
from providers.kernel_log.kernel.sources.files import DEFAULT_COMBINED, FileSource
from providers.kernel_log.kernel.sources.loki import DEFAULT_CONCURRENCY, DEFAULT_SELECTOR, LokiSource
from providers.kernel_log.loki.logql import TemplateError
from providers.kernel_log.merge import merge, oom_kills
from providers.kernel_log.window import Window, fast_window

log = logging.getLogger("attribution_adapter.kernel_log")

EPILOG_NOT_CONFIGURED = "epilog health-check logs are not configured"
SESSION_STATE_VERSION = 1

#: every setting this provider reads (the registry checks `ATTRIBUTION_*` names against it at boot); one line each
SETTINGS: tuple[str, ...] = (
    "ATTRIBUTION_KERNEL_LOG_SOURCE",
    "ATTRIBUTION_KERNEL_LOG_DIR",
    "ATTRIBUTION_KERNEL_LOG_COMBINED_FILES",
    "ATTRIBUTION_KERNEL_LOG_LOOKBACK_SECONDS",
    "ATTRIBUTION_KERNEL_LOG_GRACE_SECONDS",
    "ATTRIBUTION_KERNEL_LOG_MAX_EVIDENCE",
    "ATTRIBUTION_KERNEL_LOG_TIME_ZONE",
    "ATTRIBUTION_LOKI_URL",
    "ATTRIBUTION_LOKI_SELECTOR",
    "ATTRIBUTION_LOKI_LIMIT",
    "ATTRIBUTION_LOKI_MAX_PAGES",
    "ATTRIBUTION_LOKI_TENANT",
    "ATTRIBUTION_LOKI_HOST_LABEL",
    "ATTRIBUTION_LOKI_CONCURRENCY",
    "ATTRIBUTION_LOKI_JOB_SELECTOR",
    "ATTRIBUTION_EPILOG_DIR",
    "ATTRIBUTION_JOB_LOG_DIR",
    "ATTRIBUTION_JOB_LOG_MAX_NODE_BYTES",
    "ATTRIBUTION_JOB_LOG_MAX_REQUEST_BYTES",
)
_KNOWN = frozenset(SETTINGS)
_PREFIXES = ("ATTRIBUTION_KERNEL_LOG_", "ATTRIBUTION_LOKI_", "ATTRIBUTION_JOB_LOG_")
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


# ---------------------------------------------------------------- settings


def _get(options: Mapping[str, str], name: str) -> str | None:
    value = options.get(name)
    if value is None or not value.strip():
        return None
    return value.strip()


def _int(options: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = _get(options, name)
    if raw is None:
        return default
    if not re.fullmatch(r"[+-]?\d+", raw):
        raise ProviderConstructionError(f"{name}={raw!r} is not an integer")
    value = int(raw)
    if not low <= value <= high:
        raise ProviderConstructionError(f"{name}={value} is out of range: it must be between {low} and {high}")
    return value


def _directory(options: Mapping[str, str], name: str) -> Path:
    raw = _get(options, name)
    if raw is None:
        raise ProviderConstructionError(f"{name} is not set")
    path = Path(raw)
    if not path.is_dir():
        raise ProviderConstructionError(f"{name}={raw!r} is not an existing directory")
    try:
        next(iter(path.iterdir()), None)
    except OSError as exc:
        raise ProviderConstructionError(f"{name}={raw!r} cannot be read: {exc.strerror}") from exc
    return path


def _zone(options: Mapping[str, str], name: str) -> tzinfo:
    raw = _get(options, name)
    if raw is None:
        return UTC
    try:
        return zoneinfo.ZoneInfo(raw)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        raise ProviderConstructionError(
            f"{name}={raw!r} is not an IANA time zone name (e.g. UTC, Europe/Berlin)"
        ) from exc


@dataclass(frozen=True)
class Settings:
    source: LogSource
    lookback: timedelta
    grace: timedelta
    max_evidence: int
    epilog_dir: Path | None
    #: the zone of log formats that carry none (RFC 3164, journalctl short-precise, dmesg -T)
    time_zone: tzinfo = UTC
    #: the job's own logs, read beside the kernel logs (None: not configured; answers come from kernel logs only)
    job_logs: JobLogSource | None = None


def parse_settings(options: Mapping[str, str]) -> Settings:
    """Validate the `ATTRIBUTION_*` options of this provider; ProviderConstructionError names what is wrong."""
    for name in options:
        if name.startswith(_PREFIXES) and name not in _KNOWN:
            raise ProviderConstructionError(f"{name} is not a kernel_log setting (a typo?)")
    kind = _get(options, "ATTRIBUTION_KERNEL_LOG_SOURCE")
    if kind is None:
        raise ProviderConstructionError("ATTRIBUTION_KERNEL_LOG_SOURCE is not set: choose 'files' or 'loki'")
    source: LogSource
    if kind == "files":
        root = _directory(options, "ATTRIBUTION_KERNEL_LOG_DIR")
        combined_raw = _get(options, "ATTRIBUTION_KERNEL_LOG_COMBINED_FILES")
        combined = DEFAULT_COMBINED
        if combined_raw is not None:
            combined = tuple(n.strip() for n in combined_raw.split(",") if n.strip())
            if any("/" in n for n in combined):
                raise ProviderConstructionError(
                    "ATTRIBUTION_KERNEL_LOG_COMBINED_FILES must list plain file names, separated by commas"
                )
        source = FileSource(root, combined)
    elif kind == "loki":
        url = _get(options, "ATTRIBUTION_LOKI_URL")
        if url is None:
            raise ProviderConstructionError("ATTRIBUTION_LOKI_URL is not set (required with the loki source)")
        if not re.match(r"^https?://[^/\s]+", url):
            raise ProviderConstructionError(f"ATTRIBUTION_LOKI_URL={url!r} is not an http:// or https:// URL")
        selector = _get(options, "ATTRIBUTION_LOKI_SELECTOR") or DEFAULT_SELECTOR
        label = _get(options, "ATTRIBUTION_LOKI_HOST_LABEL") or "host"
        if not _LABEL.match(label):
            raise ProviderConstructionError(f"ATTRIBUTION_LOKI_HOST_LABEL={label!r} is not a Loki label name")
        try:
            source = LokiSource(
                url,
                selector=selector,
                limit=_int(options, "ATTRIBUTION_LOKI_LIMIT", 1000, 1, 5000),
                max_pages=_int(options, "ATTRIBUTION_LOKI_MAX_PAGES", 10, 1, 100),
                tenant=_get(options, "ATTRIBUTION_LOKI_TENANT"),
                host_label=label,
                concurrency=_int(options, "ATTRIBUTION_LOKI_CONCURRENCY", DEFAULT_CONCURRENCY, 1, 64),
            )
        except TemplateError as exc:
            raise ProviderConstructionError(f"ATTRIBUTION_LOKI_SELECTOR={selector!r} cannot be used: {exc}") from exc
    else:
        raise ProviderConstructionError(f"ATTRIBUTION_KERNEL_LOG_SOURCE={kind!r} is unknown: choose 'files' or 'loki'")
    epilog_dir = None
    if _get(options, "ATTRIBUTION_EPILOG_DIR") is not None:
        epilog_dir = _directory(options, "ATTRIBUTION_EPILOG_DIR")
    return Settings(
        source=source,
        lookback=timedelta(seconds=_int(options, "ATTRIBUTION_KERNEL_LOG_LOOKBACK_SECONDS", 900, 1, 86400)),
        grace=timedelta(seconds=_int(options, "ATTRIBUTION_KERNEL_LOG_GRACE_SECONDS", 120, 0, 3600)),
        max_evidence=_int(options, "ATTRIBUTION_KERNEL_LOG_MAX_EVIDENCE", 8, 1, MAX_EVIDENCE),
        epilog_dir=epilog_dir,
        time_zone=_zone(options, "ATTRIBUTION_KERNEL_LOG_TIME_ZONE"),
        job_logs=_job_logs(options),
    )


def _job_logs(options: Mapping[str, str]) -> JobLogSource | None:
    """The job-log source of ATTRIBUTION_JOB_LOG_DIR or ATTRIBUTION_LOKI_JOB_SELECTOR (at most one), or None."""
    directory = _get(options, "ATTRIBUTION_JOB_LOG_DIR")
    template = _get(options, "ATTRIBUTION_LOKI_JOB_SELECTOR")
    limits = ReadLimits(
        node_bytes=_int(options, "ATTRIBUTION_JOB_LOG_MAX_NODE_BYTES", MAX_NODE_BYTES, 1, MAX_NODE_BYTES),
        request_bytes=_int(options, "ATTRIBUTION_JOB_LOG_MAX_REQUEST_BYTES", MAX_REQUEST_BYTES, 1, MAX_REQUEST_BYTES),
    )
    if directory is not None and template is not None:
        raise ProviderConstructionError(
            "ATTRIBUTION_JOB_LOG_DIR and ATTRIBUTION_LOKI_JOB_SELECTOR are both set: choose one job-log source"
        )
    if directory is not None:
        return FileJobLogSource(_directory(options, "ATTRIBUTION_JOB_LOG_DIR"), limits)
    if template is None:
        return None
    problem = template_problem(template)
    if problem is not None:
        raise ProviderConstructionError(f"ATTRIBUTION_LOKI_JOB_SELECTOR {problem}")
    url = _get(options, "ATTRIBUTION_LOKI_URL")
    if url is None or not re.match(r"^https?://[^/\s]+", url):
        raise ProviderConstructionError(
            "ATTRIBUTION_LOKI_JOB_SELECTOR needs ATTRIBUTION_LOKI_URL, an http:// or https:// URL"
        )
    label = _get(options, "ATTRIBUTION_LOKI_HOST_LABEL") or "host"
    if not _LABEL.match(label):
        raise ProviderConstructionError(f"ATTRIBUTION_LOKI_HOST_LABEL={label!r} is not a Loki label name")
    return LokiJobLogSource(
        url,
        template,
        host_label=label,
        limit=_int(options, "ATTRIBUTION_LOKI_LIMIT", 1000, 1, 5000),
        max_pages=_int(options, "ATTRIBUTION_LOKI_MAX_PAGES", 10, 1, 100),
        tenant=_get(options, "ATTRIBUTION_LOKI_TENANT"),
        limits=limits,
    )


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
