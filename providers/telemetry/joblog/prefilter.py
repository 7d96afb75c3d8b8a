"""The byte-level reader of a node's tail: Python runs per match and per decisive line, never per line.

Most of a training job's output says nothing about a failure: loss lines, progress bars, NCCL's INFO lines. The
node parser (`lines.NodeParser`) takes from such a line only that the line exists and, when it carries a `[rankN]:`
prefix, that its rank wrote there. `feed_tail` therefore looks at a node's tail as bytes:

- one Hyperscan scan (`_Search`: every marker of the signal table, `signals.MARKERS`, and the texts that open or
  mark what the parser follows or that it reads another way than they stand, one literal pattern each) reports each
  match with the marker it is. The lines holding a match of a standalone marker (`signals.STANDALONE`) or of one of
  those texts are the *candidate* lines (one compiled pass over the matches finds them, `_candidates.c`); the others'
  matches (a context-only marker alone) decide nothing. Each
  candidate line is decoded and fed to the parser with the markers the scan found in it (`NodeParser.feed`'s
  `marks`), so the parser does not search the line again where the line is as it stands; a run of PyTorch's
  watchdog timeout and progress lines in their own shape is read in place (`read_kind_line`, `_kind_lines.c`) and
  handed over at once;
- every line while the parser is inside a block (a traceback, torchelastic's summary, a CRI line in parts, a
  `Last error:` waiting for its quote) is fed one by one, as the line reader always did; torchelastic's summary is cut
  out of the buffer up to its closing line and taken at once where nothing else can apply to its lines;
- the lines between candidates (a *gap*) are taken in bulk by one compiled walk over their bytes (`_gaps.place`,
  built from `_gaps.c`): a line at a time by `memchr`, it counts the lines and keeps each rank's last prefixed line
  and its number, where every `[rank` of the gap is its line's first `[`, well formed, within `_RANK_REACH` bytes of
  the line's start (the usual job log, bare or behind a collector's time, a CRI stream, a host: as `_RANK_LINE` places
  it). Only those last lines are decoded, in Python.
- a gap holding any other `[rank` (behind another bracket such as a label, a second prefix on a line, one too far
  in, a malformed one) is read by the byte patterns that place a prefix as the parser does (`_skip_placed`):
  the line's first `[rank`, well formed, within the first 512 bytes; a stretch holding any other `[rank` is halved
  until the parts that hold one are a few lines, which are fed line by line.

What the parser keeps is the same as when it reads every line: `tests/joblog/test_prefilter.py` compares the two on
the real and generated logs of the tests and on every row of the signal table.
"""

from __future__ import annotations

import re
from collections import Counter

from providers.telemetry.compiled import compiled
from providers.telemetry.joblog.lines import KindLine, Marks, NodeParser, kind_of
from providers.telemetry.joblog.patterns import LOKI_TIME, MAX_LINE_CHARS, PREFIX_SCAN
from providers.telemetry.joblog.signals import MARKERS, STANDALONE
from providers.telemetry.literals import Literals

