"""The byte-level reader of a node's tail: only the lines that may give a record go through the node parser.

Most of a training job's output says nothing about a failure: loss lines, progress bars, NCCL's INFO lines. The
node parser (`lines.NodeParser`) takes from such a line only that the line exists and, when it carries a `[rankN]:`
prefix, that its rank wrote there. `feed_tail` therefore looks at a node's tail as bytes:

- one RE2 search (a DFA: one pass over the bytes, whatever the number of words) finds the next run of *candidate*
  lines, one after the other: a line holding a marker of the signal table (`signals.STANDALONE`), a text that opens
  a block the parser follows (`Traceback (most recent call last):`, torchelastic's `Failures:` and `Root Cause`), a
  process-group marker (`[PG `, `[Rank `), or bytes the parser reads another way than they stand (a Docker JSON
  line, a CRI partial line, a terminal escape, a NUL);
- candidate lines, and every line while the parser is inside a block (a traceback, torchelastic's summary, a CRI
  line in parts), are decoded and fed to the parser one by one, as the line reader always did;
- the lines between two candidates (a *gap*) are taken in bulk: their count, and for each rank the number of its
  prefixed lines and its last one, found by byte searches. Only the last line of each rank is decoded.

The bulk step is exact only for the lines whose rank prefix a byte pattern finds as the parser would: the first
`[rank` of the line is its prefix, well formed, within the first 512 bytes. A gap holding any other `[rank` (a
second one on a line, one further in, a malformed one) is halved until the parts that hold one are a few lines,
which are fed line by line, so what the parser keeps is the same as when it reads every line:
`tests/joblog/test_prefilter.py` compares the two on the real and generated logs of the tests.
"""

from __future__ import annotations

import functools
import re
from collections import Counter

import re2

from providers.telemetry.joblog.lines import NodeParser
from providers.telemetry.joblog.patterns import MAX_LINE_CHARS, PREFIX_SCAN
from providers.telemetry.joblog.signals import STANDALONE, re2_options

#: texts that make a line a candidate besides the table's markers: they open or mark what the parser follows
STRUCTURAL = (
    "Traceback (most recent call last):",  # NodeParser._traceback opens a traceback
    "Failures:",  # NodeParser._elastic: torchelastic's summary
    "Root Cause",
    "[PG ",  # NodeParser._marker: process-group markers
    "[Rank ",
)
#: bytes after which the parser's view of a line is not its bytes: JSON-escaped text, a CRI line continued in the
#: next record, a terminal escape it removes, a NUL it drops
REREAD = ('{"log":', " stdout P ", " stderr P ", "\x1b", "\x00")

_RANK = b"[rank"
#: where torchelastic's summary starts (`Failures:`, `Root Cause (first observed failure):`) and the line of `=` that
#: ends it, looked for within _SUMMARY_BYTES
_SUMMARY_STARTS = (b"Failures:", b"Root Cause")
_SUMMARY_END = re.compile(rb"\n *=+ *(?:\n|\Z)")
_SUMMARY_BYTES = 64 * 1024
#: a gap of at most this many lines holding a `[rank` the byte patterns cannot place is read line by line; a larger
#: one is halved
_FEW_LINES = 32
#: the furthest byte offset at which the parser finds a line's `[rank` (it looks within the first PREFIX_SCAN
#: characters; a byte offset is never less than the character offset)
_RANK_REACH = PREFIX_SCAN - len(_RANK)
#: a gap line's rank prefix as the parser finds it: the line's first `[rank`, well formed, within reach. The first
#: form is the usual line (no `[` before the prefix), the second allows other brackets (torchrun's `[default0]:`).
#: Neither holds a possessive part that can backtrack (tests/robustness/test_patterns_on_python_3_11_2.py): the
#: second's repeat gives back at most its bound, and only where no `[rank` is placed
_RANK_LINE = re.compile(rb"\n[^\n\[]{0,%d}+\[rank(\d{1,9}+)\]:" % _RANK_REACH)
_RANK_LINE_BRACKETS = re.compile(rb"\n(?:[^\n\[]|\[(?!rank)){0,%d}\[rank(\d{1,9}+)\]:" % _RANK_REACH)
#: every `[rank` of a gap, with its rank key when it starts its line, well formed (the usual line), else b"": one pass
#: (a search for the literal `[rank`) both counts them and reads the keys
_RANK_AT_START = re.compile(rb"\[rank(?:(?<=\n\[rank)(\d{1,9}+)\]:|)")
_RANK_KEY = re.compile(rb"\[rank(\d{1,9}+)\]:")


@functools.cache
def _candidates() -> re2._Regexp:  # type: ignore[name-defined]
    # A match runs on to the end of its line, and on over each next line that holds a word too: a run of candidate
    # lines (a node's watchdog, progress and summary lines, one after the other) is one match.
    words = dict.fromkeys((*STANDALONE, *STRUCTURAL, *REREAD))
    word = b"(?:" + b"|".join(re2.escape(w.encode()) for w in words) + b")"
    return re2.compile(word + b"[^\n]*(?:\n[^\n]*?" + word + b"[^\n]*)*", re2_options())


def candidate_words() -> tuple[str, ...]:
    """Every text that makes a line a candidate (for the docs and the tests)."""
    return tuple(dict.fromkeys((*STANDALONE, *STRUCTURAL, *REREAD)))


