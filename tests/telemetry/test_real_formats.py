"""Real published kernel lines in every format the provider reads, through `fast` (sources: fixtures/SOURCES.md)."""

from __future__ import annotations

import gzip
import logging
import shutil
from pathlib import Path

import pytest

from providers.base import AllJobResources, ErrorType, NodeTarget
from providers.telemetry.kernel.sources.files import FileSource
from tests.telemetry.conftest import HEALTHY, at, deadline, make_request, rsyslog, write_lines, xid

FIXTURES = Path(__file__).parent / "fixtures"


def place(tmp_path: Path, fixture: str, as_name: str) -> Path:
    target = tmp_path / "logs" / as_name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(FIXTURES / fixture, target)
    return target


def fast(files_provider, nodes: list[str], **options: str):
    return files_provider(**options).fast(make_request(nodes), deadline(), None)


@pytest.mark.parametrize(
    ("fixture", "node", "category", "evidence_lines"),
    [
        ("dmesg-iso-probe-off-bus.log", "worker-01", "gpu_off_bus", 3),
        ("dmesg-T-probe-off-bus.log", "worker-01", "gpu_off_bus", 3),
        ("dmesg-decode-iso-xid79.log", "worker-01", "gpu_off_bus", 1),
        ("syslog-rfc3164-rminitadapter.log", "worker4", "gpu_hardware", 1),
        ("rsyslog-probe-off-bus-repeated-prefix.log", "worker-05", "gpu_off_bus", 3),
        ("journal-short-iso-xid79-xid119.log", "gpu17", "gpu_off_bus", 1),
        ("journal-short-precise-xid74.log", "gpu18", "nvlink", 1),
        ("journal-json-xid48.log", "gpu19", "gpu_memory", 1),
        ("rsyslog-sxid.log", "gpu21", "nvswitch", 2),
        ("dmesg-iso-xid120-gsp.log", "gpu22", "gpu_firmware", 3),
        ("rsyslog-xid74-registers.log", "gpu23", "nvlink", 1),
        ("rsyslog-xid154-reset.log", "gpu24", "gpu_driver", 1),
        ("dmesg-ctime-xid13-xid109.log", "gpu30", "gpu_driver", 1),
        ("rfc5424-nvlink5-fatal.log", "gpu36", "nvlink", 1),
    ],
)
def test_real_lines_give_the_finding_nvidia_decodes(
    files_provider, tmp_path: Path, fixture: str, node: str, category: str, evidence_lines: int
) -> None:
    # Per-host folders: formats without a host take it from the folder.
    place(tmp_path, fixture, f"{node}/kern.log")
    outcome = fast(files_provider, [node])
    assert [(f.target, f.error_category) for f in outcome.attributions] == [(NodeTarget(node), category)]
    assert outcome.error is None and outcome.unattributed_targets == ()
    first = outcome.attributions[0].evidence[0]
    assert first.message.count("\n") + 1 == evidence_lines  # a multi-line record is one event, all lines shown


def test_only_non_fatal_events_leave_the_node_unattributed(files_provider, tmp_path: Path) -> None:
    # Xid 149 NETIR_BER_EVENT Nonfatal, Xid 145 RLW_REMAP Nonfatal, Xid 63 remap pending; CRLF line ends.
    place(tmp_path, "rfc5424-non-fatal-only.log", "gpu20.log")
    outcome = fast(files_provider, ["gpu20"])
    assert outcome.attributions == ()
    assert outcome.unattributed_targets == (NodeTarget("gpu20"),)
    assert outcome.error is None


def test_application_xids_before_a_node_xid_are_not_its_evidence(files_provider, tmp_path: Path) -> None:
    # Three Xid 13 (RESTART_APP) lines, then Xid 109 (RESET_GPU): the node finding rests on the 109 alone.
    place(tmp_path, "dmesg-ctime-xid13-xid109.log", "gpu30/kern.log")
    outcome = fast(files_provider, ["gpu30"])
    (found,) = outcome.attributions
    assert [e.message for e in found.evidence] == [
        "[Wed Sep  9 11:58:14 2026] NVRM: Xid (PCI:0000:cb:00): 109, pid=1797828, name=pt_main_thread, Ch 00000008, "
        "errorString CTX SWITCH TIMEOUT, Info 0x58005"
    ]


