"""Backend faults through a real gunicorn (the project's config, 2 gthread workers): hang, then refused, then well.

After each fault the answer is 200 with the typed error, the same workers are still serving (no worker died or
was replaced), `/healthz` is 200 and the next request is answered.
"""

from __future__ import annotations

import time

import requests

from tests.faults.conftest import FACT_HTTP_PKG, NODES, Backend, fact_body, loki_xid_on, request_body

CLOSE_BOUND_S = 5.0


def post(server, body: dict) -> dict:
    response = requests.post(f"{server.base_url}/v1/attribution", json=body, timeout=30)
    assert response.status_code == 200, response.text[:500]
    data = response.json()
    for target in [f["target"] for f in data["attributions"]] + data["unattributed_targets"]:
        assert target.get("name", NODES[0]) in NODES
    return data


def still_serving(server, pids: set[int]) -> None:
    assert server.process.poll() is None
    assert server.worker_pids() == pids, "a worker died or was replaced"
    assert requests.get(f"{server.base_url}/healthz", timeout=5).status_code == 200


def hang_refused_recover(server, backend: Backend, good_payload: bytes) -> None:
    pids = server.worker_pids()
    assert len(pids) == 2

    # Hang: a backend that accepts and never answers.
    backend.fault = "hang"
    started = time.monotonic()
    for _ in range(4):  # enough for both workers to take some
        data = post(server, request_body(timeout_ms=700))
        assert data["error"]["type"] == "timeout" and data["attributions"] == []
    assert time.monotonic() - started < 20
    assert backend.wait_client_gone(4, CLOSE_BOUND_S), "a provider call never closed its backend connection"
    still_serving(server, pids)

    # Refused: the backend's port closes, nothing listens there any more.
    port = backend.port
    backend.stop()
    for _ in range(4):
        data = post(server, request_body())
        assert data["error"]["type"] == "service_error" and data["attributions"] == []
    still_serving(server, pids)

    # The backend comes back on the same port: answers are findings again.
    revived = Backend(port)
    try:
        revived.payload = good_payload
        data = post(server, request_body(timeout_ms=5000))
        assert [f["target"]["name"] for f in data["attributions"]] == ["worker-01"]
        still_serving(server, pids)
    finally:
        revived.stop()


def test_loki_hang_and_refused_under_gunicorn(gunicorn, backend: Backend) -> None:
    server = gunicorn(
        {
            "ATTRIBUTION_PROVIDER": "telemetry",
            "ATTRIBUTION_KERNEL_LOG_SOURCE": "loki",
            "ATTRIBUTION_LOKI_URL": backend.url,
        }
    )
    hang_refused_recover(server, backend, loki_xid_on("worker-01"))


def test_fact_hang_and_refused_under_gunicorn(gunicorn, backend: Backend) -> None:
    server = gunicorn(
        {
            "ATTRIBUTION_PROVIDER": "fact",
            "ATTRIBUTION_FACT_ENDPOINT": backend.url,
            "PYTHONPATH": str(FACT_HTTP_PKG),
        }
    )
    assert requests.post(f"{server.base_url}/v1/attribution", json=request_body(), timeout=30).status_code == 200
    hang_refused_recover(server, backend, fact_body(["worker-01"], NODES))
