"""Evidence that shows the events, not a burst: distinct events first, then repeats, within the bound."""

from pathlib import Path

from tests.telemetry.conftest import HEALTHY, at, deadline, make_request, rsyslog, write_lines, xid

GPU_A, GPU_B, GPU_C = "0000:07:00", "0000:46:00", "0000:9b:00"


def test_a_burst_of_one_gpu_does_not_hide_the_other_events(files_provider, tmp_path: Path) -> None:
    lines = [rsyslog(at(-60), "worker-01", HEALTHY)]
    # GPU A repeats Xid 48 four hundred times from 11:50; GPU B logs one Xid 95 at 11:55; GPU C one Xid 79 at 11:58.
    lines += [rsyslog(at(-10) + i * (at(-4) - at(-10)) / 400, "worker-01", xid(48, bus=GPU_A)) for i in range(400)]
    lines.append(rsyslog(at(-5) + (at(-4) - at(-5)) / 800, "worker-01", xid(95, bus=GPU_B)))
    lines.append(rsyslog(at(-2), "worker-01", xid(79, bus=GPU_C)))
    lines.append(rsyslog(at(30), "worker-01", HEALTHY))
    write_lines(tmp_path / "logs" / "worker-01.log", sorted(lines))
    outcome = files_provider(ATTRIBUTION_KERNEL_LOG_MAX_EVIDENCE="5").fast(
        make_request(["worker-01"]), deadline(), None
    )
    (finding,) = outcome.attributions
    assert finding.error_category == "gpu_off_bus" and finding.observed_at == at(-10)
    evidence = finding.evidence
    assert len(evidence) == 5
    # The distinct events first (one per GPU and code, earliest first), then the burst's repeats in time order.
    assert [GPU_A in e.message for e in evidence[:3]] == [True, False, False]
    assert GPU_B in evidence[1].message and GPU_C in evidence[2].message
    assert [e.observed_at for e in evidence[:3]] == sorted(e.observed_at for e in evidence[:3])
    assert all(GPU_A in e.message for e in evidence[3:])
    assert evidence[3].observed_at < evidence[4].observed_at and evidence[3].observed_at > evidence[0].observed_at


def test_a_line_in_two_files_of_one_host_counts_once(files_provider, tmp_path: Path) -> None:
    line = rsyslog(at(-1), "worker-01", xid(79))
    write_lines(tmp_path / "logs" / "worker-01" / "kern.log", [line])
    write_lines(tmp_path / "logs" / "worker-01" / "syslog", [line])
    outcome = files_provider().fast(make_request(["worker-01"]), deadline(), None)
    assert len(outcome.attributions[0].evidence) == 1
