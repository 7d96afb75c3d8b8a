"""The `files` source: a central rsyslog server's directory, read by binary search on byte offsets.

A request's cost follows its window: a file is found by a binary search on its lines' times, and inside the window
the lines of a host's file that carry one timestamp shape, hold no keyword (collect.KEYWORDS) and share their kernel
stamp with no other line are counted from their timestamps alone; only the other lines go through the line parser.
Directory listings and what the search learnt about a file are kept between requests, keyed by the file's identity
(device, inode, size, modification time). A plain file is read on a fixed grid of READ_CHUNK bytes, so its blocks of
whole lines fall in the same places whatever the window; what a block holds apart from any window is kept too
(blocks.py), so a request over unchanged or appended logs, with any window, reads only the blocks no earlier request
met.
"""

from __future__ import annotations

import errno
import gzip
import logging
import os
import re
import stat
import threading
import zlib
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from functools import lru_cache
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
from providers.kernel_log.kernel.collect import Collector
from providers.kernel_log.kernel.parse import ParsedLine, TimeContext, is_continuation, line_time, parse_line
from providers.kernel_log.kernel.sources.blocks import (
    BLOCK_CACHE_BYTES,
    Block,
    BlockCache,
    analyse,
    host_names,
    lines_naming,
    sorted_stamps,
)
from providers.kernel_log.kernel.sources.facts import (
    CACHE_ENTRIES,
    CACHE_PROBES,
    CACHE_SEARCHES,
    FactCache,
    FileFacts,
    Proof,
    keep_recent,
)

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
    path: str
    origin: str  # the path relative to the directory, as warnings and evidence name it
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


@lru_cache(maxsize=4096)
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


class _Plain:
    """A plain file read by position (`os.pread`, no buffer to fill and drop on every seek), counting the bytes it
    hands out; the reads a plain file's search and window take, at most READ_CHUNK or PROBE_LIMIT at a time."""

    def __init__(self, fd: int, collector: Collector) -> None:
        self.fd = fd
        self._collector = collector
        self._pos = 0

    def read(self, size: int) -> bytes:
        data = os.pread(self.fd, size, self._pos)
        self._pos += len(data)
        self._collector.bytes_read += len(data)
        return data

    def pread(self, at: int, size: int) -> bytes:
        data = os.pread(self.fd, size, at)
        self._collector.bytes_read += len(data)
        return data

    def seek(self, offset: int) -> None:
        self._pos = offset


