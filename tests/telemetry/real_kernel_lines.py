"""Every real kernel line the tests hold, read as the service reads it and checked against NVIDIA's own decode.

The lines are those of `fixtures/*.log` (real kernel messages in every format the provider reads, sources in
`fixtures/SOURCES.md`), of `fixtures/nvrm-status-lines.csv` (driver statuses and assertions, each with its report)
and of the incident corpus's `kernel/<node>.log` files. Each file is read through the provider's own files source
(parse, records, decode) and each line that carries an NVIDIA event is expected to decode as NVIDIA's tables say:
`node <category>` (a finding on the node), `job <category>` (the job's), `none` (no finding), or `undecided`.
The expectation of each line is written here from NVIDIA's published meaning (the Xid catalogue's buckets, the Fabric
Manager guide, the driver's status list), beside the line, never from what the decoder answers.

`python -m tests.telemetry.real_kernel_lines` prints how many are decoded as NVIDIA's tables say.
"""

from __future__ import annotations

import csv
import shutil
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from providers.base import Deadline
from providers.telemetry import TelemetryProvider
from providers.telemetry.kernel.rules import decoded_events
from providers.telemetry.window import Window

FIXTURES = Path(__file__).parent / "fixtures"
CORPUS = Path(__file__).parents[1] / "incidents" / "cases"
#: the fixtures' lines lie on 2026-09-09; the window takes the whole day
DAY = Window(datetime(2026, 9, 9, tzinfo=UTC), datetime(2026, 9, 10, tzinfo=UTC))