def test_both_fatal_netir_decodes_are_evidence(files_provider, tmp_path: Path) -> None:
    # 149 NETIR_LINK_EVT sub-code 37 (RESET_GPU) and 149 NETIR on link -1 (Link Fatal): one finding, both events.
    place(tmp_path, "rfc5424-nvlink5-fatal.log", "gpu36.log")
    (found,) = fast(files_provider, ["gpu36"]).attributions
    assert ["0x025001c6" in e.message for e in found.evidence] == [True, False]
    assert "Link -1 (0x000fe406" in found.evidence[1].message


@pytest.mark.parametrize(
    ("fixture", "node", "category", "events"),
    [
        ("syslog-rfc3164-xid13-esr.log", "Gipfeli", "application", 4),
        ("journal-short-xid31.log", "zeus", "application", 2),
        ("journal-short-iso-precise-xid31.log", "gpu33", "application", 2),
        ("dmesg-iso-xid31-xid13-xid32.log", "gpu38", "application", 6),
        ("journal-no-hostname-xid94.log", "gpu37", "gpu_memory", 1),
    ],
)
def test_application_level_xids_point_at_the_job_never_the_node(
    files_provider, tmp_path: Path, fixture: str, node: str, category: str, events: int
) -> None:
    # Xid 13, 31, 32 (RESTART_APP) and 94 (contained ECC, RESTART_APP): the job, and the node read clean; NVIDIA's
    # meaning of each code once, before the first of its lines.
    place(tmp_path, fixture, f"{node}/kern.log")
    outcome = fast(files_provider, [node])
    assert [(f.target, f.error_category) for f in outcome.attributions] == [(AllJobResources(), category)]
    evidence = outcome.attributions[0].evidence
    lines = [e.message for e in evidence if "NVRM: Xid (" in e.message]  # `GPU at PCI:` is no event
    meanings = [e.message for e in evidence if "NVRM" not in e.message]
    assert len(lines) + len(meanings) == len(evidence) == min(8, events + len(meanings))  # the evidence bound: 8
    codes = {line.split("): ")[1].split(",")[0] for line in lines}
    assert sorted(m.split()[1] for m in meanings) == sorted(codes)
    assert all("NVIDIA's resolution RESTART_APP" in m for m in meanings)
    assert outcome.unattributed_targets == (NodeTarget(node),) and outcome.error is None


@pytest.mark.parametrize(
    ("fixture", "node"),
    [
        # Xid 45 "caused by previous Xid 149/145": preemptive cleanup, NVIDIA says follow the other Xid.
        ("rsyslog-xid45-after-nvlink5.log", "gpu34"),
        # 144 SAW_MVB Nonfatal (status 0x8: IGNORE), 149 NETIR_LINK_EVT sub-code 38 (IGNORE although "Fatal"),
        # 145 RLW_RXPIPE Nonfatal.
        ("rfc5424-nvlink5-no-finding.log", "gpu35"),
    ],
)
def test_events_nvidia_decodes_as_ignore_leave_the_node_unattributed(
    files_provider, tmp_path: Path, fixture: str, node: str
) -> None:
    place(tmp_path, fixture, f"{node}/kern.log")
    outcome = fast(files_provider, [node])
    assert outcome.attributions == ()
    assert outcome.unattributed_targets == (NodeTarget(node),) and outcome.error is None


