"""Finding a window in a plain kernel log file: the search on its lines' times (each probe aimed at the log's pace),
the probes it makes, and the timestamp shapes whose lines are counted from their stamps alone (see files.py)."""

from __future__ import annotations

import os
import re
from array import array
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from typing import BinaryIO

from providers.base import (
    Deadline,
    ProviderTimeoutError,
)
from providers.telemetry.compiled import compiled
from providers.telemetry.kernel.collect import Collector
from providers.telemetry.kernel.parse import EPOCH, TimeContext, line_time, offset_zone
from providers.telemetry.kernel.sources.facts import (
    CACHE_POINTS,
    CACHE_PROBES,
    CACHE_SEARCHES,
    CACHE_SPANS,
    FileFacts,
)
from providers.telemetry.reading import GzipReader

#: the instant of the RFC 3339 stamp that starts a line, read in C (`_stamps.c`), or None where the parser's reading
#: decides (tests/telemetry/test_stamp_facts.py compares the two)
iso_time = compiled("providers.telemetry.kernel.sources._stamps").iso_time

#: the unit of the times a file's spans keep (`FileFacts.spans`)
_MICROSECOND = timedelta(microseconds=1)
#: lines are expected in time order within this much (a relay's queue or several senders in one file may
#: interleave slightly); the search starts this much early and reading stops this much late
ORDER_SLACK = timedelta(seconds=60)
#: the search stops narrowing below this many bytes and scans forward from there
SEARCH_BLOCK = 4 * 1024
#: bytes read at one probe of the search, and at most per probe when looking for a parseable line
PROBE_CHUNK = 1024
PROBE_LIMIT = 64 * 1024
#: a plain file's reading grid: its blocks (summarized, kept, counted from their stamps) start on multiples of it.
#: Much of a block's cost is its own (the cache's lookups, the bounds' bisection, the steps between blocks): a
#: 4,096-node window of 37 KiB a node was scanned in 0.34-0.46 s with blocks of 32 KiB against 0.38-0.55 s with 16
#: KiB (2026-12-07, in turns), and 64 KiB gained nothing more
READ_CHUNK = 32 * 1024
#: a "line" longer than this is cut: it is not a syslog line and must not grow the buffer without bound
MAX_LINE = 1024 * 1024


class UnknownFormat(Exception):
    """The start of a file holds no line in a known format; `line_no` is its first unreadable line."""

    def __init__(self, line_no: int) -> None:
        super().__init__(line_no)
        self.line_no = line_no


class CountingFile:
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


class PlainFile:
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


# An RFC 3339 stamp at the start of a line as parse.py reads it (`_ISO_AT_START`), up to microseconds.
_STAMP = re.compile(rb"(\d{4}-\d\d-\d\d)([T ])(\d\d:\d\d:\d\d)(?:([.,])(\d{1,6}))?(Z|z|[+-]\d\d:?\d\d)[ \t\f\v]")


_SHAPES: dict[tuple[bytes, bytes, int, bytes], re.Pattern[bytes]] = {}


def stamp_pattern(sep: bytes, fsep: bytes, digits: int, offset: bytes) -> re.Pattern[bytes]:
    """The search for the stamps of one shape in a block: one match at each newline (the block is searched with one
    put before it), the line's stamp, or b"" for a line that does not start with one (no newline is counted apart)."""
    key = (sep, fsep, digits, offset)
    pattern = _SHAPES.get(key)
    if pattern is None:
        fraction = re.escape(fsep) + rb"\d{%d}" % digits if digits else b""
        pattern = re.compile(
            rb"\n(?:(\d{4}-\d\d-\d\d" + re.escape(sep) + rb"(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d" + fraction
            + re.escape(offset) + rb")(?=[ \t\f\v])|)"
        )  # fmt: skip
        if len(_SHAPES) < 256:
            _SHAPES[key] = pattern
    return pattern


#: shapes with the bounds of recent windows (False: a shape the window cannot be written in)
_KNOWN: dict[tuple[object, ...], Shape | bool] = {}