#: per fixture file, each line carrying an NVIDIA event (a piece of its text) and how NVIDIA decodes it
EXPECTED: dict[str, list[tuple[str, str]]] = {
    # NVIDIA/NVSentinel#155: the probe-time form of a GPU fallen off the bus (one event of three lines)
    "dmesg-T-probe-off-bus.log": [
        ("NVRM: The NVIDIA GPU 0000:b3:00.0", "node gpu_off_bus"),
        ("(PCI ID: 10de:26b5) installed in this system has", "node gpu_off_bus"),
        ("fallen off the bus and is not responding to commands", "node gpu_off_bus"),
    ],
    "dmesg-iso-probe-off-bus.log": [
        ("NVRM: The NVIDIA GPU 0000:b3:00.0", "node gpu_off_bus"),
        ("(PCI ID: 10de:26b5) installed in this system has", "node gpu_off_bus"),
        ("fallen off the bus and is not responding to commands", "node gpu_off_bus"),
        ("The NVIDIA probe routine failed for 1 device(s)", "node gpu_hardware"),
    ],
    "rsyslog-probe-off-bus-repeated-prefix.log": [
        ("NVRM: The NVIDIA GPU 0000:b3:00.0", "node gpu_off_bus"),
        ("(PCI ID: 10de:26b5) installed in this system has", "node gpu_off_bus"),
        ("fallen off the bus and is not responding to commands", "node gpu_off_bus"),
    ],
    # Xid 13 (RESTART_APP) three times, then Xid 109 (RESET_GPU)
    "dmesg-ctime-xid13-xid109.log": [
        ("Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0)", "job application"),
        ("Graphics SM Global Exception on (GPC 7, TPC 7, SM 0)", "job application"),
        ("ESR 0x57c730=0xc04000b", "job application"),
        ("109, pid=1797828", "node gpu_driver"),
    ],
    # Xid 79 (RESTART_BM) and the driver's own line for it
    "dmesg-decode-iso-xid79.log": [
        ("79, pid=1054, name=nv_queue", "node gpu_off_bus"),
        ("NVRM: GPU 0000:01:00.0: GPU has fallen off the bus.", "node gpu_off_bus"),
    ],
    # Xid 120 GSP error (RESET_GPU) with its RISC-V dump lines (one event)
    "dmesg-iso-xid120-gsp.log": [
        ("120, GSP task exception", "node gpu_firmware"),
        ("Reported by libos partition:2#4", "node gpu_firmware"),
        ("RISC-V CSR State:", "node gpu_firmware"),
    ],
    # Xid 31, 13 (RESTART_APP) and 32 (RESTART_APP, CHECK_APP/CUDA)
    "dmesg-iso-xid31-xid13-xid32.log": [
        ("31, Ch 0000003a", "job application"),
        ("13, Graphics Exception: Class 0x0 Subchannel 0x0 Mismatch", "job application"),
        ("13, Graphics Exception: ESR 0x4041b0=0x0", "job application"),
        ("13, Graphics Exception: ESR 0x404000=0x80000002", "job application"),
        ("13, Graphics Exception: ChID 0052", "job application"),
        ("32, Channel ID 00000052", "job application"),
    ],
    "journal-json-xid48.log": [("48, pid='<unknown>'", "node gpu_memory")],  # WORKFLOW_XID_48
    "journal-no-hostname-xid94.log": [("94, pid=1234", "job gpu_memory")],  # contained ECC: RESTART_APP
    "journal-short-iso-precise-xid31.log": [
        ("31, pid=169800", "job application"),
        ("31, pid=174421", "job application"),
    ],
    "journal-short-iso-xid79-xid119.log": [
        ("79, pid='<unknown>'", "node gpu_off_bus"),
        ("119, pid=430", "node gpu_firmware"),  # GSP RPC timeout: RESET_GPU
    ],
    "journal-short-precise-xid74.log": [("74, pid='<unknown>'", "node nvlink")],  # no registers: "fatal" stands
    "journal-short-xid31.log": [
        ("31, pid=12890, Ch 0000003b", "job application"),
        ("31, pid=12890, Ch 0000003e", "job application"),
    ],
    # NVLink5 sheet: NETIR_BER_EVENT and RLW_REMAP Nonfatal; Xid 63 IGNORE (a remap pending)
    "rfc5424-non-fatal-only.log": [
        ("149, NETIR_BER_EVENT Nonfatal", "none"),
        ("145, RLW_REMAP Nonfatal", "none"),
        ("63, pid=1896", "none"),
    ],
    # NVLink5 sheet: 149 NETIR_LINK_EVT sub-code 37 RESET_GPU; NETIR on link -1 Link Fatal
    "rfc5424-nvlink5-fatal.log": [
        ("149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x025001c6", "node nvlink"),
        ("149, NETIR Fatal XC0 i0 Link -1", "node nvlink"),
    ],
    # NVLink5 sheet: SAW_MVB status 0x8 IGNORE; NETIR_LINK_EVT sub-code 38 IGNORE; RLW_RXPIPE Nonfatal
    "rfc5424-nvlink5-no-finding.log": [
        ("144, SAW_MVB Nonfatal", "none"),
        ("149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x026001c6", "none"),
        ("145, RLW_RXPIPE Nonfatal", "none"),
    ],
    "rsyslog-sxid-unknown.log": [("26008, SOE Watchdog error", "undecided")],  # no word, a code the guide lacks
    # SXid 24007 Fatal (and its continuation); 20009 and 28006 Non-fatal, no per-code impact in the guide
    "rsyslog-sxid.log": [
        ("24007, Fatal, Link 28", "node nvswitch"),
        ("24007, Severity 1 Engine instance 28", "node nvswitch"),
        ("20009, Non-fatal", "none"),
        ("28006, Non-fatal", "none"),
    ],
    "rsyslog-xid154-reset.log": [("154, GPU recovery action changed", "node gpu_driver")],  # to GPU Reset Required
    # Xid 45 follows other Xids: NVIDIA says follow those
    "rsyslog-xid45-after-nvlink5.log": [
        ("Ch 00000001 caused by previous Xid 149", "none"),
        ("Ch 0000000c caused by previous Xid 145", "none"),
        ("Ch 00000002 caused by previous Xid 145", "none"),
        ("Ch 00000003 caused by previous Xid 145", "none"),
    ],
    "rsyslog-xid74-registers.log": [("74, pid='<unknown>'", "node nvlink")],  # third register bit 16
    # Xid 79 and the driver's line, then three switches' SXid 20034 Fatal with their continuation lines; the one
    # Severity line of a switch whose head came later is decided alone (20034 is only potentially fatal)
    "rsyslog-xid79-sxid-interleaved.log": [
        ("79, pid='<unknown>'", "node gpu_off_bus"),
        ("NVRM: GPU 0000:91:00.0: GPU has fallen off the bus.", "node gpu_off_bus"),
        ("nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48", "node nvswitch"),
        ("nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 63", "node nvswitch"),
        ("20034, Severity 1 Engine instance 60", "undecided"),
        ("20034, Data {0x10000000", "node nvswitch"),
        ("nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 20034, Fatal, Link 37", "node nvswitch"),
        ("nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 62", "node nvswitch"),
        ("20034, Severity 1 Engine instance 37", "node nvswitch"),
        ("20034, Severity 1 Engine instance 62", "node nvswitch"),
    ],
    # RmInitAdapter failed at RM_INIT_GPU_STATE_INIT_FAILED with NV_ERR_MEMORY_ERROR: the GPU could not be initialised
    "syslog-rfc3164-rminitadapter.log": [("RmInitAdapter failed! (0x24:0x72:1568)", "node gpu_hardware")],
    # Xid 43 (NVIDIA: a user application hit a software-induced fault, the GPU stays healthy) twice, Xid 31 and
    # Xid 94 (RESTART_APP) of a Kubernetes GPU node (akash-network/support#244)
    "dmesg-T-xid43-xid31-xid94.log": [
        ("43, pid=1045242", "job application"),
        ("43, pid=1084984", "job application"),
        ("31, pid=2512125", "job application"),
        ("94, pid='<unknown>'", "job gpu_memory"),
    ],
    # SXid 12028 without a word: the Fabric Manager guide says NVLink traffic stalls and CUDA jobs are aborted
    "dmesg-decode-iso-sxid12028.log": [("12028, Data {0x000001c0", "node nvswitch")],
    # Xid 13 (RESTART_APP), four lines
    "syslog-rfc3164-xid13-esr.log": [
        ("ESR 0x5067b0=0x9", "job application"),
        ("Graphics SM Warp Exception on (GPC 1, TPC 0, SM 0)", "job application"),
        ("Graphics SM Global Exception on (GPC 1, TPC 0, SM 0)", "job application"),
        ("ESR 0x50c730=0x30009", "job application"),
    ],
}
#: fixtures of real lines the service cannot place in time (plain dmesg: seconds since boot); they are refused
REFUSED = {"dmesg-plain-seconds-since-boot.log"}
#: the driver's lines that name a GPU before its first event (TELEMETRY-NOTES.md): no event by themselves
IDENTIFICATION = ("NVRM: GPU at PCI:", "NVRM: GPU Board Serial Number:", "GPU serial number is")


