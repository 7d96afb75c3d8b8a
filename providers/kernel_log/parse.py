"""Parsing of syslog line formats and classification of kernel messages against the catalogue."""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from providers.kernel_log.catalogue import EVENTS, Points, xid_entry

# RFC 3339 / ISO 8601 with an explicit offset. `,` before the fraction is dmesg's; `+0000` is journalctl's.
_ISO = re.compile(r"(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?(Z|z|[+-]\d\d:?\d\d)")
_ISO_AT_START = re.compile(_ISO.pattern + r"(?=\s)")
# RFC 5424: <PRI>VERSION SP TIMESTAMP SP HOSTNAME SP APP-NAME SP PROCID SP MSGID SP SD [SP MSG]
_RFC5424 = re.compile(r"<\d{1,3}>1 (\S+) (\S+) (\S+) \S+ \S+ (-|(?:\[(?:[^\]\\]|\\.)*\])+)(?: (.*))?$", re.DOTALL)
# `HOST TAG: message` after the timestamp (RSYSLOG_FileFormat, journalctl short-iso). A tag has no inner colon,
# which keeps dmesg lines such as `pcieport 0000:00:01.0: AER: ...` from being read as host + tag.
_HOST_TAG = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*) ([A-Za-z0-9_./-]+)(?:\[\d+\])?:(?: (.*))?$", re.DOTALL)
# Traditional BSD syslog (`Dec  2 11:38:47 host ...`): no year and no zone, so it cannot be placed in time.
BSD_TIMESTAMP = re.compile(r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d ")


@dataclass(frozen=True)
class ParsedLine:
    observed_at: datetime  # aware, UTC
    host: str | None  # None when the format carries no host (dmesg): the file decides
    tag: str | None  # syslog tag / APP-NAME; None when absent
    message: str


def parse_timestamp(text: str) -> datetime | None:
    """Parse an RFC 3339 timestamp with an explicit offset into aware UTC; None when it is not one."""
    m = _ISO.fullmatch(text)
    return _from_match(m) if m else None


def _from_match(m: re.Match[str]) -> datetime | None:
    year, month, day, hour, minute, second, frac, off = m.groups()
    try:
        micro = int((frac or "0")[:6].ljust(6, "0"))
        if off in ("Z", "z"):
            tz = timezone.utc
        else:
            sign = -1 if off[0] == "-" else 1
            digits = off[1:].replace(":", "")
            tz = timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))
        value = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), micro, tzinfo=tz)
    except ValueError:
        return None
    return value.astimezone(timezone.utc)


def parse_line(line: str) -> ParsedLine | None:
    """Parse one syslog line (RSYSLOG_FileFormat, RFC 5424, journalctl short-iso, dmesg iso).

    Returns None for lines whose timestamp cannot be read, traditional BSD timestamps included.
    """
    line = line.rstrip("\r\n")
    if line.startswith("<"):
        m5 = _RFC5424.match(line)
        if not m5:
            return None
        ts_text, host, app, _sd, msg = m5.groups()
        ts = parse_timestamp(ts_text)
        if ts is None:
            return None
        msg = (msg or "").lstrip("\ufeff")
        return ParsedLine(ts, None if host == "-" else host, None if app == "-" else app, msg)
    m = _ISO_AT_START.match(line)
    if not m:
        return None
    ts = _from_match(m)
    if ts is None:
        return None
    rest = line[m.end() :].lstrip(" ")
    # `dmesg --time-format iso` writes a comma before the fraction and never a host: the file names the host.
    ht = None if m.group(7) is not None and line[m.start(7) - 1] == "," else _HOST_TAG.match(rest)
    if ht:
        return ParsedLine(ts, ht.group(1), ht.group(2), ht.group(3) or "")
    return ParsedLine(ts, None, None, rest)


def line_time(line: bytes) -> datetime | None:
    """The timestamp of a raw line, or None; used while searching a file by byte offset."""
    parsed = parse_line(line[:512].decode("utf-8", "replace"))
    return parsed.observed_at if parsed else None


