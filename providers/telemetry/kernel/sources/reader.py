"""Reading one kernel log file's window into the collector: the plain file's blocks (kept as summaries, counted from
their stamps where they can be) and a gzip stream's lines; what `FileSource` (files.py) hands each file to."""

from __future__ import annotations

import errno
import logging
import os
import re
import stat
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from providers.base import (
    Deadline,
)
from providers.telemetry.kernel.collect import Collector
from providers.telemetry.kernel.parse import ParsedLine, TimeContext, is_continuation, parse_line
from providers.telemetry.kernel.sources.blocks import (
    BRACKET,
    Block,
    BlockCache,
    BoundsKey,
    analyse,
    line_after,
    lines_naming,
    sorted_stamps,
)
from providers.telemetry.kernel.sources.facts import (
    CACHE_SPANS,
    FactCache,
    FileFacts,
    Proof,
)
from providers.telemetry.kernel.sources.search import (
    MAX_LINE,
    READ_CHUNK,
    CountingFile,
    PlainFile,
    Shape,
    UnknownFormat,
    check_deadline,
    first_time,
    first_unreadable,
    learn_span,
    probe_known,
    search_offset,
)
from providers.telemetry.reading import GzipReader

log = logging.getLogger("attribution_adapter.telemetry")


@dataclass(frozen=True)
class BlockPlace:
    """Where a plain file's block summaries are kept: the cache, the file's path and lineage, and the end of the
    bytes kept blocks may cover (BlockCache.lineage)."""

    path: str
    lineage: int
    valid: int
    cache: BlockCache


