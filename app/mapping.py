"""Between the schemas' plain data and the provider port's dataclasses, in both directions."""

from __future__ import annotations

from datetime import timezone
from operator import attrgetter
from typing import Any

from providers.base import (
    AllJobResources,
    AttributionOutcome,
    AttributionRequest,
    ErrorType,
    FailureContext,
    Finding,
    NodeTarget,
    Phase,
    Scope,
    Target,
    WorkloadContext,
)


def to_request(data: dict[str, Any]) -> AttributionRequest:
    scope, failure, workload = data["scope"], data["failure_context"], data["workload_context"]
    return AttributionRequest(
        workload_id=data["workload_id"],
        scope=Scope(
            nodes=tuple(scope["nodes"]),
            ranks=tuple(scope["ranks"]),
            start_time=scope.get("start_time"),
            end_time=scope.get("end_time"),
        ),
        failure_context=FailureContext(failure["detected_at"], failure["detection_signal"]),
        timeout_ms=data["timeout_ms"],
        workload_context=WorkloadContext(workload["workflow_id"], workload["attempt_index"]),
        phase=Phase(data["phase"]),
        continue_session=data.get("continue_session"),
    )


def target_data(target: Target) -> dict[str, Any]:
    if isinstance(target, NodeTarget):
        return {"type": "Node", "name": target.name}
    if isinstance(target, AllJobResources):
        return {"type": "AllJobResources"}
    raise TypeError(f"not a target: {type(target).__name__}")


def _finding_data(finding: Finding) -> dict[str, Any]:
    data: dict[str, Any] = {
        "target": target_data(finding.target),
        "error_category": finding.error_category,
        "observed_at": finding.observed_at,
        "evidence": [
            {"source": e.source, "message": e.message}
            | ({} if e.observed_at is None else {"observed_at": e.observed_at})
            for e in finding.evidence
        ],
    }
    if finding.confidence is not None:
        data["confidence"] = finding.confidence
    return data


def response_data(
    outcome: AttributionOutcome,
    *,
    schema_version: str,
    service: dict[str, str],
    request_id: str,
    session_id: str | None,
) -> dict[str, Any]:
    """The AttributionResponse as plain data for AttributionResponseSchema.dump; `error` only when there is one."""
    data: dict[str, Any] = {
        "schema_version": schema_version,
        "service": service,
        "request_id": request_id,
        "attribution_session_id": session_id,
        "attributions": [_finding_data(f) for f in outcome.attributions],
        "unattributed_targets": [target_data(t) for t in outcome.unattributed_targets],
    }
    if outcome.error is not None:
        data["error"] = {"type": outcome.error.type.value, "message": outcome.error.message}
    return data


# ---------------------------------------------------------------- the answer as JSON-ready data, in bulk


def _utc_text(value: Any) -> str:
    # Inlined `schemas.fields.format_timestamp` (the guard made every time aware UTC; a naive one still fails).
    if value.tzinfo is None:
        raise ValueError("naive datetime cannot be emitted")
    return value.astimezone(timezone.utc).isoformat().removesuffix("+00:00") + "Z"


_ALL_JOB_RESOURCES = {"type": "AllJobResources"}
_NAME = attrgetter("name")


def _target_json(target: Target) -> dict[str, Any]:
    if type(target) is NodeTarget:
        return {"type": "Node", "name": target.name}
    if type(target) is AllJobResources:
        return dict(_ALL_JOB_RESOURCES)
    return target_data(target)  # a subclass, or a TypeError for what is no target


def _targets_json(targets: tuple[Target, ...]) -> list[dict[str, Any]]:
    if set(map(type, targets)) == {NodeTarget}:  # up to 16,384 nodes: one comprehension, no call per target
        return [{"type": "Node", "name": name} for name in map(_NAME, targets)]
    return [_target_json(t) for t in targets]


def _finding_json(finding: Finding) -> dict[str, Any]:
    data: dict[str, Any] = {
        "target": _target_json(finding.target),
        "error_category": finding.error_category,
        "observed_at": _utc_text(finding.observed_at),
        "evidence": [
            {"source": e.source, "message": e.message}
            if e.observed_at is None
            else {"source": e.source, "message": e.message, "observed_at": _utc_text(e.observed_at)}
            for e in finding.evidence
        ],
    }
    if finding.confidence is not None:
        data["confidence"] = finding.confidence
    return data


def response_json(
    outcome: AttributionOutcome,
    *,
    schema_version: str,
    service: dict[str, str],
    request_id: str,
    session_id: str | None,
) -> dict[str, Any]:
    """What `AttributionResponseSchema().dump(response_data(...))` gives for an outcome the guard passed, built
    directly: the same keys in the same order and the same values, without one schema call per target or finding.
    """
    data: dict[str, Any] = {
        "schema_version": schema_version,
        "service": {"name": service["name"], "version": service["version"], "provider": service["provider"]},
        "request_id": request_id,
        "attribution_session_id": session_id,
        "attributions": [_finding_json(f) for f in outcome.attributions],
        "unattributed_targets": _targets_json(outcome.unattributed_targets),
    }
    error = outcome.error
    if error is not None:
        kind = error.type
        data["error"] = {"type": kind.value if isinstance(kind, ErrorType) else kind, "message": error.message}
    return data
