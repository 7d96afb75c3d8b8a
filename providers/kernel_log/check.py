"""`check` for kernel_log: can the configured log source and epilog directory be read, and what do they hold.

It looks at what the provider would read, the way it reads it (the files source's naming rules, the parsing room's
line formats, the epilog reader's result shapes, the Loki source's own queries), and reports per host and per file:
the line formats, the time range, unreadable lines, skipped files and epilog results. It only reads, and every read
is bounded: the head and tail of each file, a bounded number of files per host, a bounded stream through a `.gz`.
Nothing here is used when answering requests.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import stat
import zlib
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any, BinaryIO

import requests

from providers.base import (
    CheckProblem,
    CheckReport,
    CheckSeverity,
    Deadline,
    ProviderProcessingError,
    ProviderTimeoutError,
)
from providers.kernel_log.dcgm import results as epilog
from providers.kernel_log.identity import NodeNames
from providers.kernel_log.joblog.files import parse_file_name
from providers.kernel_log.joblog.loki import LokiJobLogSource
from providers.kernel_log.joblog.source import FileJobLogSource
from providers.kernel_log.kernel.collect import KERNEL_TAG, Collector
from providers.kernel_log.kernel.parse import ParsedLine, TimeContext, is_continuation, parse_line
from providers.kernel_log.kernel.sources.files import FileSource, LogName
from providers.kernel_log.kernel.sources.loki import LokiSource
from providers.kernel_log.window import Window

ERROR, WARNING = CheckSeverity.ERROR, CheckSeverity.WARNING

#: bytes read from the start and from the end of a plain file (the source itself decides a file's format from its
#: first 64 KiB)
HEAD_BYTES = 64 * 1024
TAIL_BYTES = 64 * 1024
#: decompressed bytes streamed through one `.gz` at most, looking for its last line and a cut or corrupt stream
GZ_STREAM_BYTES = 16 * 1024 * 1024
GZ_CHUNK = 256 * 1024
#: files listed (and read) per host, newest first; the rest are counted
MAX_FILES_PER_HOST = 8
#: host names listed per combined file, and skipped entries listed per directory; the rest are counted
MAX_HOSTS_LISTED = 16
MAX_SKIPPED_LISTED = 32
#: Loki: the recent window looked at, the hosts sampled in it, the lines per host, and one request's timeout
LOKI_WINDOW = timedelta(hours=24)
LOKI_MAX_HOSTS = 64
LOKI_LINES_PER_HOST = 100
LOKI_REQUEST_SECONDS = 10.0
LOKI_MAX_BODY = 4 * 1024 * 1024
LOKI_QUERY_PATH = "/loki/api/v1/query_range"

#: line formats by the token `check` reports (docs/providers.md, "Supported line formats")
FORMATS = {
    "rfc3339": "RFC 3339 syslog (RSYSLOG_FileFormat, journalctl -o short-iso)",
    "rfc5424": "RFC 5424 syslog",
    "rfc3164": "RFC 3164 syslog or journalctl -o short (no year; read in ATTRIBUTION_KERNEL_LOG_TIME_ZONE)",
    "journal_json": "journalctl -o json",
    "dmesg_iso": "dmesg --time-format iso",
    "dmesg_ctime": "dmesg -T (no zone; read in ATTRIBUTION_KERNEL_LOG_TIME_ZONE)",
    "dmesg_decode": "dmesg --decode with an ISO or -T stamp",
}
#: Loki: a stored line in none of the formats is a bare message, which the Loki source classifies as it is
BARE_MESSAGE = "message"
_RFC5424_START = re.compile(r"<\d{1,3}>1 ")
# Plain dmesg: seconds since boot (optionally after `dmesg --decode`'s facility and level): never placed in time.
_PLAIN_DMESG = re.compile(r"(?:[a-z0-9]+ *: *[a-z]+ *: ?)?\[ *\d+\.\d+\] ")


def line_format(text: str, ctx: TimeContext) -> tuple[str | None, ParsedLine | None]:
    """The format token of a line and its parse; (None, None) for a line in no known format."""
    parsed = parse_line(text, ctx)
    if parsed is None:
        return None, None
    # parse_line dispatches on the first character the same way.
    first = text[0]
    if first == "{":
        return "journal_json", parsed
    if first == "<" and _RFC5424_START.match(text):
        return "rfc5424", parsed
    if first.isdigit():
        return ("dmesg_iso" if parsed.bare else "rfc3339"), parsed
    if first == "[":
        return "dmesg_ctime", parsed
    if parsed.bare:
        return "dmesg_decode", parsed
    return "rfc3164", parsed


def _stamp(value: datetime | None) -> str | None:
    if value is None:
        return None
    text = value.astimezone(UTC).isoformat()
    return text.replace("+00:00", "Z")


# ---------------------------------------------------------------- what a sample of lines holds


@dataclass
class LineSample:
    """Counts over the lines looked at in one file (or of one Loki host)."""

    formats: Counter[str] = field(default_factory=Counter)
    first: datetime | None = None
    last: datetime | None = None
    lines: int = 0  # non-blank lines looked at
    continuations: int = 0  # lines without a stamp that continue the record before them
    unreadable: int = 0
    first_unreadable_line: int | None = None
    plain_dmesg: int = 0
    kernel_lines: int = 0  # lines the provider classifies: tagged `kernel`, or with no tag at all
    hostless: int = 0  # lines whose format carries no host (dmesg)
    hosts: Counter[str] = field(default_factory=Counter)

    @property
    def parsed(self) -> int:
        return sum(self.formats.values())

    def take(self, parsed: ParsedLine, fmt: str) -> None:
        self.formats[fmt] += 1
        at = parsed.observed_at
        self.first = at if self.first is None else min(self.first, at)
        self.last = at if self.last is None else max(self.last, at)
        if parsed.tag is None or parsed.tag.lower() == KERNEL_TAG:
            self.kernel_lines += 1
        if parsed.host is None:
            self.hostless += 1
        else:
            self.hosts[parsed.host] += 1

    def feed(self, data: bytes, first_line: int | None, ctx: TimeContext) -> None:
        """Feed whole lines; `first_line` is the number of the first (None in a tail, where numbers are unknown)."""
        previous: ParsedLine | None = None
        for index, raw in enumerate(data.split(b"\n")):
            text = raw.decode("utf-8", "replace").rstrip("\r").replace("\x00", "")
            if not text.strip():
                continue
            self.lines += 1
            fmt, parsed = line_format(text, ctx)
            if parsed is not None and fmt is not None:
                self.take(parsed, fmt)
                previous = parsed
            elif is_continuation(text, previous):
                self.continuations += 1
            else:
                self.unreadable += 1
                if _PLAIN_DMESG.match(text):
                    self.plain_dmesg += 1
                if first_line is not None and self.first_unreadable_line is None:
                    self.first_unreadable_line = first_line + index


# ---------------------------------------------------------------- reading a file, bounded


class NotRegular(Exception):
    """The path is not a regular file (a FIFO, socket or device, perhaps swapped in since it was listed)."""


def _open_regular(path: Path) -> tuple[BinaryIO, int]:
    # O_NONBLOCK: opening a FIFO must never wait for a writer; a regular file reads the same either way.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular()
        return os.fdopen(fd, "rb"), st.st_size
    except BaseException:
        os.close(fd)
        raise


def _whole_lines(data: bytes, from_start: bool, at_end: bool) -> bytes:
    """Drop the partial line a bounded read cut at either end (a read with no newline at all is one line)."""
    if not at_end:
        cut = data.rfind(b"\n")
        data = data[: cut + 1] if cut >= 0 else data
    if not from_start:
        cut = data.find(b"\n")
        data = data[cut + 1 :] if cut >= 0 else b""
    return data


@dataclass
class FileReport:
    path: str  # relative to the directory checked
    size: int | None = None
    compressed: bool = False
    status: str = "ok"  # ok, empty, unknown_format, corrupt, unreadable, not_regular
    reason: str = ""
    sample: LineSample = field(default_factory=LineSample)
    sampled: str = "whole"  # whole, head_and_tail, head (a .gz streamed only in part)

    def to_json(self, with_hosts: bool) -> dict[str, Any]:
        s = self.sample
        out: dict[str, Any] = {
            "path": self.path,
            "size": self.size,
            "compressed": self.compressed,
            "status": self.status,
            "reason": self.reason or None,
            "sampled": self.sampled,
            "formats": dict(sorted(s.formats.items())),
            "first": _stamp(s.first),
            "last": _stamp(s.last),
            "lines_sampled": s.lines,
            "kernel_lines": s.kernel_lines,
            "unreadable_lines": s.unreadable,
            "first_unreadable_line": s.first_unreadable_line,
        }
        if with_hosts:
            hosts = sorted(s.hosts)
            out["hosts"] = hosts[:MAX_HOSTS_LISTED]
            out["hosts_not_listed"] = max(0, len(hosts) - MAX_HOSTS_LISTED)
            out["lines_without_host"] = s.hostless
        return out


def sample_file(path: Path, relative: str, gz: bool, ctx: TimeContext) -> FileReport:
    """Read the head and tail of one file (a bounded stream of a `.gz`) and say what its lines are."""
    report = FileReport(relative, compressed=gz)
    try:
        handle, size = _open_regular(path)
    except NotRegular:
        report.status, report.reason = "not_regular", "not a regular file"
        return report
    except OSError as exc:
        report.status, report.reason = "unreadable", exc.strerror or type(exc).__name__
        return report
    report.size = size
    with handle:
        try:
            if gz:
                _sample_gz(handle, report, ctx)
            else:
                _sample_plain(handle, size, report, ctx)
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            report.status, report.reason = "corrupt", f"not a readable gzip stream ({type(exc).__name__})"
            return report
        except OSError as exc:
            report.status, report.reason = "unreadable", exc.strerror or type(exc).__name__
            return report
    _judge(report)
    return report


def _sample_plain(handle: BinaryIO, size: int, report: FileReport, ctx: TimeContext) -> None:
    if size <= HEAD_BYTES + TAIL_BYTES:
        report.sample.feed(handle.read(HEAD_BYTES + TAIL_BYTES), 1, ctx)
        return
    report.sampled = "head_and_tail"
    report.sample.feed(_whole_lines(handle.read(HEAD_BYTES), True, False), 1, ctx)
    _judge_head(report)
    handle.seek(size - TAIL_BYTES)
    report.sample.feed(_whole_lines(handle.read(TAIL_BYTES), False, True), None, ctx)


def _sample_gz(handle: BinaryIO, report: FileReport, ctx: TimeContext) -> None:
    stream = gzip.GzipFile(fileobj=handle, mode="rb")
    head = stream.read(HEAD_BYTES)
    rest = stream.read(GZ_CHUNK)
    if not rest:
        report.sample.feed(head, 1, ctx)
        return
    report.sample.feed(_whole_lines(head, True, False), 1, ctx)
    _judge_head(report)
    # Stream on (bounded), keeping the last TAIL_BYTES, to reach the last line and a cut or corrupt end.
    streamed = len(head) + len(rest)
    tail = rest[-TAIL_BYTES:]
    while streamed < GZ_STREAM_BYTES:
        chunk = stream.read(GZ_CHUNK)
        if not chunk:
            report.sampled = "head_and_tail"
            report.sample.feed(_whole_lines(tail, False, True), None, ctx)
            return
        streamed += len(chunk)
        tail = (tail + chunk)[-TAIL_BYTES:]
    report.sampled = "head"  # the stream goes on past the bound: its end was not read


def _judge_head(report: FileReport) -> None:
    """Decide the format from the head alone, as the source does (it reads a file's start to find a known line)."""
    if report.sample.lines and not report.sample.parsed:
        report.status = "unknown_format"


def _judge(report: FileReport) -> None:
    s = report.sample
    if report.status != "ok":
        return
    if s.lines == 0:
        report.status = "empty"
    elif s.parsed == 0:
        report.status = "unknown_format"


# ---------------------------------------------------------------- the files source


@dataclass
class HostReport:
    name: str
    layout: str  # folder or file
    files: list[FileReport] = field(default_factory=list)
    files_not_listed: int = 0

    def to_json(self) -> dict[str, Any]:
        hosts: Counter[str] = Counter()
        for f in self.files:
            hosts.update(f.sample.hosts)
        return {
            "name": self.name,
            "layout": self.layout,
            "files": [f.to_json(with_hosts=False) for f in self.files],
            "files_not_listed": self.files_not_listed,
            "hosts_in_lines": sorted(hosts)[:MAX_HOSTS_LISTED],
        }


class _Checker:
    """Collects problems and text lines while the check walks what the provider would read."""

    def __init__(self, deadline: Deadline, zone: tzinfo) -> None:
        self.deadline = deadline
        self.ctx = TimeContext(zone=zone)  # no request window: a line without a year takes the one nearest now
        self.problems: list[CheckProblem] = []
        self.text: list[str] = []
        self.out_of_time = False

    def problem(self, severity: CheckSeverity, where: str, message: str) -> None:
        self.problems.append(CheckProblem(severity, where, message))

    def expired(self, what: str) -> bool:
        if self.deadline.expired and not self.out_of_time:
            self.out_of_time = True
            self.problem(ERROR, what, "the check ran out of time before it read everything; give it more (--timeout)")
        return self.out_of_time


def _entries(path: Path) -> list[os.DirEntry[str]]:
    with os.scandir(path) as it:
        return sorted(it, key=lambda e: e.name)


def _kind(entry: os.DirEntry[str]) -> str:
    """dir, file, or why neither (symlinks are followed, as the source follows them)."""
    try:
        if entry.is_dir():
            return "dir"
        if entry.is_file():
            return "file"
        if entry.is_symlink():
            return "a symbolic link to nothing that exists"
        mode = entry.stat(follow_symlinks=False).st_mode
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _nested_holds_anything(path: str) -> bool | None:
    """Whether a folder holds any entry (only the first is looked at); None when it cannot be listed."""
    try:
        with os.scandir(path) as it:
            return next(it, None) is not None
    except OSError:
        return None


def _describe_file(f: FileReport) -> str:
    s = f.sample
    parts = [f.status]
    if s.formats:
        parts.append(", ".join(f"{fmt} {n}" if len(s.formats) > 1 else fmt for fmt, n in s.formats.most_common()))
    if s.first is not None:
        end = _stamp(s.last) if f.sampled != "head" else f"at least {_stamp(s.last)}"
        parts.append(f"{_stamp(s.first)} .. {end}")
    if f.status in ("ok", "empty", "unknown_format"):
        noun = "line" if s.lines == 1 else "lines"
        sampled = "" if f.sampled == "whole" else f" sampled ({f.sampled.replace('_', ' ')})"
        parts.append(f"{s.lines} {noun}{sampled}")
    if s.unreadable:
        where = f", first: line {s.first_unreadable_line}" if s.first_unreadable_line else ""
        parts.append(f"{s.unreadable} unreadable{where}")
    if f.reason:
        parts.append(f.reason)
    return f"{f.path}: " + "; ".join(parts)


def _file_problems(c: _Checker, f: FileReport, combined: bool) -> None:
    s = f.sample
    if f.status == "unreadable":
        c.problem(ERROR, f.path, f"cannot be read ({f.reason}); the source skips it: give the Adapter read access")
    elif f.status == "corrupt":
        c.problem(ERROR, f.path, f"is {f.reason}; the source skips it: replace or remove the file")
    elif f.status == "not_regular":
        c.problem(WARNING, f.path, "is not a regular file; the source skips it")
    elif f.status == "unknown_format":
        if s.plain_dmesg == s.unreadable:
            c.problem(
                ERROR,
                f.path,
                "holds plain dmesg lines (seconds since boot), which cannot be placed in time; the source skips it: "
                "write it with `dmesg --time-format iso`, or collect the node's syslog or journal instead",
            )
        else:
            c.problem(
                ERROR,
                f.path,
                f"no line of its first {HEAD_BYTES // 1024} KiB is in a known format (first unreadable line "
                f"{s.first_unreadable_line or 1}); the source skips it: see docs/providers.md, Supported line formats",
            )
    elif f.status == "ok":
        if s.unreadable * 2 > s.lines:
            c.problem(
                WARNING,
                f.path,
                f"{s.unreadable} of {s.lines} lines sampled are in no known format and are skipped "
                f"(first: line {s.first_unreadable_line or '?'})",
            )
        if s.kernel_lines == 0:
            c.problem(WARNING, f.path, "no line sampled is a kernel line (syslog tag `kernel`); only those classify")
        if combined and s.hostless:
            severity = ERROR if s.hostless == s.parsed else WARNING
            c.problem(
                severity,
                f.path,
                f"{s.hostless} lines carry no host name (dmesg output), and in a combined file only a line's host "
                "names its node: put such a file in a per-host folder, <dir>/<host>/",
            )


def _check_files(c: _Checker, source: FileSource) -> dict[str, Any]:
    root = source.root
    details: dict[str, Any] = {"source": "files", "log_dir": str(root), "hosts": [], "combined": [], "skipped": []}
    try:
        entries = _entries(root)
    except OSError as exc:
        c.problem(ERROR, str(root), f"the log directory cannot be read ({exc.strerror}): give the Adapter read access")
        return details
    c.text.append(f"kernel logs: files source, {root}")
    hosts: list[HostReport] = []
    combined: dict[str, list[tuple[LogName, str, Path]]] = {}
    per_host_files: dict[str, list[tuple[LogName, str, Path]]] = {}
    skipped: list[dict[str, str]] = []

    def skip(where: str, reason: str, severity: CheckSeverity | None) -> None:
        skipped.append({"path": where, "reason": reason})
        if severity is not None:
            c.problem(severity, where, f"is skipped by the source: {reason}")

    for entry in entries:
        kind = _kind(entry)
        if kind == "dir":
            hosts.append(_check_folder(c, source, entry, skip))
        elif kind == "file":
            name = source.read_name(entry.name, top_level=True)
            if name.host is None:
                combined.setdefault(name.base, []).append((name, entry.name, Path(entry.path)))
            elif entry.name.startswith("."):
                skip(entry.name, "a hidden file names no host", None)
            else:
                per_host_files.setdefault(name.host, []).append((name, entry.name, Path(entry.path)))
        else:
            skip(entry.name, kind, WARNING)
    for host, found in sorted(per_host_files.items()):
        report = HostReport(host, "file")
        _read_group(c, report, found, combined=False)
        hosts.append(report)
    hosts.sort(key=lambda h: (h.name.lower(), h.layout))
    combined_reports: list[FileReport] = []
    for _, found in sorted(combined.items()):
        group = HostReport("", "combined")
        _read_group(c, group, found, combined=True)
        combined_reports.extend(group.files)
        if group.files_not_listed:
            details.setdefault("combined_not_listed", 0)
            details["combined_not_listed"] += group.files_not_listed

    readable = [f for h in hosts for f in h.files] + combined_reports
    if not readable:
        c.problem(
            ERROR,
            str(root),
            "holds no log file the source reads: expected <dir>/<host>/<file>, <dir>/<host>[.log], or combined files "
            f"named {', '.join(sorted(source.combined))} (with rotation suffixes)",
        )
    elif not any(f.status == "ok" for f in readable):
        c.problem(ERROR, str(root), "no file holds a line the source can read, so every answer would be empty")
    for host in hosts:
        layout = f"folder {host.name}/" if host.layout == "folder" else "per-host file"
        c.text.append(f"  host {host.name} ({layout})")
        for f in host.files:
            c.text.append(f"    {_describe_file(f)}")
        if host.files_not_listed:
            c.text.append(f"    ... and {host.files_not_listed} older files, not read")
    for f in combined_reports:
        names = sorted(f.sample.hosts)
        listed = ", ".join(names[:MAX_HOSTS_LISTED]) + (
            f" and {len(names) - MAX_HOSTS_LISTED} more" if len(names) > MAX_HOSTS_LISTED else ""
        )
        c.text.append(f"  combined {_describe_file(f)}; hosts: {listed or 'none'}")
    for item in skipped[:MAX_SKIPPED_LISTED]:
        c.text.append(f"  skipped {item['path']}: {item['reason']}")
    if len(skipped) > MAX_SKIPPED_LISTED:
        c.text.append(f"  ... and {len(skipped) - MAX_SKIPPED_LISTED} more skipped")
    details["hosts"] = [h.to_json() for h in hosts]
    details["combined"] = [f.to_json(with_hosts=True) for f in combined_reports]
    details["skipped"] = skipped[:MAX_SKIPPED_LISTED]
    details["skipped_not_listed"] = max(0, len(skipped) - MAX_SKIPPED_LISTED)
    details.setdefault("combined_not_listed", 0)
    return details


def _check_folder(c: _Checker, source: FileSource, entry: os.DirEntry[str], skip: Any) -> HostReport:
    report = HostReport(entry.name, "folder")
    try:
        inner = _entries(Path(entry.path))
    except OSError as exc:
        c.problem(
            ERROR, f"{entry.name}/", f"the host folder cannot be read ({exc.strerror}): give the Adapter read access"
        )
        return report
    found: list[tuple[LogName, str, Path]] = []
    nested = False
    for sub in inner:
        where = f"{entry.name}/{sub.name}"
        kind = _kind(sub)
        if kind == "file":
            found.append((source.read_name(sub.name, top_level=False), where, Path(sub.path)))
        elif kind == "dir":
            holds = _nested_holds_anything(sub.path)
            if holds is None or holds:
                nested = True
                skip(f"{where}/", "a folder inside a host folder", None)
                c.problem(
                    ERROR,
                    f"{where}/",
                    "is a folder inside a host folder, and the source reads one level only (<dir>/<host>/<file>): "
                    "move its files up into the host folder, or point ATTRIBUTION_KERNEL_LOG_DIR at the level that "
                    "holds the host folders",
                )
        else:
            skip(where, kind, WARNING)
    if not found and not nested:
        c.problem(WARNING, f"{entry.name}/", "the host folder holds no file")
    _read_group(c, report, found, combined=False)
    return report


def _read_group(c: _Checker, report: HostReport, found: list[tuple[LogName, str, Path]], combined: bool) -> None:
    # Newest first, as the source reads a rotation group; a bounded number is read and the rest counted.
    found.sort(key=lambda item: (item[0].order, item[0].base, item[1]))
    for name, relative, path in found[:MAX_FILES_PER_HOST]:
        if c.expired(relative):
            report.files_not_listed += 1
            continue
        f = sample_file(path, relative, name.gz, c.ctx)
        _file_problems(c, f, combined)
        report.files.append(f)
    report.files_not_listed += max(0, len(found) - MAX_FILES_PER_HOST)
    if report.layout != "combined":
        _host_name_problems(c, report)
        if report.files and all(f.status == "empty" for f in report.files):
            c.problem(WARNING, report.name, "its files hold no line yet, so its node has no telemetry")


def _host_name_problems(c: _Checker, report: HostReport) -> None:
    """Lines naming another host than their folder or file: the name decides, so the caller must send that one."""
    names = NodeNames([report.name])
    others = sorted({h for f in report.files for h in f.sample.hosts if names.node_for(h) is None})
    if others:
        shown = ", ".join(others[:MAX_HOSTS_LISTED])
        c.problem(
            WARNING,
            report.name,
            f"its lines name the host(s) {shown}; the {report.layout} name decides, so requests must name the node "
            f"{report.name!r}",
        )


# ---------------------------------------------------------------- epilog results


def epilog_node(stem: str) -> str:
    """The node part of a top-level result's name: `<node>` or `<node>-<stamp>` (epilog's layout)."""
    for width, marker_at, marker in ((16, 8, "T"), (20, 4, "-")):
        tail = stem[-width:]
        if (
            len(stem) > width + 1
            and stem[-width - 1] == "-"
            and tail[marker_at].upper() == marker
            and epilog.name_time(tail) is not None
        ):
            return stem[: -width - 1]
    return stem


def _result(path: Path, relative: str) -> dict[str, Any]:
    out: dict[str, Any] = {"path": relative, "time": None, "time_from": None, "status": "unreadable", "reason": None}
    try:
        handle, size = _open_regular(path)
    except NotRegular:
        out["reason"] = "not a regular file"
        return out
    except OSError as exc:
        out["reason"] = exc.strerror or type(exc).__name__
        return out
    with handle:
        try:
            mtime = os.fstat(handle.fileno()).st_mtime
            named = epilog.name_time(path.name)
            out["time"] = _stamp(named or datetime.fromtimestamp(mtime, tz=UTC))
            out["time_from"] = "name" if named else "mtime"
            if size > epilog.MAX_RESULT_BYTES:
                out["reason"] = f"larger than {epilog.MAX_RESULT_BYTES // (1024 * 1024)} MiB"
                return out
            data = handle.read(epilog.MAX_RESULT_BYTES + 1)
        except OSError as exc:
            out["reason"] = exc.strerror or type(exc).__name__
            return out
    try:
        status, failures = epilog.parse_diag(epilog.find_json_object(data.decode("utf-8", "replace")))
    except epilog.UnreadableResult as exc:
        out["reason"] = str(exc)
        return out
    out["status"] = status
    out["failures"] = len(failures)
    return out


def _check_epilog(c: _Checker, root: Path | None) -> dict[str, Any] | None:
    if root is None:
        c.text.append("epilog results: not configured (ATTRIBUTION_EPILOG_DIR); slow answers insufficient_telemetry")
        c.problem(
            WARNING,
            "ATTRIBUTION_EPILOG_DIR",
            "is not set, so every slow request answers insufficient_telemetry; set it to the epilog results' directory",
        )
        return None
    details: dict[str, Any] = {"dir": str(root), "hosts": [], "skipped": []}
    c.text.append(f"epilog results: {root}")
    try:
        entries = _entries(root)
    except OSError as exc:
        c.problem(
            ERROR, str(root), f"the epilog directory cannot be read ({exc.strerror}): give the Adapter read access"
        )
        return details
    per_node: dict[str, list[tuple[str, Path]]] = {}
    for entry in entries:
        kind = _kind(entry)
        if kind == "dir":
            try:
                inner = _entries(Path(entry.path))
            except OSError as exc:
                c.problem(ERROR, f"{entry.name}/", f"the epilog folder cannot be read ({exc.strerror})")
                continue
            bucket = per_node.setdefault(entry.name, [])
            for sub in inner:
                where = f"{entry.name}/{sub.name}"
                sub_kind = _kind(sub)
                if sub_kind == "file" and sub.name.endswith(".json"):
                    bucket.append((where, Path(sub.path)))
                elif sub_kind == "dir" and _nested_holds_anything(sub.path) is not False:
                    c.problem(
                        ERROR,
                        f"{where}/",
                        "is a folder inside a host's epilog folder, and the reader reads one level only "
                        "(<dir>/<node>/<result>.json): move its results up",
                    )
                else:
                    details["skipped"].append(
                        {"path": where, "reason": "not a .json file" if sub_kind == "file" else sub_kind}
                    )
        elif kind == "file" and entry.name.endswith(".json"):
            per_node.setdefault(epilog_node(entry.name[: -len(".json")]), []).append((entry.name, Path(entry.path)))
        else:
            details["skipped"].append({"path": entry.name, "reason": "not a .json file" if kind == "file" else kind})
    for item in details["skipped"]:
        c.problem(WARNING, item["path"], f"is not read by the epilog reader ({item['reason']})")
    if not any(per_node.values()):
        c.problem(WARNING, str(root), "holds no epilog result yet, so slow requests answer insufficient_telemetry")
    for node, found in sorted(per_node.items(), key=lambda kv: kv[0].lower()):
        results = []
        for relative, path in sorted(found, reverse=True)[:MAX_FILES_PER_HOST]:
            if c.expired(relative):
                break
            result = _result(path, relative)
            if result["status"] == "unreadable":
                c.problem(
                    ERROR,
                    relative,
                    f"the epilog result cannot be read ({result['reason']}); its node stays uncertain in every slow "
                    "answer: fix or remove it",
                )
            results.append(result)
        not_listed = max(0, len(found) - len(results))
        details["hosts"].append({"name": node, "results": results, "results_not_listed": not_listed})
        c.text.append(f"  host {node}")
        for r in results:
            when = f"{r['time']} (from the {'name' if r['time_from'] == 'name' else 'file time'})" if r["time"] else ""
            reason = f" ({r['reason']})" if r["reason"] else ""
            c.text.append(f"    {r['path']}: {r['status']}{reason}" + (f"; {when}" if when else ""))
        if not_listed:
            c.text.append(f"    ... and {not_listed} more, not read")
    return details


# ---------------------------------------------------------------- Loki


class _HostSample(Collector):
    """A collector that only counts what the Loki source feeds it for one host."""

    def __init__(self, host: str, window: Window, zone: tzinfo) -> None:
        super().__init__([host], window, zone=zone)
        self.sample = LineSample()

    def add(
        self, node: str, observed_at: datetime, message: str, raw: str, tag: str | None, origin: str | None = None
    ) -> None:
        fmt, parsed = line_format(raw, self.time_context) if raw else (None, None)
        if parsed is None or fmt is None:
            # A bare message: the Loki source classifies it as it is, stamped with Loki's own time.
            parsed, fmt = ParsedLine(observed_at, node, None, raw), BARE_MESSAGE
        self.sample.lines += 1
        self.sample.take(parsed, fmt)


class _Unreachable(ProviderProcessingError):
    """No answer at all: a connection refused, a name that does not resolve, a TLS failure."""


def _loki_get(url: str, headers: dict[str, str], params: dict[str, Any], deadline: Deadline) -> Any:
    """One small Loki API call; ProviderProcessingError/ProviderTimeoutError name what went wrong, in one line."""
    remaining = deadline.remaining()
    if remaining <= 0:
        raise ProviderTimeoutError("the check ran out of time")
    try:
        with requests.get(
            url, params=params, headers=headers, timeout=min(remaining, LOKI_REQUEST_SECONDS), stream=True
        ) as response:
            body = response.raw.read(LOKI_MAX_BODY + 1, decode_content=True)
            status = response.status_code
    except requests.Timeout as exc:
        raise ProviderTimeoutError(f"Loki did not answer {url} in time") from exc
    except (requests.RequestException, OSError) as exc:
        raise _Unreachable(f"Loki could not be reached at {url} ({type(exc).__name__})") from exc
    if status != 200:
        raise ProviderProcessingError(f"Loki answered HTTP {status} to {url}")
    if len(body) > LOKI_MAX_BODY:
        raise ProviderProcessingError(f"Loki answered {url} with more than {LOKI_MAX_BODY // (1024 * 1024)} MiB")
    return body


def _loki_list(body: bytes, url: str) -> list[str]:
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise ProviderProcessingError(f"Loki answered {url} with something that is not JSON") from exc
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, list):
        raise ProviderProcessingError(f"Loki answered {url} without a list of values")
    return sorted({v for v in data if isinstance(v, str) and v})