def test_sxid_continuation_lines_join_their_own_switch_when_switches_interleave(files_provider, tmp_path: Path) -> None:
    # Xid 79 and three switches logging SXid 20034 at once: each `Severity`/`Data` line joins the latest record of
    # its own switch; only the `Severity` line whose switch has no record before it stays undecided.
    place(tmp_path, "rsyslog-xid79-sxid-interleaved.log", "gpu40/kern.log")
    outcome = fast(files_provider, ["gpu40"])
    (found,) = outcome.attributions
    assert (found.target, found.error_category) == (NodeTarget("gpu40"), "gpu_off_bus")
    sxids = {e.message.split("\n")[0].split("SXid ")[1]: e.message for e in found.evidence if "SXid" in e.message}
    assert [m.count("\n") for m in sxids.values()] == [0, 1, 1, 1]
    assert "Data {0x10000000" in sxids["(PCI:0000:05:00.0): 20034, Fatal, Link 63 LTSSM Fault Up"]
    assert "Engine instance 37" in sxids["(PCI:0000:07:00.0): 20034, Fatal, Link 37 LTSSM Fault Up"]
    assert "Engine instance 62" in sxids["(PCI:0000:05:00.0): 20034, Fatal, Link 62 LTSSM Fault Up"]
    assert outcome.error is not None and outcome.error.type is ErrorType.INSUFFICIENT_TELEMETRY
    assert outcome.error.message.endswith("SXid 20034 (1 time)")


def test_an_sxid_line_without_severity_long_after_its_switchs_record_is_decided_on_its_own(
    files_provider, tmp_path: Path
) -> None:
    # Lines of the interleaved excerpt: a Fatal head, another switch's line, then the head switch's word-less line
    # 4 ms later (it continues the head's record) and the same line again five minutes later (a record of its own:
    # SXid 20034 is only potentially fatal, so alone it stays undecided and is reported, not joined to the finding).
    head = "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 63 LTSSM Fault Up"
    other = "nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 20034, Fatal, Link 37 LTSSM Fault Up"
    follower = "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Severity 1 Engine instance 62 Sub-engine instance 00"
    ms = 1 / 60000  # a millisecond, in at()'s minutes
    lines = [rsyslog(at(-10), "gpu41", HEALTHY), rsyslog(at(-8), "gpu41", head)]
    lines += [rsyslog(at(-8 + 2 * ms), "gpu41", other), rsyslog(at(-8 + 4 * ms), "gpu41", follower)]
    lines += [rsyslog(at(1), "gpu41", HEALTHY)]
    write_lines(tmp_path / "logs" / "gpu41.log", lines)
    joined = fast(files_provider, ["gpu41"])
    (found,) = joined.attributions
    assert found.error_category == "nvswitch" and joined.error is None
    assert any(head in e.message and "Engine instance 62" in e.message for e in found.evidence)
    lines.insert(4, rsyslog(at(-3), "gpu41", follower))
    write_lines(tmp_path / "logs" / "gpu41.log", lines)
    later = fast(files_provider, ["gpu41"])
    (found,) = later.attributions
    assert found.error_category == "nvswitch"
    assert sum(e.message.count("Engine instance 62") for e in found.evidence) == 1
    assert later.error is not None and later.error.message.endswith("SXid 20034 (1 time)")


def test_an_unknown_sxid_without_severity_is_never_a_finding_and_is_reported(files_provider, tmp_path: Path) -> None:
    place(tmp_path, "rsyslog-sxid-unknown.log", "gpu22/kern.log")
    outcome = fast(files_provider, ["gpu22"])
    assert outcome.attributions == () and outcome.unattributed_targets == ()
    assert outcome.error is not None and outcome.error.type is ErrorType.INSUFFICIENT_TELEMETRY
    assert "SXid 26008 (1 time)" in outcome.error.message and "SOE" not in outcome.error.message