class FileSource:
    """Reads `<dir>/<host>/*`, `<dir>/<host>[.log]*` and combined files such as `<dir>/kern.log*`."""

    evidence_source = "syslog"

    def __init__(
        self,
        root: Path,
        combined: tuple[str, ...] = DEFAULT_COMBINED,
        cache_entries: int = CACHE_ENTRIES,
        by_stamps: bool = True,
        block_bytes: int = BLOCK_CACHE_BYTES,
    ) -> None:
        self.root = root
        self.combined = frozenset(combined)
        #: listings and per-file facts kept between requests (0 entries: nothing kept)
        self.cache = FactCache(cache_entries)
        #: analysed blocks of per-host files kept between requests (0 bytes: nothing kept)
        self.blocks = BlockCache(block_bytes if cache_entries > 0 else 0)
        #: count blocks of plain noise lines from their timestamps (False: parse every line of the window)
        self.by_stamps = by_stamps
        #: host folder name -> (the listing it was worked out from, its files by rotation group)
        self._groups: OrderedDict[str, tuple[list[tuple[str, str, bool, bool]], list[tuple[str, list[LogFile]]]]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()

    # ------------------------------------------------------------ layout

    def plan(self, collector: Collector, proof: Proof | None = None) -> list[tuple[str | None, list[LogFile]]]:
        """The rotation groups to read: (forced node or None for combined files, files newest first). The folders
        listed are recorded in `proof`, if given."""
        groups: dict[tuple[str, str | None, str], list[LogFile]] = {}
        try:
            entries = self.cache.listing(str(self.root), strict=False, proof=proof)
        except OSError as exc:
            raise ProviderProcessingError(
                "the kernel log directory could not be read", kind=SourceFailure.UNREADABLE
            ) from exc
        for name, path, is_dir, is_file in entries:
            if is_dir:
                node = collector.node_for(name)
                if node is None:
                    continue  # a host outside the scope: never opened
                try:
                    inner = self.cache.listing(path, strict=True, proof=proof)
                except OSError:
                    log.warning("kernel log folder %s could not be read; skipped", name)
                    collector.mark_unreadable(node)
                    continue
                for base, files in self._folder_groups(name, inner):
                    groups[(name, node, base)] = files
            elif is_file:
                base, gz, order = _rotation(name)
                if base in self.combined:
                    node = None
                else:
                    stem = base[: -len(".log")] if base.endswith(".log") else base
                    node = collector.node_for(stem)
                    if node is None:
                        continue
                groups.setdefault(("", node, base), []).append(LogFile(path, name, gz, order))
        return [
            (node, files if name else sorted(files, key=lambda f: f.order))
            for (name, node, _), files in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][2]))
        ]

    def _folder_groups(self, name: str, listing: list[tuple[str, str, bool, bool]]) -> list[tuple[str, list[LogFile]]]:
        """A host folder's files by rotation group, each newest first; worked out once for each listing the cache
        hands out (a changed folder is listed again, as a new list)."""
        known = self._groups.get(name)
        if known is not None and known[0] is listing:
            return known[1]
        groups: dict[str, list[LogFile]] = {}
        for sub_name, sub_path, _, is_file in listing:
            if is_file:
                base, gz, order = _rotation(sub_name)
                groups.setdefault(base, []).append(LogFile(sub_path, f"{name}/{sub_name}", gz, order))
        out = [(base, sorted(files, key=lambda f: f.order)) for base, files in groups.items()]
        with self._lock:
            keep_recent(self._groups, name, (listing, out), self.cache.entries)
        return out

    def read_name(self, name: str, top_level: bool) -> LogName:
        """How a file `name` found at the top of the directory (or inside a host folder) is read; for `check`."""
        base, gz, order = _rotation(name)
        host = None
        if top_level and base not in self.combined:
            host = base[: -len(".log")] if base.endswith(".log") else base
        return LogName(base, gz, order, host)

    # ------------------------------------------------------------ reading

    def scan(
        self, collector: Collector, deadline: Deadline, trace: TraceContext | None = None, proof: Proof | None = None
    ) -> None:
        """Read the window of every planned file into the collector; every folder listed and file read is recorded
        in `proof`, if given."""
        for node, files in self.plan(collector, proof):
            self._read_group(node, files, collector, deadline, proof)
        collector.finish()

    def _read_group(
        self, node: str | None, files: list[LogFile], collector: Collector, deadline: Deadline, proof: Proof | None
    ) -> None:
        lo = shifted(collector.window.start, -ORDER_SLACK)
        hi = shifted(collector.window.end, ORDER_SLACK)
        newer_first: datetime | None = None  # first line time of the next newer file of the rotation
        for log_file in files:
            _check(deadline)
            # File times are not used: copies and checkouts reset them; the lines' own times decide.
            if newer_first is not None and newer_first < lo:
                break  # everything in this and older files precedes the newer file's first line
            reader = _Reader(collector, node, log_file.origin, hi, deadline, proof)
            if not self.by_stamps:
                reader._shape = False
            elif node is None:  # a combined file: only lines that can be the scope's hosts' are parsed
                reader.hosts = host_names(collector.names.short_names)
            try:
                if log_file.gz:
                    newer_first = reader.read_gz(log_file.path, lo, self.cache)
                else:
                    newer_first = reader.read_plain(log_file.path, lo, self.cache, self.blocks)
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


