"""Operating the Adapter under real gunicorn: metrics summed across workers, JSON logs, graceful shutdown."""

from __future__ import annotations

import base64
import concurrent.futures
import json
import os
import signal
import threading
import time

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from app.openapi import SEED_EXAMPLE as SEED_REQUEST
from tests.fakes import FAKE_PROVIDER as FAKE


def _issuing_pid(session_id: str) -> str:
    payload = session_id.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["s"]["marker"]


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def _total(samples: dict, name: str, **labels: str) -> float:
    wanted = set(labels.items())
    return sum(
        value
        for (sample_name, sample_labels), value in samples.items()
        if sample_name == name and wanted <= set(sample_labels)
    )


def test_metrics_from_two_workers_add_up_on_the_metrics_port(start_gunicorn):
    server = start_gunicorn(
        {"ATTRIBUTION_PROVIDER": FAKE, "ATTRIBUTION_WORKERS": "2", "ATTRIBUTION_FAKE_DELAY_MS": "40"}
    )
    server.wait_ready()
    url = f"{server.base_url}/v1/attribution"
    served_by: set[str] = set()
    sent = 0
    invalid = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        for _ in range(8):  # bounded: at most 64 requests
            answers = list(pool.map(lambda _: requests.post(url, json=SEED_REQUEST, timeout=15), range(8)))
            sent += len(answers)
            for answer in answers:
                assert answer.status_code == 200
                served_by.add(_issuing_pid(answer.json()["attribution_session_id"]))
            if len(served_by) == 2:
                break
    for _ in range(3):
        assert requests.post(url, json={"phase": "fast"}, timeout=15).status_code == 422
        invalid += 1
    assert len(served_by) == 2, "the requests did not reach both workers"

    scrape = requests.get(server.metrics_url, timeout=5)
    assert scrape.status_code == 200
    samples = _samples(scrape.text)
    assert _total(samples, "attribution_requests_total", phase="fast", outcome="ok") == sent
    assert _total(samples, "attribution_provider_call_duration_seconds_count", provider="fake", phase="fast") == sent
    assert _total(samples, "attribution_findings_total", error_category="gpu_hardware") == sent
    assert _total(samples, "flask_http_request_total", method="POST", status="200") == sent
    assert _total(samples, "flask_http_request_total", method="POST", status="422") == invalid
    info = [labels for (name, labels), _ in samples.items() if name == "attribution_adapter_info"]
    assert info and dict(info[0])["provider"] == "fake" and dict(info[0])["version"] == "0.1.0"
    # Labels stay bounded: no workload ids, node names or paths in any label value.
    for _, labels in samples:
        for _, value in labels:
            assert "worker-01" not in value and "12345" not in value and "training-example" not in value
    # The app port does not serve metrics.
    assert requests.get(f"{server.base_url}/metrics", timeout=5).status_code == 404


def test_request_logs_are_json_and_keep_out_bodies_evidence_and_user_ids(start_gunicorn):
    server = start_gunicorn({"ATTRIBUTION_PROVIDER": FAKE, "ATTRIBUTION_WORKERS": "1"})
    server.wait_ready()
    url = f"{server.base_url}/v1/attribution"
    request = {
        **SEED_REQUEST,
        "workload_id": "job-of-user-alice.smith",
        "workload_context": {"workflow_id": "alice.smith@example.com", "attempt_index": 2},
    }
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    answer = requests.post(url, json=request, timeout=15, headers={"traceparent": f"00-{trace_id}-00f067aa0ba902b7-01"})
    assert answer.status_code == 200
    evidence = answer.json()["attributions"][0]["evidence"][0]["message"]
    assert "fallen off the bus" in evidence
    rejected = requests.post(url, json={**request, "timeout_ms": "alice.smith"}, timeout=15)
    assert rejected.status_code == 422
    server.stop()

    lines = [json.loads(line) for line in server.output().splitlines() if line.strip()]
    assert lines, "no log lines"
    text = server.output()
    for secret in ("alice", "fallen off the bus", "NVRM", "worker-01", "training-example"):
        assert secret not in text
    requests_logged = [
        line for line in lines if line.get("message") == "request" and line.get("path") == "/v1/attribution"
    ]
    ok = next(line for line in requests_logged if line["status"] == 200)
    assert ok["request_id"] == answer.json()["request_id"]
    assert ok["trace_id"] == trace_id
    assert ok["phase"] == "fast" and ok["outcome"] == "ok" and ok["provider"] == "fake" and ok["level"] == "info"
    assert isinstance(ok["duration_ms"], float) and ok["time"].endswith("Z")
    bad = next(line for line in requests_logged if line["status"] == 422)
    assert bad["level"] == "warning" and bad["request_id"] == rejected.headers["X-Request-ID"]
    assert any(line["logger"] == "gunicorn.error" for line in lines), "gunicorn's own logs are not in JSON"


def test_sigterm_lets_in_flight_requests_finish_and_refuses_new_ones(start_gunicorn):
    server = start_gunicorn(
        {"ATTRIBUTION_PROVIDER": FAKE, "ATTRIBUTION_WORKERS": "1", "ATTRIBUTION_FAKE_DELAY_MS": "2000"}
    )
    server.wait_ready()
    url = f"{server.base_url}/v1/attribution"
    results: list[requests.Response] = []
    in_flight = threading.Thread(target=lambda: results.append(requests.post(url, json=SEED_REQUEST, timeout=30)))
    in_flight.start()
    time.sleep(0.5)  # the request is now inside the provider call
    os.kill(server.pid, signal.SIGTERM)
    time.sleep(0.3)
    with pytest.raises(requests.RequestException):
        requests.get(f"{server.base_url}/healthz", timeout=3)
    in_flight.join(timeout=30)
    assert results and results[0].status_code == 200
    assert "error" not in results[0].json() and results[0].json()["attributions"]
    assert server.wait_exit(timeout_s=30) == 0


def test_each_stopping_worker_closes_its_provider(start_gunicorn, tmp_path):
    marker = tmp_path / "closed.txt"
    server = start_gunicorn(
        {"ATTRIBUTION_PROVIDER": FAKE, "ATTRIBUTION_WORKERS": "2", "ATTRIBUTION_FAKE_CLOSE_MARKER": str(marker)}
    )
    workers = server.wait_ready()
    assert requests.get(f"{server.base_url}/healthz", timeout=5).status_code == 200
    server.stop()
    assert server.process.returncode == 0
    closed = marker.read_text().split("\n")
    assert sorted(line for line in closed if line) == sorted(f"closed pid-{pid}" for pid in workers)