def test_unknown_xid_codes_are_counted_without_log_text(files_provider, tmp_path: Path) -> None:
    lines = [rsyslog(at(-60), "worker-01", HEALTHY)]
    lines += [rsyslog(at(-5 + i / 10), "worker-01", xid(999, "pid=1, name=secret-job, new text")) for i in range(3)]
    lines += [rsyslog(at(30), "worker-01", HEALTHY)]
    write_lines(tmp_path / "logs" / "worker-01.log", lines)
    write_lines(
        tmp_path / "logs" / "worker-02.log",
        [rsyslog(at(-60), "worker-02", HEALTHY), rsyslog(at(30), "worker-02", HEALTHY)],
    )
    outcome = fast(files_provider, ["worker-01", "worker-02"])
    assert outcome.attributions == ()
    assert outcome.unattributed_targets == (NodeTarget("worker-02"),)  # worker-01 was not seen to be fine
    assert outcome.error is not None and outcome.error.type is ErrorType.INSUFFICIENT_TELEMETRY
    assert "does not know" in outcome.error.message and "Xid 999 (3 times)" in outcome.error.message
    assert "secret-job" not in outcome.error.message


def test_a_user_space_line_in_dmesg_decode_output_is_not_the_kernel(files_provider, tmp_path: Path) -> None:
    place(tmp_path, "dmesg-decode-iso-xid79.log", "worker-01/kern.log")
    evidence = fast(files_provider, ["worker-01"]).attributions[0].evidence
    assert all("0000:02:00" not in e.message for e in evidence)  # the `user  :` facility line


def test_a_logger_line_in_the_journal_is_not_the_kernel(files_provider, tmp_path: Path) -> None:
    place(tmp_path, "journal-json-xid48.log", "gpu19/journal.json")
    finding = fast(files_provider, ["gpu19"]).attributions[0]
    assert finding.error_category == "gpu_memory"  # the `logger` Xid 79 would have been gpu_off_bus
    assert all("0000:09:00" not in e.message for e in finding.evidence)


def test_plain_dmesg_cannot_be_placed_in_time_and_is_reported(files_provider, tmp_path: Path, caplog) -> None:
    place(tmp_path, "dmesg-plain-seconds-since-boot.log", "worker-01/dmesg.log")
    write_lines(tmp_path / "logs" / "worker-02.log", [rsyslog(at(-1), "worker-02", xid(79))])
    with caplog.at_level(logging.WARNING, logger="attribution_adapter.telemetry"):
        outcome = fast(files_provider, ["worker-01", "worker-02"])
    assert [f.target for f in outcome.attributions] == [NodeTarget("worker-02")]
    assert outcome.unattributed_targets == ()
    assert outcome.error is not None and outcome.error.type is ErrorType.INSUFFICIENT_TELEMETRY
    (record,) = [r for r in caplog.records if "known format" in r.getMessage()]
    assert "worker-01/dmesg.log" in record.getMessage() and "line 1" in record.getMessage()
    assert "RmInitAdapter" not in record.getMessage()  # no log text in the service's own logs


def test_year_less_lines_take_the_year_nearest_the_window(files_provider, tmp_path: Path) -> None:
    # RFC 3164 lines on New Year's Eve for a failure just after midnight: the old year, not the window's.
    new_year = at(0).replace(year=2027, month=1, day=1, hour=0, minute=1)
    lines = [
        "Dec 31 23:59:30 worker-01 kernel: [ 10.000001] NVRM: Xid (PCI:0000:07:00): 48, DBE",
        "Jan  1 00:05:00 worker-01 kernel: [ 400.000001] " + HEALTHY,
    ]
    write_lines(
        tmp_path / "logs" / "worker-01.log", ["Dec 31 23:30:00 worker-01 kernel: [ 1.000001] " + HEALTHY, *lines]
    )
    outcome = files_provider().fast(make_request(["worker-01"], detected=new_year), deadline(), None)
    (finding,) = outcome.attributions
    assert finding.observed_at == new_year.replace(year=2026, month=12, day=31, hour=23, minute=59, second=30)