@dataclass(frozen=True)
class Shape:
    """One timestamp shape (separators, fraction digits, offset) and the window's bounds written in it."""

    pattern: re.Pattern[bytes]
    zone: tzinfo
    start_key: bytes
    start_exact: bool  # the window's start is written exactly at this precision
    end_key: bytes
    hi_key: bytes
    #: what the pattern is made of (blocks.StampParts): separator, fraction separator, fraction digits, offset
    parts: tuple[bytes, bytes, int, bytes]

    @classmethod
    def detect(cls, data: bytes, collector: Collector, hi: datetime) -> Shape | None:
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
    ) -> Shape | bool:
        try:
            zone = offset_zone(offset.decode())
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
        parts = (sep, fsep, digits, offset)  # fsep is b"" exactly when there is no fraction (_STAMP)
        return cls(stamp_pattern(*parts), zone, keys[0], exact, keys[1], keys[2], parts)

    def holds(self, first: bytes, last: bytes) -> bool:
        """Every stamp from `first` to `last` (in order) lies in the window, as count_before and the end key judge."""
        return (first >= self.start_key if self.start_exact else first > self.start_key) and last <= self.end_key

    def count_before(self, ordered: list[bytes], low: int, high: int) -> int:
        """The index in [low, high) of the first stamp not before the window's start."""
        if self.start_exact:
            return bisect_left(ordered, self.start_key, low, high)
        # Written less precisely than the start: a stamp equal to the start's truncation lies before it.
        return bisect_right(ordered, self.start_key, low, high)


def check_deadline(deadline: Deadline) -> None:
    if deadline.expired:
        raise ProviderTimeoutError("reading the kernel logs did not finish in time")


def first_unreadable(f: PlainFile) -> int | None:
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


def _line_time(raw: bytes, ctx: TimeContext) -> datetime | None:
    """`parse.line_time`: a line starting with an RFC 3339 stamp in its usual shape read in C (1.9 us with the
    datetime made, the parser's reading 6 us), any other by the parser."""
    if raw[:1].isdigit():
        micro = iso_time(raw)
        if micro is not None:
            return EPOCH + timedelta(microseconds=micro)
    return line_time(raw, ctx)


def first_time(f: GzipReader, ctx: TimeContext) -> tuple[datetime | None, bool]:
    """The first parseable timestamp within the first PROBE_LIMIT bytes of a stream, and whether it (and every
    line before it) was read without the TimeContext."""
    data = f.read(PROBE_LIMIT)
    lines = data.split(b"\n")
    free = True
    for raw in lines[:-1] if len(lines) > 1 else lines:
        free = free and _context_free(raw)
        value = _line_time(raw, ctx)
        if value is not None:
            return value, free
    if data.strip():
        raise UnknownFormat(next((i for i, raw in enumerate(lines, start=1) if raw.strip()), 1))
    return None, free


def probe_known(f: PlainFile, pos: int, end: int, ctx: TimeContext, facts: FileFacts) -> tuple[int, datetime | None]:
    """_probe, answered from the file's facts when this probe was made before (with this TimeContext if it matters)."""
    known = facts.probes.get((pos, end))
    if known is not None and (known[2] is None or known[2] == ctx):
        return known[0], known[1]
    start, value, free = _probe(f, pos, end, ctx)
    if len(facts.probes) < CACHE_PROBES:
        facts.probes[(pos, end)] = (start, value, None if free else ctx)
    return start, value


def _probe(f: PlainFile, pos: int, end: int, ctx: TimeContext) -> tuple[int, datetime | None, bool]:
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
        value = _line_time(data[:nl], ctx)
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


#: how far before a grid line `grid_block_start` looks for the newline that ends the block before it
GRID_LOOK_BACK = 4096


def grid_block_start(f: PlainFile, offset: int) -> int:
    """Where the block holding the line at `offset` starts on the file's READ_CHUNK grid: after the last newline
    before the grid line at or below `offset` (the reader cuts its blocks there: reader.forward_plain). A window
    starting anywhere in that block then reads it under the key an earlier window kept its summary under, instead of
    a block of its own analysed anew. Reading from there is reading earlier than the search found, which is always
    safe. `offset` itself when no newline lies within GRID_LOOK_BACK bytes before that grid line."""
    grid = offset - offset % READ_CHUNK
    if grid == 0:
        return 0
    back = f.pread(max(0, grid - GRID_LOOK_BACK), min(GRID_LOOK_BACK, grid))
    newline = back.rfind(b"\n")
    return grid - len(back) + newline + 1 if newline >= 0 else offset


