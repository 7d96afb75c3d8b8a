"""The shipped samples (conf/samples) with the seed's example request: worker-01 gets the finding."""

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from providers.base import AttributionRequest, ErrorType, NodeTarget, Phase
from providers.telemetry import TelemetryProvider
from tests.telemetry.conftest import deadline, make_request

SAMPLES = Path(__file__).resolve().parents[2] / "conf" / "samples"
OPTIONS = {
    "ATTRIBUTION_KERNEL_LOG_SOURCE": "files",
    "ATTRIBUTION_KERNEL_LOG_DIR": str(SAMPLES / "kernel-logs"),
    "ATTRIBUTION_EPILOG_DIR": str(SAMPLES / "epilog"),
}


def test_seed_request_yields_the_worker_01_finding() -> None:
    # {"scope":{"nodes":["worker-01"],"ranks":[]},"failure_context":{"detected_at":"2026-09-09T12:00:00Z",...}}
    outcome = TelemetryProvider.from_options(OPTIONS).fast(make_request(["worker-01"]), deadline(), None)
    (finding,) = outcome.attributions
    assert finding.target == NodeTarget("worker-01")
    assert finding.error_category == "gpu_off_bus"
    assert finding.observed_at == datetime(2026, 9, 9, 11, 58, 12, 123481, tzinfo=UTC)
    assert any("Xid (PCI:0000:91:00): 79" in e.message for e in finding.evidence)
    assert outcome.unattributed_targets == () and outcome.error is None


def test_all_sample_nodes() -> None:
    nodes = ["worker-01", "worker-02", "worker-03", "worker-04", "worker-05", "worker-06"]
    outcome = TelemetryProvider.from_options(OPTIONS).fast(make_request(nodes), deadline(), None)
    assert [(f.target, f.error_category) for f in outcome.attributions] == [
        (NodeTarget("worker-01"), "gpu_off_bus"),
        (NodeTarget("worker-06"), "gpu_off_bus"),  # the dmesg-style file's three-line record
    ]
    # worker-02's Xid 13 points at the job, but node findings exist; worker-04 only has a correctable AER;
    # worker-05 only non-fatal NVLink5, Xid 63, Xid 154 to None and a non-fatal SXid.
    assert outcome.unattributed_targets == tuple(
        NodeTarget(n) for n in ("worker-02", "worker-03", "worker-04", "worker-05")
    )
    assert outcome.error is None
    (probe,) = [f for f in outcome.attributions if f.target == NodeTarget("worker-06")]
    assert probe.evidence[0].message.count("NVRM:") == 3  # one event with its three lines
    only_app = TelemetryProvider.from_options(OPTIONS).fast(make_request(["worker-02", "worker-03"]), deadline(), None)
    assert [f.error_category for f in only_app.attributions] == ["application"]


def test_sample_epilog() -> None:
    req = make_request(
        ["worker-01", "worker-03", "worker-04"],
        start=datetime(2026, 9, 9, 8, tzinfo=UTC),
        end=datetime(2026, 9, 9, 12, 30, tzinfo=UTC),
        phase=Phase.SLOW,
    )
    outcome = TelemetryProvider.from_options(OPTIONS).slow(req, {"v": 1}, deadline(), None)
    assert [(f.target, f.error_category) for f in outcome.attributions] == [(NodeTarget("worker-01"), "gpu_memory")]
    assert outcome.unattributed_targets == (NodeTarget("worker-03"),)
    assert outcome.error is not None and outcome.error.type is ErrorType.INSUFFICIENT_TELEMETRY


JOB_OPTIONS = {**OPTIONS, "ATTRIBUTION_JOB_LOG_DIR": str(SAMPLES / "job-logs")}


def _job_request(workload: str, nodes: list[str]) -> AttributionRequest:
    return replace(make_request(nodes), workload_id=workload)


def test_sample_job_logs_hang_names_the_node_of_the_rank_behind() -> None:
    outcome = TelemetryProvider.from_options(JOB_OPTIONS).fast(
        _job_request("67890", ["worker-07", "worker-08"]), deadline(), None
    )
    assert [(f.target, f.error_category) for f in outcome.attributions] == [
        (NodeTarget("worker-08"), "collective_hang")
    ]
    assert outcome.unattributed_targets == (NodeTarget("worker-07"),)


def test_sample_job_logs_oom_kill_is_host_oom_with_the_kernel_line() -> None:
    outcome = TelemetryProvider.from_options(JOB_OPTIONS).fast(_job_request("67891", ["worker-12"]), deadline(), None)
    (finding,) = outcome.attributions
    assert (finding.target, finding.error_category) == (NodeTarget("worker-12"), "host_oom")
    kernel = [e for e in finding.evidence if e.source == "syslog"]
    assert len(kernel) == 1 and "Out of memory: Killed process 48213" in kernel[0].message
    assert outcome.error is None


def test_the_seed_request_with_sample_job_logs_is_unchanged() -> None:
    plain = TelemetryProvider.from_options(OPTIONS).fast(make_request(["worker-01"]), deadline(), None)
    with_jobs = TelemetryProvider.from_options(JOB_OPTIONS).fast(make_request(["worker-01"]), deadline(), None)
    assert with_jobs.attributions == plain.attributions and with_jobs.error is None