def _check_loki(c: _Checker, source: LokiSource, zone: tzinfo) -> dict[str, Any]:
    base = source.endpoint.removesuffix(LOKI_QUERY_PATH)
    now = datetime.now(UTC)
    window = Window(now - LOKI_WINDOW, now)
    details: dict[str, Any] = {
        "source": "loki",
        "url": base,
        "host_label": source.host_label,
        "ready": None,
        "window": {"start": _stamp(window.start), "end": _stamp(window.end)},
        "hosts": [],
        "hosts_not_listed": 0,
    }
    c.text.append(f"kernel logs: Loki at {base}, label {source.host_label!r}, the last {LOKI_WINDOW}")
    headers = {"Accept": "application/json"}
    if source.tenant:
        headers["X-Scope-OrgID"] = source.tenant
    try:
        _loki_get(f"{base}/ready", headers, {}, c.deadline)
        details["ready"] = "ready"
    except (_Unreachable, ProviderTimeoutError) as exc:
        c.problem(ERROR, "ATTRIBUTION_LOKI_URL", f"{exc}: check the URL and the network path to Loki")
        return details
    except ProviderProcessingError as exc:
        details["ready"] = str(exc)  # a gateway in front of Loki may not serve /ready; the queries below decide
    span = {"start": _ns(window.start), "end": _ns(window.end)}
    values_url = f"{base}/loki/api/v1/label/{source.host_label}/values"
    try:
        hosts = _loki_list(_loki_get(values_url, headers, span, c.deadline), values_url)
        if not hosts:
            labels_url = f"{base}/loki/api/v1/labels"
            labels = _loki_list(_loki_get(labels_url, headers, span, c.deadline), labels_url)
            c.problem(
                ERROR,
                "ATTRIBUTION_LOKI_HOST_LABEL",
                f"no stream carries the label {source.host_label!r} in the last {LOKI_WINDOW}; labels seen: "
                f"{', '.join(labels[:MAX_HOSTS_LISTED]) or 'none'}: set it to the label that holds the hostname",
            )
            return details
    except (ProviderProcessingError, ProviderTimeoutError) as exc:
        c.problem(ERROR, "ATTRIBUTION_LOKI_URL", str(exc))
        return details
    sampler = LokiSource(
        base,
        selector=source.selector,
        limit=LOKI_LINES_PER_HOST,
        max_pages=1,
        tenant=source.tenant,
        host_label=source.host_label,
    )
    lines_seen = 0
    for host in hosts[:LOKI_MAX_HOSTS]:
        if c.expired(host):
            break
        collector = _HostSample(host, window, zone)
        entry: dict[str, Any] = {"name": host, "status": "ok", "reason": None}
        try:
            sampler.scan(collector, c.deadline, None)
        except (ProviderProcessingError, ProviderTimeoutError) as exc:
            entry["status"], entry["reason"] = "failed", str(exc)
            c.problem(ERROR, host, f"the query for this host failed: {exc}")
        s = collector.sample
        lines_seen += s.lines
        entry.update(
            formats=dict(sorted(s.formats.items())),
            first=_stamp(s.first),
            last=_stamp(s.last),
            lines_sampled=s.lines,
            kernel_lines=s.kernel_lines,
        )
        if entry["status"] == "ok" and s.lines == 0:
            entry["status"] = "no_lines"
        details["hosts"].append(entry)
        formats = ", ".join(f"{k} {v}" for k, v in s.formats.most_common()) or "no lines"
        span_text = f"; {_stamp(s.first)} .. {_stamp(s.last)}" if s.first else ""
        c.text.append(f"  host {host}: {entry['status']}; {formats}{span_text}")
    details["hosts_not_listed"] = max(0, len(hosts) - LOKI_MAX_HOSTS)
    if details["hosts_not_listed"]:
        c.text.append(f"  ... and {details['hosts_not_listed']} more hosts, not queried")
    if details["hosts"] and lines_seen == 0 and not c.out_of_time:
        c.problem(
            ERROR,
            "ATTRIBUTION_LOKI_SELECTOR",
            f"matched no line of any host in the last {LOKI_WINDOW}: check that it selects the kernel log streams "
            f"and uses the label {source.host_label!r} for {{hosts}}",
        )
    return details


