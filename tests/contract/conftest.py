"""Shared helpers of the contract suite: a valid request, the app around a scriptable fake, and response checks.

Every test talks to the service as ADI does: JSON over `POST /v1/attribution` through the Flask test client.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from app import create_app
from app.settings import Settings
from providers.base import AttributionOutcome, Evidence, Finding, NodeTarget
from schemas import messages
from tests.fakes import FakeProvider
from tests.openapi_schema import openapi_validator

URL = "/v1/attribution"
DETECTED_AT = "2026-09-09T12:00:00Z"
WINDOW = {"start_time": "2026-09-09T11:00:00Z", "end_time": "2026-09-09T12:30:00Z"}
RESPONSE_KEYS = {
    "schema_version",
    "service",
    "request_id",
    "attribution_session_id",
    "attributions",
    "unattributed_targets",
}
# The 422 `type` tokens: those of schemas/messages.py and the body reader's own.
PROBLEM_TYPES = {value.error_type for value in vars(messages).values() if isinstance(value, messages.TypedMessage)} | {
    "json_invalid",
    "content_type",
    "dict_type",
}
VALID_TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


# ---------------------------------------------------------------- requests


def valid_request(**overrides: Any) -> dict[str, Any]:
    """The seed's example request (a `fast`), with top-level fields replaced by `overrides`."""
    body: dict[str, Any] = {
        "schema_version": "0.1.0",
        "workload_id": "12345",
        "scope": {"nodes": ["worker-01", "worker-02", "worker-03"], "ranks": [0, 1, 2, 3]},
        "failure_context": {"detected_at": DETECTED_AT, "detection_signal": "application_error"},
        "timeout_ms": 10000,
        "workload_context": {"workflow_id": "training-example", "attempt_index": 0},
        "phase": "fast",
    }
    body.update(copy.deepcopy(overrides))
    return body


def slow_request(session_id: str, *, window: bool = True, **overrides: Any) -> dict[str, Any]:
    body = valid_request(phase="slow", continue_session=session_id, **overrides)
    if window:
        body["scope"] = {**body["scope"], **WINDOW}
    return body


def with_value(body: dict[str, Any], path: Iterable[str | int], value: Any) -> dict[str, Any]:
    """A deep copy of `body` with the value at `path` set (the last key is created when missing)."""
    result = copy.deepcopy(body)
    *parents, last = list(path)
    node: Any = result
    for key in parents:
        node = node[key]
    node[last] = value
    return result


def without(body: dict[str, Any], path: Iterable[str | int]) -> dict[str, Any]:
    result = copy.deepcopy(body)
    *parents, last = list(path)
    node: Any = result
    for key in parents:
        node = node[key]
    del node[last]
    return result


def post(client: Any, body: Any, headers: dict[str, str] | None = None) -> Any:
    """POST `body` as JSON (ensure_ascii, so lone surrogates travel as `\\uXXXX` escapes)."""
    data = body if isinstance(body, (bytes, str)) else json.dumps(body, allow_nan=False)
    return client.post(URL, data=data, headers={"Content-Type": "application/json", **(headers or {})})


# ---------------------------------------------------------------- providers and apps


def echo_fast(request: Any, *_: Any) -> AttributionOutcome:
    """One finding on the first node, observed at the request's `detected_at` (so its conversion shows)."""
    nodes = request.scope.nodes
    findings = (
        (
            Finding(
                target=NodeTarget(nodes[0]),
                error_category="gpu_hardware",
                observed_at=request.failure_context.detected_at,
                evidence=(Evidence("syslog", "NVRM: Xid 79, GPU has fallen off the bus."),),
                confidence=0.9,
            ),
        )
        if nodes
        else ()
    )
    return AttributionOutcome(
        attributions=findings,
        unattributed_targets=tuple(NodeTarget(n) for n in nodes[1:]),
        session_state={"phase": "fast", "nodes": len(nodes)},
    )


def empty_outcome(*_: Any) -> AttributionOutcome:
    return AttributionOutcome()


def raising(exc: BaseException) -> Callable[..., Any]:
    def behaviour(*_: Any) -> AttributionOutcome:
        raise exc

    return behaviour