@dataclass(frozen=True)
class _BlockPlace:
    """Where a plain file's analysed blocks are kept: the cache, the file's path and lineage, and the end of the
    bytes kept blocks may cover (BlockCache.lineage)."""

    path: str
    lineage: int
    valid: int
    cache: BlockCache


class _Reader:
    """Reads one file into the collector: its lines, their continuations, and where the window lies."""

    def __init__(
        self,
        collector: Collector,
        node: str | None,
        origin: str,
        hi: datetime,
        deadline: Deadline,
        proof: Proof | None = None,
    ) -> None:
        self.collector = collector
        self.proof = proof
        self.node = node
        self.origin = origin
        self.hi = hi
        self.deadline = deadline
        self.ctx: TimeContext = collector.time_context
        self.previous: tuple[str, object] | None = None  # (node, parsed) of the last stamped line
        self.nodes_seen: set[str] = set()
        #: the timestamp shape of the file's blocks and its window bounds (None: none tried yet; False: unusable)
        self._shape: _Shape | None | bool = None
        #: for a combined file: a search for the scope's short names (None: every line is parsed)
        self.hosts: re.Pattern[bytes] | None = None

    def close(self) -> None:
        for node in self.nodes_seen:
            self.collector.end_origin(node, self.origin)

    def read_gz(self, path: str, lo: datetime, cache: FactCache) -> datetime | None:
        # A gzip stream cannot seek: look at its first line, skip it when it starts after the window, else
        # stream it from the top and stop past the window's end.
        with open(path, "rb") as raw:
            st = os.fstat(raw.fileno())
            if self.proof is not None:
                self.proof.saw(path, st)
            facts = cache.facts(path, st)
            known = facts.gz_first
            if known is not None and (known[2] is None or known[2] == self.ctx):
                first, unknown, _ = known
            else:
                stream = gzip.GzipFile(fileobj=_Counter(raw, self.collector), mode="rb")  # type: ignore[arg-type]
                try:
                    first, free = _first_time(stream, self.ctx)
                    unknown = None
                except UnknownFormat as exc:
                    first, free, unknown = None, False, exc.line_no
                facts.gz_first = (first, unknown, None if free else self.ctx)
            if unknown is not None:
                raise UnknownFormat(unknown)
            if first is not None and first > self.hi:
                return first
            raw.seek(0)
            stream = gzip.GzipFile(fileobj=_Counter(raw, self.collector), mode="rb")  # type: ignore[arg-type]
            self.forward(_chunks(stream))
        return first

    def read_plain(self, path: str, lo: datetime, cache: FactCache, blocks: BlockCache) -> datetime | None:
        # Not blocking: a file replaced by a FIFO since it was listed must not hold the thread until a writer comes.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            f = _Plain(fd, self.collector)
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise OSError(errno.EINVAL, "not a regular file", path)
            if self.proof is not None:
                self.proof.saw(path, st)
            size = st.st_size
            if size == 0:
                return None
            number, valid = blocks.lineage(path, st, f.pread)
            facts = cache.facts(path, st, number, valid)
            _, first = _probe_known(f, 0, size, self.ctx, facts)
            if first is None:
                line_no = _first_unreadable(f)
                if line_no is None:
                    return None  # only blank lines: nothing to read, nothing unreadable
                raise UnknownFormat(line_no)
            if first > self.hi:
                return first
            offset = _search(f, size, lo, self.deadline, self.ctx, facts)
            self.forward_plain(f, offset, _BlockPlace(path, number, valid, blocks))
        finally:
            os.close(fd)
        return first

    def forward_plain(self, f: _Plain, offset: int, place: _BlockPlace) -> None:
        """`forward` over a plain file from `offset`, reading on a fixed grid of READ_CHUNK bytes so that blocks of
        whole lines fall in the same places whatever the window; a block analysed before is taken from `place`'s
        cache instead of being read again (the block's bytes, from the file of the same identity)."""
        start = offset  # the file offset of the first byte of `rest`
        rest = b""
        while True:
            _check(self.deadline)
            if self.node is not None and self._shape is not False:
                cached = self._cached_block(start, place)
                if cached is not None:
                    if self.apply(cached):
                        return
                    # `rest` held no newline, so the block reaches past it: reading goes on where the block ends.
                    start, rest = cached.end, b""
                    continue
            at = start + len(rest)
            f.seek(at)
            chunk = f.read(READ_CHUNK - at % READ_CHUNK)
            if not chunk:
                break
            data = rest + chunk
            cut = data.rfind(b"\n")
            if cut < 0:
                rest = data
                if len(rest) > MAX_LINE:  # not a syslog line: dropped, never a buffer without bound
                    start, rest = start + len(rest), b""
                continue
            block = self._new_block(data, cut + 1, start, place)
            rest = data[cut + 1 :]
            start += cut + 1
            if self.apply(block) if block is not None else self.block(data, cut + 1):
                return
        if rest:
            self.feed(rest)

    def _shape_of(self, first: bytes) -> _Shape | None:
        """The file's stamp shape, found from the first block the reader meets (`first` starts with its first
        line) and kept for the file's later blocks; None when it has none the window can be written in."""
        if self._shape is None:
            self._shape = _Shape.detect(first, self.collector, self.hi) or False
        return self._shape if isinstance(self._shape, _Shape) else None

    def _cached_block(self, start: int, place: _BlockPlace) -> Block | None:
        block = place.cache.get((place.path, place.lineage, start))
        if block is None or block.end > place.valid:
            return None
        shape = self._shape if isinstance(self._shape, _Shape) else self._shape_of(block.lines[0])
        if shape is None:
            return replace(block, stamps=None)  # no usable shape: every line is parsed
        return block if block.pattern == shape.pattern.pattern else None

    def _new_block(self, data: bytes, end: int, start: int, place: _BlockPlace) -> Block | None:
        """The analysed block of `data[:end]` (kept in the cache), or None when it is read line by line anyway."""
        if self.node is None or self._shape is False:
            return None
        shape = self._shape_of(data)
        if shape is None:
            return None
        block = analyse(data[:end] if end < len(data) else data, start + end, shape.pattern)
        place.cache.put((place.path, place.lineage, start), block)
        return block

    def apply(self, block: Block) -> bool:
        """Feed an analysed block; True when reading should stop."""
        if block.stamps is None:
            if len(block.parsed) == len(block.lines):  # every line kept parsed
                return any(self.take(*block.parsed[i]) for i in range(len(block.lines)))
            return any(self.feed(raw) for raw in block.lines)
        assert isinstance(self._shape, _Shape)
        return self._by_stamps(block, self._shape)

    def forward(self, chunks: Iterator[bytes]) -> None:
        """Feed lines in order until the first one later than the window's end (still fed, for coverage)."""
        rest = b""
        for chunk in chunks:
            _check(self.deadline)
            data = rest + chunk
            cut = data.rfind(b"\n")
            if cut < 0:
                rest = data
            else:
                rest = data[cut + 1 :]
                if self.block(data, cut + 1):
                    return
            if len(rest) > MAX_LINE:
                rest = b""
        if rest:
            self.feed(rest)

    def block(self, data: bytes, end: int) -> bool:
        """Feed the whole lines `data[:end]` (`end` just after a newline); True when reading should stop."""
        if self.node is not None and self._shape is not False:
            done = self._block_by_stamps(data, end)
            if done is not None:
                return done
        elif self.hosts is not None and self._shape is not False:
            done = self._combined_by_stamps(data, end, self.hosts)
            if done is not None:
                return done
        for raw in data[: end - 1].split(b"\n"):
            if self.feed(raw):
                return True
        return False

    def _block_by_stamps(self, data: bytes, end: int) -> bool | None:
        """The fast way through a block of one node's lines, or None when the block does not qualify (blocks.py)."""
        shape = self._shape_of(data)
        if shape is None:
            return None
        block = analyse(data[:end] if end < len(data) else data, end, shape.pattern)
        if block.stamps is None:
            return None
        return self._by_stamps(block, shape)

    def _combined_by_stamps(self, data: bytes, end: int, hosts: re.Pattern[bytes]) -> bool | None:
        """A block of a combined file, or None when it does not qualify: only the lines that can be a scope host's
        are parsed.

        It qualifies as a host's block does (every line starts with a stamp of one shape, in time order, ASCII, no
        NUL), so every line parses as a stamped line of its own. A line holding no scope node's short name is then
        another host's: reading it would only forget the previous line (which matters to a line without a stamp,
        and the block has none) and, past the reading bound, stop; so the lines up to the bound that name no scope
        node are left out, the first and last line and those past the bound are fed as they are.
        """
        shape = self._shape_of(data)
        if shape is None:
            return None
        view = data[:end] if end < len(data) else data
        ordered = sorted_stamps(view, shape.pattern)
        if ordered is None:
            return None
        lines = view[:-1].split(b"\n")
        n = len(lines)
        stop = bisect_right(ordered, shape.hi_key, 1, n - 1)  # lines [1, stop) are not past the reading bound
        for i in (0, *(i for i in lines_naming(view, hosts) if 1 <= i < stop), *range(stop, n)):
            if self.feed(lines[i]):
                return True
        return False

    def _by_stamps(self, block: Block, shape: _Shape) -> bool:
        """Feed a block that qualifies (blocks.py): every line's stamp has one shape, in time order, ASCII, no NUL.

        A line whose `[seconds]` values occur nowhere else in the block shares its kernel stamp with no other line,
        so it neither continues a record nor is continued: it starts a record of its own, which is never kept when
        it holds no keyword, and only its time counts. Those lines are counted by bisecting the stamps. The first and
        the last line, the marked lines (keyword lines, lines holding a repeated `[seconds]` value) and the lines
        from the first one past the reading bound on are fed one by one, so the state left is exact.
        """
        ordered, parsed, marked = block.stamps, block.parsed, block.marked
        assert ordered is not None
        n = len(ordered)
        node = self.node
        assert node is not None
        if not marked and shape.holds(ordered[0], ordered[-1]):
            (first_text, first), (last_text, last) = parsed[0], parsed[n - 1]
            if first is not None and last is not None:
                # Wholly inside the window, nothing marked: the first line (which may continue the open record),
                # n - 2 lines each a record of its own, the last line (which the next block may continue; its
                # kernel stamp is not the first line's, so it closes the record the first line left open).
                collector, origin = self.collector, self.origin
                collector.add_parsed(node, first, first_text, origin)
                collector.add_heads(node, 0, n - 2, 0)
                collector.add_parsed(node, last, last_text, origin)
                self.nodes_seen.add(node)
                self.previous = (node, last)
                return False  # the window's end is not past the reading bound
        if self.take(*parsed[0]):
            return True
        stop = bisect_right(ordered, shape.hi_key, 1, n - 1)  # lines [1, stop) are not past the reading bound
        low = 1
        for k in [*(i for i in marked if 1 <= i < stop), stop] if marked else (stop,):
            if low < k:
                self.collector.end_origin(node, self.origin)  # the open record is followed by a new one
                before = shape.count_before(ordered, low, k)
                upto = bisect_right(ordered, shape.end_key, low, k)
                self.collector.add_heads(node, before - low, upto - before, k - upto)
            if k < stop and self.take(*parsed[k]):
                return True
            low = k + 1
        for i in range(stop, n):
            if self.take(*block.parsed_line(i)):
                return True
        return False

    def feed(self, raw: bytes) -> bool:
        """Feed one line; True when it is past the window's end and reading should stop."""
        text = raw.decode("utf-8", "replace").rstrip("\r").replace("\x00", "")
        return self.take(text, parse_line(text, self.ctx))

    def take(self, text: str, parsed: ParsedLine | None) -> bool:
        """Take one line as text and parsed; True when it is past the window's end and reading should stop."""
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