def test_zone_less_lines_are_read_in_the_configured_zone(files_provider, tmp_path: Path) -> None:
    # 13:58 in Berlin (CEST, +02:00) is 11:58Z: inside the window only when read in that zone.
    write_lines(
        tmp_path / "logs" / "worker-01.log",
        [
            "Sep  9 13:30:00 worker-01 kernel: " + HEALTHY,
            "Sep  9 13:58:12 worker-01 kernel: " + xid(79),
            "Sep  9 14:05:00 worker-01 kernel: " + HEALTHY,
        ],
    )
    berlin = fast(files_provider, ["worker-01"], ATTRIBUTION_KERNEL_LOG_TIME_ZONE="Europe/Berlin")
    assert berlin.attributions[0].observed_at == at(-1.8)
    utc = fast(files_provider, ["worker-01"])
    assert utc.attributions == ()


def test_nul_bytes_invalid_utf8_and_crlf_in_a_line(files_provider, tmp_path: Path) -> None:
    path = tmp_path / "logs" / "worker-01.log"
    path.parent.mkdir(parents=True)
    path.write_bytes(
        rsyslog(at(-60), "worker-01", HEALTHY).encode() + b"\r\n"
        + rsyslog(at(-1), "worker-01", xid(95, "pid=7, name=py\xff\x00thon, Uncontained: LTC TAG")).encode("latin-1")
        + b"\r\n"
        + rsyslog(at(30), "worker-01", HEALTHY).encode() + b"\r\n"
    )  # fmt: skip
    finding = fast(files_provider, ["worker-01"]).attributions[0]
    assert finding.error_category == "gpu_memory"
    assert "\x00" not in finding.evidence[0].message and "\r" not in finding.evidence[0].message


def test_a_corrupt_rotated_gz_and_a_vanished_file_break_only_themselves(
    files_provider, tmp_path: Path, caplog, monkeypatch
) -> None:
    folder = tmp_path / "logs" / "worker-01"
    write_lines(folder / "kern.log", [rsyslog(at(-14), "worker-01", HEALTHY), rsyslog(at(-1), "worker-01", xid(79))])
    (folder / "kern.log.1.gz").write_bytes(gzip.compress(b"x" * 10)[:12])  # cut short: corrupt
    write_lines(tmp_path / "logs" / "worker-02.log", [rsyslog(at(-2), "worker-02", xid(48))])
    vanished = write_lines(tmp_path / "logs" / "worker-03.log", [rsyslog(at(-2), "worker-03", xid(79))])
    real_plan = FileSource.plan

    def plan(self: FileSource, collector, proof=None):  # noqa: ANN001, ANN202 - the file is rotated away once listed
        planned = real_plan(self, collector, proof)
        vanished.unlink(missing_ok=True)
        return planned

    monkeypatch.setattr(FileSource, "plan", plan)
    with caplog.at_level(logging.WARNING, logger="attribution_adapter.telemetry"):
        outcome = fast(files_provider, ["worker-01", "worker-02", "worker-03"])
    assert {(f.target.name, f.error_category) for f in outcome.attributions} == {
        ("worker-01", "gpu_off_bus"),
        ("worker-02", "gpu_memory"),
    }
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "worker-01/kern.log.1.gz" in messages and "worker-03.log" in messages
    assert outcome.error is not None and outcome.error.type is ErrorType.INSUFFICIENT_TELEMETRY


def test_node_identity_is_whole_names_or_short_and_fqdn(files_provider, tmp_path: Path) -> None:
    write_lines(
        tmp_path / "logs" / "worker-01.cluster.local" / "kern.log",
        [rsyslog(at(-1), "worker-01.cluster.local", xid(79))],
    )
    write_lines(
        tmp_path / "logs" / "kern.log", [rsyslog(at(-1), "WORKER-1", xid(48)), rsyslog(at(-1), "worker-010", xid(48))]
    )
    outcome = fast(files_provider, ["worker-01", "worker"])
    assert [(f.target, f.error_category) for f in outcome.attributions] == [(NodeTarget("worker-01"), "gpu_off_bus")]
