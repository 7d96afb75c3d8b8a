"""The provider port: plain domain dataclasses, the provider interface and its typed exceptions.

Providers speak only these types. Nothing here imports Flask, the app or the schemas.
"""

from __future__ import annotations

import abc
import enum
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

TRACEPARENT_RE = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")

#: the contract's bounds on a finding's evidence, which every provider and the app's guard apply
MAX_EVIDENCE = 32
MAX_EVIDENCE_MESSAGE = 4096
ELLIPSIS = "…"


#: the representable range of an aware datetime: a time computed from a request's is clipped to it, never overflows
EARLIEST = datetime.min.replace(tzinfo=timezone.utc)
LATEST = datetime.max.replace(tzinfo=timezone.utc)


def shifted(value: datetime, delta: timedelta) -> datetime:
    """`value + delta`, or EARLIEST or LATEST where that passes year 1 or 9999 (any valid timestamp is valid)."""
    try:
        return value + delta
    except OverflowError:
        return LATEST if delta > timedelta(0) else EARLIEST


def cut_text(text: str, limit: int = MAX_EVIDENCE_MESSAGE) -> str:
    """`text` of at most `limit` characters; text that was cut ends in an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + ELLIPSIS


class Phase(enum.StrEnum):
    FAST = "fast"
    SLOW = "slow"


class ErrorType(enum.StrEnum):
    """The public `error.type` values. They are response data, never HTTP status codes."""

    TIMEOUT = "timeout"
    INSUFFICIENT_TELEMETRY = "insufficient_telemetry"
    SERVICE_ERROR = "service_error"
    NO_ATTRIBUTION_AVAILABLE = "no_attribution_available"

    @property
    def blocks_findings(self) -> bool:
        """Every type but `insufficient_telemetry` means `attributions` must be empty."""
        return self is not ErrorType.INSUFFICIENT_TELEMETRY


# ---------------------------------------------------------------- request


@dataclass(frozen=True)
class Scope:
    nodes: tuple[str, ...]
    ranks: tuple[int, ...]
    start_time: datetime | None = None
    end_time: datetime | None = None


@dataclass(frozen=True)
class FailureContext:
    detected_at: datetime
    detection_signal: str


@dataclass(frozen=True)
class WorkloadContext:
    workflow_id: str
    attempt_index: int


@dataclass(frozen=True)
class AttributionRequest:
    """One validated request; every datetime is timezone-aware UTC."""

    workload_id: str
    scope: Scope
    failure_context: FailureContext
    timeout_ms: int
    workload_context: WorkloadContext
    phase: Phase
    continue_session: str | None = None


# ---------------------------------------------------------------- outcome


@dataclass(frozen=True)
class NodeTarget:
    name: str


@dataclass(frozen=True)
class AllJobResources:
    pass


Target = NodeTarget | AllJobResources


@dataclass(frozen=True)
class Evidence:
    source: str
    message: str
    observed_at: datetime | None = None


@dataclass(frozen=True)
class Finding:
    target: Target
    error_category: str
    observed_at: datetime
    evidence: tuple[Evidence, ...] = ()
    # None means unknown, never "low": a provider that has no calibrated value leaves it out.
    confidence: float | None = None


@dataclass(frozen=True)
class ProviderError:
    type: ErrorType
    message: str


@dataclass(frozen=True)
class AttributionOutcome:
    """What a provider answers. `session_state` is what its `slow` needs to continue (small, JSON-able)."""

    attributions: tuple[Finding, ...] = ()
    unattributed_targets: tuple[Target, ...] = ()
    error: ProviderError | None = None
    session_state: Mapping[str, str | int] = field(default_factory=dict)


# ---------------------------------------------------------------- call context


@dataclass(frozen=True)
class Deadline:
    """An absolute point on the monotonic clock by which the Adapter stops waiting for the provider."""

    expires_at: float

    @classmethod
    def after_ms(cls, milliseconds: int) -> Deadline:
        return cls(time.monotonic() + milliseconds / 1000.0)

    def remaining(self) -> float:
        """Seconds left, never negative."""
        return max(0.0, self.expires_at - time.monotonic())

    @property
    def expired(self) -> bool:
        return time.monotonic() >= self.expires_at


@dataclass(frozen=True)
class TraceContext:
    """A W3C trace context that was validated on the way in; providers pass it on to their backends."""

    traceparent: str
    tracestate: str | None = None

    @property
    def trace_id(self) -> str:
        match = TRACEPARENT_RE.match(self.traceparent)
        return match.group(1) if match else ""

    def headers(self) -> dict[str, str]:
        headers = {"traceparent": self.traceparent}
        if self.tracestate:
            headers["tracestate"] = self.tracestate
        return headers


# ---------------------------------------------------------------- exceptions


class ProviderConstructionError(Exception):
    """The provider (or what it needs for this request) cannot be built: missing package, setting or resource.

    At boot it stops the process; raised from `fast`/`slow` before any processing it is an HTTP 500.
    The message names what is missing and must be safe to show an operator.
    """


class SourceFailure(enum.StrEnum):
    """What went wrong with the telemetry source, as the operator's failure metric counts it (a closed set)."""

    #: the source could not be reached (connection refused, name not resolved, connection broken)
    UNREACHABLE = "unreachable"
    #: the source did not answer in time
    TIMEOUT = "timeout"
    #: the source answered with an error, or a directory or file could not be read
    UNREADABLE = "unreadable"
    #: the source answered something that cannot be parsed or breaks its own format
    MALFORMED = "malformed"
    #: any other failure
    OTHER = "other"


