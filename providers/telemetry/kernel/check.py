"""`check` for the kernel signal's files source: what each host's files hold, the way the source would read them.

It reports per host and per file: the line formats, the time range, unreadable lines and skipped files. Every read is
bounded: the head and tail of each file, a bounded number of files per host, a bounded stream through a `.gz`.
"""

from __future__ import annotations

import gzip
import os
import re
import zlib
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

from providers.base import CheckSeverity, shifted
from providers.telemetry.checking import (
    ERROR,
    MAX_FILES_PER_HOST,
    MAX_HOSTS_LISTED,
    MAX_SKIPPED_LISTED,
    WARNING,
    Checker,
    span,
    stamp,
    tally,
)
from providers.telemetry.identity import NodeNames
from providers.telemetry.kernel.collect import KERNEL_TAG
from providers.telemetry.kernel.parse import ParsedLine, TimeContext, is_continuation, parse_line
from providers.telemetry.kernel.sources.files import FileSource, LogName
from providers.telemetry.kernel.sources.search import ORDER_SLACK
from providers.telemetry.reading import (
    GzipReader,
    NotRegular,
    entry_kind,
    list_folder,
    nested_holds_anything,
    open_regular,
    whole_lines,
)

#: bytes read from the start and from the end of a plain file (the source itself decides a file's format from its
#: first 64 KiB)
HEAD_BYTES = 64 * 1024
TAIL_BYTES = 64 * 1024
#: decompressed bytes streamed through one `.gz` at most, looking for its last line and a cut or corrupt stream
GZ_STREAM_BYTES = 16 * 1024 * 1024
GZ_CHUNK = 256 * 1024
#: lines parsed from each end of a host's plain file longer than HEAD_BYTES + TAIL_BYTES: enough for its format and
#: its time span (the file is one host's: its host names are that host's); a fleet's thousands of files are checked in
#: seconds (the rest of the head is parsed only when none of these is in a known format, as the source looks that far
#: for one)
END_LINES = 16
#: bytes read first from each end for those lines (more of the head when they are not enough)
END_BYTES = 16 * 1024

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
_RFC5424_START = re.compile(r"<[0-9]{1,3}>1 ")
# Plain dmesg: seconds since boot (optionally after `dmesg --decode`'s facility and level): never placed in time.
_PLAIN_DMESG = re.compile(r"(?:[a-z0-9]+ *: *[a-z]+ *: ?)?\[ *[0-9]+\.[0-9]+\] ")


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
            "first": stamp(s.first),
            "last": stamp(s.last),
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


def sample_file(path: Path, relative: str, gz: bool, ctx: TimeContext, ends: bool = False) -> FileReport:
    """Read the head and tail of one file (a bounded stream of a `.gz`) and say what its lines are; with `ends`, of a
    plain file longer than the head and tail only its first and last END_LINES lines (a host's own file)."""
    report = FileReport(relative, compressed=gz)
    try:
        handle, size = open_regular(path)
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
            elif ends and size > HEAD_BYTES + TAIL_BYTES:
                _sample_ends(handle, size, report, ctx)
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
    report.sample.feed(whole_lines(handle.read(HEAD_BYTES), True, False), 1, ctx)
    _judge_head(report)
    handle.seek(size - TAIL_BYTES)
    report.sample.feed(whole_lines(handle.read(TAIL_BYTES), False, True), None, ctx)


def _sample_ends(handle: BinaryIO, size: int, report: FileReport, ctx: TimeContext) -> None:
    """The first and last END_LINES lines of a long file; the rest of its first HEAD_BYTES too when none of those
    first lines is in a known format (the format is judged on the head, as the source judges it)."""
    report.sampled = "head_and_tail"
    raw = handle.read(END_BYTES)
    head = whole_lines(raw, True, False)
    cut = _after_lines(head, END_LINES)
    report.sample.feed(head[:cut], 1, ctx)
    if not report.sample.parsed:
        rest = whole_lines(raw[cut:] + handle.read(HEAD_BYTES - END_BYTES), True, False)
        report.sample.feed(rest, 1 + head[:cut].count(b"\n"), ctx)
        _judge_head(report)
    handle.seek(size - END_BYTES)
    tail = whole_lines(handle.read(END_BYTES), False, True)
    cut = _before_lines(tail, END_LINES)
    report.sample.feed(tail[cut:], None, ctx)


def _after_lines(data: bytes, lines: int) -> int:
    """Where the `lines`-th line of `data` (whole lines) ends: all of it when it holds fewer."""
    at = 0
    for _ in range(lines):
        at = data.find(b"\n", at) + 1
        if at == 0:
            return len(data)
    return at


def _before_lines(data: bytes, lines: int) -> int:
    """Where the last `lines` lines of `data` (whole lines, ending in a newline) start."""
    at = len(data) - 1
    for _ in range(lines):
        at = data.rfind(b"\n", 0, at)
        if at < 0:
            return 0
    return at + 1