class Reader:
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
        self._shape: Shape | None | bool = None
        #: for a combined file: a search for the scope's short names (None: every line is parsed)
        self.hosts: re.Pattern[bytes] | None = None
        #: for a combined file: a scope host's line before this time (the search's target, the window's start less
        #: ORDER_SLACK) does not show that the host's log reaches back before the window. Which of those lines are
        #: read depends on where reading starts (the line the search found, or the block holding it on the grid, as
        #: the file facts kept say); the lines from the target on are read wherever it starts
        self.since: datetime | None = None
        #: the last line of a block counted from its summary, its record not yet opened (`_inside`): its bytes (None:
        #: read from `_file`), where it starts and ends, its `[seconds]` values
        self.pending: tuple[bytes | None, int, int, tuple[bytes, ...]] | None = None
        self._file: PlainFile | None = None
        #: the facts of the plain file being read, where its first blocks counted from their stamps are kept as spans
        #: (the next window, a later failure's, starts a little after this one), and how many more are kept
        self._facts: FileFacts | None = None
        self._spans_left = CACHE_SPANS

    def close(self) -> None:
        self.pending = None  # a record holding no keyword: nothing kept when its file ends
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
                try:
                    first, free = first_time(GzipReader(CountingFile(raw, self.collector)), self.ctx)  # type: ignore[arg-type]
                    unknown = None
                except UnknownFormat as exc:
                    first, free, unknown = None, False, exc.line_no
                facts.gz_first = (first, unknown, None if free else self.ctx)
            if unknown is not None:
                raise UnknownFormat(unknown)
            if first is not None and first > self.hi:
                return first
            raw.seek(0)
            self.forward(GzipReader(CountingFile(raw, self.collector)).chunks(READ_CHUNK))  # type: ignore[arg-type]
        return first

    def read_plain(self, path: str, lo: datetime, cache: FactCache, blocks: BlockCache) -> datetime | None:
        # Not blocking: a file replaced by a FIFO since it was listed must not hold the thread until a writer comes.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            f = PlainFile(fd, self.collector)
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
            at, first = probe_known(f, 0, size, self.ctx, facts)
            if first is None:
                line_no = first_unreadable(f)
                if line_no is None:
                    return None  # only blank lines: nothing to read, nothing unreadable
                raise UnknownFormat(line_no)
            if first > self.hi:
                return first
            offset = search_offset(f, size, lo, self.deadline, self.ctx, facts, (at, first))
            self._facts = facts
            self.forward_plain(f, offset, BlockPlace(path, number, valid, blocks))
        finally:
            os.close(fd)
        return first

    def forward_plain(self, f: PlainFile, offset: int, place: BlockPlace) -> None:
        """`forward` over a plain file from `offset`, reading on a fixed grid of READ_CHUNK bytes so that blocks of
        whole lines fall in the same places whatever the window; a block whose summary was kept (`place`'s cache,
        from the file of the same identity) is counted from it when it lies wholly inside the window, else its bytes
        are read again and only the lines its summary marks and those at the window's edges are parsed."""
        self._file = f
        start = offset  # the file offset of the first byte of `rest`
        rest = b""
        while True:
            check_deadline(self.deadline)
            if self.node is not None and self._shape is not False:
                cached = self._cached_block(start, place)
                if cached is not None:
                    done = self._kept(f, start, cached, place)
                    if done is not None:
                        self._learn(start, cached)
                    if done is None:
                        cached = None  # its bytes are not what the summary says: read as a new block
                    elif done:
                        return
                    else:
                        # `rest` held no newline, so the block reaches past it: reading goes on where it ends.
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
            view = data[: cut + 1] if cut + 1 < len(data) else data
            rest = data[cut + 1 :]
            done = self._new_block(view, start, place)
            start += cut + 1
            if done:
                return
        if rest:
            self.feed(rest)

    def _shape_of(self, first: bytes) -> Shape | None:
        """The file's stamp shape, found from the first block the reader meets (`first` starts with its first
        line) and kept for the file's later blocks; None when it has none the window can be written in."""
        if self._shape is None:
            self._shape = Shape.detect(first, self.collector, self.hi) or False
        return self._shape if isinstance(self._shape, Shape) else None

    def _cached_block(self, start: int, place: BlockPlace) -> Block | None:
        """The kept summary of the block starting at `start`, when it covers bytes known unchanged and was made for
        the file's stamp shape."""
        block = place.cache.get((place.path, place.lineage, start))
        if block is None or block.end > place.valid:
            return None
        # The first line starts with its stamp, followed by a blank (the pattern's lookahead).
        shape = self._shape if isinstance(self._shape, Shape) else self._shape_of(block.first + b" ")
        return block if shape is not None and block.pattern == shape.pattern.pattern else None

    def _kept(self, f: PlainFile, start: int, block: Block, place: BlockPlace) -> bool | None:
        """Feed a block from its kept summary (reading its bytes again unless it lies wholly inside the window with
        nothing marked, or the window's bounds were found in it before); True when reading should stop, None when
        its bytes no longer match the summary."""
        shape = self._shape
        assert isinstance(shape, Shape)
        bounds = None
        if not block.marked:
            if shape.holds(block.first, block.last):
                done = self._inside(block, None)
                if done is not None:
                    return done
            bounds = (place.path, place.lineage, start, shape.start_key, shape.start_exact, shape.end_key, shape.hi_key)
            found = place.cache.bounds.get(bounds)
            if found is not None and block.first <= shape.hi_key and not self._continues(block.first_brackets):
                return self._at_bounds(block, found, start)
        # The bytes are those the summary was made from (the lineage vouches for them); what is checked guards
        # against a file rewritten while it is read: the length, the first and last stamps, and for a block whose
        # marked lines are taken where the summary says they start, that a line starts there.
        data = f.pread(start, block.end - start)
        last = data.rfind(b"\n", 0, len(data) - 1) + 1
        if (
            len(data) != block.end - start
            or not data.endswith(b"\n")
            or not data.startswith(block.first)
            or data[last : last + len(block.last)] != block.last
            or any(at and data[at - 1] != 10 for at in block.marked_at)  # 10: a newline
        ):
            return None
        return self._by_stamps(block, data, shape, inside_tried=True, bounds=(place.cache, bounds))

    def _new_block(self, view: bytes, start: int, place: BlockPlace) -> bool:
        """Feed the whole lines `view` read from file offset `start`, keeping the block's summary when it can be
        counted from its stamps; True when reading should stop."""
        if self.node is None or self._shape is False:
            return self.block(view, len(view))
        shape = self._shape_of(view)
        block = None if shape is None else analyse(view, start + len(view), shape.pattern, shape.parts)
        if block is None:
            return any(self.feed(raw) for raw in view[:-1].split(b"\n"))
        assert shape is not None
        place.cache.put((place.path, place.lineage, start), block)
        self._learn(start, block)
        bounds = (place.path, place.lineage, start, shape.start_key, shape.start_exact, shape.end_key, shape.hi_key)
        return self._by_stamps(block, view, shape, bounds=(place.cache, bounds))

    def _learn(self, start: int, block: Block) -> None:
        """Keep the span of one of the first CACHE_SPANS blocks of the reading counted from their stamps (kept or
        analysed now; it starts at file offset `start`) in the file's facts, for the search of a later window
        (search.learn_span)."""
        if self._facts is not None and self._spans_left > 0:
            self._spans_left -= 1
            learn_span(self._facts, start, block.end, block.first, block.last)

    def forward(self, chunks: Iterator[bytes]) -> None:
        """Feed lines in order until the first one later than the window's end (still fed, for coverage)."""
        rest = b""
        for chunk in chunks:
            check_deadline(self.deadline)
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
            shape = self._shape_of(data)
            view = data[:end] if end < len(data) else data
            block = None if shape is None else analyse(view, end, shape.pattern, shape.parts)
            if block is not None:
                assert shape is not None
                return self._by_stamps(block, view, shape)
        elif self.hosts is not None and self._shape is not False:
            done = self._combined_by_stamps(data, end, self.hosts)
            if done is not None:
                return done
        for raw in data[: end - 1].split(b"\n"):
            if self.feed(raw):
                return True
        return False

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

    def _by_stamps(
        self,
        block: Block,
        data: bytes,
        shape: Shape,
        inside_tried: bool = False,
        bounds: tuple[BlockCache, BoundsKey | None] | None = None,
    ) -> bool:
        """Feed a block that qualifies (blocks.py): every line's stamp has one shape, in time order, ASCII, no NUL.
        `data` is its bytes (whole lines).

        A line whose `[seconds]` values occur nowhere else in the block shares its kernel stamp with no other line
        of it, so it continues no record but (the first line) the one open before the block, and is continued by
        none but (the last line) the next block's first: it starts a record of its own, which is never kept when it
        holds no keyword, and only its time counts. Those lines are counted from where the window's bounds fall in
        the block (`blocks.line_after`, a bisection of its bytes). The marked lines (keyword lines, lines holding a
        repeated `[seconds]` value), the first line when it may continue the open record, and the lines from the
        first one past the reading bound on are fed one by one, so the state left is exact; the last line, when
        counted inside the window, is left `pending` (`_inside`). A block wholly inside the window with nothing
        marked is counted from its summary alone (`_inside`). Where the bounds fell in a block with nothing marked is
        kept under `bounds` (the cache and the block's key with the window's bounds), for a next request with the
        same window (`_at_bounds`).
        """
        marked = block.marked
        last_at = data.rfind(b"\n", 0, len(data) - 1) + 1
        if not inside_tried and not marked and shape.holds(block.first, block.last):
            done = self._inside(block, data[last_at:-1])
            if done is not None:
                return done
        n = block.count
        node = self.node
        assert node is not None
        self.nodes_seen.add(node)
        hi_key, first, last = shape.hi_key, block.first, block.last
        if (marked and marked[0] == 0) or first > hi_key or self._continues(block.first_brackets):
            if self.take(*self._parsed(data[: data.find(b"\n")])):
                return True
            low = 1
        else:
            low = 0  # counted with the lines after it
        # Where the bounds fall: the first line not before the window's start, the first past its end, the first
        # past the reading bound (each a line index, and for the last its offset), found only when inside the block.
        if shape.start_exact:
            starts = 0 if first >= shape.start_key else n if last < shape.start_key else -1
        else:
            starts = 0 if first > shape.start_key else n if last <= shape.start_key else -1
        if starts < 0:
            starts = line_after(data, shape.start_key, not shape.start_exact, n)[0]
        end_key = shape.end_key
        ends = n if last <= end_key else 0 if first > end_key else line_after(data, end_key, True, n)[0]
        # lines [low, stop) are not past the reading bound, `stop_at` the offset of line `stop`
        stop, stop_at = (n, len(data)) if last <= hi_key else line_after(data, hi_key, True, n)
        last_free = stop == n and not (marked and marked[-1] == n - 1)  # the last line counted, not fed
        if bounds is not None and bounds[1] is not None and not marked and low == 0:
            after = tuple(BRACKET.findall(data, stop_at, data.index(b"\n", stop_at))) if stop < n else ()
            bounds[0].bounds.put(bounds[1], (starts, ends, stop, stop_at, after))
        # the marked lines not past the reading bound, each with where it starts, then the bound
        taken = [(k, at) for k, at in zip(marked, block.marked_at, strict=True) if low <= k < stop] if marked else []
        taken.append((stop, -1))
        for k, at in taken:
            if low < k:
                self.collector.end_origin(node, self.origin)  # the open record is followed by a new one
                before = min(max(starts, low), k)
                upto = min(max(ends, low), k)
                self.collector.add_heads(node, before - low, upto - before, k - upto)
                self.pending = None
                self.previous = None
            if k < stop and self.take(*self._parsed(data[at : data.index(b"\n", at)])):
                return True
            low = k + 1
        if last_free:
            if starts < n and ends == n:
                # counted inside the window: its record, which the next block's first line may continue
                self.pending = (data[last_at:-1], block.last_at, block.end, block.last_brackets)
            return False
        if stop < n and not (marked and stop in marked):
            # The first line past the reading bound ends the reading: unless it may continue the open record, it
            # closes that record and only shows coverage after the window, without being parsed.
            raw = data[stop_at : data.index(b"\n", stop_at)]
            if not self._continues(tuple(BRACKET.findall(raw))):
                self.collector.end_origin(node, self.origin)
                self.collector.add_heads(node, 0, 0, 1)
                return True
        while stop_at < len(data):
            cut = data.index(b"\n", stop_at)
            if self.take(*self._parsed(data[stop_at:cut])):
                return True
            stop_at = cut + 1
        return False

    def _at_bounds(self, block: Block, found: tuple[int, int, int, int, tuple[bytes, ...]], start: int) -> bool:
        """`_by_stamps` for a block with nothing marked whose first line starts a record, from where the window's
        bounds were found in it before (its lines before the window's start, inside it, and the first past the
        reading bound with its `[seconds]` values), without reading it; the same steps, in the same order."""
        starts, ends, stop, stop_at, after = found
        n, node = block.count, self.node
        assert node is not None
        self.nodes_seen.add(node)
        self.collector.end_origin(node, self.origin)
        before, upto = min(starts, stop), min(ends, stop)
        self.collector.add_heads(node, before, upto - before, stop - upto)
        self.pending = None
        self.previous = None
        if stop == n:
            if starts < n and ends == n:
                self.pending = (None, block.last_at, block.end, block.last_brackets)
            return False
        if not self._continues(after):
            self.collector.end_origin(node, self.origin)
            self.collector.add_heads(node, 0, 0, 1)
            return True
        assert self._file is not None
        rest = self._file.pread(start + stop_at, block.end - start - stop_at)
        return any(self.take(*self._parsed(raw)) for raw in rest[:-1].split(b"\n"))

    def _continues(self, brackets: tuple[bytes, ...]) -> bool:
        """Whether a stamped line holding the `[seconds]` values `brackets` may continue the open record (a pending
        line is parsed and its record opened first when it may); False leaves no line pending."""
        if self.pending is not None:
            if not set(self.pending[3]).intersection(brackets):
                self.pending = None  # the line closes it: a record holding no keyword, which keeps nothing
                return False
            self._open_pending()
        assert self.node is not None
        current = self.collector.open_record(self.node, self.origin)
        return current is not None and current.mono is not None and current.mono.encode() in brackets

    def _inside(self, block: Block, last: bytes | None) -> bool | None:
        """Count a block lying wholly inside the window with no marked line from its summary, parsing nothing; None
        when its first line may continue the open record (its bytes are then read line by line).

        Every line of it is in the window and starts a record holding no keyword (no `[seconds]` value repeats in
        it), so the open record before it is complete unless the first line repeats its kernel stamp, and of the
        records it starts only the last one's may go on (in the next block). That last line is left `pending`,
        counted but unparsed: a next line that can continue it (repeating one of its `[seconds]` values, or an
        unstamped line) has it parsed and its record opened first (`_open_pending`); any other line closes it, a
        record holding no keyword, which keeps nothing. `last` is its bytes when they are at hand.
        """
        node = self.node
        assert node is not None
        if self._continues(block.first_brackets):
            return None
        self.collector.end_origin(node, self.origin)
        self.collector.add_heads(node, 0, block.count, 0)
        self.nodes_seen.add(node)
        self.pending = (last, block.last_at, block.end, block.last_brackets)
        self.previous = None
        return False

    def _open_pending(self) -> None:
        """Parse the pending line (counted, its record not opened: `_inside`) and open its record."""
        assert self.pending is not None and self.node is not None
        raw, at, end, _ = self.pending
        self.pending = None
        if raw is None:
            assert self._file is not None
            raw = self._file.pread(at, end - 1 - at)  # the line without its newline
        text, parsed = self._parsed(raw)
        if parsed is not None:
            self.collector.reopen(self.node, parsed, text, self.origin)
            self.previous = (self.node, parsed)

    def _parsed(self, raw: bytes) -> tuple[str, ParsedLine | None]:
        """A line of a block that qualifies (ASCII, no NUL) as text and parsed, as `feed` makes them."""
        text = raw.decode("ascii").rstrip("\r")
        return text, parse_line(text, self.ctx)

    def feed(self, raw: bytes) -> bool:
        """Feed one line; True when it is past the window's end and reading should stop."""
        text = raw.decode("utf-8", "replace").rstrip("\r").replace("\x00", "")
        return self.take(text, parse_line(text, self.ctx))

    def take(self, text: str, parsed: ParsedLine | None) -> bool:
        """Take one line as text and parsed; True when it is past the window's end and reading should stop."""
        if self.pending is not None:
            if parsed is None:
                if text.strip():  # an unstamped line may continue it
                    self._open_pending()
            elif parsed.mono is not None and parsed.mono.encode() in self.pending[3]:
                self._open_pending()  # it may repeat its kernel stamp
            else:
                self.pending = None  # closed: a record holding no keyword, which keeps nothing
        if parsed is None:
            if self.previous is not None and is_continuation(text, self.previous[1]):  # type: ignore[arg-type]
                self.collector.add_continuation(self.previous[0], text, self.origin)
            return False  # another unreadable line: skipped, never fatal
        node = self.node if self.node is not None else self.collector.node_for(parsed.host)
        if node is None:
            self.previous = None
            return parsed.observed_at > self.hi
        self.nodes_seen.add(node)
        since = self.since
        self.collector.add_parsed(node, parsed, text, self.origin, since is None or parsed.observed_at >= since)
        self.previous = (node, parsed)
        return parsed.observed_at > self.hi
