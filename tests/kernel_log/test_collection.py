"""The garbage collector is paused while `kernel_log` reads and concludes, and runs again after, whatever happens."""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from app import create_app
from app.settings import Settings
from providers.base import AttributionRequest, Deadline, ProviderProcessingError, TraceContext
from providers.kernel_log import KernelLogProvider
from providers.kernel_log.collection import collector_paused
from providers.kernel_log.joblog.source import JobLogs
from providers.kernel_log.settings import parse_settings
from providers.kernel_log.window import Window
from tests.joblog.support import T0
from tests.kernel_log.conftest import fast_body, rsyslog, write_lines, xid


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
    provider = KernelLogProvider(dataclasses.replace(settings, job_logs=source))
    return create_app(Settings(provider="kernel_log"), provider).test_client()


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
