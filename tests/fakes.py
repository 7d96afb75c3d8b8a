"""A scriptable test provider, also loadable by gunicorn as `ATTRIBUTION_PROVIDER=tests.fakes:from_options`."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from datetime import timezone

from providers.base import (
    AttributionOutcome,
    AttributionRequest,
    Deadline,
    Evidence,
    Finding,
    NodeTarget,
    Provider,
    TraceContext,
)

Behaviour = Callable[..., AttributionOutcome]

#: what `ATTRIBUTION_PROVIDER` is set to for a real gunicorn serving this fake
FAKE_PROVIDER = "tests.fakes:from_options"


def first_node_finding(request: AttributionRequest, *_: object) -> AttributionOutcome:
    """One finding on the first node in scope, the others unattributed; the fast pass leaves a marker state."""
    nodes = request.scope.nodes
    findings = (
        (
            Finding(
                target=NodeTarget(nodes[0]),
                error_category="gpu_hardware",
                observed_at=request.failure_context.detected_at.astimezone(timezone.utc),
                evidence=(Evidence("syslog", "NVRM: Xid (PCI:0000:07:00): 79, GPU has fallen off the bus."),),
            ),
        )
        if nodes
        else ()
    )
    return AttributionOutcome(
        attributions=findings,
        unattributed_targets=tuple(NodeTarget(n) for n in nodes[1:]),
        session_state={"marker": f"pid-{os.getpid()}", "nodes": len(nodes)},
    )


class FakeProvider(Provider):
    """Answers with `fast_behaviour`/`slow_behaviour` and records every call."""

    name = "fake"
    version = "1.0"

    def __init__(self, fast: Behaviour = first_node_finding, slow: Behaviour | None = None, delay_s: float = 0.0):
        self.fast_behaviour = fast
        self.slow_behaviour = slow or (lambda request, state, *_: first_node_finding(request))
        self.delay_s = delay_s
        self.calls: list[tuple[str, AttributionRequest, object, TraceContext | None]] = []
        self.finished = threading.Event()
        self._lock = threading.Lock()

    def fast(self, request: AttributionRequest, deadline: Deadline, trace: TraceContext | None) -> AttributionOutcome:
        with self._lock:
            self.calls.append(("fast", request, None, trace))
        if self.delay_s:
            time.sleep(self.delay_s)
        try:
            return self.fast_behaviour(request, deadline, trace)
        finally:
            self.finished.set()

    def slow(
        self,
        request: AttributionRequest,
        session_state: Mapping[str, str | int],
        deadline: Deadline,
        trace: TraceContext | None,
    ) -> AttributionOutcome:
        with self._lock:
            self.calls.append(("slow", request, dict(session_state), trace))
        if self.delay_s:
            time.sleep(self.delay_s)
        return self.slow_behaviour(request, session_state, deadline, trace)


class ProcessFakeProvider(FakeProvider):
    """For real gunicorn runs: `slow` echoes the worker that issued the session and the one serving it."""

    def __init__(self, delay_s: float, close_marker: str | None = None) -> None:
        super().__init__(slow=self._slow, delay_s=delay_s)
        self.close_marker = close_marker

    def close(self) -> None:
        if self.close_marker:
            with open(self.close_marker, "a") as marker:
                marker.write(f"closed pid-{os.getpid()}\n")

    @staticmethod
    def _slow(request: AttributionRequest, state: Mapping[str, str | int], *_: object) -> AttributionOutcome:
        outcome = first_node_finding(request)
        finding = outcome.attributions[0]
        evidence = Evidence("fake", f"issued by {state.get('marker')}; continued by pid-{os.getpid()}")
        return AttributionOutcome(
            attributions=(Finding(finding.target, "gpu_hardware", finding.observed_at, (evidence,)),),
            unattributed_targets=outcome.unattributed_targets,
        )


#: the variables `from_options` reads, declared so that boot refuses any other `ATTRIBUTION_*` name
SETTINGS = ("ATTRIBUTION_FAKE_DELAY_MS", "ATTRIBUTION_FAKE_CLOSE_MARKER", "ATTRIBUTION_FAKE_KEEPS_DEADLINE")


def from_options(options: Mapping[str, str]) -> Provider:
    """The factory gunicorn uses; `ATTRIBUTION_FAKE_DELAY_MS` makes every call wait that long, and
    `ATTRIBUTION_FAKE_CLOSE_MARKER` names a file where `close()` notes each process that closed the provider,
    `ATTRIBUTION_FAKE_KEEPS_DEADLINE=1` sets `keeps_deadline`."""
    provider = ProcessFakeProvider(
        delay_s=int(options.get("ATTRIBUTION_FAKE_DELAY_MS", "0")) / 1000.0,
        close_marker=options.get("ATTRIBUTION_FAKE_CLOSE_MARKER"),
    )
    # `ATTRIBUTION_FAKE_KEEPS_DEADLINE=1`: the fake claims to keep the deadline, so it is called in the request's
    # thread (its delay still ignores the deadline, which shows what happens to an answer that comes late).
    provider.keeps_deadline = options.get("ATTRIBUTION_FAKE_KEEPS_DEADLINE") == "1"
    return provider
