"""The garbage collector is paused while `telemetry` reads and concludes, and runs again after, whatever happens; a
worker reads one large request at a time."""

from __future__ import annotations

import dataclasses
import gc
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from app import create_app
from app.settings import Settings
from providers.base import AttributionRequest, Deadline, ProviderProcessingError, TraceContext
from providers.telemetry import TelemetryProvider
from providers.telemetry.collection import LARGE_SCOPE_NODES, collector_paused
from providers.telemetry.joblog.source import JobLogs
from providers.telemetry.settings import parse_settings
from providers.telemetry.window import Window
from tests.joblog.support import T0
from tests.telemetry.conftest import fast_body, rsyslog, write_lines, xid


@pytest.fixture(autouse=True)
def _collector_running() -> Iterator[None]:
    assert gc.isenabled()
    yield
    gc.enable()


@dataclasses.dataclass
class _Watching:
    """A job-log source that records whether the collector ran while it was read, and may fail."""

    fail: bool = False
    seen: list[bool] = dataclasses.field(default_factory=list)

    def read(
        self, request: AttributionRequest, nodes: Sequence[str], window: Window, deadline: Deadline,
        trace: TraceContext | None,
    ) -> JobLogs:
        self.seen.append(gc.isenabled())
        if self.fail:
            raise RuntimeError("a bug in a source")
        raise ProviderProcessingError("the job-log folder could not be listed")


def _client(tmp_path: Path, source: _Watching):
    kernel = tmp_path / "kernel"
    write_lines(kernel / "gpu-1.log", [rsyslog(T0, "gpu-1", xid(79, "0000:3b:00.0", "GPU has fallen off the bus."))])
    settings = parse_settings({"ATTRIBUTION_KERNEL_LOG_SOURCE": "files", "ATTRIBUTION_KERNEL_LOG_DIR": str(kernel)})
    provider = TelemetryProvider(dataclasses.replace(settings, job_logs=source))
    return create_app(Settings(provider="telemetry"), provider).test_client()


def test_the_collector_is_paused_while_a_request_is_read_and_runs_again_after(tmp_path: Path) -> None:
    source = _Watching()
    answer = _client(tmp_path, source).post("/v1/attribution", json=fast_body(["gpu-1"], T0.isoformat()))
    assert answer.status_code == 200 and answer.get_json()["attributions"][0]["error_category"] == "gpu_off_bus"
    assert source.seen == [False] and gc.isenabled()


def test_the_collector_runs_again_after_a_request_that_failed_inside_the_provider(tmp_path: Path) -> None:
    source = _Watching(fail=True)
    answer = _client(tmp_path, source).post("/v1/attribution", json=fast_body(["gpu-1"], T0.isoformat()))
    assert answer.status_code == 200 and answer.get_json()["error"]["type"] == "service_error"
    assert source.seen == [False] and gc.isenabled()


def test_requests_side_by_side_share_one_pause_and_an_operators_choice_stands() -> None:
    first, second = collector_paused(), collector_paused()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert not gc.isenabled()  # the second request still runs
    second.__exit__(None, None, None)
    assert gc.isenabled()
    gc.disable()  # turned off by whoever runs the service
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


@dataclasses.dataclass
class _Holding:
    """A job-log source that holds the first request until released, and counts the reads."""

    started: threading.Event = dataclasses.field(default_factory=threading.Event)
    release: threading.Event = dataclasses.field(default_factory=threading.Event)
    reads: int = 0

    def read(
        self, request: AttributionRequest, nodes: Sequence[str], window: Window, deadline: Deadline,
        trace: TraceContext | None,
    ) -> JobLogs:
        self.reads += 1
        if self.reads == 1:
            self.started.set()
            self.release.wait(10)
        return JobLogs({}, ())


def test_a_worker_reads_one_large_request_at_a_time_and_a_waiting_one_gets_timeout_at_its_deadline(
    tmp_path: Path,
) -> None:
    (tmp_path / "kernel").mkdir()
    settings = parse_settings(
        {"ATTRIBUTION_KERNEL_LOG_SOURCE": "files", "ATTRIBUTION_KERNEL_LOG_DIR": str(tmp_path / "kernel")}
    )
    source = _Holding()
    app = create_app(Settings(provider="telemetry"), TelemetryProvider(dataclasses.replace(settings, job_logs=source)))
    large = [f"node-{i:05d}" for i in range(LARGE_SCOPE_NODES + 1)]
    answers: list[dict] = []
    first = threading.Thread(
        target=lambda: answers.append(app.test_client().post("/v1/attribution", json=fast_body(large, T0.isoformat()))
                                      .get_json())
    )
    first.start()
    try:
        assert source.started.wait(10)
        body = fast_body(large, T0.isoformat())
        body["timeout_ms"] = 1500
        waiting = app.test_client().post("/v1/attribution", json=body).get_json()
        assert waiting["error"]["type"] == "timeout" and waiting["attributions"] == []
        assert source.reads == 1  # the second request read nothing
        # A small request does not wait for the large one.
        small = app.test_client().post("/v1/attribution", json=fast_body(large[:LARGE_SCOPE_NODES], T0.isoformat()))
        assert small.get_json()["error"]["type"] == "insufficient_telemetry" and source.reads == 2
    finally:
        source.release.set()
        first.join(10)
    assert answers[0]["error"]["type"] == "insufficient_telemetry"  # the first one was answered
    # Once it ended, the next large request is read.
    assert app.test_client().post("/v1/attribution", json=fast_body(large, T0.isoformat())).status_code == 200
    assert source.reads == 3