# An RFC 3339 stamp at the start of a line as parse.py reads it (`_ISO_AT_START`), up to microseconds.
_STAMP = re.compile(rb"(\d{4}-\d\d-\d\d)([T ])(\d\d:\d\d:\d\d)(?:([.,])(\d{1,6}))?(Z|z|[+-]\d\d:?\d\d)[ \t\f\v]")
_SHAPES: dict[tuple[bytes, bytes, int, bytes], re.Pattern[bytes]] = {}
#: shapes with the bounds of recent windows (False: a shape the window cannot be written in)
_KNOWN: dict[tuple[object, ...], _Shape | bool] = {}


@dataclass(frozen=True)
class _Shape:
    """One timestamp shape (separators, fraction digits, offset) and the window's bounds written in it."""

    pattern: re.Pattern[bytes]
    zone: tzinfo
    start_key: bytes
    start_exact: bool  # the window's start is written exactly at this precision
    end_key: bytes
    hi_key: bytes

    @classmethod
    def detect(cls, data: bytes, collector: Collector, hi: datetime) -> _Shape | None:
        m = _STAMP.match(data)
        if m is None:
            return None
        sep, fsep, frac, offset = m.group(2), m.group(4) or b"", m.group(5) or b"", m.group(6)
        known_key = (sep, fsep, len(frac), offset, collector.window, hi)
        known = _KNOWN.get(known_key)
        if known is None:
            known = cls._make(sep, fsep, frac, offset, collector, hi)
            if len(_KNOWN) >= 256:
                _KNOWN.clear()
            _KNOWN[known_key] = known
        return known or None

    @classmethod
    def _make(
        cls, sep: bytes, fsep: bytes, frac: bytes, offset: bytes, collector: Collector, hi: datetime
    ) -> _Shape | bool:
        try:
            zone: tzinfo = UTC if offset in (b"Z", b"z") else _offset(offset.decode())
        except ValueError:
            return False
        digits = len(frac)
        keys = []
        for bound in (collector.window.start, collector.window.end, hi):
            local = bound.astimezone(zone)
            if not 1000 <= local.year <= 9999:
                return False
            text = local.isoformat(sep.decode(), "seconds")[:19]  # the date, `sep` and the time of day
            if digits:
                text += fsep.decode() + f"{local.microsecond:06d}"[:digits]
            keys.append((text + offset.decode()).encode())
        start = collector.window.start.astimezone(zone)
        exact = start.microsecond % 10 ** (6 - digits) == 0
        key = (sep, fsep, digits, offset)
        pattern = _SHAPES.get(key)
        if pattern is None:
            # A match starts at a newline (the block is searched with one put before it): as many matches as lines
            # means every line starts with a stamp.
            fraction = re.escape(fsep) + rb"\d{%d}" % digits if digits else b""
            pattern = re.compile(
                rb"\n(\d{4}-\d\d-\d\d" + re.escape(sep) + rb"(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d" + fraction
                + re.escape(offset) + rb")(?=[ \t\f\v])"
            )  # fmt: skip
            if len(_SHAPES) < 256:
                _SHAPES[key] = pattern
        return cls(pattern, zone, keys[0], exact, keys[1], keys[2])

    def holds(self, first: bytes, last: bytes) -> bool:
        """Every stamp from `first` to `last` (in order) lies in the window, as count_before and the end key judge."""
        return (first >= self.start_key if self.start_exact else first > self.start_key) and last <= self.end_key

    def count_before(self, ordered: list[bytes], low: int, high: int) -> int:
        """The index in [low, high) of the first stamp not before the window's start."""
        if self.start_exact:
            return bisect_left(ordered, self.start_key, low, high)
        # Written less precisely than the start: a stamp equal to the start's truncation lies before it.
        return bisect_right(ordered, self.start_key, low, high)


