"""The compiled gap pass (`providers/telemetry/joblog/_gaps.c`) gives what reading the gap line by line gives.

`place(data, start, end, reach)` must count the lines of `data[start:end]`, keep each rank's last prefixed line in
order of first sight, and name the last prefixed line's rank, exactly as a line-by-line reading here does (a line's
prefix: its first `[`, a well-formed `[rankN]:` within `reach` bytes of its start); and it must answer None (the
byte patterns then read the gap) for every gap holding any other `[rank`. Generated gaps are built from the pieces
that decide (prefixes of 1 to 10 digits, leading zeros, a second `[rank` on a line, a bracket before the prefix,
collector times and CRI streams in front, brackets and `rank` apart, a missing `:`, bytes that are not UTF-8), with
any start and end and small reaches. `tests/joblog/test_prefilter.py` checks the reader built on it against the
parser itself.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from providers.telemetry.joblog._gaps import place
from providers.telemetry.joblog.prefilter import _RANK_REACH

_PREFIX = re.compile(rb"\[rank(\d{1,9}+)\]:")

Placed = tuple[int, tuple[tuple[int, int, int, int], ...], int | None]


def _by_lines(data: bytes, start: int, end: int, reach: int = _RANK_REACH) -> Placed | None:
    """The gap read a line at a time, in Python."""
    gap = data[start:end]
    lines = gap.split(b"\n")
    if gap.endswith(b"\n"):
        lines.pop()
    placed: dict[int, tuple[int, int, int, int]] = {}
    last = None
    pos = start
    for number, line in enumerate(lines, 1):
        first = line.find(b"[")
        prefix = _PREFIX.match(line, first) if first >= 0 else None
        at_start = pos == 0 or data[pos - 1] == 0x0A
        if prefix is not None and first <= reach and at_start and line.count(b"[rank") == 1:
            rank = int(prefix.group(1))
            placed[rank] = (rank, pos, pos + len(line), number)
            last = rank
        elif b"[rank" in line:
            return None
        pos += len(line) + 1
    return len(lines), tuple(placed.values()), last


_PIECES = st.sampled_from(
    [
        b"[rank0]:",
        b"[rank1]:",
        b"[rank01]:",
        b"[rank7]:",
        b"[rank123456789]:",
        b"[rank1234567890]:",
        b"[rank]:",
        b"[rank3]",
        b"[rank3] :",
        b"[rank",
        b"[ran",
        b"rank5]:",
        b"[",
        b"]:",
        b"[default0]:",
        b"[I1207 12:00:00.000 ProcessGroupNCCL.cpp:1] ",
        b"2026-12-07T12:00:00.000000Z ",
        b"2026-12-07T12:00:00.000000000Z stdout F ",
        b"node-a: ",
        b"x",
        b"loss 0.25 step 9",
        b"\xff\xfe",
        b" ",
        b"\n",
        b"\n",
        b"\n",
    ]
)


@st.composite
def _gaps(draw: st.DrawFn) -> tuple[bytes, int, int]:
    data = b"".join(draw(st.lists(_PIECES, min_size=1, max_size=60)))
    start = draw(st.integers(0, len(data) - 1))
    end = draw(st.integers(start + 1, len(data)))
    return data, start, end


@settings(max_examples=1500, deadline=None)
@given(_gaps(), st.sampled_from([_RANK_REACH, _RANK_REACH, 0, 1, 10, 30]))
def test_a_gap_is_placed_as_reading_it_line_by_line_places_it(gap: tuple[bytes, int, int], reach: int) -> None:
    data, start, end = gap
    assert place(data, start, end, reach) == _by_lines(data, start, end, reach)


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=1, max_size=400), st.data())
def test_any_bytes_are_placed_or_refused_as_reading_them_line_by_line_does(data: bytes, draw: st.DataObject) -> None:
    start = draw.draw(st.integers(0, len(data) - 1))
    end = draw.draw(st.integers(start + 1, len(data)))
    assert place(data, start, end, _RANK_REACH) == _by_lines(data, start, end)


def test_a_usual_gap_gives_each_rank_its_last_line_in_order_of_first_sight() -> None:
    data = b"[rank2]:a\n[rank0]:b\nplain\n[rank2]:c\n[rank00]:d\n"
    assert place(data, 0, len(data), _RANK_REACH) == (5, ((2, 26, 35, 4), (0, 36, 46, 5)), 0)
    # the same gap without its last newline: the last line still counts, and ends where the data ends
    assert place(data, 0, len(data) - 1, _RANK_REACH) == (5, ((2, 26, 35, 4), (0, 36, 46, 5)), 0)
    # a gap that starts further on counts from its own first line
    assert place(data, 10, len(data), _RANK_REACH) == (4, ((0, 36, 46, 4), (2, 26, 35, 3)), 0)


def test_a_gap_without_prefixes_counts_its_lines_and_names_no_rank() -> None:
    data = b"one\ntwo\nthree"
    assert place(data, 0, len(data), _RANK_REACH) == (3, (), None)
    assert place(data, 4, 8, _RANK_REACH) == (1, (), None)


@pytest.mark.parametrize(
    "line",
    [
        b"[x] [rank1]:a",  # behind another bracket
        b"[default0]:[rank1]:a",  # behind torchrun's role
        b"x" * 508 + b"[rank1]:a",  # too far in for the parser to look
        b"[rank1]:a [rank2]:b",  # a second prefix on the line
        b"[rank1]:a [rank",  # a second `[rank` at all
        b"[rank1234567890]:a",  # ten digits
        b"[rank]:a",  # no digits
        b"[rank1]a",  # no colon
        b"[rank1",  # cut short
    ],
)
def test_a_gap_with_a_rank_text_that_is_not_a_usual_prefix_is_refused(line: bytes) -> None:
    data = b"[rank0]:ok\n" + line + b"\n[rank0]:ok\n"
    assert place(data, 0, len(data), _RANK_REACH) is None
    assert place(data, 11, len(data), _RANK_REACH) is None
    assert place(data, 0, 11, _RANK_REACH) == (1, ((0, 0, 10, 1),), 0)  # the lines before it alone are usual


def test_a_prefix_behind_a_collectors_time_or_a_stream_is_placed_with_its_whole_line() -> None:
    data = (
        b"2026-12-07T12:00:00.000000Z [rank3]:a\n"
        b"2026-12-07T12:00:00.000000000Z stdout F [rank1]:b\n"
        + b"x" * 507 + b"[rank3]:c\n"  # as far in as the parser looks
    )  # fmt: skip
    second, third = data.index(b"2026", 1), data.index(b"xxx")
    assert place(data, 0, len(data), _RANK_REACH) == (
        3, ((3, third, len(data) - 1, 3), (1, second, third - 1, 2)), 3
    )  # fmt: skip
    assert place(data, 0, len(data), 506) is None  # the third prefix beyond a shorter reach


def test_a_gap_that_does_not_start_a_line_is_refused_when_its_first_line_has_a_prefix() -> None:
    data = b"x[rank1]:a\n"
    assert place(data, 1, len(data), _RANK_REACH) is None
    assert place(b"x\nb\n", 1, 4, _RANK_REACH) == (2, (), None)  # nothing to place: counted all the same


def test_many_distinct_ranks_are_each_kept() -> None:
    data = b"".join(b"[rank%d]:x\n" % r for r in range(5000)) + b"[rank17]:again\n"
    lines, placed, last = place(data, 0, len(data), _RANK_REACH)
    assert lines == 5001 and last == 17 and len(placed) == 5000
    assert [r for r, *_ in placed] == list(range(5000))
    assert placed[17][3] == 5001 and data[placed[17][1] : placed[17][2]] == b"[rank17]:again"


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ((b"ab", 0, 0, 9), ValueError),
        ((b"ab", 1, 3, 9), ValueError),
        ((b"ab", -1, 1, 9), ValueError),
        ((b"ab", 2, 1, 9), ValueError),
        ((b"ab", 0, 1, -1), ValueError),
        (("ab", 0, 1, 9), TypeError),
        ((bytearray(b"ab"), 0, 1, 9), TypeError),
        ((b"ab", 0, 1), TypeError),
        ((b"ab", "0", 1, 9), TypeError),
    ],
)
def test_a_call_outside_its_contract_raises_and_reads_nothing(args: tuple, error: type[Exception]) -> None:
    with pytest.raises(error):
        place(*args)
