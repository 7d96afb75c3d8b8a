"""Operating the Adapter under real gunicorn on 127.0.0.1: typo'd settings and ports in use stop the start with one
clear line, every line on stderr is JSON in one format, a request's id is on every line written while it is served,
and the alerting gauges are served on the metrics port."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from app.boot import CANNOT_START
from app.openapi import SEED_EXAMPLE
from tests.fakes import FAKE_PROVIDER as FAKE

LINE_KEYS = {"time", "level", "logger", "message"}
POLL_BOUND_S = 20  # how long a state may take to show up on a loaded machine: a bound, not a timing


def json_lines(output: str) -> list[dict]:
    """Every line of gunicorn's output parsed as one JSON object in the service's format (or the test fails)."""
    lines = []
    for text in output.splitlines():
        try:
            entry = json.loads(text)
        except json.JSONDecodeError:
            pytest.fail(f"not a JSON line: {text!r}\n--- whole output:\n{output}")
        assert isinstance(entry, dict) and LINE_KEYS <= entry.keys(), text
        lines.append(entry)
    assert lines, "gunicorn wrote nothing"
    return lines


def errors(lines: list[dict]) -> list[str]:
    return [entry["message"] for entry in lines if entry["level"] in ("error", "critical")]


def test_an_unknown_setting_stops_the_boot_naming_the_closest(start_gunicorn):
    server = start_gunicorn({"ATTRIBUTION_PROVIDER": FAKE, "ATTRIBUTION_WORKER": "4"})
    assert server.wait_exit() == CANNOT_START
    assert errors(json_lines(server.output())) == [
        "attribution-adapter: cannot start: unknown setting ATTRIBUTION_WORKER; did you mean ATTRIBUTION_WORKERS?"
    ]


def test_another_providers_setting_is_a_json_warning_and_the_server_serves(start_gunicorn):
    server = start_gunicorn({"ATTRIBUTION_PROVIDER": FAKE, "ATTRIBUTION_WORKERS": "1", "ATTRIBUTION_LOKI_URL": "x"})
    server.wait_ready()
    server.stop()
    lines = json_lines(server.output())
    warnings = [entry["message"] for entry in lines if entry["level"] == "warning"]
    assert warnings == [
        "setting not read: ATTRIBUTION_LOKI_URL is a setting of the telemetry provider; "
        f"ATTRIBUTION_PROVIDER={FAKE} ignores it"
    ]


def test_a_bad_server_setting_is_one_json_line(start_gunicorn):
    server = start_gunicorn({"ATTRIBUTION_PROVIDER": FAKE, "ATTRIBUTION_WORKERS": "many"})
    assert server.wait_exit() == CANNOT_START
    assert errors(json_lines(server.output())) == [
        "attribution-adapter: cannot start: ATTRIBUTION_WORKERS='many' is not an integer"
    ]


@pytest.mark.parametrize("setting", ["ATTRIBUTION_BIND", "ATTRIBUTION_METRICS_BIND"])
def test_a_port_in_use_is_one_clear_line_and_exit_4(start_gunicorn, setting):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        address = f"127.0.0.1:{holder.getsockname()[1]}"
        server = start_gunicorn({"ATTRIBUTION_PROVIDER": FAKE, setting: address})
        code = server.wait_exit()
    output = server.output()
    assert code == CANNOT_START
    assert "Traceback" not in output
    assert errors(json_lines(output)) == [
        f"attribution-adapter: cannot start: {setting}={address} cannot be bound: address already in use (a second "
        "instance on one machine needs both ATTRIBUTION_BIND and ATTRIBUTION_METRICS_BIND set to free ports)"
    ]


def test_every_line_is_json_and_a_request_s_lines_carry_its_id(start_gunicorn, tmp_path: Path):
    # A host folder whose only file is in no known format: the provider warns, naming the file, while serving.
    (tmp_path / "worker-01").mkdir()
    (tmp_path / "worker-01" / "kern.log").write_text("hello there\nnot a kernel log line\n")
    server = start_gunicorn(
        {
            "ATTRIBUTION_PROVIDER": "telemetry",
            "ATTRIBUTION_KERNEL_LOG_SOURCE": "files",
            "ATTRIBUTION_KERNEL_LOG_DIR": str(tmp_path),
            "ATTRIBUTION_WORKERS": "1",
        }
    )
    server.wait_ready()
    body = {**SEED_EXAMPLE, "scope": {"nodes": ["worker-01"], "ranks": []}}
    ids = []
    for _ in range(2):
        answer = requests.post(f"{server.base_url}/v1/attribution", json=body, timeout=15)
        assert answer.status_code == 200 and answer.json()["error"]["type"] == "insufficient_telemetry"
        ids.append(answer.headers["X-Request-ID"])
    assert requests.post(f"{server.base_url}/v1/attribution", json={}, timeout=15).status_code == 422
    server.stop()  # the shutdown's lines too
    lines = json_lines(server.output())
    file_warnings = [entry for entry in lines if "kern.log" in entry["message"]]
    assert [entry["request_id"] for entry in file_warnings] == ids
    assert all(entry["level"] == "warning" and "worker-01/kern.log" in entry["message"] for entry in file_warnings)
    request_lines = [
        entry
        for entry in lines
        if entry["logger"] == "attribution_adapter.request"
        and entry.get("status") == 200
        and entry.get("path") == "/v1/attribution"
    ]
    assert [entry["request_id"] for entry in request_lines] == ids
    # Lines written outside any request (boot, shutdown) carry no request id.
    assert any(entry["message"].startswith("Starting gunicorn") for entry in lines)
    assert all("request_id" not in entry for entry in lines if entry["logger"] == "gunicorn.error")


def _gauges(url: str) -> dict[str, float]:
    text = requests.get(url, timeout=5).text
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name
        in (
            "attribution_requests_in_flight",
            "attribution_provider_calls_in_flight",
            "attribution_provider_concurrency_limit",
        )
    }


def _poll(url: str, wanted: dict[str, float]) -> dict[str, float]:
    deadline = time.monotonic() + POLL_BOUND_S
    seen = _gauges(url)
    while time.monotonic() < deadline and any(seen.get(k) != v for k, v in wanted.items()):
        time.sleep(0.05)
        seen = _gauges(url)
    return seen


def test_in_flight_gauges_and_the_limit_on_the_metrics_port(start_gunicorn):
    server = start_gunicorn(
        {
            "ATTRIBUTION_PROVIDER": FAKE,
            "ATTRIBUTION_WORKERS": "1",
            "ATTRIBUTION_PROVIDER_CONCURRENCY": "5",
            "ATTRIBUTION_FAKE_DELAY_MS": "3000",
        }
    )
    server.wait_ready()
    url = f"{server.base_url}/v1/attribution"
    answers: list[int] = []
    callers = [
        threading.Thread(target=lambda: answers.append(requests.post(url, json=SEED_EXAMPLE, timeout=30).status_code))
        for _ in range(2)
    ]
    for caller in callers:
        caller.start()
    busy = {
        "attribution_requests_in_flight": 2.0,
        "attribution_provider_calls_in_flight": 2.0,
        "attribution_provider_concurrency_limit": 5.0,
    }
    during = _poll(server.metrics_url, busy)
    for caller in callers:
        caller.join(30)
    assert during == busy
    assert answers == [200, 200]
    idle = {**busy, "attribution_requests_in_flight": 0.0, "attribution_provider_calls_in_flight": 0.0}
    assert _poll(server.metrics_url, idle) == idle
    server.stop()
    json_lines(server.output())