#: the gap pass (`_gaps.c`)
place = compiled("providers.telemetry.joblog._gaps").place
#: the candidate lines grouped from the search's matches (`_candidates.c`)
candidate_lines = compiled("providers.telemetry.joblog._candidates").lines
#: PyTorch's watchdog timeout and progress lines read in place (`_kind_lines.c`): printable ASCII, Loki's time in
#: front where the Loki source puts it (`loki._joined`), `[rankN]:`, the C++ log header (`[E909 17:59:58.000415432
#: ProcessGroupNCCL.cpp:616] `, a thread id after the time in some releases), the process-group marker (`[Rank N]`,
#: `[PG 1 Rank N]`, `[PG ID 0 PG GUID 0(default_pg) Rank N]`) and the message, to the line's end. Read so, a line
#: gives what the node parser's readers give it (`kinds.watchdog`, `kinds.progress`, `NodeParser._marker`): the
#: header holds no `[` the marker search could take, the message starts right behind the marker, the watchdog's tail
#: is at the first `Timeout(ms)=` after its head, and a progress line holds nothing after its numbers that another of
#: its shapes could start with. `tests/joblog/test_prefilter.py` compares the reader with the parser on every shape,
#: behind Loki's time, and on lines one step off each; `tests/joblog/test_kind_lines.py` the compiled reading with a
#: regular expression of the same shape.
read_kind_line = compiled("providers.telemetry.joblog._kind_lines").read

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
#: the time the Loki source puts in front of each line and a blank (`patterns.LOKI_TIME`), in the buffer's bytes
_LOKI_TIME = LOKI_TIME.encode()
#: where torchelastic's summary starts (`Failures:`, `Root Cause (first observed failure):`) and the line of `=` that
#: ends it, looked for within _SUMMARY_BYTES
_SUMMARY_STARTS = (b"Failures:", b"Root Cause")
_SUMMARY_END = re.compile(rb"\n *=+ *(?:\n|\Z)")
#: the same behind Loki's time on each line
_STAMPED_SUMMARY_START = re.compile(_LOKI_TIME + rb"(?:Failures:|Root Cause)")
_STAMPED_SUMMARY_END = re.compile(rb"\n" + _LOKI_TIME + rb" *=+ *(?:\n|\Z)")
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


def candidate_words() -> tuple[str, ...]:
    """Every text that makes a line a candidate (for the docs and the tests)."""
    return tuple(dict.fromkeys((*STANDALONE, *STRUCTURAL, *REREAD)))


# ---------------------------------------------------------------- the search


class _Search:
    """One Hyperscan database of every word the reader looks for: the signal table's markers (their ids are their
    indices in `signals.MARKERS`) and the structural and reread texts. `lines` scans a buffer once and gives its
    candidate lines, each with the markers found in it."""

    def __init__(self) -> None:
        words = list(MARKERS)
        words += [w for w in (*STRUCTURAL, *REREAD) if w not in MARKERS]
        self.markers = len(MARKERS)
        self.literals = Literals(words)
        self.lengths = self.literals.lengths
        # a line holding one of these is a candidate; a context-only marker alone (`~` in the table) is not
        standalone = set(STANDALONE) | set(STRUCTURAL) | set(REREAD)
        #: 1 for each word whose line is a candidate
        self.deciding = bytes(w in standalone for w in words)

    def lines(self, data: bytes) -> list[tuple[int, int, Marks]]:
        """The candidate lines of `data`, in order: (where the line starts, where it ends (its newline, or the end
        of the data), what the search found in it (`lines.Marks`)), grouped from the matches in C
        (`_candidates.c`)."""
        found = self.literals.ends(data)
        if not found:
            return []
        return candidate_lines(data, found, self.lengths, self.deciding, self.markers)  # type: ignore[no-any-return]


_SEARCH = _Search()  # compiled when the reader is loaded, not on a request's first node


# ---------------------------------------------------------------- the reader


def feed_tail(parser: NodeParser, data: bytes) -> None:
    """Hand the whole lines of `data` (the first one complete; the last may lack its newline) to `parser`, oldest
    first, with the same outcome as feeding each decoded line."""
    size = len(data)
    candidates = _SEARCH.lines(data)
    count = len(candidates)
    k = 0  # the next candidate line
    pos = 0
    while pos < size:
        while k < count and candidates[k][0] < pos:
            k += 1  # fed already, as a line of a block
        at = candidates[k][0] if k < count else size
        if parser.in_block:
            if at == pos:
                pos = _feed_candidate(parser, data, candidates[k])
                k += 1
            else:
                pos = _feed_line(parser, data, pos, size)
            continue
        if at > pos:
            _skip(parser, data, pos, at)
            pos = at
            continue
        if data.startswith(_SUMMARY_STARTS, pos) or _STAMPED_SUMMARY_START.match(data, pos):
            end = _summary(parser, data, pos)
            if end > pos:
                pos = end
                continue
        if parser.plain:
            read = _kind_run(parser, data, candidates, k)
            if read:
                k += read
                pos = candidates[k - 1][1] + 1
                continue
        pos = _feed_candidate(parser, data, candidates[k])
        k += 1