@lru_cache(maxsize=64)
def _offset(text: str) -> tzinfo:
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    return timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))


def _check(deadline: Deadline) -> None:
    if deadline.expired:
        raise ProviderTimeoutError("reading the kernel logs did not finish in time")


def _chunks(f: _Counter | gzip.GzipFile) -> Iterator[bytes]:
    while True:
        chunk = f.read(READ_CHUNK)
        if not chunk:
            return
        yield chunk


def _first_unreadable(f: _Plain) -> int | None:
    """The number of the first non-empty line at the start of a file that holds no known format (None: all blank)."""
    f.seek(0)
    for number, raw in enumerate(f.read(PROBE_LIMIT).split(b"\n"), start=1):
        if raw.strip():
            return number
    return None


#: first bytes of lines whose time parse.py reads without the TimeContext (RFC 3339 stamps, journal JSON)
_CONTEXT_FREE = frozenset(b"0123456789{")


def _context_free(raw: bytes) -> bool:
    return not raw or raw[0] in _CONTEXT_FREE


def _first_time(f: gzip.GzipFile, ctx: TimeContext) -> tuple[datetime | None, bool]:
    """The first parseable timestamp within the first PROBE_LIMIT bytes of a stream, and whether it (and every
    line before it) was read without the TimeContext."""
    data = f.read(PROBE_LIMIT)
    lines = data.split(b"\n")
    free = True
    for raw in lines[:-1] if len(lines) > 1 else lines:
        free = free and _context_free(raw)
        value = line_time(raw, ctx)
        if value is not None:
            return value, free
    if data.strip():
        raise UnknownFormat(next((i for i, raw in enumerate(lines, start=1) if raw.strip()), 1))
    return None, free


