"""The FACT provider, through an HTTP `fact_client` (tests/faults/fact_http_pkg), against a failing loopback FACT.

Contract (docs/contract.md): unreachable, erroring, unreadable or contract-breaking (a node outside the scope) is 200
`service_error`; no answer in time is 200 `timeout`; both with empty `attributions`. The call ends (the backend
sees the connection closed) and the app serves the next request.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from tests.faults.conftest import (
    NODES,
    OUTSIDE,
    URL,
    Backend,
    check_in_scope,
    check_typed_error,
    fact_body,
    fact_options,
    make_app,
    request_body,
)

CLOSE_BOUND_S = 5.0
WINDOW = {"start_time": "2026-09-09T12:05:00Z", "end_time": "2026-09-09T12:20:00Z"}


@pytest.fixture
def fact_app(fact_http_client, backend: Backend):
    backend.payload = fact_body(["worker-01"], NODES)
    return make_app(fact_options(backend.url))


def serves_next_request(client, backend: Backend) -> None:
    backend.fault = "ok"
    backend.payload = fact_body(["worker-01"], NODES)
    response = client.post(URL, json=request_body(timeout_ms=5000))
    assert response.status_code == 200
    data = response.get_json()
    assert [f["target"] for f in data["attributions"]] == [{"type": "Node", "name": "worker-01"}]
    assert "error" not in data


def test_baseline_valid_answer_gives_a_finding(fact_app, backend: Backend) -> None:
    client = fact_app.test_client()
    data = client.post(URL, json=request_body()).get_json()
    assert data["service"]["provider"] == "fact"
    assert data["attributions"][0]["target"] == {"type": "Node", "name": "worker-01"}
    assert data["attributions"][0]["error_category"] == "gpu_xid"
    assert data["unattributed_targets"] == [{"type": "Node", "name": n} for n in ("worker-02", "worker-03")]
    method, path, sent = backend.requests[0]
    assert (method, path) == ("POST", "/v1/attributions")
    assert json.loads(sent)["nodes"] == NODES
    # The slow phase goes through the same client and server.
    slow = request_body(phase="slow", continue_session=data["attribution_session_id"])
    slow["scope"] |= WINDOW
    data = client.post(URL, json=slow).get_json()
    assert data["attributions"][0]["target"] == {"type": "Node", "name": "worker-01"}
    assert backend.requests[1][:2] == ("POST", "/v1/attributions/att-1/continue")


def test_connection_refused_is_service_error(fact_http_client, refused_url: str) -> None:
    client = make_app(fact_options(refused_url)).test_client()
    for _ in range(2):
        data = check_typed_error(client.post(URL, json=request_body()), "service_error")
        assert data["unattributed_targets"] == []
        assert data["attribution_session_id"]  # a fast answer still starts a session


@pytest.mark.parametrize("fault", ["status500", "malformed", "truncated"])
def test_erroring_or_unreadable_answer_is_service_error(fact_app, backend: Backend, fault: str) -> None:
    backend.fault = fault
    client = fact_app.test_client()
    data = check_typed_error(client.post(URL, json=request_body()), "service_error")
    assert data["unattributed_targets"] == []
    serves_next_request(client, backend)


@pytest.mark.parametrize("fault", ["hang", "late", "drip"])
def test_no_answer_in_time_is_timeout_and_the_call_ends(fact_app, backend: Backend, fault: str) -> None:
    backend.fault = fault
    backend.late_s = 4.0
    client = fact_app.test_client()
    started = time.monotonic()
    data = check_typed_error(client.post(URL, json=request_body(timeout_ms=800)), "timeout")
    assert time.monotonic() - started < 10
    assert data["unattributed_targets"] == []
    assert backend.wait_client_gone(1, CLOSE_BOUND_S), "the FACT call never closed its connection"
    serves_next_request(client, backend)


def test_slow_phase_hang_is_timeout(fact_app, backend: Backend) -> None:
    client = fact_app.test_client()
    session = client.post(URL, json=request_body()).get_json()["attribution_session_id"]
    backend.fault = "hang"
    slow = request_body(timeout_ms=800, phase="slow", continue_session=session)
    slow["scope"] |= WINDOW
    data = check_typed_error(client.post(URL, json=slow), "timeout")
    assert data["attribution_session_id"] == session
    assert backend.wait_client_gone(1, CLOSE_BOUND_S)
    serves_next_request(client, backend)


def test_huge_answer_is_bounded_and_contract_valid(fact_app, backend: Backend) -> None:
    """~40 MB: 3 faulty nodes with 100 000 symptoms each and 100 000 analysed nodes, most outside the scope."""
    many = fact_body(["worker-01", "worker-02", "worker-03"], NODES, symptoms_per_node=100_000)
    data = json.loads(many)
    data["analysed_nodes"] += [f"healthy-{i:06d}" for i in range(100_000)]
    body = json.dumps(data).encode()
    del data, many

    def chunks() -> Iterator[bytes]:
        for i in range(0, len(body), 1 << 20):
            yield body[i : i + (1 << 20)]

    backend.fault = "huge"
    backend.huge_length = len(body)
    backend.huge_chunks = chunks
    print(f"\nhuge FACT answer: {len(body) / 2**20:.1f} MiB")
    client = fact_app.test_client()
    response = client.post(URL, json=request_body(timeout_ms=60000))
    assert response.status_code == 200
    data = response.get_json()
    check_in_scope(data, NODES)
    error = (data.get("error") or {}).get("type")
    assert error in (None, "timeout", "service_error")
    if error is None:
        assert sorted(f["target"]["name"] for f in data["attributions"]) == NODES
        # Evidence is cut to ATTRIBUTION_FACT_MAX_EVIDENCE (8) per finding, never the 100 000 symptoms.
        assert all(len(f["evidence"]) == 8 for f in data["attributions"])
        assert data["unattributed_targets"] == []
    else:
        assert data["attributions"] == []
    assert len(response.get_data()) < 1024 * 1024
    serves_next_request(client, backend)


def test_node_outside_the_scope_is_service_error(fact_app, backend: Backend) -> None:
    backend.payload = fact_body(["worker-01", OUTSIDE], NODES + [OUTSIDE])
    client = fact_app.test_client()
    response = client.post(URL, json=request_body())
    data = check_typed_error(response, "service_error")
    assert data["unattributed_targets"] == []
    assert OUTSIDE not in response.get_data(as_text=True)
    serves_next_request(client, backend)


def test_healthy_node_outside_the_scope_is_left_out(fact_app, backend: Backend) -> None:
    backend.payload = fact_body(["worker-01"], NODES + [OUTSIDE])
    response = fact_app.test_client().post(URL, json=request_body())
    data = response.get_json()
    assert "error" not in data
    assert OUTSIDE not in response.get_data(as_text=True)
    check_in_scope(data, NODES)
