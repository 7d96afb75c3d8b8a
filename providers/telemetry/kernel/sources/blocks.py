"""Blocks of one host's log lines: what the `files` source learns about a block without any window, kept between
requests as a compact summary.

A block is the whole lines between two read positions of a file. Whether it can be counted from its timestamps (one
stamp shape on every line, in time order, only ASCII, no NUL), its stamps, and which of its lines must go through
the line parser (keyword lines, lines sharing a `[seconds]` value) depend on its bytes alone, not on the request's
window: `analyse` works them out once and `BlockCache` keeps them, keyed by the file's identity (device, inode,
size, modification time) and the block's first byte (a block analysed for another stamp pattern is not used).

What is kept is a summary of a few hundred bytes, never the block's lines: its number of lines, its first and last
stamps, the indexes of its marked lines and where each starts, the `[seconds]` values of its first and last lines
and where its last line starts. A later request over the same bytes, with any window, counts a block lying wholly
inside its window from the summary alone, reading and parsing nothing (files.py); a block at the window's edges (or
holding marked lines) is read again (one `pread` of its bytes, from the page cache), its stamps bisected for the
window's bounds, and only its first line, its marked lines (taken where they start, the block never split into
lines) and the first line past the reading bound are parsed.

The cache holds at most `max_bytes` (an estimate of the memory each summary takes), least recently used dropped
first: at the default, about 40,000 blocks, ten for each of 4,096 hosts (a summary measured 800 bytes with its key).
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date
from functools import lru_cache

from providers.telemetry.cache import Bounded
from providers.telemetry.compiled import compiled
from providers.telemetry.kernel.collect import KEYWORDS
from providers.telemetry.literals import Literals

_STAMPS = compiled("providers.telemetry.kernel.sources._stamps")
#: a block's stamp facts, where a bound falls inside a block, and the lines holding a `[seconds]` value found twice
#: (`_stamps.c`)
stamp_facts, line_after, repeated_lines = _STAMPS.facts, _STAMPS.line_after, _STAMPS.repeated_lines

#: what the cache of block summaries may hold, in bytes (estimated: packed stamps and the summary's objects)
BLOCK_CACHE_BYTES = 32 * 1024 * 1024
#: a file modified less than this long ago may change again within one tick of a coarse file-system clock without
#: its modification time changing: its blocks are trusted only once the bytes before its end are found unchanged
SETTLE_NS = 2_000_000_000
#: the bytes before a file's end compared to tell an appended file from a rewritten one
TAIL_BYTES = 4096
#: files whose lineage (identity and end as last seen) is kept: a current and a rotated file for 8,192 hosts
LINEAGES = 16384
#: blocks where the bounds of a window were found, kept for a request with the same window (a retry, the next
#: request on a live log; about 500 bytes each): the two edges of a window for 4,096 hosts
BOUNDS = 8192
#: every `[seconds]` of a block: a line's kernel stamp (parse.py `_MONO`) is one of them, so when none repeats no
#: two lines share a kernel stamp and none continues the record before it
BRACKET = re.compile(rb"\[ *(\d+\.\d+)\]")
#: a stamp shape's parts, as `_stamps.facts` takes them (search.Shape.parts): the separator between date and time,
#: the fraction's separator (b"" without a fraction), the fraction's digits and the offset
StampParts = tuple[bytes, bytes, int, bytes]
#: the memory a block's summary takes with its key in the cache, estimated (its marked lines: 80 bytes more each, an
#: index and an offset)
_SUMMARY_BYTES = 800


@dataclass(frozen=True, slots=True)
class Block:
    """A block's window-independent facts, when it can be counted from its stamps: its end, its number of lines, its
    first and last stamps, the indexes of the lines that must be parsed one by one and where each starts in the block
    (so that a request takes them out of the block's bytes without splitting it into lines), the `[seconds]` values of
    its first and last lines and where its last line starts (a file offset)."""

    end: int  # the file offset just after the block's last newline
    pattern: bytes  # the stamp pattern it was analysed for
    count: int
    first: bytes
    last: bytes
    marked: tuple[int, ...]
    marked_at: tuple[int, ...]  # where each marked line starts, counted from the block's first byte
    first_brackets: tuple[bytes, ...]
    last_brackets: tuple[bytes, ...]
    last_at: int

    @property
    def size(self) -> int:
        return _SUMMARY_BYTES + 80 * len(self.marked)


def analyse(view: bytes, end: int, pattern: re.Pattern[bytes], parts: StampParts) -> Block | None:
    """The facts of `view` (whole lines, ending with a newline, the last of them ending at file offset `end`) for
    the stamp `pattern` (one match at each newline, the block searched with one put before it: the line's stamp, or
    b"" when it does not start with one), whose `parts` are the shape's separator, fraction separator, fraction
    digits and offset; None when it cannot be counted from its stamps (its lines are then parsed one by one).

    One compiled walk (`_stamps.facts`) decides what `sorted_stamps` and the `[seconds]` search decide, with no
    object made per line."""
    found = stamp_facts(view, *parts)
    if found is None:
        return None
    count, first, last, repeats = found
    marked = keyword_lines(view)
    if repeats:
        # A `[seconds]` value repeats: lines holding it may share a kernel stamp (a record of several lines),
        # so they are fed one by one too; every other line's kernel stamp is its own.
        marked = sorted(set(marked).union(repeated_lines(view)))
    last_at = view.rfind(b"\n", 0, len(view) - 1) + 1
    return Block(
        end,
        pattern.pattern,
        count,
        first,
        last,
        tuple(marked),
        line_starts(view, marked),
        tuple(BRACKET.findall(view, 0, view.find(b"\n"))),
        tuple(BRACKET.findall(view, last_at)),
        end - len(view) + last_at,
    )


def sorted_stamps(view: bytes, pattern: re.Pattern[bytes]) -> list[bytes] | None:
    """The stamps of the block `view`, one a line, when it can be counted from them: at least three lines, every one
    starting with a stamp of `pattern`, in time order, on days that exist, only ASCII and no NUL (parsing drops NUL
    bytes and reads other scripts' digits). Else None."""
    if b"\x00" in view or not view.isascii():
        return None
    stamps = pattern.findall(b"\n" + view[:-1])
    if len(stamps) < 3 or b"" in stamps or stamps != sorted(stamps) or not valid_days(stamps):
        return None
    return stamps


def valid_days(ordered: list[bytes]) -> bool:
    """Every stamp's date exists (parse.py refuses 2026-02-30) and lies inside what it converts (`ordered` is
    sorted: when its ends share a day, every stamp has that day)."""
    first, last = ordered[0][:10], ordered[-1][:10]
    for day in (first,) if first == last else {s[:10] for s in ordered}:
        try:
            value = date(int(day[:4]), int(day[5:7]), int(day[8:10]))
        except ValueError:
            return False
        if not 1 < value.year < 9999:
            return False
    return True


#: the kernel's keywords, searched for in a block at once
_KEYWORDS = Literals(KEYWORDS)


def line_starts(view: bytes, indexes: list[int]) -> tuple[int, ...]:
    """Where the lines of `view` at `indexes` (in order) start: before line k lie k lines and their newlines."""
    if not indexes:
        return ()
    before = list(itertools.accumulate(map(len, view.split(b"\n", indexes[-1])), initial=0))
    return tuple(before[k] + k for k in indexes)


def keyword_lines(view: bytes) -> list[int]:
    """The indexes of the lines of `view` holding a keyword (collect.KEYWORDS), in order: one search of the block
    for every keyword, then the lines of the matches (a keyword holds no newline)."""
    lengths = _KEYWORDS.lengths
    return _lines_of(view, (end - lengths[ident] for end, ident in _KEYWORDS.ends(view)))


def _lines_of(view: bytes, starts: Iterable[int]) -> list[int]:
    """The indexes of the lines of `view` where the matches starting at `starts` lie, each line once, in order
    (`starts` in the order of the lines they lie on)."""
    found: list[int] = []
    at = line = 0  # `line` newlines lie before `at`
    for start in starts:
        if start < at:
            continue  # on a line already found
        line += view.count(b"\n", at, start)
        found.append(line)
        at = view.find(b"\n", start) + 1 or len(view)
        line += 1
    return found


#: the most scope names a combined file's lines are searched for at once (more: every line is parsed)
MAX_HOST_NAMES = 256


@lru_cache(maxsize=32)
def host_names(shorts: frozenset[str]) -> re.Pattern[bytes] | None:
    """A search for any of the scope's short names (lower case) in a lowered block, or None when there are too many
    to search for or one is empty (it would match everywhere)."""
    if not shorts or len(shorts) > MAX_HOST_NAMES or "" in shorts or not all(s.isascii() for s in shorts):
        return None
    return re.compile(b"|".join(re.escape(s.encode()) for s in sorted(shorts, key=len, reverse=True)))


def lines_naming(view: bytes, names: re.Pattern[bytes]) -> list[int]:
    """The indexes of the lines of the ASCII block `view` that hold one of `names`, case-insensitively, in order.

    A host names a scope node only when its name, lowered, holds the node's short name (identity.NodeNames): a line
    holding none cannot be a scope node's line.
    """
    lowered = view.lower()
    return _lines_of(lowered, (m.start() for m in names.finditer(lowered)))


#: a block's key: (path, the file's lineage, the block's first byte)
BlockKey = tuple[str, int, int]
#: a block's key and a window's bounds as a stamp shape writes them (start, whether exact, end, reading bound)
BoundsKey = tuple[str, int, int, bytes, bool, bytes, bytes]


@dataclass(frozen=True)
class _Lineage:
    """A file as last seen: its device, inode, size, modification time, a digest of its last bytes and its lineage
    number (the blocks kept for it carry that number)."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    tail: bytes
    number: int


def _tail(read: Callable[[int, int], bytes], size: int) -> bytes:
    start = max(0, size - TAIL_BYTES)
    return hashlib.blake2b(read(start, size - start), digest_size=16).digest()


class BlockCache:
    """Analysed blocks between requests, at most `max_bytes` of them, least recently used dropped first;
    thread-safe."""

    def __init__(self, max_bytes: int = BLOCK_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        # Bounded by bytes alone: the count bound is never the one reached.
        self._items: Bounded[BlockKey, Block] = Bounded(
            sys.maxsize if max_bytes > 0 else 0, max_size=max_bytes, size=lambda block: block.size
        )
        self._lineages: Bounded[str, _Lineage] = Bounded(LINEAGES)
        #: where a window's bounds fell in a block (files.py `_at_bounds`): line indexes before its start and past
        #: its end, the first line past the reading bound, that line's offset and `[seconds]` values
        self.bounds: Bounded[BoundsKey, tuple[int, int, int, int, tuple[bytes, ...]]] = Bounded(
            BOUNDS if max_bytes > 0 else 0
        )
        self._numbers = itertools.count(1)

    @property
    def held(self) -> int:
        """The estimated bytes of the blocks held."""
        return self._items.held

    def lineage(self, path: str, st: os.stat_result, read: Callable[[int, int], bytes]) -> tuple[int, int]:
        """(the lineage number of the file `path` now has status `st`, the end of the bytes its kept blocks may
        cover); `read(offset, size)` reads the open file.

        A file that is the one last seen (same device and inode, no smaller) keeps its lineage when it is unchanged
        and settled, or when the bytes before its former end are the same (it was appended to: a live log): its
        blocks before that end stand. Anything else (replaced, rotated into place, truncated, rewritten) starts a new
        lineage, and no block kept before is used for it.
        """
        seen = self._lineages.get(path)
        valid = 0
        if seen is not None and (seen.dev, seen.ino) == (st.st_dev, st.st_ino) and st.st_size >= seen.size:
            unchanged = st.st_size == seen.size and st.st_mtime_ns == seen.mtime_ns
            if unchanged and time.time_ns() - st.st_mtime_ns >= SETTLE_NS:
                valid = seen.size
            elif _tail(read, seen.size) == seen.tail:
                valid = seen.size
        if not valid:
            seen = None
        number = seen.number if seen is not None else next(self._numbers)
        if seen is None or seen.size != st.st_size or seen.mtime_ns != st.st_mtime_ns:
            now = _Lineage(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, _tail(read, st.st_size), number)
            self._lineages.put(path, now)
        return number, valid

    def get(self, key: BlockKey) -> Block | None:
        return self._items.get(key)

    def put(self, key: BlockKey, block: Block) -> None:
        self._items.put(key, block)

    def __len__(self) -> int:
        return len(self._items)


__all__ = [
    "BLOCK_CACHE_BYTES",
    "Block",
    "BlockCache",
    "BoundsKey",
    "analyse",
    "host_names",
    "keyword_lines",
    "line_after",
    "lines_naming",
    "repeated_lines",
    "sorted_stamps",
    "valid_days",
]
