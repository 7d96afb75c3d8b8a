"""`attribution-adapter check` on the Loki source: reachability, the host label, and per host whether lines parse."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from tests.cli.conftest import FakeLoki


def _ns(at: datetime) -> int:
    return int(at.timestamp()) * 1_000_000_000 + at.microsecond * 1000


def _recent(minutes_ago: int) -> datetime:
    return datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=minutes_ago)


def _env(url: str, **extra: str) -> dict[str, str]:
    return {
        "ATTRIBUTION_PROVIDER": "telemetry",
        "ATTRIBUTION_KERNEL_LOG_SOURCE": "loki",
        "ATTRIBUTION_LOKI_URL": url,
        **extra,
    }


def _streams() -> dict[str, list[tuple[int, str]]]:
    at = _recent(30)
    stamp = at.isoformat().replace("+00:00", "Z")
    return {
        # Full syslog lines, as rsyslog forwards them.
        "worker-01": [(_ns(at), f"{stamp} worker-01 kernel: NVRM: GPU 0000:91:00.0: GPU has fallen off the bus.")],
        # Bare messages, as a journal scrape stores them: the source classifies them as they are.
        "worker-02": [(_ns(at), "NVRM: Xid (PCI:0000:38:00): 13, pid=48213, name=python3, Graphics SM Warp Exception")],
    }


def test_a_reachable_loki_reports_each_host_and_its_formats(run_cli):
    with FakeLoki(_streams()) as loki:
        result = run_cli(["check", "--json"], _env(loki.url))
        queried = [q["query"][0] for q in loki.queries if q["path"] == ["/loki/api/v1/query_range"]]
        text = run_cli(["check", "--verbose"], _env(loki.url))
        summary = run_cli(["check"], _env(loki.url))
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    logs = doc["details"]["kernel_logs"]
    assert logs["source"] == "loki" and logs["ready"] == "ready" and logs["host_label"] == "host"
    hosts = {h["name"]: h for h in logs["hosts"]}
    assert hosts["worker-01"]["formats"] == {"rfc3339": 1} and hosts["worker-01"]["status"] == "ok"
    assert hosts["worker-02"]["formats"] == {"message": 1}
    # One query per host over the recent window, by the source's own selector.
    assert queried == ['{host=~"worker-01"}', '{host=~"worker-02"}']
    assert text.exit_code == 0
    assert "  host worker-01: ok; rfc3339 1;" in text.stdout
    assert "  hosts: 2, 2 queried (2 ok)" in summary.stdout.splitlines() and "host worker-01" not in summary.stdout


def test_an_unreachable_loki_fails_in_one_line(run_cli, unreachable_url):
    result = run_cli(["check"], _env(unreachable_url))
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith("attribution-adapter check: failed: ATTRIBUTION_LOKI_URL: Loki could not be reached at")
    assert "check the URL and the network path" in line


def test_a_host_label_no_stream_carries_names_the_labels_seen(run_cli):
    with FakeLoki(_streams(), label="hostname") as loki:
        result = run_cli(["check", "--json"], _env(loki.url))
    assert result.exit_code == 1
    (problem,) = [p for p in json.loads(result.stdout)["problems"] if p["severity"] == "error"]
    assert problem["where"] == "ATTRIBUTION_LOKI_HOST_LABEL"
    assert "no stream carries the label 'host'" in problem["message"] and "hostname, job" in problem["message"]


def test_a_selector_that_matches_no_line_fails(run_cli):
    with FakeLoki(_streams()) as loki:
        result = run_cli(["check", "--verbose"], _env(loki.url, ATTRIBUTION_LOKI_SELECTOR='{hostname=~"{hosts}"}'))
    # The streams carry `host`, not `hostname`: every host is listed, and no query finds a line.
    assert result.exit_code == 1
    assert "  host worker-01: no_lines; no lines" in result.stdout
    assert "  hosts: 2, 2 queried (2 no_lines)" in result.stdout.splitlines()
    (line,) = result.stderr.splitlines()
    assert line.startswith("attribution-adapter check: failed: ATTRIBUTION_LOKI_SELECTOR: matched no line of any host")


def test_calls_answered_429_or_503_are_sent_again_after_retry_after(run_cli):
    # a busy gateway refuses the first call of each kind once: /ready, the host label's values, each host's sample
    refusals = {
        "/ready": [(503, "0")],
        "/loki/api/v1/label/host/values": [(429, "0")],
        "/loki/api/v1/query_range": [(429, "0"), (503, None)],
    }
    with FakeLoki(_streams(), refusals=refusals) as loki:
        result = run_cli(["check", "--json"], _env(loki.url))
        calls = [q["path"][0] for q in loki.queries]
    assert result.exit_code == 0, result.output
    logs = json.loads(result.stdout)["details"]["kernel_logs"]
    assert logs["ready"] == "ready"
    assert [h["status"] for h in logs["hosts"]] == ["ok", "ok"]
    assert calls.count("/ready") == 2 and calls.count("/loki/api/v1/label/host/values") == 2
    assert calls.count("/loki/api/v1/query_range") == 4  # the first host's sample sent three times, the second's once


def test_a_retry_after_past_the_calls_time_bound_is_not_waited_for_and_said(run_cli):
    with FakeLoki(_streams(), refusals={"/loki/api/v1/label/host/values": [(429, "3600")]}) as loki:
        result = run_cli(["check", "--json"], _env(loki.url))
        calls = [q["path"][0] for q in loki.queries]
    assert result.exit_code == 1
    (problem,) = [p for p in json.loads(result.stdout)["problems"] if p["severity"] == "error"]
    assert problem["where"] == "ATTRIBUTION_LOKI_URL"
    assert "answered HTTP 429 and asked to retry after 3600 s, past the deadline" in problem["message"]
    assert calls.count("/loki/api/v1/label/host/values") == 1