def feed_tail(parser: NodeParser, data: bytes) -> None:
    """Hand the whole lines of `data` (the first one complete; the last may lack its newline) to `parser`, oldest
    first, with the same outcome as feeding each decoded line."""
    size = len(data)
    runs = _candidates().finditer(data)  # one pass: the next run of candidate lines at or after where reading stands
    first = last = -1  # the current run: where its first line starts, where its last line ends
    pos = 0
    while pos < size:
        if first <= pos < last:  # the rest of a run of candidate lines: decoded at once, fed one by one
            if data.startswith(_SUMMARY_STARTS, pos):
                end = _summary(parser, data, pos)
                if end > pos:
                    pos = end
                    continue
            end = data.find(b"\n", last)
            if end < 0:
                end = size
            feed = parser.feed
            for line in data[pos:end].decode("utf-8", "replace").split("\n"):
                feed(line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS])
            pos = end + 1
            continue
        if parser.in_block:
            pos = _feed_line(parser, data, pos, size)
            continue
        while last < pos:
            hit = next(runs, None)
            if hit is None:
                first = last = size
            else:
                first, last = data.rfind(b"\n", 0, hit.start()) + 1, hit.end()
        if first > pos:
            _skip(parser, data, pos, first)
            pos = first


def _summary(parser: NodeParser, data: bytes, pos: int) -> int:
    """torchelastic's summary starting at `pos`, up to the line of `=` that ends it, cut out of the buffer and taken
    by the parser at once (`NodeParser.summary`); where reading goes on, or `pos` when the parser would not take it
    so (its lines are then fed one by one)."""
    end = _SUMMARY_END.search(data, pos, pos + _SUMMARY_BYTES)
    if end is None:
        return pos
    block = data[pos : end.end()]
    if not block.isascii():
        return pos
    if not parser.summary(block.rstrip(b"\n").decode("ascii").split("\n")):
        return pos
    return end.end()


def _feed_line(parser: NodeParser, data: bytes, pos: int, size: int) -> int:
    """Feed the line at `pos`; return where the next one starts."""
    end = data.find(b"\n", pos)
    if end < 0:
        end = size
    parser.feed(_text(data[pos:end]))
    return end + 1


def _text(raw: bytes) -> str:
    """One line as the node parser reads it: decoded (an invalid byte replaced), cut at MAX_LINE_CHARS."""
    line = raw.decode("utf-8", "replace")
    return line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS]


def text_lines(data: bytes) -> list[str]:
    """Every line of what a `files.TailSink` is given, without its newline, as the node parser reads it one by one
    (what `feed_tail` must come to the same as; tests and tools read a tail this way)."""
    lines = data.split(b"\n")
    if data.endswith(b"\n") or not data:
        lines.pop()  # the empty text after the last newline is no line
    return [_text(raw) for raw in lines]


def _skip(parser: NodeParser, data: bytes, start: int, end: int) -> None:
    """Take the lines of `data[start:end]` (whole lines, none a candidate, the parser in no block) in bulk."""
    newline_end = data[end - 1] == 0x0A
    lines = data.count(b"\n", start, end) + (0 if newline_end else 1)
    keys = _RANK_AT_START.findall(data, start, end)
    if not start and keys and not keys[0] and data.startswith(_RANK):  # the data's first line: no newline before it
        first = _RANK_KEY.match(data)
        keys[0] = first.group(1) if first else b""
    if b"" not in keys:
        if not keys:
            parser.absorb(lines, {}, None)
            return
        ranks: Counter[bytes] | None = Counter(keys)
    else:
        prefixes = data.count(_RANK, start, end)
        if not prefixes:
            parser.absorb(lines, {}, None)
            return
        ranks = _ranks(data, start, end, prefixes)
    if ranks is None:  # a `[rank` the byte patterns cannot place as the parser would
        middle = data.find(b"\n", start + (end - start) // 2, end - 1) + 1
        if lines > _FEW_LINES and middle > start:  # halve the gap: the rest of it is still taken in bulk
            _skip(parser, data, start, middle)
            _skip(parser, data, middle, end)
            return
        pos = start
        while pos < end:  # a few lines: read one by one
            pos = _feed_line(parser, data, pos, end)
        return
    seen: dict[int, tuple[int, int, str]] = {}
    by_rank: dict[int, int] = {}  # rank -> the offset of its last prefix
    counts: dict[int, int] = {}
    for key, count in ranks.items():
        rank = int(key)
        at = data.rfind(b"[rank" + key + b"]:", start, end)
        counts[rank] = counts.get(rank, 0) + count
        if at > by_rank.get(rank, -1):
            by_rank[rank] = at
    for rank, at in by_rank.items():
        head = data.rfind(b"\n", start, at) + 1 or start
        tail = data.find(b"\n", at, end)
        if tail < 0:
            tail = end
        number = lines - data.count(b"\n", head, end) + (1 if newline_end else 0)
        seen[rank] = (counts[rank], number, _text(data[head:tail]))
    last = data.rfind(_RANK, start, end)
    parser.absorb(lines, seen, int(data[last + len(_RANK) : data.find(b"]", last, end)]))


def _ranks(data: bytes, start: int, end: int, prefixes: int) -> Counter[bytes] | None:
    """The rank keys of the gap's prefixed lines in order of first sight, with their counts; None when some `[rank`
    of the gap is not a line's prefix as the parser reads it."""
    for pattern in (_RANK_LINE, _RANK_LINE_BRACKETS):
        found = pattern.findall(data, start - 1, end) if start else _first(pattern, data, end)
        if len(found) == prefixes:
            return Counter(found)
    return None


def _first(pattern: re.Pattern[bytes], data: bytes, end: int) -> list[bytes]:
    """`pattern.findall` over a gap that starts the data (no newline before its first line)."""
    return pattern.findall(b"\n" + data[:end])


__all__ = ["REREAD", "STRUCTURAL", "candidate_words", "feed_tail", "text_lines"]
