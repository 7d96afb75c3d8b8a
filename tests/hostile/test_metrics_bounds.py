"""/metrics stays bounded whatever callers send; a SIGHUP reload keeps the counts; exit leaves no directory."""

from __future__ import annotations

import os
import signal
import time

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.fakes import FAKE_PROVIDER as FAKE
from tests.hostile.conftest import assert_json_refusal, exchange


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _scrape(server) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    answer = requests.get(server.metrics_url, timeout=10)
    assert answer.status_code == 200
    return _samples(answer.text)


def _total(samples: dict, name: str) -> float:
    return sum(value for (sample_name, _), value in samples.items() if sample_name == name)


def _traffic(server, tag: str, count: int) -> None:
    """Custom methods and unknown paths, each one new."""
    for i in range(count):
        exchange(server.port, f"X{tag}{i} /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        answer = requests.get(f"{server.base_url}/no/such/{tag}/{i}", timeout=10)
        assert answer.status_code == 404


def test_custom_methods_and_unknown_paths_do_not_grow_metrics(server):
    _traffic(server, "A", 20)
    first = _scrape(server)
    _traffic(server, "B", 150)
    second = _scrape(server)
    assert set(first) == set(second), sorted(set(second) - set(first))[:10]
    assert _total(second, "attribution_requests_refused_total") >= 170


def test_refusals_are_counted_by_reason(server):
    before = _scrape(server)
    assert_json_refusal(exchange(server.port, b"nonsense\r\n\r\n"), 400)
    after = _scrape(server)
    key = ("attribution_requests_refused_total", (("reason", "bad_request"),))
    assert after[key] == before.get(key, 0) + 1


@pytest.mark.parametrize("operator_dir", [False, True], ids=["own-directory", "operator-directory"])
def test_sighup_keeps_counters_and_info_and_exit_removes_its_own_directory(start_gunicorn, tmp_path, operator_dir):
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {"ATTRIBUTION_PROVIDER": FAKE, "ATTRIBUTION_WORKERS": "1", "TMPDIR": str(temp)}
    if operator_dir:
        env["PROMETHEUS_MULTIPROC_DIR"] = str(tmp_path / "operator-metrics")
    server = start_gunicorn(env)
    old_workers = server.wait_ready()
    for _ in range(5):
        assert requests.get(f"{server.base_url}/healthz", timeout=10).status_code == 200
    before = _scrape(server)
    served = _total(before, "flask_http_request_total")
    assert served >= 5
    if operator_dir:
        metrics_dir = tmp_path / "operator-metrics"
    else:
        (metrics_dir,) = temp.glob("attribution-adapter-metrics-*")
    assert any(metrics_dir.glob("*.db"))

    os.kill(server.pid, signal.SIGHUP)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # bounded: until a new worker replaced the old one
        workers = server.worker_pids()
        if workers and not workers & old_workers:
            break
        time.sleep(0.1)
    assert workers and not workers & old_workers, "no reload happened"
    server.wait_ready()

    after = _scrape(server)
    assert _total(after, "flask_http_request_total") >= served
    info = [value for (name, _), value in after.items() if name == "attribution_adapter_info"]
    assert info == [1.0]

    server.stop()
    assert server.process.returncode == 0
    assert list(temp.iterdir()) == []  # no directory of its own left behind
    assert metrics_dir.exists() == operator_dir  # an operator's directory is the operator's
