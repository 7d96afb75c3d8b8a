"""Decode rules: kernel records into events, using the catalogue and, where NVIDIA's decode needs it, the line.

The number alone decides most Xids (the catalogue's row). Where NVIDIA's decode depends on the rest of the line a
named rule reads it (the rule names are the catalogue's `rule` column):

- `xid74_registers`: the seven NVLink registers of Xid 74, read as NVIDIA's WORKFLOW_NVLINK_ERR says (quoted in
  NVIDIA/NVSentinel docs/designs/019-workflow-nvlink-err.md from NVIDIA's Xid catalogue): first register bits 0, 23,
  30 "can be safely ignored"; fifth register bits 20, 23, 26, 29 are an ECC threshold with "no uncorrectable error",
  "continue operation"; first register bits 1, 20 and fourth register bits 16, 17 are "sympathetic or secondary"
  errors whose own Xid/SXid decides. Any other bit (or a line without registers) is a fatal NVLink error.
- `nvlink5_decode`: Xid 144-150 as `UNIT (Fatal|Nonfatal) XC<n> i<n> Link <nn> (0x<intrinfo> 0x<status> ...)`
  (format from leptonai/gpud components/accelerator/nvidia/xid/kmsg.go); the catalogue's nvlink5 rows (NVIDIA's
  "XID 144-150 Decode" sheet: intrinfo bit patterns, sub-code in bits 20-25, error status) decide; without a
  matching row the line's Fatal/Nonfatal word decides; a line with neither is undecoded.
- `xid154_recovery_action`: `GPU recovery action changed from 0x<a> (...) to 0x<b> (...)`; the action values are
  NVML's nvmlDeviceGpuRecoveryAction_t (0 None, 1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain and reset,
  5 recover IMEX domain, 6 bus reset, 7 system reboot; NVIDIA cuda-python nvml bindings, A100 memory error
  management guide "Error Recovery and Response Flags"). None is no finding; any other known action is a node one.
- `sxid_severity`: `nvidia-nvswitchN: SXid (PCI:...): <code>, (Fatal|Non-fatal), Link <nn> ...` (driver
  `common_nvswitch.h`; NVIDIA/NVSentinel syslog-health-monitor sxid_handler_test.go). The word decides, except for
  the codes the Fabric Manager guide calls always fatal (a finding whatever the word); lines that
  repeat the code without it (`Severity 1 Engine instance ...`, `Data {...}`) continue the latest record of the
  same switch and code logged within SXID_CONTINUATION of it, also when another switch's lines come between
  (switches log at once: leptonai/gpud components/accelerator/nvidia/error/sxid/README.md); a lone line without
  the word falls back to the catalogue:
  always fatal is a finding, potentially fatal is undecided, non-fatal is none.
- `sxid_guide_impact`: the guide's per-code table says more than the word (NVLink traffic stalls and CUDA jobs are
  aborted although the driver writes `Non-fatal`; every GPU and NVSwitch must be reset): the row decides.

Events without an Xid (NVIDIA/open-gpu-kernel-modules messages; Linux drivers/pci/pcie/aer.c):
`NVRM: GPU <bdf>: GPU has fallen off the bus.`, the three-line probe-time form `NVRM: The NVIDIA GPU <bdf>` /
`(PCI ID: ...) installed in this system has` / `fallen off the bus and is not responding to commands.`
(NVIDIA/NVSentinel issue 155), `NVRM: GPU <bdf>: RmInitAdapter failed! (0x..:0x..:..)` and `NVRM: The NVIDIA probe
routine failed for N device(s).` (NVIDIA/open-gpu-kernel-modules issue 789, NVIDIA/gpu-operator issue 1146), GSP RPC
timeouts, and PCIe AER `severity=` (Correctable/Corrected is no finding, Uncorrectable/Uncorrected is). The driver's
status codes in `NVRM:` lines (an assertion's `[NV_ERR_RESET_REQUIRED] (0x00000062)`, a GSP RPC's `status=0x0000000f`)
are read by `nvstatus.py` from the driver's own print sites and decided by its status table.

A finding on the job carries NVIDIA's own words on the event (`Event.meaning`), shown before its lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from providers.telemetry.kernel.catalogue import Catalogue, Points, Row, catalogue
from providers.telemetry.kernel.nvstatus import decode_status
from providers.telemetry.kernel.parse import Record

#: an SXid line without the Fatal/Non-fatal word continues its switch's latest record of that code only when logged
#: this close to it (the driver writes a record's lines within milliseconds); a later one is decided on its own
SXID_CONTINUATION = timedelta(seconds=1)
# The driver writes a code in ASCII digits: a code of other digits (which `\d` and `int` take) or of more digits than
# any code has is not read as a code (and `int` refuses more than 4,300 digits)
_XID = re.compile(r"\bNVRM: Xid \(([^)]*)\): ([0-9]{1,10})\b,?\s*(.*)", re.DOTALL)
_SXID = re.compile(r"\bSXid \(PCI:([^)]*)\): ([0-9]{1,10})\b,?\s*(.*)", re.DOTALL)
#: an Xid or SXid line whose code is not read (`_XID`, `_SXID` take no other): an event not understood
_XID_UNREAD = re.compile(r"\bNVRM: Xid \(([^)]*)\): ")
_SXID_UNREAD = re.compile(r"\bSXid \(PCI:([^)]*)\): ")
_SXID_SEVERITY = re.compile(r"(Fatal|Non-fatal)\b", re.IGNORECASE)
_OFF_BUS = re.compile(r"\bNVRM: GPU (?:at )?(?:PCI:)?([0-9a-fA-F:.]+):? (?:GPU )?has fallen off the bus")
_OFF_BUS_PROBE = re.compile(r"\bfallen off the bus and is not responding to commands")
_OFF_BUS_PROBE_FIRST = re.compile(r"\bNVRM: The NVIDIA GPU ([0-9a-fA-F:.]+)\s*$")
_OFF_BUS_PROBE_SECOND = re.compile(r"\bNVRM: \(PCI ID: [0-9a-fA-F]{4}:[0-9a-fA-F]{4}\) installed in this system has")
_RM_INIT = re.compile(r"\bNVRM: (?:GPU ([0-9a-fA-F:.]+): )?RmInitAdapter failed!")
_PROBE_FAILED = re.compile(r"\bNVRM: .*\bprobe\b.*\bfailed\b", re.IGNORECASE)
_AER = re.compile(r"\bPCIe Bus Error: severity=(Correctable|Corrected|Uncorrectable|Uncorrected)")
_AER_DEVICE = re.compile(r"([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])")
_GSP_TIMEOUT = re.compile(r"\bTimeout after [0-9]+s of waiting for RPC response from GPU[0-9]* GSP")
_NVLINK5 = re.compile(
    r"(\S+)\s+(Fatal|Nonfatal|Non-fatal)\b(?:\s+XC([0-9]+)\s+i([0-9]+)\s+Link\s+(-?[0-9]+)"
    r"(?:\s*\((0x[0-9a-fA-F]+)[\s,]+(0x[0-9a-fA-F]+))?)?",
    re.IGNORECASE,
)
#: the process context an Xid line may carry before its message (`pid=2024380, name=nvidia-smi, `)
_PROCESS = re.compile(r"^pid=[^,]*,\s*(?:name=[^,]*,\s*)?")
_XID74 = re.compile(r"\blink\s*([0-9]+)\s*\(\s*(0x[0-9a-fA-F]+(?:\s*,\s*0x[0-9a-fA-F]+){6})\s*\)", re.IGNORECASE)
_XID154 = re.compile(r"recovery action changed from 0x([0-9a-fA-F]+).*?\bto 0x([0-9a-fA-F]+)", re.IGNORECASE)

#: WORKFLOW_NVLINK_ERR: register index -> bits that are no finding (ignorable, threshold-only, sympathetic)
_XID74_NO_FINDING = {0: {0, 1, 20, 23, 30}, 3: {16, 17}, 4: {20, 23, 26, 29}}
#: nvmlDeviceGpuRecoveryAction_t values; 0 is None
_RECOVERY_ACTIONS = {0: "none", 1: "gpu reset", 2: "node reboot", 3: "drain p2p", 4: "drain and reset",
                     5: "recover imex domain", 6: "bus reset", 7: "system reboot"}  # fmt: skip
#: the decode rules the catalogue may name; a test checks the file names exactly these
RULES = frozenset(
    {"xid74_registers", "nvlink5_decode", "xid154_recovery_action", "sxid_severity", "sxid_guide_impact"}
)
#: NVIDIA's investigatory workflows that read an application fault by where it repeats (WORKFLOW_XID_13: the same TPC
#: and GPC; WORKFLOW_XID_31: the same GPU): repeated on one GPU they point at possible hardware
REPEAT_WORKFLOWS = frozenset({"WORKFLOW_XID_13", "WORKFLOW_XID_31"})
#: where an Xid 13 line names its graphics processing cluster and texture processing cluster
_GPC_TPC = re.compile(r"\bGPC ([0-9]+), TPC ([0-9]+)")


@dataclass(frozen=True)
class Event:
    """One decoded kernel event on one scope node."""

    host: str
    observed_at: datetime
    kind: str  # xid, sxid, gpu_off_bus, gpu_init_failed, aer, gsp_timeout
    code: int | None
    points: Points
    category: str | None
    device: str | None  # the GPU, switch or PCIe device the line names (tells repeats of one event apart)
    line: str  # the evidence text: the record's log lines
    label: str  # how the event is named in a message without log text, e.g. "Xid 79"
    #: NVIDIA's words on what the event means, shown before its lines where they decide (a job finding, a status)
    meaning: str | None = None
    #: where NVIDIA's repetition workflow (REPEAT_WORKFLOWS) places the event: the GPU, and for Xid 13 the GPC and
    #: TPC the line names; None for other events
    repeat_key: str | None = None


@dataclass(frozen=True)
class Decision:
    points: Points
    category: str | None


_NOTHING = Decision(Points.NOTHING, None)
_UNKNOWN = Decision(Points.UNKNOWN, None)


def _row_decision(row: Row) -> Decision:
    return Decision(row.points, row.category)


def _device(text: str) -> str:
    words = text.strip().removeprefix("PCI:").split()  # none in `(PCI:)`
    return words[0].lower() if words else ""


def _bits(value: int) -> set[int]:
    return {b for b in range(32) if value >> b & 1}


def decode_xid74(row: Row, rest: str) -> Decision:
    """Xid 74 by its registers (WORKFLOW_NVLINK_ERR); without registers the driver's "fatal error" stands."""
    m = _XID74.search(rest)
    if m is None:
        return _row_decision(row)
    registers = [int(v, 16) & 0xFFFFFFFF for v in re.split(r"\s*,\s*", m.group(2))]
    if not any(registers):
        return _row_decision(row)
    for index, value in enumerate(registers):
        if _bits(value) - _XID74_NO_FINDING.get(index, set()):
            return _row_decision(row)
    return _NOTHING