def _ns(value: datetime) -> int:
    delta = value - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


# ---------------------------------------------------------------- job logs

#: workload folders of the job-log directory looked at (the newest first, by modification time)
MAX_WORKLOADS_LISTED = 16


def _check_job_logs(c: _Checker, root: Path) -> dict[str, Any]:
    """The job-log tree `<dir>/<workload_id>/<attempt_index>/<node>.log*`: readable, laid out, files per attempt."""
    details: dict[str, Any] = {"dir": str(root), "workloads": [], "workloads_not_listed": 0, "skipped": []}
    c.text.append(f"job logs: {root}")
    try:
        entries = _entries(root)
    except OSError as exc:
        c.problem(
            ERROR, str(root), f"the job-log directory cannot be read ({exc.strerror}): give the Adapter read access"
        )
        return details
    workloads = []
    for entry in entries:
        kind = _kind(entry)
        if kind == "dir":
            workloads.append(entry)
        else:
            reason = kind if kind != "file" else "a file, not a workload folder"
            details["skipped"].append({"path": entry.name, "reason": reason})

    def modified(entry: os.DirEntry[str]) -> float:
        try:
            return entry.stat().st_mtime
        except OSError:
            return 0.0

    workloads.sort(key=modified, reverse=True)
    for entry in workloads[:MAX_WORKLOADS_LISTED]:
        if c.expired(f"{entry.name}/"):
            break
        try:
            attempts = _entries(Path(entry.path))
        except OSError as exc:
            c.problem(ERROR, f"{entry.name}/", f"the workload's job-log folder cannot be read ({exc.strerror})")
            continue
        for attempt in attempts:
            where = f"{entry.name}/{attempt.name}"
            if _kind(attempt) != "dir" or not attempt.name.isascii() or not attempt.name.isdigit():
                details["skipped"].append({"path": where, "reason": "not an attempt folder (<attempt_index>/)"})
                continue
            try:
                files = _entries(Path(attempt.path))
            except OSError as exc:
                c.problem(ERROR, f"{where}/", f"the attempt's job-log folder cannot be read ({exc.strerror})")
                continue
            nodes: set[str] = set()
            count = 0
            for f in files:
                parsed = parse_file_name(f.name)
                if parsed is None or _kind(f) != "file":
                    details["skipped"].append({"path": f"{where}/{f.name}", "reason": "not <node>.log[.N][.gz]"})
                    continue
                nodes.add(parsed[0])
                count += 1
            details["workloads"].append(
                {"workload_id": entry.name, "attempt_index": int(attempt.name), "files": count, "nodes": sorted(nodes)}
            )
            listed = ", ".join(sorted(nodes)[:MAX_HOSTS_LISTED]) + (" ..." if len(nodes) > MAX_HOSTS_LISTED else "")
            c.text.append(f"  workload {entry.name} attempt {attempt.name}: {count} file(s) of {len(nodes)} node(s)"
                          + (f" ({listed})" if nodes else ""))
            if not nodes:
                c.problem(WARNING, f"{where}/", "holds no <node>.log file, so this attempt's job logs are empty")
    details["workloads_not_listed"] = max(0, len(workloads) - MAX_WORKLOADS_LISTED)
    if details["workloads_not_listed"]:
        c.text.append(f"  ... and {details['workloads_not_listed']} more workload folder(s), not read")
    for item in details["skipped"][:MAX_SKIPPED_LISTED]:
        c.problem(
            WARNING, item["path"],
            f"is not read as a job log ({item['reason']}); the layout is "
            "<dir>/<workload_id>/<attempt_index>/<node>.log",
        )
    if not workloads:
        c.problem(WARNING, str(root), "holds no workload folder yet, so fast answers use kernel logs only")
    return details


