"""The `files` source: a central rsyslog server's directory, read by binary search on byte offsets."""

from __future__ import annotations

import gzip
import logging
import os
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import BinaryIO

from providers.base import (
    Deadline,
    ProviderProcessingError,
    ProviderTimeoutError,
    SourceFailure,
    TraceContext,
    shifted,
)
from providers.kernel_log.collect import Collector
from providers.kernel_log.parse import TimeContext, is_continuation, line_time, parse_line

log = logging.getLogger("attribution_adapter.kernel_log")

#: lines are expected in time order within this much (a relay's queue or several senders in one file may
#: interleave slightly); the search starts this much early and reading stops this much late
ORDER_SLACK = timedelta(seconds=60)
#: the binary search stops narrowing below this many bytes and scans forward from there
SEARCH_BLOCK = 4 * 1024
#: bytes read at one probe of the search, and at most per probe when looking for a parseable line
PROBE_CHUNK = 1024
PROBE_LIMIT = 64 * 1024
READ_CHUNK = 16 * 1024
#: a "line" longer than this is cut: it is not a syslog line and must not grow the buffer without bound
MAX_LINE = 1024 * 1024
#: default base names of files that hold many hosts
DEFAULT_COMBINED = ("kern.log", "kernel.log", "syslog", "messages", "all.log")

# `<base>` with an optional rotation suffix: `.N`, `-YYYYMMDD` (logrotate dateext), then `.gz`.
_ROTATED = re.compile(r"^(?P<base>.+?)(?:\.(?P<num>\d+)|-(?P<date>\d{8}))?(?P<gz>\.gz)?$")


@dataclass(frozen=True)
class LogFile:
    path: Path
    gz: bool
    order: tuple[int, int]  # newest first when sorted ascending


@dataclass(frozen=True)
class LogName:
    """How the source reads a file name: its rotation group, whether it is gzip, its place in the rotation."""

    base: str
    gz: bool
    order: tuple[int, int]  # newest first when sorted ascending
    #: the host a top-level per-host file names (`<host>[.log]`); None for a combined file or inside a host folder
    host: str | None


class UnknownFormat(Exception):
    """The start of a file holds no line in a known format; `line_no` is its first unreadable line."""

    def __init__(self, line_no: int) -> None:
        super().__init__(line_no)
        self.line_no = line_no


def _rotation(name: str) -> tuple[str, bool, tuple[int, int]]:
    m = _ROTATED.match(name)
    assert m is not None  # the pattern matches every non-empty name
    if m.group("num"):
        order = (1, int(m.group("num")))
    elif m.group("date"):
        order = (2, -int(m.group("date")))
    else:
        order = (0, 0)
    return m.group("base"), bool(m.group("gz")), order


class _Counter:
    """A read-only file wrapper that counts the bytes it hands out (gzip reads through it)."""

    def __init__(self, raw: BinaryIO, collector: Collector) -> None:
        self._raw = raw
        self._collector = collector

    def read(self, size: int = -1) -> bytes:
        data = self._raw.read(size)
        self._collector.bytes_read += len(data)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._raw.seek(offset, whence)

    def tell(self) -> int:
        return self._raw.tell()