def _sample_gz(handle: BinaryIO, report: FileReport, ctx: TimeContext) -> None:
    reader = GzipReader(handle, max_inflated=GZ_STREAM_BYTES)
    head = reader.read(HEAD_BYTES)
    rest = reader.read(GZ_CHUNK)
    if not rest:
        report.sample.feed(head, 1, ctx)
        return
    report.sample.feed(whole_lines(head, True, False), 1, ctx)
    _judge_head(report)
    # Stream on (bounded), keeping the last TAIL_BYTES, to reach the last line and a cut or corrupt end.
    tail = reader.tail(TAIL_BYTES, GZ_CHUNK, kept=rest)
    if not reader.complete:
        report.sampled = "head"  # the stream goes on past the bound: its end was not read
        return
    report.sampled = "head_and_tail"
    report.sample.feed(whole_lines(tail, False, True), None, ctx)


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


def _describe_file(f: FileReport) -> str:
    s = f.sample
    parts = [f.status]
    if s.formats:
        parts.append(", ".join(f"{fmt} {n}" if len(s.formats) > 1 else fmt for fmt, n in s.formats.most_common()))
    if s.first is not None:
        end = stamp(s.last) if f.sampled != "head" else f"at least {stamp(s.last)}"
        parts.append(f"{stamp(s.first)} .. {end}")
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


def _file_problems(c: Checker, f: FileReport, combined: bool) -> None:
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


def check_files(c: Checker, source: FileSource) -> dict[str, Any]:
    """What the files source would read under its directory, per host and per combined file."""
    ctx = TimeContext(zone=c.zone)  # no request window: a line without a year takes the one nearest now
    root = source.root
    details: dict[str, Any] = {"source": "files", "log_dir": str(root), "hosts": [], "combined": [], "skipped": []}
    entries = c.folder(root, "log directory")
    if entries is None:
        return details
    c.say(f"kernel logs: files source, {root}")
    hosts: list[HostReport] = []
    combined: dict[str, list[tuple[LogName, str, Path]]] = {}
    per_host_files: dict[str, list[tuple[LogName, str, Path]]] = {}
    skipped: list[dict[str, str]] = []

    def skip(where: str, reason: str, severity: CheckSeverity | None) -> None:
        skipped.append({"path": where, "reason": reason})
        if severity is not None:
            c.problem(severity, where, f"is skipped by the source: {reason}")

    _read_ends_ahead(c, entries)
    for entry in entries:
        kind = entry_kind(entry)
        if kind == "dir":
            hosts.append(_check_folder(c, ctx, source, entry, skip))
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
        _read_group(c, ctx, report, found, combined=False)
        hosts.append(report)
    hosts.sort(key=lambda h: (h.name.lower(), h.layout))
    combined_reports: list[FileReport] = []
    for _, found in sorted(combined.items()):
        group = HostReport("", "combined")
        _read_group(c, ctx, group, found, combined=True)
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
    _summary(c, hosts, combined_reports, skipped)
    for host in hosts:
        layout = f"folder {host.name}/" if host.layout == "folder" else "per-host file"
        c.detail(f"  host {host.name} ({layout})")
        for f in host.files:
            c.detail(f"    {_describe_file(f)}")
        if host.files_not_listed:
            c.detail(f"    ... and {host.files_not_listed} older files, not read")
    for f in combined_reports:
        names = sorted(f.sample.hosts)
        shown = ", ".join(names[:MAX_HOSTS_LISTED]) + (
            f" and {len(names) - MAX_HOSTS_LISTED} more" if len(names) > MAX_HOSTS_LISTED else ""
        )
        c.detail(f"  combined {_describe_file(f)}; hosts: {shown or 'none'}")
    for item in skipped[:MAX_SKIPPED_LISTED]:
        c.detail(f"  skipped {item['path']}: {item['reason']}")
    if len(skipped) > MAX_SKIPPED_LISTED:
        c.detail(f"  ... and {len(skipped) - MAX_SKIPPED_LISTED} more skipped")
    details["hosts"] = [h.to_json() for h in hosts]
    details["combined"] = [f.to_json(with_hosts=True) for f in combined_reports]
    details["skipped"] = skipped[:MAX_SKIPPED_LISTED]
    details["skipped_not_listed"] = max(0, len(skipped) - MAX_SKIPPED_LISTED)
    details.setdefault("combined_not_listed", 0)
    return details