def _feed_candidate(parser: NodeParser, data: bytes, candidate: tuple[int, int, Marks]) -> int:
    """Feed a candidate line with the markers the search found in it; return where the next line starts."""
    start, end, marks = candidate
    parser.feed(_text(data[start:end]), marks)
    return end + 1


def _kind_run(parser: NodeParser, data: bytes, candidates: list[tuple[int, int, Marks]], k: int) -> int:
    """Read the run of watchdog timeout and progress lines in PyTorch's own shape (`read_kind_line`) that starts at
    candidate `k`, one line after the other, each with its kind's markers alone, and hand them to the parser at once
    (`NodeParser.kind_lines`); the parser reading by itself (`NodeParser.plain`, which such lines leave as it is).
    Return how many candidate lines were taken: 0 when the first is none of them."""
    run: list[KindLine] = []
    count = len(candidates)
    j = k
    expected = candidates[k][0]
    while j < count:
        start, end, marks = candidates[j]
        if start != expected:
            break
        watchdog = kind_of(marks[0])
        if watchdog is None:
            break
        line = read_kind_line(data, start, end, marks[1], watchdog, MAX_LINE_CHARS)
        if line is None:  # not in the shape, or a marker inside its prefix
            break
        run.append(line)
        expected = end + 1
        j += 1
    if not run:
        return 0
    return parser.kind_lines(run)


def _summary(parser: NodeParser, data: bytes, pos: int) -> int:
    """torchelastic's summary starting at `pos` (Loki's time in front of each of its lines or not), up to the line of
    `=` that ends it, cut out of the buffer and taken by the parser at once (`NodeParser.summary`); where reading
    goes on, or `pos` when the parser would not take it so (its lines are then fed one by one)."""
    stamped = data[pos:pos + 1].isdigit()  # `Failures:` or `Root Cause` start with a letter, Loki's time a digit
    end = (_STAMPED_SUMMARY_END if stamped else _SUMMARY_END).search(data, pos, pos + _SUMMARY_BYTES)
    if end is None:
        return pos
    block = data[pos : end.end()]
    if not block.isascii():
        return pos
    if not parser.summary(block.rstrip(b"\n").decode("ascii").split("\n"), stamped):
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


# ---------------------------------------------------------------- gaps


def _skip(parser: NodeParser, data: bytes, start: int, end: int) -> None:
    """Take the lines of `data[start:end]` (whole lines, none a candidate, the parser in no block) in bulk."""
    found = place(data, start, end, _RANK_REACH)
    if found is None:
        _skip_placed(parser, data, start, end)
        return
    lines, placed, last = found
    parser.absorb(lines, {rank: (number, _text(data[at:tail])) for rank, at, tail, number in placed}, last)


def _skip_placed(parser: NodeParser, data: bytes, start: int, end: int) -> None:
    """`_skip` for a gap holding a `[rank` that does not start its line: each line's prefix placed by the byte patterns
    that find it as the parser does, or the lines fed one by one where they cannot."""
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
    seen: dict[int, tuple[int, str]] = {}
    by_rank: dict[int, int] = {}  # rank -> the offset of its last prefix
    for key in ranks:
        rank = int(key)
        at = data.rfind(b"[rank" + key + b"]:", start, end)
        if at > by_rank.get(rank, -1):
            by_rank[rank] = at
    for rank, at in by_rank.items():
        head = data.rfind(b"\n", start, at) + 1 or start
        tail = data.find(b"\n", at, end)
        if tail < 0:
            tail = end
        number = lines - data.count(b"\n", head, end) + (1 if newline_end else 0)
        seen[rank] = (number, _text(data[head:tail]))
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