def search_offset(
    f: PlainFile, size: int, target: datetime, deadline: Deadline, ctx: TimeContext, facts: FileFacts,
    first: tuple[int, datetime | None] | None = None,
) -> int:
    """A byte offset at or before the first line at or after `target`, within SEARCH_BLOCK (and a READ_CHUNK) of it.
    When the file was searched before (a window read in it earlier), that is where a block holding the line found
    starts (`_known_block_start`): an earlier reading's first block, or the block on the file's grid: the blocks read
    for the earlier window are read under the keys they were kept under. A file met for the first time is read from
    the line found: a fresh worker does not analyse more of each file than the window needs. `first` is where the
    file's first line with a time starts and that time (the probe at its start), when known (a time None: none found).

    The search starts between the lines earlier searches found (`FileFacts.points`) nearest the target on either
    side: the latest one before it and the first one at or after it. A window moved by less than a few lines' time
    is found without a probe; one moved further, by the probes between them only. Where two lines' times are known,
    the next probe goes where the target's time lies between them at their pace (`_aim`): a log written at an even
    pace is found in a few probes instead of a bisection's nine over 2 MiB; after two such steps that did not halve
    the range, a step halves it, so that an uneven log costs at most three times a bisection's probes."""
    key = (target, ctx)
    known = facts.searches.get(key)
    if known is not None:
        return known
    spanned = _spanned(facts, target)
    if spanned is not None:
        if len(facts.searches) < CACHE_SEARCHES:
            facts.searches[key] = spanned
        return spanned
    points = facts.points
    below, above = _bounds(points, target, size)
    lo, hi = below[0], above[0]
    if first is not None and first[1] is not None and below[1] is None and first[0] < hi:
        if first[1] >= target:
            hi = 0  # the first line with a time is at or after the target: the file is read from its start
        else:
            below = first
            lo = max(lo, first[0])
    pace = below  # the first line with a known time before the target: the pace when none after it is known
    slow = 0  # aimed steps in a row that did not halve the range: after two, a step halves it
    while hi - lo > SEARCH_BLOCK:
        check_deadline(deadline)
        aim = None if slow >= 2 else _aim(below, above, pace, target)
        # an aim is kept half a SEARCH_BLOCK from either end: a probe that lands on the near side of the target's
        # line leaves less than a SEARCH_BLOCK to search
        mid = (lo + hi) // 2 if aim is None else min(max(aim, lo + SEARCH_BLOCK // 2), hi - SEARCH_BLOCK // 2)
        width = hi - lo
        start, ts, free = _probe(f, mid, hi, ctx)
        if ts is not None and free and start < hi:
            points[start] = ts
        if ts is not None and ts < target and start < hi:
            lo, below = start, (start, ts)
            if pace[1] is None:
                pace = below
        else:
            # At or past the target, or nothing readable near here: searching earlier is always safe.
            hi = mid
            above = (start, ts) if ts is not None and ts >= target else (hi, None)
        slow = slow + 1 if aim is not None and hi - lo > width // 2 else 0
    if len(points) > CACHE_POINTS:
        nearest = sorted(points, key=lambda at: abs(at - lo))[:CACHE_POINTS]
        facts.points = {at: points[at] for at in nearest}
    if facts.searches:
        lo = _known_block_start(f, lo, facts)
    if len(facts.searches) < CACHE_SEARCHES:
        facts.searches[key] = lo
    return lo


#: a line known by where it starts and its time (None: not known)
Point = tuple[int, datetime | None]


def _aim(below: Point, above: Point, pace: Point, target: datetime) -> int | None:
    """Where the line of `target`'s time is expected after the line `below` (before the target): at the pace the
    log was written between it and `above` (a line at or after the target), or, that line's time unknown, between
    `pace` (a line before `below`) and it; None when no two times known are in order."""
    lo, t_lo = below
    if t_lo is None:
        return None
    hi, t_hi = above
    if t_hi is not None and t_hi > t_lo and hi > lo:
        return lo + int((hi - lo) * ((target - t_lo) / (t_hi - t_lo)))
    early, t_early = pace
    if t_early is not None and t_early < t_lo and early < lo:
        return lo + int((lo - early) * ((target - t_lo) / (t_lo - t_early)))
    return None


