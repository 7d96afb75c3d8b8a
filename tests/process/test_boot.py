"""gunicorn boot: a missing provider setting or dependency stops the boot; a working provider serves."""

from __future__ import annotations

import concurrent.futures
import re

import requests

from app.openapi import SEED_EXAMPLE
from tests.fakes import FAKE_PROVIDER

FAKE = FAKE_PROVIDER
SEED_REQUEST = SEED_EXAMPLE


def test_fact_without_fact_client_stops_the_boot_and_names_it(start_gunicorn):
    server = start_gunicorn({"ATTRIBUTION_PROVIDER": "fact", "ATTRIBUTION_FACT_ENDPOINT": "http://127.0.0.1:9"})
    code = server.wait_exit(timeout_s=30)
    assert code != 0
    assert "fact_client" in server.output()


def test_unset_provider_stops_the_boot_and_names_the_variable(start_gunicorn):
    server = start_gunicorn({})
    code = server.wait_exit(timeout_s=30)
    assert code != 0
    assert "ATTRIBUTION_PROVIDER" in server.output()


def test_unknown_provider_stops_the_boot_and_lists_the_known_names(start_gunicorn):
    server = start_gunicorn({"ATTRIBUTION_PROVIDER": "nosuch"})
    assert server.wait_exit(timeout_s=30) != 0
    output = server.output()
    assert "'nosuch' is not a known provider" in output
    assert "fact" in output and "telemetry" in output


def test_bad_server_setting_stops_the_boot_and_names_it(start_gunicorn):
    server = start_gunicorn({"ATTRIBUTION_PROVIDER": FAKE, "ATTRIBUTION_WORKERS": "many"})
    assert server.wait_exit(timeout_s=30) != 0
    assert "ATTRIBUTION_WORKERS" in server.output()


def test_working_provider_serves_healthz_and_an_attribution(start_gunicorn):
    server = start_gunicorn({"ATTRIBUTION_PROVIDER": FAKE, "ATTRIBUTION_WORKERS": "2"})
    server.wait_ready()
    health = requests.get(f"{server.base_url}/healthz", timeout=5)
    assert health.status_code == 200
    assert health.json() == {"status": "ok"}
    answer = requests.post(f"{server.base_url}/v1/attribution", json=SEED_REQUEST, timeout=15)
    assert answer.status_code == 200
    body = answer.json()
    assert body["service"]["provider"] == "fake"
    assert body["attributions"][0]["target"] == {"type": "Node", "name": "worker-01"}
    assert answer.headers["X-Request-ID"] == body["request_id"]
    # Metrics live on their own port, never on the app port.
    assert requests.get(f"{server.base_url}/metrics", timeout=5).status_code == 404


def _slow_request(session_id: str) -> dict:
    return {
        **SEED_REQUEST,
        "phase": "slow",
        "continue_session": session_id,
        "scope": {
            "nodes": ["worker-01"],
            "ranks": [],
            "start_time": "2026-09-09T12:01:00Z",
            "end_time": "2026-09-09T12:05:00Z",
        },
    }


def test_a_slow_served_by_another_worker_continues_the_session(start_gunicorn):
    # Each call waits 50 ms, so concurrent requests spread over both workers.
    server = start_gunicorn(
        {"ATTRIBUTION_PROVIDER": FAKE, "ATTRIBUTION_WORKERS": "2", "ATTRIBUTION_FAKE_DELAY_MS": "50"}
    )
    server.wait_ready()
    url = f"{server.base_url}/v1/attribution"
    fast = requests.post(url, json=SEED_REQUEST, timeout=15)
    assert fast.status_code == 200
    session_id = fast.json()["attribution_session_id"]

    continued_by: set[str] = set()
    issued_by: set[str] = set()
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        for _ in range(10):  # bounded: at most 80 slow requests
            answers = list(pool.map(lambda _: requests.post(url, json=_slow_request(session_id), timeout=15), range(8)))
            for answer in answers:
                assert answer.status_code == 200
                body = answer.json()
                assert "error" not in body
                assert body["attribution_session_id"] == session_id
                match = re.fullmatch(
                    r"issued by (pid-\d+); continued by (pid-\d+)", body["attributions"][0]["evidence"][0]["message"]
                )
                assert match is not None
                issued_by.add(match.group(1))
                continued_by.add(match.group(2))
            if len(continued_by) > 1:
                break
    assert len(issued_by) == 1
    assert continued_by - issued_by, f"no slow request reached a worker other than {issued_by}"
    assert {int(pid.removeprefix("pid-")) for pid in continued_by} <= server.worker_pids()