def _pattern_matches(pattern: str, value: int) -> bool:
    if len(pattern) != 32:
        return False
    for index, ch in enumerate(pattern):
        bit = value >> (31 - index) & 1
        if (ch == "1" and not bit) or (ch == "0" and bit):
            return False
    return True


def _nvlink5_row(cat: Catalogue, code: int, intrinfo: int, status: int) -> Row | None:
    for row in cat.nvlink5:
        if row.code != code:
            continue
        fields = dict(part.split("=", 1) for part in row.description.split(";"))
        if int(fields["status"], 16) != status:
            continue
        if _pattern_matches(fields["v2"], intrinfo) or _pattern_matches(fields["v1"], intrinfo):
            return row
    return None


def decode_nvlink5(cat: Catalogue, row: Row, rest: str) -> Decision:
    m = _NVLINK5.match(_PROCESS.sub("", rest, count=1))
    if m is None:
        return _UNKNOWN
    word, intrinfo, status = m.group(2), m.group(6), m.group(7)
    if intrinfo is not None and status is not None:
        sheet = _nvlink5_row(cat, row.code, int(intrinfo, 16), int(status, 16))
        if sheet is not None:
            return _row_decision(sheet)
    return _row_decision(row) if word.lower() == "fatal" else _NOTHING


def decode_xid154(row: Row, rest: str) -> Decision:
    m = _XID154.search(rest)
    if m is None:
        return _UNKNOWN
    action = _RECOVERY_ACTIONS.get(int(m.group(2), 16))
    if action is None:
        return _UNKNOWN
    return _NOTHING if action == "none" else _row_decision(row)