class FileSource:
    """Reads `<dir>/<host>/*`, `<dir>/<host>[.log]*` and combined files such as `<dir>/kern.log*`."""

    evidence_source = "syslog"

    def __init__(self, root: Path, combined: tuple[str, ...] = DEFAULT_COMBINED) -> None:
        self.root = root
        self.combined = frozenset(combined)

    # ------------------------------------------------------------ layout

    def plan(self, collector: Collector) -> list[tuple[str | None, list[LogFile]]]:
        """The rotation groups to read: (forced node or None for combined files, files newest first)."""
        groups: dict[tuple[str, str | None, str], list[LogFile]] = {}
        try:
            entries = list(os.scandir(self.root))
        except OSError as exc:
            raise ProviderProcessingError(
                "the kernel log directory could not be read", kind=SourceFailure.UNREADABLE
            ) from exc
        for entry in entries:
            try:
                is_dir = entry.is_dir()
                is_file = entry.is_file()
            except OSError:
                continue
            if is_dir:
                node = collector.node_for(entry.name)
                if node is None:
                    continue  # a host outside the scope: never opened
                try:
                    inner = [sub for sub in os.scandir(entry.path) if sub.is_file()]
                except OSError:
                    log.warning("kernel log folder %s could not be read; skipped", entry.name)
                    collector.mark_unreadable(node)
                    continue
                for sub in inner:
                    base, gz, order = _rotation(sub.name)
                    groups.setdefault((entry.name, node, base), []).append(LogFile(Path(sub.path), gz, order))
            elif is_file:
                base, gz, order = _rotation(entry.name)
                if base in self.combined:
                    node = None
                else:
                    stem = base[: -len(".log")] if base.endswith(".log") else base
                    node = collector.node_for(stem)
                    if node is None:
                        continue
                groups.setdefault(("", node, base), []).append(LogFile(Path(entry.path), gz, order))
        return [
            (node, sorted(files, key=lambda f: f.order))
            for (_, node, _), files in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][2]))
        ]

    def read_name(self, name: str, top_level: bool) -> LogName:
        """How a file `name` found at the top of the directory (or inside a host folder) is read; for `check`."""
        base, gz, order = _rotation(name)
        host = None
        if top_level and base not in self.combined:
            host = base[: -len(".log")] if base.endswith(".log") else base
        return LogName(base, gz, order, host)

    # ------------------------------------------------------------ reading

    def scan(self, collector: Collector, deadline: Deadline, trace: TraceContext | None = None) -> None:
        """Read the window of every planned file into the collector."""
        for node, files in self.plan(collector):
            self._read_group(node, files, collector, deadline)
        collector.finish()

    def _read_group(self, node: str | None, files: list[LogFile], collector: Collector, deadline: Deadline) -> None:
        lo = shifted(collector.window.start, -ORDER_SLACK)
        hi = shifted(collector.window.end, ORDER_SLACK)
        newer_first: datetime | None = None  # first line time of the next newer file of the rotation
        for log_file in files:
            _check(deadline)
            # File times are not used: copies and checkouts reset them; the lines' own times decide.
            if newer_first is not None and newer_first < lo:
                break  # everything in this and older files precedes the newer file's first line
            reader = _Reader(collector, node, log_file.path.relative_to(self.root).as_posix(), hi, deadline)
            try:
                if log_file.gz:
                    newer_first = reader.read_gz(log_file.path, lo)
                else:
                    newer_first = reader.read_plain(log_file.path, lo)
            except UnknownFormat as exc:
                log.warning(
                    "kernel log file %s has no line in a known format (first unreadable line %d); skipped",
                    reader.origin,
                    exc.line_no,
                )
                collector.mark_unreadable(node)
                newer_first = None
            except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
                # One broken, corrupt or vanished file breaks only itself: the other files' lines stand.
                log.warning("kernel log file %s could not be read (%s); skipped", reader.origin, type(exc).__name__)
                collector.mark_unreadable(node)
                newer_first = None
            finally:
                reader.close()


class _Reader:
    """Reads one file into the collector: its lines, their continuations, and where the window lies."""

    def __init__(self, collector: Collector, node: str | None, origin: str, hi: datetime, deadline: Deadline) -> None:
        self.collector = collector
        self.node = node
        self.origin = origin
        self.hi = hi
        self.deadline = deadline
        self.ctx: TimeContext = collector.time_context
        self.previous: tuple[str, object] | None = None  # (node, parsed) of the last stamped line
        self.nodes_seen: set[str] = set()

    def close(self) -> None:
        for node in self.nodes_seen:
            self.collector.end_origin(node, self.origin)

    def read_gz(self, path: Path, lo: datetime) -> datetime | None:
        # A gzip stream cannot seek: look at its first line, skip it when it starts after the window, else
        # stream it from the top and stop past the window's end.
        with path.open("rb") as raw:
            first = _first_time(gzip.GzipFile(fileobj=_Counter(raw, self.collector), mode="rb"), self.ctx)  # type: ignore[arg-type]
        if first is not None and first > self.hi:
            return first
        with path.open("rb") as raw:
            stream = gzip.GzipFile(fileobj=_Counter(raw, self.collector), mode="rb")  # type: ignore[arg-type]
            self.forward(_chunks(stream))
        return first

    def read_plain(self, path: Path, lo: datetime) -> datetime | None:
        with path.open("rb") as raw:
            f = _Counter(raw, self.collector)
            size = os.fstat(raw.fileno()).st_size
            if size == 0:
                return None
            _, first = _probe(f, 0, size, self.ctx)
            if first is None:
                line_no = _first_unreadable(f)
                if line_no is None:
                    return None  # only blank lines: nothing to read, nothing unreadable
                raise UnknownFormat(line_no)
            if first > self.hi:
                return first
            offset = _search(f, size, lo, self.deadline, self.ctx)
            f.seek(offset)
            self.forward(_chunks(f))
        return first

    def forward(self, chunks: Iterator[bytes]) -> None:
        """Feed lines in order until the first one later than the window's end (still fed, for coverage)."""
        rest = b""
        for chunk in chunks:
            _check(self.deadline)
            rest += chunk
            lines = rest.split(b"\n")
            rest = lines.pop()
            if len(rest) > MAX_LINE:
                rest = b""
            for raw in lines:
                if self.feed(raw):
                    return
        if rest:
            self.feed(rest)

    def feed(self, raw: bytes) -> bool:
        """Feed one line; True when it is past the window's end and reading should stop."""
        text = raw.decode("utf-8", "replace").rstrip("\r").replace("\x00", "")
        parsed = parse_line(text, self.ctx)
        if parsed is None:
            if self.previous is not None and is_continuation(text, self.previous[1]):  # type: ignore[arg-type]
                self.collector.add_continuation(self.previous[0], text, self.origin)
            return False  # another unreadable line: skipped, never fatal
        node = self.node if self.node is not None else self.collector.node_for(parsed.host)
        if node is None:
            self.previous = None
            return parsed.observed_at > self.hi
        self.nodes_seen.add(node)
        self.collector.add_parsed(node, parsed, text, self.origin)
        self.previous = (node, parsed)
        return parsed.observed_at > self.hi