@dataclass(frozen=True)
class Checked:
    source: str
    line: str
    expected: str
    got: str

    @property
    def ok(self) -> bool:
        return self.expected == self.got


def _decisions(folder: Path, node: str) -> list[tuple[str, str]]:
    """(line text of an event, its decision) for each event of `node`'s kernel log under `folder`."""
    provider = TelemetryProvider.from_options(
        {"ATTRIBUTION_KERNEL_LOG_SOURCE": "files", "ATTRIBUTION_KERNEL_LOG_DIR": str(folder)}
    )
    collector = provider.collect([node], DAY, Deadline.after_ms(30_000), None)
    out = []
    for event in decoded_events(collector):
        decision = {"node": f"node {event.category}", "job": f"job {event.category}", "nothing": "none",
                    "unknown": "undecided"}[event.points.value]  # fmt: skip
        out.extend((line, decision) for line in event.line.split("\n"))
    return out


def _match(decisions: list[tuple[str, str]], piece: str) -> str:
    found = [d for line, d in decisions if piece in line]
    return found[0] if found else "-"


def fixture_lines(root: Path) -> list[Checked]:
    out = []
    for name, expected in EXPECTED.items():
        folder = root / name.removesuffix(".log")
        (folder / "node").mkdir(parents=True)
        shutil.copyfile(FIXTURES / name, folder / "node" / "kern.log")
        decisions = _decisions(folder, "node")
        out += [Checked(name, piece, want, _match(decisions, piece)) for piece, want in expected]
    return out


def _placed(node: str, messages: list[str]) -> list[str]:
    """Report lines whose time and host were left out, as the node's rsyslog writes them, a second apart."""
    start = DAY.start + timedelta(hours=12)
    return [f"{(start + timedelta(seconds=i)).isoformat()} {node} kernel: [{1000 + i}.000001] {m}"
            for i, m in enumerate(messages)]  # fmt: skip


