"""Attribution rules of `fast`: one finding per node, the job-wide finding, unattributed and missing nodes."""

from datetime import UTC
from pathlib import Path

from providers.base import AllJobResources, ErrorType, NodeTarget
from tests.telemetry.conftest import HEALTHY, at, deadline, make_request, rsyslog, write_lines, xid


def _log(tmp_path: Path, host: str, *lines: str) -> None:
    # A quiet line before and after the window so the node's log is seen to span it.
    write_lines(
        tmp_path / "logs" / f"{host}.log",
        [rsyslog(at(-60), host, HEALTHY), *lines, rsyslog(at(30), host, HEALTHY)],
    )


def _all_times(outcome):  # every datetime the outcome carries
    for f in outcome.attributions:
        yield f.observed_at
        for e in f.evidence:
            yield e.observed_at


def test_one_finding_per_node_with_worst_category_and_first_event(files_provider, tmp_path: Path) -> None:
    _log(
        tmp_path,
        "worker-01",
        rsyslog(at(-10), "worker-01", xid(64)),  # gpu_memory, first event
        rsyslog(at(-5), "worker-01", xid(74)),  # nvlink
        rsyslog(at(-2), "worker-01", xid(79)),  # gpu_off_bus: the worst
        rsyslog(at(-1), "worker-01", xid(45)),  # points at nothing
    )
    outcome = files_provider().fast(make_request(["worker-01"]), deadline(), None)
    assert len(outcome.attributions) == 1
    finding = outcome.attributions[0]
    assert finding.target == NodeTarget("worker-01")
    assert finding.error_category == "gpu_off_bus"
    assert finding.observed_at == at(-10)
    assert finding.confidence is None
    assert [e.observed_at for e in finding.evidence] == [at(-10), at(-5), at(-2)]
    assert all(e.source == "syslog" and "NVRM: Xid" in e.message for e in finding.evidence)
    assert outcome.unattributed_targets == () and outcome.error is None
    assert all(t.tzinfo is UTC for t in _all_times(outcome))


def test_evidence_is_bounded_and_keeps_the_worst_lines(files_provider, tmp_path: Path) -> None:
    lines = [
        rsyslog(at(-14) + i * (at(0) - at(-14)) / 40, "worker-01", xid(64, bus=f"0000:{i:02x}:00")) for i in range(40)
    ]
    lines.append(rsyslog(at(1), "worker-01", xid(79, rest="x" * 5000)))  # the worst, and last
    _log(tmp_path, "worker-01", *lines)
    outcome = files_provider(ATTRIBUTION_KERNEL_LOG_MAX_EVIDENCE="5").fast(
        make_request(["worker-01"]), deadline(), None
    )
    evidence = outcome.attributions[0].evidence
    assert len(evidence) == 5
    assert evidence[-1].observed_at == at(1)  # not crowded out by the 40 lesser lines
    assert len(evidence[-1].message) == 4096 and evidence[-1].message.endswith("…")
    assert all(len(e.message) <= 4096 for e in evidence)


def test_application_errors_alone_point_at_the_job(files_provider, tmp_path: Path) -> None:
    _log(tmp_path, "worker-01", rsyslog(at(-1), "worker-01", xid(13)))
    _log(
        tmp_path,
        "worker-02",
        rsyslog(at(-2), "worker-02", xid(31)),
        rsyslog(at(-1), "worker-02", xid(154, "GPU recovery action changed from 0x0 (None) to 0x0 (None)")),
    )
    outcome = files_provider().fast(make_request(["worker-01", "worker-02"]), deadline(), None)
    assert len(outcome.attributions) == 1
    finding = outcome.attributions[0]
    assert finding.target == AllJobResources()
    assert finding.error_category == "application"
    assert finding.observed_at == at(-2)
    assert set(outcome.unattributed_targets) == {NodeTarget("worker-01"), NodeTarget("worker-02")}


def test_node_findings_win_over_application_errors(files_provider, tmp_path: Path) -> None:
    _log(tmp_path, "worker-01", rsyslog(at(-1), "worker-01", xid(13)))
    _log(tmp_path, "worker-02", rsyslog(at(-1), "worker-02", xid(48)))
    outcome = files_provider().fast(make_request(["worker-01", "worker-02"]), deadline(), None)
    assert [f.target for f in outcome.attributions] == [NodeTarget("worker-02")]
    assert outcome.unattributed_targets == (NodeTarget("worker-01"),)