def _check(deadline: Deadline) -> None:
    if deadline.expired:
        raise ProviderTimeoutError("reading the kernel logs did not finish in time")


def _chunks(f: _Counter | gzip.GzipFile) -> Iterator[bytes]:
    while True:
        chunk = f.read(READ_CHUNK)
        if not chunk:
            return
        yield chunk


def _first_unreadable(f: _Counter) -> int | None:
    """The number of the first non-empty line at the start of a file that holds no known format (None: all blank)."""
    f.seek(0)
    for number, raw in enumerate(f.read(PROBE_LIMIT).split(b"\n"), start=1):
        if raw.strip():
            return number
    return None


def _first_time(f: gzip.GzipFile, ctx: TimeContext) -> datetime | None:
    """The first parseable timestamp within the first PROBE_LIMIT bytes of a stream."""
    data = f.read(PROBE_LIMIT)
    lines = data.split(b"\n")
    for raw in lines[:-1] if len(lines) > 1 else lines:
        value = line_time(raw, ctx)
        if value is not None:
            return value
    if data.strip():
        raise UnknownFormat(next((i for i, raw in enumerate(lines, start=1) if raw.strip()), 1))
    return None


def _probe(f: _Counter, pos: int, end: int, ctx: TimeContext) -> tuple[int, datetime | None]:
    """(start, time) of the first parseable line starting at or after `pos` (looking at most PROBE_LIMIT bytes)."""
    if pos > 0:
        f.seek(pos - 1)
        data = f.read(PROBE_CHUNK)
        base = pos - 1
        nl = data.find(b"\n")
        while nl < 0 and len(data) < PROBE_LIMIT:
            more = f.read(PROBE_CHUNK)
            if not more:
                return end, None
            data += more
            nl = data.find(b"\n")
        if nl < 0:
            return end, None
        line_start = base + nl + 1
        data = data[nl + 1 :]
    else:
        f.seek(0)
        data = f.read(PROBE_CHUNK)
        line_start = 0
    consumed = 0
    while line_start < end and consumed < PROBE_LIMIT:
        nl = data.find(b"\n")
        if nl < 0:
            more = f.read(PROBE_CHUNK)
            if not more:
                nl = len(data)
            else:
                data += more
                continue
        value = line_time(data[:nl], ctx)
        if value is not None:
            return line_start, value
        line_start += nl + 1
        consumed += nl + 1
        data = data[nl + 1 :]
        if not data:
            data = f.read(PROBE_CHUNK)
            if not data:
                break
    return line_start, None


def _search(f: _Counter, size: int, target: datetime, deadline: Deadline, ctx: TimeContext) -> int:
    """A byte offset at or before the first line at or after `target`, within SEARCH_BLOCK of it."""
    lo, hi = 0, size
    while hi - lo > SEARCH_BLOCK:
        _check(deadline)
        mid = (lo + hi) // 2
        start, ts = _probe(f, mid, hi, ctx)
        if ts is not None and ts < target and start < hi:
            lo = start
        else:
            # At or past the target, or nothing readable near here: searching earlier is always safe.
            hi = mid
    return lo