def _probe_known(f: _Plain, pos: int, end: int, ctx: TimeContext, facts: FileFacts) -> tuple[int, datetime | None]:
    """_probe, answered from the file's facts when this probe was made before (with this TimeContext if it matters)."""
    known = facts.probes.get((pos, end))
    if known is not None and (known[2] is None or known[2] == ctx):
        return known[0], known[1]
    start, value, free = _probe(f, pos, end, ctx)
    if len(facts.probes) < CACHE_PROBES:
        facts.probes[(pos, end)] = (start, value, None if free else ctx)
    return start, value


def _probe(f: _Plain, pos: int, end: int, ctx: TimeContext) -> tuple[int, datetime | None, bool]:
    """(start, time) of the first parseable line starting at or after `pos` (looking at most PROBE_LIMIT bytes), and
    whether every line looked at was read without the TimeContext."""
    free = True
    if pos > 0:
        f.seek(pos - 1)
        data = f.read(PROBE_CHUNK)
        base = pos - 1
        nl = data.find(b"\n")
        while nl < 0 and len(data) < PROBE_LIMIT:
            more = f.read(PROBE_CHUNK)
            if not more:
                return end, None, free
            data += more
            nl = data.find(b"\n")
        if nl < 0:
            return end, None, free
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
        free = free and _context_free(data[:nl])
        value = line_time(data[:nl], ctx)
        if value is not None:
            return line_start, value, free
        line_start += nl + 1
        consumed += nl + 1
        data = data[nl + 1 :]
        if not data:
            data = f.read(PROBE_CHUNK)
            if not data:
                break
    return line_start, None, free


def _search(f: _Plain, size: int, target: datetime, deadline: Deadline, ctx: TimeContext, facts: FileFacts) -> int:
    """A byte offset at or before the first line at or after `target`, within SEARCH_BLOCK of it."""
    key = (target, ctx)
    known = facts.searches.get(key)
    if known is not None:
        return known
    lo, hi = 0, size
    while hi - lo > SEARCH_BLOCK:
        _check(deadline)
        mid = (lo + hi) // 2
        start, ts = _probe_known(f, mid, hi, ctx, facts)
        if ts is not None and ts < target and start < hi:
            lo = start
        else:
            # At or past the target, or nothing readable near here: searching earlier is always safe.
            hi = mid
    if len(facts.searches) < CACHE_SEARCHES:
        facts.searches[key] = lo
    return lo