def decode_xid(cat: Catalogue, code: int, rest: str) -> Decision:
    """The decision for one Xid line: the catalogue's row, or its named rule; a code the file lacks is unknown."""
    row = cat.xid.get(code)
    if row is None:
        return _UNKNOWN
    if row.rule == "xid74_registers":
        return decode_xid74(row, rest)
    if row.rule == "nvlink5_decode":
        return decode_nvlink5(cat, row, rest)
    if row.rule == "xid154_recovery_action":
        return decode_xid154(row, rest)
    return _row_decision(row)


def decode_sxid(cat: Catalogue, code: int, rest: str) -> Decision:
    """An SXid by the guide where it says more than the line (always fatal; a per-code impact), else by its
    Fatal/Non-fatal word, or (without it) by the catalogue's fatality of the code."""
    word = _SXID_SEVERITY.match(rest)
    row = cat.sxid.get(code)
    if row is not None and (row.fatality == "always_fatal" or row.rule == "sxid_guide_impact"):
        return _row_decision(row)
    if word is not None:
        if word.group(1).lower() == "fatal":
            return Decision(Points.NODE, row.category if row is not None else "nvswitch")
        return _NOTHING
    if row is None:
        return _UNKNOWN
    return _UNKNOWN if row.fatality == "potentially_fatal" else _NOTHING