def status_lines(root: Path) -> list[Checked]:
    """fixtures/nvrm-status-lines.csv: `node <category>` or `none` where a driver status site prints a status, `-`
    where the line prints none at a status site (no event)."""
    text = (FIXTURES / "nvrm-status-lines.csv").read_text()
    rows = list(csv.DictReader(line for line in text.splitlines() if not line.startswith("#")))
    folder = root / "nvrm"
    folder.mkdir(parents=True)
    (folder / "ex.log").write_text("\n".join(_placed("ex", [r["line"] for r in rows])) + "\n")
    decisions = _decisions(folder, "ex")
    return [Checked(r["url"], r["line"], r["expected"], _match(decisions, r["line"])) for r in rows]


#: per corpus case with a quoted kernel log, each line carrying an NVIDIA or PCIe event (a piece of its text) and how
#: NVIDIA's tables (and the kernel's AER severities) decode it; the case's other lines carry no event
CORPUS_EXPECTED: dict[str, list[tuple[str, str]]] = {
    # Xid 79 (RESTART_BM) and the driver's own line for it
    "akash-support-209-xid79-node1": [
        ("79, pid='<unknown>'", "node gpu_off_bus"),
        ("GPU 0000:a1:00.0: GPU has fallen off the bus.", "node gpu_off_bus"),
    ],
    # a corrected PCIe error (no finding), then an uncorrectable fatal one on the GPU's root port, then Xid 79
    "gpu-burn-1-pcie-surprise-down-xid79": [
        ("PCIe Bus Error: severity=Corrected", "none"),
        ("PCIe Bus Error: severity=Uncorrected (Fatal)", "node pcie"),
        ("79, GPU has fallen off the bus.", "node gpu_off_bus"),
    ],
    # the driver's initialisation of a GPU failed (RM_INIT status 0x26), four times; its follow-up line naming the
    # device's minor number is part of the same event
    "pai-4344-gpu-missing-rminitadapter": [("RmInitAdapter failed! (0x26:0xffff:1127)", "node gpu_hardware")],
    # NV_ERR_RESET_REQUIRED at an assertion, and a GSP allocation failing with status 0x62 (the same)
    "sichek-51-reset-required-gpu1": [
        ("GspRmAlloc failed", "node gpu_driver"),
        ("Reset required [NV_ERR_RESET_REQUIRED]", "node gpu_driver"),
    ],
}


def corpus_lines(root: Path) -> list[Checked]:
    """The corpus's quoted kernel logs, each line as `CORPUS_EXPECTED` says (a line it does not list: no event; a
    fragment a report quotes inline, without the driver's prefix, is no kernel line the driver prints)."""
    from tests.incidents.corpus import cases

    out = []
    for case in cases():
        for node, messages in case.kernel.items():
            folder = root / case.id
            folder.mkdir(parents=True)
            (folder / f"{node}.log").write_text("\n".join(_placed(node, messages)) + "\n")
            decisions = _decisions(folder, node)
            expected = CORPUS_EXPECTED.get(case.id, [])
            for m in messages:
                want = next((w for piece, w in expected if piece in m), "-")
                out.append(Checked(case.id, m, want, _match(decisions, m)))
    return out


def check_all() -> list[Checked]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        return [*fixture_lines(root / "f"), *status_lines(root / "s"), *corpus_lines(root / "c")]


def main() -> None:
    every = check_all()
    checked = [c for c in every if c.expected != "-"]
    good = [c for c in checked if c.ok]
    quiet = [c for c in every if c.expected == "-"]
    print(f"real kernel lines carrying an NVIDIA event, decoded as NVIDIA's tables say: {len(good)} of {len(checked)}")
    print(f"real NVRM lines that carry no event (no status at a status site, a GPU named), read as no event: "
          f"{sum(c.ok for c in quiet)} of {len(quiet)}")
    print(f"(fixture files of real lines refused as unplaceable in time: {', '.join(sorted(REFUSED))})")
    for c in every:
        if not c.ok:
            print(f"  not as NVIDIA decodes it: {c.source}: {c.line[:100]!r}: expected {c.expected}, got {c.got}")


if __name__ == "__main__":
    main()