# ---------------------------------------------------------------- the report


def check(
    source: object, epilog_dir: Path | None, zone: tzinfo, deadline: Deadline, job_logs: object | None = None
) -> CheckReport:
    """Check the configured log source and epilog directory; see the module docstring and docs/cli.md."""
    c = _Checker(deadline, zone)
    details: dict[str, Any] = {}
    if isinstance(source, FileSource):
        details["kernel_logs"] = _check_files(c, source)
    elif isinstance(source, LokiSource):
        details["kernel_logs"] = _check_loki(c, source, zone)
    else:
        c.text.append(f"kernel logs: a {type(source).__name__} source, which check does not know")
        details["kernel_logs"] = None
    details["epilog"] = _check_epilog(c, epilog_dir)
    if isinstance(job_logs, FileJobLogSource):
        details["job_logs"] = _check_job_logs(c, job_logs.root)
    elif isinstance(job_logs, LokiJobLogSource):
        c.text.append(f"job logs: Loki streams {job_logs.template} (read per request; not queried by check)")
        details["job_logs"] = {"loki_selector": job_logs.template}
    problems = sorted(c.problems, key=lambda p: p.severity is not ERROR)  # errors first, each kind in walk order
    errors = sum(p.severity is ERROR for p in problems)
    warnings = len(problems) - errors
    summary = f"{errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)}"
    return CheckReport(checked=True, summary=summary, text=tuple(c.text), details=details, problems=tuple(problems))


__all__ = ["check", "line_format", "sample_file", "epilog_node", "FORMATS"]