def _read_ends_ahead(c: Checker, entries: list[os.DirEntry[str]]) -> None:
    """Ask the kernel to read both ends of the host folders' files ahead (`posix_fadvise`), before they are sampled
    one by one: a fleet's thousands of files not in the page cache are then read side by side, not one at a time."""
    for count, entry in enumerate(entries):
        if count % 256 == 0 and c.deadline.expired:
            return
        try:
            if not entry.is_dir():
                continue
            with os.scandir(entry.path) as inner:
                paths = sorted(e.path for e in inner if e.is_file())[: MAX_FILES_PER_HOST * 2]
        except OSError:
            continue  # the check itself says what is wrong
        for path in paths:
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            except OSError:
                continue
            try:
                size = os.fstat(fd).st_size
                os.posix_fadvise(fd, 0, END_BYTES, os.POSIX_FADV_WILLNEED)
                if size > END_BYTES:
                    os.posix_fadvise(fd, size - END_BYTES, END_BYTES, os.POSIX_FADV_WILLNEED)
            except OSError:
                pass
            finally:
                os.close(fd)


def _summary(c: Checker, hosts: list[HostReport], combined: list[FileReport], skipped: list[dict[str, str]]) -> None:
    """The files source's part of the summary: hosts and files counted by status, the time their lines span."""
    folders = sum(h.layout == "folder" for h in hosts)
    files = [f for h in hosts for f in h.files]
    older = sum(h.files_not_listed for h in hosts)
    statuses = Counter(f.status for f in files)
    line = f"  hosts: {len(hosts)} ({folders} in folders, {len(hosts) - folders} in per-host files)"
    if hosts:
        line += f"; their files: {len(files)} read ({tally(statuses) or 'none'})"
        line += f", {older} older not read" if older else ""
    c.say(line)
    if combined:
        named = {h for f in combined for h in f.sample.hosts}
        c.say(f"  combined files: {len(combined)} read ({tally(Counter(f.status for f in combined))}); "
              f"hosts named in their lines: {len(named)}")
    read = [f.sample for f in files + combined if f.sample.first is not None]
    first = min((s.first for s in read if s.first is not None), default=None)
    last = max((s.last for s in read if s.last is not None), default=None)
    c.say(f"  lines span {span(first, last)}")
    if skipped:
        c.say(f"  skipped: {len(skipped)} entr{'y' if len(skipped) == 1 else 'ies'} (each that matters is a problem)")


def _check_folder(c: Checker, ctx: TimeContext, source: FileSource, entry: os.DirEntry[str], skip: Any) -> HostReport:
    report = HostReport(entry.name, "folder")
    try:
        inner = list_folder(Path(entry.path))
    except OSError as exc:
        c.problem(
            ERROR, f"{entry.name}/", f"the host folder cannot be read ({exc.strerror}): give the Adapter read access"
        )
        return report
    found: list[tuple[LogName, str, Path]] = []
    nested = False
    for sub in inner:
        where = f"{entry.name}/{sub.name}"
        kind = entry_kind(sub)
        if kind == "file":
            found.append((source.read_name(sub.name, top_level=False), where, Path(sub.path)))
        elif kind == "dir":
            holds = nested_holds_anything(sub.path)
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
    _read_group(c, ctx, report, found, combined=False)
    return report


def _read_group(
    c: Checker, ctx: TimeContext, report: HostReport, found: list[tuple[LogName, str, Path]], combined: bool
) -> None:
    # Newest first, as the source reads a rotation group; a bounded number is read and the rest counted.
    found.sort(key=lambda item: (item[0].order, item[0].base, item[1]))
    for name, relative, path in found[:MAX_FILES_PER_HOST]:
        if c.expired(relative):
            report.files_not_listed += 1
            continue
        f = sample_file(path, relative, name.gz, ctx, ends=not combined)
        _file_problems(c, f, combined)
        report.files.append(f)
    report.files_not_listed += max(0, len(found) - MAX_FILES_PER_HOST)
    if report.layout != "combined":
        _host_name_problems(c, report)
        _order_problems(c, report, [name for name, _, _ in found[:MAX_FILES_PER_HOST]])
        if report.files and all(f.status == "empty" for f in report.files):
            c.problem(WARNING, report.name, "its files hold no line yet, so its node has no telemetry")


def _order_problems(c: Checker, report: HostReport, names: list[LogName]) -> None:
    """A rotated file holding lines later than the start of the next newer file of its group: the source reads a
    group newest first and stops at the first file that starts before the window, so such lines can be missed."""
    newer: dict[str, FileReport] = {}
    for name, f in zip(names, report.files, strict=False):
        before = newer.get(name.base)
        if f.status == "ok" and f.sample.last is not None:
            if before is not None and before.sample.first is not None and f.sample.last > shifted(
                before.sample.first, ORDER_SLACK
            ):
                c.problem(
                    WARNING,
                    f.path,
                    f"holds lines up to {stamp(f.sample.last)}, later than the start of the newer {before.path} "
                    f"({stamp(before.sample.first)}): the files are out of rotation order, and the source, which "
                    "reads a rotation newest first, can miss such lines",
                )
            newer[name.base] = f


def _host_name_problems(c: Checker, report: HostReport) -> None:
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