def test_missing_nodes_are_counted_not_listed(files_provider, tmp_path: Path) -> None:
    _log(tmp_path, "worker-01", rsyslog(at(-1), "worker-01", xid(95)))
    _log(tmp_path, "worker-02")
    _log(tmp_path, "worker-03")
    nodes = ["worker-01", "worker-02", "worker-03", "worker-04", "worker-05"]
    outcome = files_provider().fast(make_request(nodes), deadline(), None)
    assert [f.target for f in outcome.attributions] == [NodeTarget("worker-01")]
    assert outcome.unattributed_targets == (NodeTarget("worker-02"), NodeTarget("worker-03"))
    assert outcome.error is not None and outcome.error.type is ErrorType.INSUFFICIENT_TELEMETRY
    assert outcome.error.message == "no kernel log lines for 2 of 5 nodes in the window"


def test_no_logs_at_all_is_insufficient_telemetry_with_empty_result(files_provider, tmp_path: Path) -> None:
    outcome = files_provider().fast(make_request(["worker-01", "worker-02"]), deadline(), None)
    assert outcome.attributions == () and outcome.unattributed_targets == ()
    assert outcome.error is not None and outcome.error.type is ErrorType.INSUFFICIENT_TELEMETRY
    assert "2 nodes" in outcome.error.message


def test_empty_scope_reads_nothing(files_provider, tmp_path: Path) -> None:
    _log(tmp_path, "worker-01", rsyslog(at(-1), "worker-01", xid(79)))
    outcome = files_provider().fast(make_request([]), deadline(), None)
    assert outcome.attributions == () and outcome.unattributed_targets == ()
    assert outcome.error is not None and outcome.error.type is ErrorType.INSUFFICIENT_TELEMETRY
    assert dict(outcome.session_state) == {"v": 1}


def test_only_scope_nodes_appear(files_provider, tmp_path: Path) -> None:
    write_lines(
        tmp_path / "logs" / "kern.log", [rsyslog(at(-1), "worker-09", xid(79)), rsyslog(at(-1), "worker-01", HEALTHY)]
    )
    outcome = files_provider().fast(make_request(["worker-01"]), deadline(), None)
    assert outcome.attributions == ()
    assert outcome.unattributed_targets == (NodeTarget("worker-01"),)


def test_window_follows_settings_and_is_cut_to_the_scope(files_provider, tmp_path: Path) -> None:
    _log(tmp_path, "worker-01", rsyslog(at(-20), "worker-01", xid(48)), rsyslog(at(3), "worker-01", xid(79)))
    req = make_request(["worker-01"])
    default = files_provider().fast(req, deadline(), None)
    assert default.attributions == ()  # -20 min is before the 900 s lookback, +3 min after the 120 s grace
    wide = files_provider(
        ATTRIBUTION_KERNEL_LOG_LOOKBACK_SECONDS="1500", ATTRIBUTION_KERNEL_LOG_GRACE_SECONDS="240"
    ).fast(req, deadline(), None)
    assert wide.attributions[0].error_category == "gpu_off_bus"
    # The job started 10 minutes before the failure: the 48 at -20 min is before it.
    cut = files_provider(ATTRIBUTION_KERNEL_LOG_LOOKBACK_SECONDS="1500").fast(
        make_request(["worker-01"], start=at(-10), end=at(10)), deadline(), None
    )
    assert cut.attributions == () and cut.unattributed_targets == (NodeTarget("worker-01"),)


def test_failure_outside_the_scope_times_leaves_no_window(files_provider, tmp_path: Path) -> None:
    _log(tmp_path, "worker-01", rsyslog(at(-1), "worker-01", xid(79)))
    outcome = files_provider().fast(make_request(["worker-01"], start=at(60), end=at(120)), deadline(), None)
    assert outcome.attributions == ()
    assert outcome.error is not None and outcome.error.type is ErrorType.INSUFFICIENT_TELEMETRY


def test_session_state_is_small_and_json_able(files_provider, tmp_path: Path) -> None:
    _log(tmp_path, "worker-01")
    outcome = files_provider().fast(make_request(["worker-01"]), deadline(), None)
    assert dict(outcome.session_state) == {"v": 1}
