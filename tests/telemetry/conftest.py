"""Test data builders for the telemetry provider: real line formats, requests, providers on temp trees."""

from __future__ import annotations

import gzip
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from providers.base import (
    AttributionRequest,
    Deadline,
    FailureContext,
    Phase,
    Scope,
    WorkloadContext,
)
from providers.telemetry import TelemetryProvider
from providers.telemetry.scan_process import ScanProcess

#: the seed example's failure time
DETECTED = datetime(2026, 9, 9, 12, 0, 0, tzinfo=UTC)


def at(minutes: float, base: datetime = DETECTED) -> datetime:
    """A time `minutes` after (negative: before) the failure."""
    return base + timedelta(minutes=minutes)


def rsyslog(ts: datetime, host: str, msg: str, tag: str = "kernel") -> str:
    """A line in RSYSLOG_FileFormat, with a kernel monotonic bracket (seconds since a boot a week earlier)."""
    mono = (ts - datetime(2026, 9, 2, tzinfo=UTC)).total_seconds()
    return f"{ts.strftime('%Y-%m-%dT%H:%M:%S.%f')}+00:00 {host} {tag}: [{mono:.6f}] {msg}"


def journal(ts: datetime, host: str, msg: str) -> str:
    """A line as `journalctl -k -o short-iso` prints it (`+0000`, no fraction)."""
    return f"{ts.strftime('%Y-%m-%dT%H:%M:%S')}+0000 {host} kernel: {msg}"


def rfc5424(ts: datetime, host: str, msg: str, app: str = "kernel") -> str:
    """An RFC 5424 line as rsyslog's RSYSLOG_SyslogProtocol23Format writes it."""
    return f"<3>1 {ts.strftime('%Y-%m-%dT%H:%M:%S.%f')}Z {host} {app} - - - {msg}"


def dmesg(ts: datetime, msg: str) -> str:
    """A `dmesg --time-format iso` line (no hostname)."""
    return f"{ts.strftime('%Y-%m-%dT%H:%M:%S,%f')}+00:00 {msg}"


def xid(code: int, rest: str = "pid='<unknown>', name=<unknown>, details", bus: str = "0000:07:00") -> str:
    return f"NVRM: Xid (PCI:{bus}): {code}, {rest}"


HEALTHY = "IPv6: ADDRCONF(NETDEV_CHANGE): ib0: link becomes ready"


def write_lines(path: Path, lines: Iterable[str], gz: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = ("\n".join(lines) + "\n").encode()
    path.write_bytes(gzip.compress(data, mtime=0) if gz else data)
    return path


def healthy_lines(host: str, start: datetime, end: datetime, every: timedelta = timedelta(minutes=5)) -> list[str]:
    out = []
    t = start
    while t <= end:
        out.append(rsyslog(t, host, HEALTHY))
        t += every
    return out


def make_request(
    nodes: Iterable[str],
    detected: datetime = DETECTED,
    start: datetime | None = None,
    end: datetime | None = None,
    phase: Phase = Phase.FAST,
) -> AttributionRequest:
    return AttributionRequest(
        workload_id="12345",
        scope=Scope(nodes=tuple(nodes), ranks=(), start_time=start, end_time=end),
        failure_context=FailureContext(detected_at=detected, detection_signal="application_error"),
        timeout_ms=10000,
        workload_context=WorkloadContext(workflow_id="training-example", attempt_index=0),
        phase=phase,
        continue_session="s" if phase is Phase.SLOW else None,
    )


def fast_body(
    nodes: Iterable[str], detected_at: str, ranks: Iterable[int] = (), workload_id: str = "12345"
) -> dict[str, object]:
    """A fast request's JSON body, as a caller POSTs it."""
    return {
        "schema_version": "0.1.0",
        "workload_id": workload_id,
        "scope": {"nodes": list(nodes), "ranks": list(ranks)},
        "failure_context": {"detected_at": detected_at, "detection_signal": "application_error"},
        "timeout_ms": 10000,
        "workload_context": {"workflow_id": "training-example", "attempt_index": 0},
        "phase": "fast",
    }


def deadline(seconds: float = 10.0) -> Deadline:
    return Deadline.after_ms(int(seconds * 1000))


@pytest.fixture
def files_provider(tmp_path: Path) -> Callable[..., TelemetryProvider]:
    """Build a `files` provider over tmp_path/logs with extra options."""

    def build(**extra: str) -> TelemetryProvider:
        (tmp_path / "logs").mkdir(exist_ok=True)
        options: Mapping[str, str] = {
            "ATTRIBUTION_PROVIDER": "telemetry",
            "ATTRIBUTION_KERNEL_LOG_SOURCE": "files",
            "ATTRIBUTION_KERNEL_LOG_DIR": str(tmp_path / "logs"),
            **extra,
        }
        return TelemetryProvider.from_options(options)

    return build


@pytest.fixture
def scan_processes() -> Iterator[Callable[..., ScanProcess]]:
    """`start(scan, descriptors=(), share=None)`: a kernel-log scan process of this test process
    (`ScanProcess.start`), stopped and reaped at the end."""
    processes: list[ScanProcess] = []

    def start(scan: Callable[..., object], descriptors: Sequence[int] = (), share: Callable[..., None] | None = None
              ) -> ScanProcess:  # fmt: skip
        process = ScanProcess()
        process.start(scan, descriptors, share)  # type: ignore[arg-type]
        assert process.pid > 0
        processes.append(process)
        return process

    yield start
    for process in processes:
        process.close()
