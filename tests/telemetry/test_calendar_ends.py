"""telemetry behind the Flask app with times at the ends of the calendar: windows are clipped, never overflow.

Year 1 and year 9999 are valid RFC 3339 times. The fast window (detected_at - lookback .. + grace), the files
source's reading slack around it and Loki's nanosecond range are each clipped at the ends of what can be
represented: the answer is what the telemetry holds, never a service_error, never an error-level log record.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import responses

from app import create_app
from app.settings import Settings
from providers.telemetry import TelemetryProvider

ROOT = Path(__file__).resolve().parents[2]
FIRST = "0001-01-01T00:00:00Z"
LAST = "9999-12-31T23:59:59.999999Z"
ENDS = [FIRST, "0001-01-01T00:00:00.000001Z", "0001-01-01T00:05:00Z", "9999-12-31T23:58:00Z", LAST]
XID79 = "kernel: NVRM: Xid (PCI:0000:07:00): 79, pid=1, GPU has fallen off the bus."
LOKI = "http://loki.test:3100"
MAX_NS = 2**63 - 1


def request_body(detected_at: str, phase: str = "fast", **scope: Any) -> dict[str, Any]:
    return {
        "schema_version": "0.1.0",
        "workload_id": "12345",
        "scope": {"nodes": ["worker-01", "worker-02"], "ranks": [], **scope},
        "failure_context": {"detected_at": detected_at, "detection_signal": "application_error"},
        "timeout_ms": 10000,
        "workload_context": {"workflow_id": "training-example", "attempt_index": 0},
        "phase": phase,
    }


def client_for(options: dict[str, str]) -> Any:
    provider = TelemetryProvider.from_options({"ATTRIBUTION_PROVIDER": "telemetry", **options})
    return create_app(Settings(provider="telemetry"), provider).test_client()


def answer(client: Any, body: dict[str, Any], caplog: pytest.LogCaptureFixture) -> dict[str, Any]:
    response = client.post("/v1/attribution", json=body)
    assert response.status_code == 200, response.get_data(as_text=True)
    data = response.get_json()
    assert data.get("error", {}).get("type") != "service_error", data
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    return data


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    """worker-01's kernel log: an Xid 79 in year 1, one in 2026 and one in year 9999."""
    directory = tmp_path / "logs"
    directory.mkdir()
    (directory / "worker-01.log").write_text(
        f"0001-01-01T00:01:00+00:00 worker-01 {XID79}\n"
        f"2026-09-09T11:59:00+00:00 worker-01 {XID79}\n"
        f"9999-12-31T23:57:00+00:00 worker-01 {XID79}\n"
    )
    return directory


@pytest.mark.parametrize("time_zone", [None, "America/New_York", "Pacific/Kiritimati"])
@pytest.mark.parametrize("detected_at", ENDS)
def test_fast_at_the_ends_of_the_calendar_reads_the_files_around_it(logs, caplog, detected_at, time_zone):
    options = {"ATTRIBUTION_KERNEL_LOG_SOURCE": "files", "ATTRIBUTION_KERNEL_LOG_DIR": str(logs)}
    if time_zone:
        options["ATTRIBUTION_KERNEL_LOG_TIME_ZONE"] = time_zone
    data = answer(client_for(options), request_body(detected_at), caplog)
    # The line of that end of the calendar lies inside the clipped window (15 minutes before, 2 after).
    [finding] = data["attributions"]
    assert finding["target"] == {"type": "Node", "name": "worker-01"}
    assert finding["error_category"] == "gpu_off_bus"
    assert finding["observed_at"] == ("0001-01-01T00:01:00Z" if detected_at < "5" else "9999-12-31T23:57:00Z")
    assert data["unattributed_targets"] == []
    assert data["error"]["type"] == "insufficient_telemetry"  # worker-02 has no log


@pytest.mark.parametrize("window", [(FIRST, LAST), (FIRST, "0001-01-01T00:02:00Z"), ("9999-12-31T23:50:00Z", LAST)])
def test_fast_with_scope_times_at_the_ends_of_the_calendar(logs, caplog, window):
    options = {"ATTRIBUTION_KERNEL_LOG_SOURCE": "files", "ATTRIBUTION_KERNEL_LOG_DIR": str(logs)}
    start, end = window
    data = answer(client_for(options), request_body(end, start_time=start, end_time=end), caplog)
    assert [f["target"]["name"] for f in data["attributions"]] == ["worker-01"]


@pytest.mark.parametrize(
    ("window", "found"),
    [((FIRST, LAST), True), ((FIRST, "0001-01-01T00:00:00.000001Z"), False), (("9999-12-31T23:59:59Z", LAST), False)],
)
def test_slow_with_an_epilog_window_at_the_ends_of_the_calendar(logs, tmp_path, caplog, window, found):
    epilog_dir = tmp_path / "epilog"
    epilog_dir.mkdir()
    shutil.copy(ROOT / "conf/samples/epilog/worker-01-20260909T121000Z.json", epilog_dir)
    client = client_for(
        {
            "ATTRIBUTION_KERNEL_LOG_SOURCE": "files",
            "ATTRIBUTION_KERNEL_LOG_DIR": str(logs),
            "ATTRIBUTION_EPILOG_DIR": str(epilog_dir),
        }
    )
    start, end = window
    session = answer(client, request_body(end), caplog)["attribution_session_id"]
    slow = request_body(end, "slow", start_time=start, end_time=end) | {"continue_session": session}
    data = answer(client, slow, caplog)
    # The sample epilog (2026-09-09, a failed GPU check on worker-01) is found where the window holds it.
    assert [f["target"]["name"] for f in data["attributions"]] == (["worker-01"] if found else [])


@responses.activate
@pytest.mark.parametrize("detected_at", [FIRST, "0001-01-01T00:05:00Z", "9999-12-31T23:58:00Z", LAST])
def test_loki_is_not_asked_about_a_window_outside_its_time_range(caplog, detected_at):
    # No answer is registered: a query would fail the request with a service_error.
    data = answer(
        client_for({"ATTRIBUTION_KERNEL_LOG_SOURCE": "loki", "ATTRIBUTION_LOKI_URL": LOKI}),
        request_body(detected_at),
        caplog,
    )
    assert data["error"]["type"] == "insufficient_telemetry"
    assert len(responses.calls) == 0


@responses.activate
@pytest.mark.parametrize(
    ("detected_at", "start", "end"),
    [
        ("1970-01-01T00:05:00Z", "0", str(7 * 60 * 10**9 + 1)),
        ("2262-04-11T23:47:00Z", str((MAX_NS // 10**9 - 16 - 15 * 60) * 10**9), str(MAX_NS)),
    ],
)
def test_loki_query_range_is_clipped_to_its_nanoseconds(caplog, detected_at, start, end):
    empty = {"status": "success", "data": {"resultType": "streams", "result": [], "stats": {}}}
    responses.get(f"{LOKI}/loki/api/v1/query_range", json=empty)
    client = client_for({"ATTRIBUTION_KERNEL_LOG_SOURCE": "loki", "ATTRIBUTION_LOKI_URL": LOKI})
    answer(client, request_body(detected_at), caplog)
    [call] = responses.calls
    query = parse_qs(urlparse(call.request.url).query)
    assert (query["start"], query["end"]) == ([start], [end])