# ---------------------------------------------------------------- classification

_XID = re.compile(r"\bNVRM: Xid \(([^)]*)\): (\d+)\b")
_SXID = re.compile(r"\bSXid \(PCI:[^)]*\): (\d+), (Fatal|Non-fatal)\b", re.IGNORECASE)
_OFF_BUS = re.compile(r"\bNVRM: GPU (?:at )?(?:PCI:)?[0-9a-fA-F:.]+:? (?:GPU )?has fallen off the bus")
_OFF_BUS_PROBE_3 = re.compile(r"\bNVRM: fallen off the bus and is not responding to commands")
_OFF_BUS_PROBE_1 = re.compile(r"\bNVRM: The NVIDIA GPU [0-9a-fA-F:.]+\s*$")
_OFF_BUS_PROBE_2 = re.compile(r"\bNVRM: \(PCI ID: [0-9a-fA-F]{4}:[0-9a-fA-F]{4}\) installed in this system has")
_AER = re.compile(r"\bPCIe Bus Error: severity=(Correctable|Corrected|Uncorrectable|Uncorrected)\b")
_GSP_TIMEOUT = re.compile(r"\bTimeout after \d+s of waiting for RPC response from GPU\d* GSP")


@dataclass(frozen=True)
class Event:
    """One classified kernel event on one host."""

    host: str
    observed_at: datetime
    kind: str  # "xid" or an EVENTS key
    code: int | None
    category: str | None
    points: Points
    line: str  # the evidence text (the raw log line, or the joined lines of a multi-line form)


#: every recognised event holds one of these; the cheap test spares ordinary lines the regex searches
_KEYWORDS = ("NVRM", "SXid", "PCIe Bus Error", "GSP")


def classify(message: str) -> tuple[str, int | None, str | None, Points] | None:
    """Classify one kernel message: (kind, code, category, points), or None when it is no GPU/PCIe event."""
    if not any(k in message for k in _KEYWORDS):
        return None
    m = _XID.search(message)
    if m:
        entry = xid_entry(int(m.group(2)))
        return "xid", entry.code, entry.category, entry.points
    m = _SXID.search(message)
    if m:
        ev = EVENTS["sxid_fatal" if m.group(2).lower() == "fatal" else "sxid_nonfatal"]
        return ev.key, int(m.group(1)), ev.category, ev.points
    for key, rx in (("gpu_off_bus", _OFF_BUS), ("gpu_off_bus_probe", _OFF_BUS_PROBE_3), ("gsp_timeout", _GSP_TIMEOUT)):
        if rx.search(message):
            ev = EVENTS[key]
            return ev.key, None, ev.category, ev.points
    m = _AER.search(message)
    if m:
        ev = EVENTS["aer_correctable" if m.group(1).startswith("Correct") else "aer_uncorrectable"]
        return ev.key, None, ev.category, ev.points
    return None


class Classifier:
    """Classifies a stream of kernel messages per host; keeps two lines per host for the probe-time form."""

    def __init__(self) -> None:
        self._recent: dict[str, deque[str]] = {}

    def feed(self, host: str, observed_at: datetime, message: str, raw: str) -> Event | None:
        recent = self._recent.get(host)
        if recent is None:
            recent = self._recent[host] = deque(maxlen=2)
        result = classify(message)
        event = None
        if result is not None:
            kind, code, category, points = result
            text = raw
            if kind == "gpu_off_bus_probe" and len(recent) == 2:
                first, second = recent
                # The probe-time form spans three lines; the first names the GPU, so keep it in the evidence.
                if _OFF_BUS_PROBE_1.search(first) and _OFF_BUS_PROBE_2.search(second):
                    text = "\n".join((first, second, raw))
            event = Event(host, observed_at, kind, code, category, points, text)
        recent.append(raw)
        return event