def xid_meaning(row: Row) -> str:
    """NVIDIA's words on an Xid that points at the job, as its finding's evidence says them."""
    said = row.meaning or f"{row.description}"
    buckets = "/".join(b for b in (row.immediate, row.investigatory) if b)
    return f"Xid {row.code} {row.name} ({row.description}; NVIDIA's resolution {buckets}): {said}"


def _repeat_key(row: Row | None, device: str, rest: str) -> str | None:
    """Where NVIDIA's repetition workflow places an application-fault Xid: its GPU (and GPC/TPC for Xid 13)."""
    if row is None or row.investigatory not in REPEAT_WORKFLOWS:
        return None
    if row.investigatory == "WORKFLOW_XID_13":
        m = _GPC_TPC.search(rest)
        return f"{device} GPC {m.group(1)} TPC {m.group(2)}" if m else None
    return device


class _HostDecoder:
    """Decodes one host's records in log order, remembering what multi-line forms need."""

    def __init__(self, cat: Catalogue, host: str) -> None:
        self.cat = cat
        self.host = host
        self.events: list[Event] = []
        self.recent: list[Record] = []  # the last two records: the probe-time form may repeat the syslog prefix
        #: (switch, code) -> index in events of the latest SXid head of that switch and code: switches log at once,
        #: so one switch's continuation lines may follow another switch's record
        self.open_sxid: dict[tuple[str, str], int] = {}

    def feed(self, record: Record) -> None:
        first = record.lines[0] if record.lines else ""
        sxid = _SXID.search(first)
        if sxid is not None and self._continues_sxid(record, sxid):
            return
        event = self._decode(record, first)
        if event is not None:
            self.events.append(event)
            if event.kind == "sxid" and sxid is not None:
                self.open_sxid[(sxid.group(1).lower(), sxid.group(2))] = len(self.events) - 1
        self.recent = [*self.recent[-1:], record]

    def _continues_sxid(self, record: Record, m: re.Match[str]) -> bool:
        if _SXID_SEVERITY.match(m.group(3)):
            return False
        index = self.open_sxid.get((m.group(1).lower(), m.group(2)))
        if index is None:
            return False
        head = self.events[index]
        if abs(record.observed_at - head.observed_at) > SXID_CONTINUATION:
            return False  # a later line of that switch and code is not part of that record: decided on its own
        self.events[index] = replace(head, line=head.line + "\n" + record.evidence)
        return True

    def _event(self, record: Record, kind: str, code: int | None, decision: Decision, device: str | None,
               label: str, line: str | None = None, meaning: str | None = None,
               repeat_key: str | None = None) -> Event:  # fmt: skip
        return Event(
            self.host, record.observed_at, kind, code, decision.points, decision.category, device,
            line if line is not None else record.evidence, label, meaning, repeat_key,
        )  # fmt: skip

    def _decode(self, record: Record, first: str) -> Event | None:
        m = _XID.search(first)
        if m is not None:
            code = int(m.group(2))
            rest = m.group(3) + "\n" + "\n".join(record.lines[1:])
            decision = decode_xid(self.cat, code, rest)
            row = self.cat.xid.get(code)
            device = _device(m.group(1))
            meaning = xid_meaning(row) if row is not None and decision.points is Points.JOB else None
            return self._event(record, "xid", code, decision, device, f"Xid {code}", meaning=meaning,
                               repeat_key=_repeat_key(row, device, rest))  # fmt: skip
        m = _SXID.search(first)
        if m is not None:
            code = int(m.group(2))
            decision = decode_sxid(self.cat, code, m.group(3))
            return self._event(record, "sxid", code, decision, _device(m.group(1)), f"SXid {code}")
        for kind, unread in (("xid", _XID_UNREAD), ("sxid", _SXID_UNREAD)):
            m = unread.search(first)
            if m is not None:  # said as not understood, never guessed
                label = f"{'Xid' if kind == 'xid' else 'SXid'} of a code that cannot be read"
                return self._event(record, kind, None, _UNKNOWN, _device(m.group(1)), label)
        text = record.text
        if _OFF_BUS_PROBE.search(text):
            return self._probe_off_bus(record, text)
        m = _OFF_BUS.search(text)
        if m is not None:
            return self._event(record, "gpu_off_bus", None, Decision(Points.NODE, "gpu_off_bus"),
                               _device(m.group(1)), "GPU fallen off the bus")  # fmt: skip
        m = _RM_INIT.search(text)
        if m is not None:
            status = decode_status(text)
            return self._event(record, "gpu_init_failed", None, Decision(Points.NODE, "gpu_hardware"),
                               _device(m.group(1) or ""), "RmInitAdapter failure",
                               meaning=status.meaning if status is not None else None)  # fmt: skip
        if _PROBE_FAILED.search(text):
            return self._event(record, "gpu_init_failed", None, Decision(Points.NODE, "gpu_hardware"), None,
                               "NVIDIA probe failure")  # fmt: skip
        m = _AER.search(text)
        if m is not None:
            correctable = m.group(1).startswith("Correct")
            decision = _NOTHING if correctable else Decision(Points.NODE, "pcie")
            device = _AER_DEVICE.search(text)
            return self._event(record, "aer", None, decision, device.group(1).lower() if device else None,
                               "PCIe AER error")  # fmt: skip
        if _GSP_TIMEOUT.search(text):
            return self._event(record, "gsp_timeout", None, Decision(Points.NODE, "gpu_firmware"), None,
                               "GSP RPC timeout")  # fmt: skip
        status = decode_status(text)
        if status is not None:
            return self._event(record, "nv_status", None, Decision(status.points, status.category), status.device,
                               status.label, meaning=status.meaning or None)  # fmt: skip
        return None

    def _probe_off_bus(self, record: Record, text: str) -> Event:
        line = record.evidence
        device = None
        first = _OFF_BUS_PROBE_FIRST.search(text.split("\n", 1)[0])
        if len(record.lines) == 1 and len(self.recent) == 2:
            # The probe-time form spans three lines; written with the prefix repeated it arrives as three records.
            one, two = self.recent
            if _OFF_BUS_PROBE_FIRST.search(one.text) and _OFF_BUS_PROBE_SECOND.search(two.text):
                line = "\n".join((one.evidence, two.evidence, record.evidence))
                first = _OFF_BUS_PROBE_FIRST.search(one.text)
        if first is not None:
            device = _device(first.group(1))
        return self._event(record, "gpu_off_bus", None, Decision(Points.NODE, "gpu_off_bus"), device,
                           "GPU fallen off the bus", line)  # fmt: skip


def decode_records(host: str, records: Iterable[Record], cat: Catalogue | None = None) -> list[Event]:
    """The events of one host's records, in the order given (each origin's records in log order)."""
    decoder = _HostDecoder(cat or catalogue(), host)
    for record in records:
        decoder.feed(record)
    return decoder.events