class NamedFakeProvider(FakeProvider):
    """A FakeProvider published under another registry name."""

    def __init__(self, name: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.name = name


def make_client(provider: FakeProvider, **settings: Any) -> Any:
    app = (
        create_app(Settings(provider=provider.name, **settings), provider)
        if settings
        else create_app(provider=provider)
    )
    app.config["TESTING"] = True
    return app.test_client()


@pytest.fixture
def provider() -> FakeProvider:
    return FakeProvider(fast=echo_fast, slow=lambda request, state, *_: echo_fast(request))


@pytest.fixture
def client(provider: FakeProvider) -> Any:
    return make_client(provider)


# ---------------------------------------------------------------- the published OpenAPI document


_VALIDATORS = {name: openapi_validator(name) for name in ("AttributionResponse", "ValidationError", "ErrorDetail")}


def openapi_errors(body: Any, component: str = "AttributionResponse") -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in _VALIDATORS[component].iter_errors(body)]


_UTC_Z = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z")


def _timestamps(body: dict[str, Any]) -> list[str]:
    found = []
    for finding in body.get("attributions", []):
        found.append(finding["observed_at"])
        found.extend(e["observed_at"] for e in finding["evidence"] if "observed_at" in e)
    return found


def check_200(response: Any) -> dict[str, Any]:
    """A 200 `AttributionResponse`: valid against the published OpenAPI document, UTC `Z` timestamps,
    `error` present only when there is one, `X-Request-ID` equal to `request_id`. Returns the body."""
    assert response.status_code == 200, (response.status_code, response.get_data(as_text=True))
    assert response.mimetype == "application/json"
    body = response.get_json()
    assert openapi_errors(body) == []
    assert set(body) - {"error"} == RESPONSE_KEYS
    if "error" in body:
        assert body["error"] is not None
        assert set(body["error"]) == {"type", "message"}
    assert body["schema_version"] == "0.1.0"
    assert body["service"]["name"] == "attribution-adapter"
    assert response.headers["X-Request-ID"] == body["request_id"]
    for stamp in _timestamps(body):
        assert _UTC_Z.fullmatch(stamp), stamp
    return body


def check_empty_error(response: Any, error_type: str) -> dict[str, Any]:
    """A 200 that carries `error.type` and nothing of a provider's answer."""
    body = check_200(response)
    assert body["attributions"] == []
    assert body["unattributed_targets"] == []
    assert body.get("error", {}).get("type") == error_type, body
    return body


def check_detail(response: Any, status: int) -> dict[str, Any]:
    """A `{"detail": str}` error body (404, 405, 413, 500) with an `X-Request-ID` and no stack trace."""
    assert response.status_code == status, (response.status_code, response.get_data(as_text=True))
    assert response.mimetype == "application/json"
    body = response.get_json()
    assert isinstance(body, dict) and set(body) == {"detail"}
    assert isinstance(body["detail"], str) and body["detail"]
    assert openapi_errors(body, "ErrorDetail") == []
    assert "Traceback" not in response.get_data(as_text=True)
    assert response.headers.get("X-Request-ID")
    return body


def check_422(response: Any, provider: FakeProvider | None = None, count: int | None = None) -> list[dict[str, Any]]:
    """A 422 in the FastAPI shape: `{"detail": [{"loc", "msg", "type"}, ...]}`, provider not called."""
    assert response.status_code == 422, (response.status_code, response.get_data(as_text=True))
    assert response.mimetype == "application/json"
    assert response.headers.get("X-Request-ID")
    body = response.get_json()
    assert isinstance(body, dict) and set(body) == {"detail"}
    detail = body["detail"]
    assert isinstance(detail, list) and detail
    for entry in detail:
        assert set(entry) == {"loc", "msg", "type"}, entry
        assert isinstance(entry["loc"], list) and entry["loc"]
        assert all(isinstance(step, (str, int)) and not isinstance(step, bool) for step in entry["loc"])
        assert entry["loc"][0] in ("body", "header")
        assert isinstance(entry["msg"], str) and entry["msg"]
        assert entry["type"] in PROBLEM_TYPES, entry
    assert openapi_errors(body, "ValidationError") == []
    if count is not None:
        assert len(detail) == count, detail
    if provider is not None:
        assert provider.calls == []
    return detail


def one_problem(response: Any, provider: FakeProvider, loc: list[Any], kind: str | None = None) -> dict[str, Any]:
    """Exactly one 422 entry, at `loc` (and of `kind` when given)."""
    (entry,) = check_422(response, provider, count=1)
    assert entry["loc"] == loc, entry
    if kind is not None:
        assert entry["type"] == kind, entry
    return entry