class ProviderProcessingError(Exception):
    """The provider failed while processing: the answer is 200 with `error.type` `service_error`.

    The message becomes `error.message`: one short sentence, no stack trace, credential or log excerpt.
    `kind` says what failed at the telemetry source, for the metrics; a provider that does not say counts as `other`.
    """

    kind: SourceFailure = SourceFailure.OTHER

    def __init__(self, *args: object, kind: SourceFailure | None = None) -> None:
        super().__init__(*args)
        if kind is not None:
            self.kind = kind


class ProviderTimeoutError(ProviderProcessingError):
    """A backend did not answer in time: the answer is 200 with `error.type` `timeout`."""

    kind = SourceFailure.TIMEOUT


# ---------------------------------------------------------------- check (the command line's `check`)


class CheckSeverity(enum.StrEnum):
    #: answers would be empty or wrong until it is fixed: `check` exits non-zero
    ERROR = "error"
    #: worth a look; answers are not made wrong by it
    WARNING = "warning"


@dataclass(frozen=True)
class CheckProblem:
    severity: CheckSeverity
    #: what it is about: a file or folder (relative to its directory), a host, a setting or a backend
    where: str
    #: what is wrong and what to do about it, in one line
    message: str


@dataclass(frozen=True)
class CheckReport:
    """What a provider's `check` found about its backend or telemetry, for a person and as JSON."""

    #: False when the provider looked at nothing beyond its own construction
    checked: bool
    #: one line saying what was looked at
    summary: str
    #: the report for a person, line by line: a summary (counts, time spans, problems stay separate)
    text: tuple[str, ...] = ()
    #: the same with every per-host and per-file line (`check --verbose`); empty: the same as `text`
    verbose_text: tuple[str, ...] = ()
    #: the same report as JSON-able data; its shape is the provider's and documented beside it
    details: Mapping[str, Any] = field(default_factory=dict)
    problems: tuple[CheckProblem, ...] = ()

    @property
    def ok(self) -> bool:
        return not any(p.severity is CheckSeverity.ERROR for p in self.problems)


# ---------------------------------------------------------------- interface


class Provider(abc.ABC):
    """A failure-attribution provider. Implementations must be safe to call from several threads at once."""

    #: the registry name, published as `service.provider`
    name: str = "unnamed"
    #: the provider's identity written into session ids and checked when a `slow` continues one (app/sessions.py);
    #: None means `name`. It must stay the same across releases, or a rolling upgrade breaks open sessions: a
    #: renamed provider keeps its first name here
    session_identity: str | None = None
    #: the provider's own version, for the info metric and logs
    version: str = "0"
    #: True only when `fast` and `slow` return (or raise) by `deadline` on their own, whatever their backend does:
    #: the Adapter then calls them in the request's thread. Otherwise each call runs on a thread pool and the
    #: Adapter stops waiting at the deadline. Either way an answer that arrives after the deadline is a `timeout`.
    keeps_deadline: bool = False

    @abc.abstractmethod
    def fast(self, request: AttributionRequest, deadline: Deadline, trace: TraceContext | None) -> AttributionOutcome:
        """The fast signal pass that starts a session."""

    @abc.abstractmethod
    def slow(
        self,
        request: AttributionRequest,
        session_state: Mapping[str, str | int],
        deadline: Deadline,
        trace: TraceContext | None,
    ) -> AttributionOutcome:
        """The slow pass over the epilog window `scope.start_time`..`scope.end_time` (both present)."""

    def check(self, deadline: Deadline) -> CheckReport:
        """Look at the backend or telemetry the provider reads and say what would make its answers empty or wrong.

        Optional: by default there is nothing to check beyond construction. Reads only, bounded by `deadline`.
        """
        return CheckReport(
            checked=False,
            summary=f"the provider {self.name!r} was built; it offers no check of what it reads",
        )

    def after_fork(self, descriptors: Sequence[int] = ()) -> None:  # noqa: B027 - optional hook
        """Start what must be forked from a server's worker while it has one thread; called once in each worker,
        right after it was forked. `descriptors`: the server's listening sockets, which a process the
        provider forks closes (it must not keep the server's port bound)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release what the provider holds; called once when the process stops."""