def learn_span(facts: FileFacts, start: int, end: int, first: bytes, last: bytes) -> None:
    """Keep in `facts` that the bytes [start, end) of the file are whole lines in time order whose first and last
    lines' stamps are `first` and `last` (a block the reader counted from its stamps: RFC 3339 stamps of one
    `Shape`, which carry their zone and are read without the TimeContext): a later search for a time they hold is
    answered from them (`_spanned`). A block kept already stays where it is: the oldest learnt is dropped first."""
    spans = facts.spans
    k = _span_at(spans, start)
    if k >= 0:
        if spans[k + 1] == end:
            return
        del spans[k : k + 4]  # the file's bytes there are another block now
    try:
        low, high = _microseconds(first), _microseconds(last)
    except ValueError:
        return
    if high < low:
        return
    spans.extend((start, end, low, high))
    if len(spans) > 4 * CACHE_SPANS:
        del spans[:4]


def _microseconds(stamp: bytes) -> int:
    """An RFC 3339 stamp of a `Shape` (date, `T` or a blank, the time of day, up to 6 fraction digits after `.` or
    `,`, `Z` or an offset) as microseconds since the epoch: the instant `parse.line_time` reads from it."""
    micro = iso_time(stamp + b" ")
    if micro is not None:
        return micro  # type: ignore[no-any-return]
    return (datetime.fromisoformat(stamp.decode("ascii").replace("z", "Z")) - EPOCH) // _MICROSECOND


def _span_at(spans: array[int], start: int) -> int:
    """Where in `spans` (four numbers a block) the block starting at `start` is, or -1: searched in C among the
    blocks' starts alone (a time or an end equal to `start` is not one)."""
    try:
        return spans[::4].index(start) * 4
    except ValueError:
        return -1


def _spanned(facts: FileFacts, target: datetime) -> int | None:
    """Where a block read before starts (`FileFacts.spans`) when the first line at or after `target` lies in it with
    a line before `target` ahead of it: its first line is before `target` and its last at or after it, or its last
    is before `target` and the block that follows it (one read before, too) starts at or after it. Reading from
    there reads the line found and a line before it, within the block's bytes, as a search would. None when no
    block read before says so."""
    spans = facts.spans[:]  # a copy taken at once: another thread may add to them meanwhile
    if not spans:
        return None
    at = (target - EPOCH) // _MICROSECOND
    for k in range(0, len(spans), 4):
        if spans[k + 2] < at:
            if at <= spans[k + 3]:
                return spans[k]
            after = _span_at(spans, spans[k + 1])
            if after >= 0 and at <= spans[after + 2]:
                return spans[k]
    return None


def _known_block_start(f: PlainFile, offset: int, facts: FileFacts) -> int:
    """Where to read from for the line at `offset` in a file searched before: the latest earlier search's answer at
    or before it within its block on the grid, where an earlier window's reading started a block whose summary was
    kept under that offset (a file met first is read from the line its search found, not from the grid); else
    where the block holding it starts on the grid (`grid_block_start`)."""
    grid = grid_block_start(f, offset)
    # a copy taken at once: another thread may add to the facts of the same file meanwhile
    started = [at for at in list(facts.searches.values()) if grid <= at <= offset]
    return max(started) if started else grid


def _bounds(points: dict[int, datetime], target: datetime, size: int) -> tuple[Point, Point]:
    """Where the search for `target` starts: the latest line known before it and the first one known at or after it
    (lines found by earlier probes), each with its time; the whole file (times unknown) when none is known, or when
    the lines known go back in time across the target."""
    below: Point = (0, None)
    above: Point = (size, None)
    for at, ts in list(points.items()):  # a copy taken at once: another thread may add to them meanwhile
        if at >= size:
            continue
        if ts < target:
            if at >= below[0]:
                below = (at, ts)
        elif at < above[0]:
            above = (at, ts)
    return (below, above) if below[0] < above[0] else ((0, None), (size, None))
