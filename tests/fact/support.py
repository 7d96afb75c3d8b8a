"""Shared values and builders for the FACT provider tests: the fake package's path, requests and bodies."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from providers.base import AttributionRequest, FailureContext, Phase, Scope, WorkloadContext

FAKE_PKG = Path(__file__).parent / "fake_pkg"
ENDPOINT = "https://fact.internal.example:8443/api"
OPTIONS = {"ATTRIBUTION_PROVIDER": "fact", "ATTRIBUTION_FACT_ENDPOINT": ENDPOINT}
NODES = ("worker-01", "worker-02", "worker-03")
DETECTED_AT = datetime(2026, 9, 9, 12, 0, tzinfo=timezone.utc)
WINDOW = (datetime(2026, 9, 9, 12, 5, tzinfo=timezone.utc), datetime(2026, 9, 9, 12, 20, tzinfo=timezone.utc))
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def request(
    nodes: tuple[str, ...] = NODES, phase: Phase = Phase.FAST, window: tuple[datetime, datetime] | None = None
) -> AttributionRequest:
    start, end = window if window else (None, None)
    return AttributionRequest(
        workload_id="12345",
        scope=Scope(nodes=nodes, ranks=(0, 1, 7), start_time=start, end_time=end),
        failure_context=FailureContext(DETECTED_AT, "application_error"),
        timeout_ms=10000,
        workload_context=WorkloadContext("training-example", 0),
        phase=phase,
    )


def body(phase: str = "fast", session: str | None = None, window: bool = False, **overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "schema_version": "0.1.0",
        "workload_id": "12345",
        "scope": {"nodes": list(NODES), "ranks": [0, 1, 7]},
        "failure_context": {"detected_at": "2026-09-09T12:00:00Z", "detection_signal": "application_error"},
        "timeout_ms": 10000,
        "workload_context": {"workflow_id": "training-example", "attempt_index": 0},
        "phase": phase,
    }
    if session is not None:
        data["continue_session"] = session
    if window:
        data["scope"] |= {"start_time": "2026-09-09T12:05:00Z", "end_time": "2026-09-09T12:20:00Z"}
    return data | overrides
