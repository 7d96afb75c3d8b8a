"""The parsing room: kernel log lines of every known format into timestamped lines, and lines into records.

Formats (sources named beside each pattern): RSYSLOG_FileFormat and RFC 5424 (rsyslog docs, RFC 5424), RFC 3164
(`Sep  9 11:58:12 host kernel: ...`, RFC 3164), `journalctl -o short`, `short-precise`, `short-iso`,
`short-iso-precise` and `json` (systemd journalctl(1), systemd.journal-fields(7)), `dmesg --time-format iso`,
`dmesg -T` and `dmesg --decode` (util-linux dmesg(1)). Plain `dmesg` lines carry only seconds since boot and cannot
be placed in time: they never parse.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone, tzinfo

from providers.telemetry.digits import number

# RFC 3339 / ISO 8601 with an explicit offset. `,` before the fraction is dmesg's; `+0000` is journalctl's.
# (Every number in ASCII digits, as the programs write them: `\d` would take the digits of every script.)
_ISO = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[T ]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:[.,]([0-9]{1,9}))?"
    r"(Z|z|[+-][0-9]{2}:?[0-9]{2})"
)
_ISO_AT_START = re.compile(_ISO.pattern + r"(?=\s)")
# RFC 5424: <PRI>VERSION SP TIMESTAMP SP HOSTNAME SP APP-NAME SP PROCID SP MSGID SP SD [SP MSG]
_RFC5424 = re.compile(r"<[0-9]{1,3}>1 (\S+) (\S+) (\S+) \S+ \S+ (-|(?:\[(?:[^\]\\]|\\.)*\])+)(?: (.*))?$", re.DOTALL)
_RFC5424_START = re.compile(r"<[0-9]{1,3}>1 ")
# RFC 3164 and journalctl short/short-precise: `Mmm dd hh:mm:ss[.ffffff] ` (an optional <PRI> first), no year, no zone.
_BSD = re.compile(
    r"(?:<[0-9]{1,3}>)?(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) ([ 0-9]?[0-9]) "
    r"([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,9}))? "
)
# `dmesg -T`: `[Wed Sep  9 11:58:12 2026] `: a year, no zone.
_DMESG_T = re.compile(
    r"\[(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +([0-9][0-9]?) "
    r"([0-9]{2}):([0-9]{2}):([0-9]{2}) ([0-9]{4})\] ?"
)
# `dmesg --decode` puts `facility:level:` first (util-linux: padded with spaces, e.g. `kern  :warn  : `).
_DECODE = re.compile(
    r"(kern|user|mail|daemon|auth|syslog|lpr|news|uucp|cron|authpriv|ftp|res0|res1|res2|res3|local[0-7]) *: *"
    r"(emerg|alert|crit|err|warn|notice|info|debug) *: ?"
)
# `HOST TAG: message` after the timestamp. A tag has no inner colon, which keeps dmesg lines such as
# `pcieport 0000:00:01.0: AER: ...` from being read as host + tag.
_HOST_TAG = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*) ([A-Za-z0-9_./-]+)(?:\[[0-9]+\])?:(?: (.*))?$", re.DOTALL)
# `journalctl --no-hostname` and similar: the tag alone.
_KERNEL_TAG_ONLY = re.compile(r"kernel:(?: (.*))?$", re.DOTALL)
# The kernel's own stamp inside a syslog line (`[679160.239013] `), and the caller id of newer kernels (`[ T1946] `).
_MONO = re.compile(r"\[ *([0-9]+\.[0-9]+)\] (?:\[ *[TC][0-9]+\] )?")
_MONTHS = {m: i for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), start=1)}
#: rsyslog writes a newline inside a message as `#012` (its control-character escape)
_RSYSLOG_NEWLINE = "#012"
#: the journal JSON fields read; `__REALTIME_TIMESTAMP` is microseconds since the epoch as a decimal string
_JOURNAL_TIME = re.compile(rb'"__REALTIME_TIMESTAMP" *: *"(\d{1,20})"')
#: bytes of a line looked at to read its time (a journal JSON line keeps its timestamp near the start)
TIME_PROBE_BYTES = 4096
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class TimeContext:
    """How to place lines that lack a year or a zone: the zone they were written in, and the request window."""

    zone: tzinfo = UTC
    #: the middle of the request window; a line without a year takes the year that puts it nearest this
    anchor: datetime | None = None


DEFAULT_CONTEXT = TimeContext()


@dataclass(frozen=True)
class ParsedLine:
    observed_at: datetime  # aware, UTC
    host: str | None  # None when the format carries no host (dmesg): the file decides
    tag: str | None  # syslog tag / APP-NAME; None when absent
    message: str  # may hold several lines of one kernel record, separated by "\n"
    #: the kernel's `[seconds]` stamp inside a syslog line; consecutive lines sharing it are one kernel record
    mono: str | None = None
    #: True for dmesg output, whose continuation lines follow with no stamp at all
    bare: bool = False


def parse_timestamp(text: str) -> datetime | None:
    """Parse an RFC 3339 timestamp with an explicit offset into aware UTC; None when it is not one."""
    m = _ISO.fullmatch(text)
    return _from_iso(m) if m else None


def _from_iso(m: re.Match[str]) -> datetime | None:
    year, month, day, hour, minute, second, frac, off = m.groups()
    try:
        micro = int((frac or "0")[:6].ljust(6, "0"))
        tz = offset_zone(off)
        value = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), micro, tzinfo=tz)
        return value if tz is UTC else value.astimezone(UTC)
    except (ValueError, OverflowError):
        return None


@functools.lru_cache(maxsize=64)
def offset_zone(off: str) -> tzinfo:
    """The zone of an RFC 3339 offset text (`Z`, `+02:00`, `-0530`), built once per text (a log repeats one or two);
    ValueError for an offset no zone has."""
    if off in ("Z", "z"):
        return UTC
    sign = -1 if off[0] == "-" else 1
    digits = off[1:].replace(":", "")
    return timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))


def _local(ctx: TimeContext, year: int, month: int, day: int, hms: tuple[int, int, int], micro: int) -> datetime | None:
    try:
        return datetime(year, month, day, *hms, micro, tzinfo=ctx.zone).astimezone(UTC)
    except (ValueError, OverflowError):
        return None


def _nearest_year(ctx: TimeContext, month: int, day: int, hms: tuple[int, int, int], micro: int) -> datetime | None:
    """The reading of a year-less time that lies nearest the window (exact: a line a year away is in no window)."""
    anchor = ctx.anchor or datetime.now(UTC)
    best: datetime | None = None
    for year in (anchor.year - 1, anchor.year, anchor.year + 1):
        if not 1 <= year <= 9999:
            continue
        value = _local(ctx, year, month, day, hms, micro)
        if value is not None and (best is None or abs(value - anchor) < abs(best - anchor)):
            best = value
    return best


def _micro(frac: str | None) -> int:
    return int((frac or "0")[:6].ljust(6, "0"))


def _split_mono(message: str) -> tuple[str, str | None]:
    m = _MONO.match(message)
    if m is None:
        return message, None
    return message[m.end() :], m.group(1)


def _host_tag(rest: str, observed_at: datetime) -> ParsedLine:
    """`HOST TAG: message`, `kernel: message` or a bare message after a syslog timestamp."""
    ht = _HOST_TAG.match(rest)
    if ht:
        host, tag, message = ht.group(1), ht.group(2), ht.group(3) or ""
    else:
        only = _KERNEL_TAG_ONLY.match(rest)
        host, tag, message = (None, "kernel", only.group(1) or "") if only else (None, None, rest)
    message, mono = _split_mono(message)
    return ParsedLine(observed_at, host, tag, message.replace(_RSYSLOG_NEWLINE, "\n"), mono)


def _journal(line: str) -> ParsedLine | None:
    """One `journalctl -o json` object: MESSAGE (string or byte array), `__REALTIME_TIMESTAMP`, `_HOSTNAME`."""
    try:
        doc = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(doc, dict):
        return None
    stamp = doc.get("__REALTIME_TIMESTAMP", doc.get("_SOURCE_REALTIME_TIMESTAMP"))
    micro = number(stamp, 20) if isinstance(stamp, str) else None
    if micro is None:
        return None
    try:
        observed_at = EPOCH + timedelta(microseconds=micro)
    except OverflowError:
        return None
    raw = doc.get("MESSAGE")
    if isinstance(raw, list) and all(isinstance(b, int) and 0 <= b < 256 for b in raw):
        message = bytes(raw).decode("utf-8", "replace")  # journald stores non-UTF-8 text as a byte array
    elif isinstance(raw, str):
        message = raw
    else:
        return None
    host = doc.get("_HOSTNAME")
    if doc.get("_TRANSPORT") == "kernel":
        tag: str | None = "kernel"
    else:
        ident = doc.get("SYSLOG_IDENTIFIER", doc.get("_COMM"))
        tag = ident if isinstance(ident, str) else "-"
    return ParsedLine(observed_at, host if isinstance(host, str) else None, tag, message.replace("\x00", ""))


def parse_line(line: str, ctx: TimeContext = DEFAULT_CONTEXT) -> ParsedLine | None:
    """Parse one log line of a known format; None for a line whose time cannot be read (plain dmesg included)."""
    line = line.rstrip("\r\n").replace("\x00", "")
    if not line:
        return None
    first = line[0]
    if first == "{":
        return _journal(line)
    if first == "<" and _RFC5424_START.match(line):
        return _rfc5424(line)
    if first.isdigit():
        return _iso_line(line)
    if first == "[":
        return _dmesg_t(line, ctx, "kernel")
    decode = _DECODE.match(line)
    if decode is not None:
        return _decoded(line[decode.end() :], decode.group(1), ctx)
    return _bsd_line(line, ctx)


def _rfc5424(line: str) -> ParsedLine | None:
    m5 = _RFC5424.match(line)
    if not m5:
        return None
    ts_text, host, app, _sd, msg = m5.groups()
    ts = parse_timestamp(ts_text)
    if ts is None:
        return None
    message, mono = _split_mono((msg or "").lstrip("\ufeff"))
    return ParsedLine(
        ts, None if host == "-" else host, None if app == "-" else app, message.replace(_RSYSLOG_NEWLINE, "\n"), mono
    )


def _iso_line(line: str) -> ParsedLine | None:
    m = _ISO_AT_START.match(line)
    if not m:
        return None
    ts = _from_iso(m)
    if ts is None:
        return None
    rest = line[m.end() :].lstrip(" ")
    # `dmesg --time-format iso` writes a comma before the fraction and never a host: the file names the host.
    if m.group(7) is not None and line[m.start(7) - 1] == ",":
        return ParsedLine(ts, None, None, rest, bare=True)
    return _host_tag(rest, ts)


def _dmesg_t(line: str, ctx: TimeContext, tag: str | None) -> ParsedLine | None:
    m = _DMESG_T.match(line)
    if not m:
        return None  # plain dmesg: seconds since boot cannot be placed in time
    month, day, hh, mm, ss, year = m.groups()
    ts = _local(ctx, int(year), _MONTHS[month], int(day), (int(hh), int(mm), int(ss)), 0)
    if ts is None:
        return None
    return ParsedLine(ts, None, tag, line[m.end() :], bare=True)


def _decoded(rest: str, facility: str, ctx: TimeContext) -> ParsedLine | None:
    # Only the kern facility is the kernel's own; `user` lines were written into the ring buffer from user space.
    tag = "kernel" if facility == "kern" else facility
    if rest.startswith("["):
        return _dmesg_t(rest, ctx, tag)
    m = _ISO_AT_START.match(rest)
    if not m:
        return None
    ts = _from_iso(m)
    return None if ts is None else ParsedLine(ts, None, tag, rest[m.end() :].lstrip(" "), bare=True)


def _bsd_line(line: str, ctx: TimeContext) -> ParsedLine | None:
    m = _BSD.match(line)
    if not m:
        return None
    month, day, hh, mm, ss, frac = m.groups()
    ts = _nearest_year(ctx, _MONTHS[month], int(day), (int(hh), int(mm), int(ss)), _micro(frac))
    if ts is None:
        return None
    return _host_tag(line[m.end() :], ts)


def line_time(raw: bytes, ctx: TimeContext = DEFAULT_CONTEXT) -> datetime | None:
    """The timestamp of a raw line, or None; used while searching a file by byte offset."""
    head = raw[:TIME_PROBE_BYTES]
    if head.startswith(b"{"):
        m = _JOURNAL_TIME.search(head)
        if m is None:
            return None
        try:
            return EPOCH + timedelta(microseconds=int(m.group(1)))
        except OverflowError:
            return None
    text = head[:512].decode("utf-8", "replace")
    line = text.rstrip("\r\n").replace("\x00", "")
    if line[:1].isdigit():  # an RFC 3339 stamp or nothing: parse_line's time, without reading host and tag
        m = _ISO_AT_START.match(line)
        return _from_iso(m) if m else None
    parsed = parse_line(text, ctx)
    return parsed.observed_at if parsed else None


def is_continuation(text: str, previous: ParsedLine | None) -> bool:
    """A line without a stamp that continues the kernel record before it (dmesg and journalctl indent these)."""
    if previous is None or not text.strip():
        return False
    return text[0] in " \t" or previous.bare


@dataclass
class Record:
    """One kernel record: its first line's time, host and tag, and all of its lines."""

    observed_at: datetime
    tag: str | None
    lines: list[str]  # the message lines (without syslog prefixes)
    raw: list[str]  # the log lines as written, for evidence
    mono: str | None = None

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    @property
    def evidence(self) -> str:
        return "\n".join(self.raw)


#: how far apart the syslog times of one record's lines may lie (they are written in one burst)
RECORD_SPREAD = timedelta(milliseconds=250)
#: lines of one record at most; a longer run of continuation lines is cut (a kernel record is far shorter)
MAX_RECORD_LINES = 64


def starts_record(current: Record | None, parsed: ParsedLine) -> bool:
    """False when `parsed` repeats the kernel stamp of `current`: syslog writes each line of a record that way."""
    mono = parsed.mono
    return (
        mono is None
        or current is None
        or mono != current.mono
        or abs(parsed.observed_at - current.observed_at) > RECORD_SPREAD
    )


def new_record(parsed: ParsedLine, raw: str) -> Record:
    message = parsed.message
    lines = message.split("\n")[:MAX_RECORD_LINES] if "\n" in message else [message]
    return Record(parsed.observed_at, parsed.tag, lines, [raw], parsed.mono)


def extend_record(record: Record, message: str, raw: str) -> None:
    """Add a continuation (a line without a stamp, or one repeating the record's kernel stamp)."""
    if len(record.lines) < MAX_RECORD_LINES:
        record.lines.extend(message.split("\n")[: MAX_RECORD_LINES - len(record.lines)])
        record.raw.append(raw)
