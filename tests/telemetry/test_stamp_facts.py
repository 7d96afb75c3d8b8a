"""The compiled stamp facts of a kernel-log block (`kernel/sources/_stamps.c`) decide as the patterns decide, and its
bisection finds where a window's bound falls as the `bisect` of the block's stamps does.

`facts(view, *parts)` must give None exactly where `blocks.sorted_stamps` with the shape's pattern gives None, and
otherwise the number of lines, the first and last stamps and whether a `[seconds]` value (`blocks.BRACKET`) is found
twice. Generated blocks are made of lines that start with a stamp of the shape or one step off it (a day that does
not exist, hour 24, minute 60, a fraction a digit short, another offset, no blank behind it, years 0001 and 9999),
in order or not, with bodies holding `[seconds]` values and their near misses, NUL and bytes beyond ASCII (about a
third of the generated blocks can be counted from their stamps).
"""

from __future__ import annotations

import bisect
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from providers.telemetry.kernel.parse import DEFAULT_CONTEXT, EPOCH, line_time
from providers.telemetry.kernel.sources import search
from providers.telemetry.kernel.sources._stamps import facts, iso_time, line_after, repeated_lines
from providers.telemetry.kernel.sources.blocks import BRACKET, analyse, sorted_stamps
from providers.telemetry.kernel.sources.search import stamp_pattern

_SHAPES = st.tuples(
    st.sampled_from([b"T", b" "]),
    st.sampled_from([(b"", 0), (b".", 3), (b",", 6), (b".", 1), (b".", 9)]),
    st.sampled_from([b"Z", b"z", b"+05:30", b"-0800", b"+00:00"]),
).map(lambda t: (t[0], t[1][0], t[1][1], t[2]))

_DAYS = [b"2026-12-07", b"2026-12-08", b"2024-02-29", b"2000-02-29", b"0002-01-01", b"9998-12-31", b"2026-12-31"]
_TIMES = [b"00:00:00", b"09:59:59", b"23:59:59", b"12:30:00", b"19:05:07"]
_BODIES = [b"[ 12.5]", b"[12.5]", b"[  3.000001]", b"[12.]", b"[.5]", b"[ 1.0", b"[[1.0]", b"[ 7.25] [7.25]",
           b"kernel:", b"NVRM: Xid", b" ", b"\t", b"x", b"[ 0.1]", b"[ 0.2]", b"[0.10]"]  # fmt: skip
#: one step off a line of the shape, each applied to a line now and then
_FLAWS = [
    ("day", [b"2025-02-29", b"2026-04-31", b"2026-13-01", b"2026-00-10", b"0001-01-01", b"9999-12-31", b"1900-02-29",
             b"2026-12-00"]),
    ("time", [b"24:00:00", b"19:60:00", b"19:00:61", b"2a:00:00"]),
    ("sep", None), ("fraction", None), ("offset", [b"+01:00", b"Z", b"-08:00"]), ("blank", [b"", b"x", b"\n"]),
    ("line", [b"", b"-- no stamp"]), ("body", [b"\x00", b"\xc3\xa9", b"\x7f"]),
]  # fmt: skip


@st.composite
def _blocks(draw: st.DrawFn) -> tuple[bytes, tuple[bytes, bytes, int, bytes]]:
    sep, fsep, digits, offset = shape = draw(_SHAPES)
    lines = []
    for _ in range(draw(st.integers(0, 8))):
        day, time = draw(st.sampled_from(_DAYS)), draw(st.sampled_from(_TIMES))
        own_sep, own_fraction, own_offset = sep, fsep + b"7" * digits if digits else b"", offset
        blank = draw(st.sampled_from([b" ", b"\t", b"\v", b"\f"]))
        body = b"".join(draw(st.lists(st.sampled_from(_BODIES), max_size=3)))
        if draw(st.integers(0, 15)) == 0:
            flaw, values = draw(st.sampled_from(_FLAWS))
            if flaw == "day":
                day = draw(st.sampled_from(values))
            elif flaw == "time":
                time = draw(st.sampled_from(values))
            elif flaw == "sep":
                own_sep = b"T" if sep == b" " else b" "
            elif flaw == "fraction":
                own_fraction = own_fraction[:-1] if digits else b".5"
            elif flaw == "offset":
                own_offset = draw(st.sampled_from([v for v in values if v != offset]))
            elif flaw == "blank":
                blank = draw(st.sampled_from(values))
            elif flaw == "line":
                lines.append(draw(st.sampled_from(values)) + body)
                continue
            else:
                body += draw(st.sampled_from(values))
        lines.append(day + own_sep + time + own_fraction + own_offset + blank + body)
    if draw(st.integers(0, 4)):
        lines.sort()
    view = b"\n".join(lines) + draw(st.sampled_from([b"\n", b"\n", b"\n", b"", b"\n\n"]))
    return view, shape


def _by_patterns(view: bytes, shape: tuple[bytes, bytes, int, bytes]) -> tuple[int, bytes, bytes, bool] | None:
    stamps = sorted_stamps(view, stamp_pattern(*shape))
    if stamps is None:
        return None
    values = BRACKET.findall(view)
    return len(stamps), stamps[0], stamps[-1], len(set(values)) != len(values)


@settings(max_examples=2500, deadline=None)
@given(_blocks())
def test_a_block_is_judged_as_the_stamp_pattern_and_the_seconds_search_judge_it(
    block: tuple[bytes, tuple[bytes, bytes, int, bytes]],
) -> None:
    view, shape = block
    assert facts(view, *shape) == _by_patterns(view, shape)


def _line(day: bytes, time: bytes, body: bytes) -> bytes:
    return day + b"T" + time + b".000000+00:00 host kernel: " + body + b"\n"


SHAPE = (b"T", b".", 6, b"+00:00")


def test_a_block_in_order_gives_its_count_and_ends() -> None:
    view = b"".join(_line(b"2026-12-07", b"10:00:0%d" % i, b"[ %d.5] x" % i) for i in range(5))
    assert facts(view, *SHAPE) == (5, b"2026-12-07T10:00:00.000000+00:00", b"2026-12-07T10:00:04.000000+00:00", False)
    block = analyse(view, 1000, stamp_pattern(*SHAPE), SHAPE)
    assert block is not None and block.count == 5 and block.marked == ()


def test_a_repeated_seconds_value_marks_the_lines_that_hold_it() -> None:
    view = b"".join(_line(b"2026-12-07", b"10:00:0%d" % i, b"[ %d.5] x" % min(i, 2)) for i in range(5))
    assert facts(view, *SHAPE)[3] is True
    block = analyse(view, 1000, stamp_pattern(*SHAPE), SHAPE)
    assert block is not None and block.marked == (2, 3, 4)
    starts = [0, *(i + 1 for i, byte in enumerate(view) if byte == 10)]
    assert block.marked_at == tuple(starts[k] for k in (2, 3, 4))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.sampled_from([b"x", b"NVRM: Xid 79", b"", b"a longer body " * 9])),
                min_size=3, max_size=40))
def test_each_marked_line_is_kept_with_where_it_starts(lines: list[tuple[int, bytes]]) -> None:
    # lines in time order, `[seconds]` values that may repeat, keyword lines among them
    view = b"".join(_line(b"2026-12-07", b"10:%02d:%02d" % divmod(i, 60), b"[ %d.5] " % s + body)
                    for i, (s, body) in enumerate(lines))
    block = analyse(view, len(view), stamp_pattern(*SHAPE), SHAPE)
    assert block is not None
    split = view[:-1].split(b"\n")
    assert len(block.marked_at) == len(block.marked)
    for k, at in zip(block.marked, block.marked_at, strict=True):
        assert view[at : view.index(b"\n", at)] == split[k]
    keywords = [k for k, (_, body) in enumerate(lines) if body.startswith(b"NVRM")]
    assert set(keywords) <= set(block.marked)


@pytest.mark.parametrize(
    "view",
    [
        b"".join(_line(b"2026-12-07", b"10:00:0%d" % i, b"x") for i in (0, 2, 1)),  # out of order
        b"".join(_line(b"2026-12-07", b"10:00:0%d" % i, b"x") for i in range(2)),  # two lines only
        b"".join(_line(b"2026-02-29", b"10:00:0%d" % i, b"x") for i in range(3)),  # a day that does not exist
        b"".join(_line(b"2026-12-07", b"10:00:0%d" % i, b"\xc3\xa9") for i in range(3)),  # not ASCII
        b"".join(_line(b"2026-12-07", b"10:00:0%d" % i, b"\x00") for i in range(3)),  # a NUL
        b"".join(_line(b"2026-12-07", b"10:00:0%d" % i, b"x") for i in range(3)) + b"continued\n",  # a bare line
        b"",
    ],
)
def test_a_block_that_cannot_be_counted_from_its_stamps_is_refused(view: bytes) -> None:
    assert facts(view, *SHAPE) is None
    assert _by_patterns(view, SHAPE) is None


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ((b"x\n", b"T", b".", 6), TypeError),
        (("x\n", b"T", b".", 6, b"Z"), TypeError),
        ((b"x\n", b"T", b".", "6", b"Z"), TypeError),
        ((b"x\n", b"T", b".", 10, b"Z"), ValueError),
        ((b"x\n", b"T", b".", -1, b"Z"), ValueError),
    ],
)
def test_a_call_outside_its_contract_raises(args: tuple, error: type[Exception]) -> None:
    with pytest.raises(error):
        facts(*args)


# ---------------------------------------------------------------- where a bound falls inside a block


def _by_bisect(data: bytes, key: bytes, right: bool) -> tuple[int, int]:
    """The first line whose stamp is past `key` (`right`) or not before it, by the `bisect` of every line's stamp."""
    lines = data[:-1].split(b"\n")
    stamps = [line[: len(key)] for line in lines]
    index = (bisect.bisect_right if right else bisect.bisect_left)(stamps, key)
    return index, sum(len(line) + 1 for line in lines[:index])


@st.composite
def _ordered_blocks(draw: st.DrawFn) -> tuple[bytes, bytes]:
    seconds = sorted(draw(st.lists(st.integers(0, 59), min_size=1, max_size=40)))
    bodies = draw(st.lists(st.sampled_from([b"", b"x", b"kernel: [ 1.5] eth0 up", b"y" * 300]), min_size=len(seconds),
                           max_size=len(seconds)))  # fmt: skip
    data = b"".join(_line(b"2026-12-07", b"10:00:%02d" % s, body) for s, body in zip(seconds, bodies, strict=True))
    key = b"2026-12-07T10:00:%02d.000000+00:00" % draw(st.integers(0, 60))
    cut = draw(st.sampled_from([len(key), len(key), 19, 10]))  # a key as long as the stamps, or a prefix of one
    return data, key[:cut]


@settings(max_examples=1500, deadline=None)
@given(_ordered_blocks(), st.booleans())
def test_a_bound_is_found_where_the_bisect_of_the_stamps_finds_it(block: tuple[bytes, bytes], right: bool) -> None:
    data, key = block
    assert line_after(data, key, right, data.count(b"\n")) == _by_bisect(data, key, right)


def test_a_bound_before_every_line_or_past_them_all() -> None:
    data = b"".join(_line(b"2026-12-07", b"10:00:0%d" % i, b"x") for i in range(3))
    assert line_after(data, b"2026-12-06", True, 3) == (0, 0)
    assert line_after(data, b"2026-12-08", False, 3) == (3, len(data))
    assert line_after(data, b"2026-12-07T10:00:01.000000+00:00", True, 3) == (2, 2 * len(data) // 3)
    assert line_after(data, b"2026-12-07T10:00:01.000000+00:00", False, 3) == (1, len(data) // 3)


def test_a_block_whose_last_line_has_no_newline_is_refused_where_the_bisection_needs_it() -> None:
    with pytest.raises(ValueError):
        line_after(b"2026-12-07T10:00:00 a", b"2026-12-08", True, 1)


def _repeated_lines_by_pattern(view: bytes) -> list[int]:
    """The lines holding a `[seconds]` value found twice, by the BRACKET pattern: each match's value counted, then
    the line of each match whose value was counted twice or more."""
    values = [m.group(1) for m in BRACKET.finditer(view)]
    twice = {v for v in values if values.count(v) > 1}
    return sorted({view.count(b"\n", 0, m.start()) for m in BRACKET.finditer(view) if m.group(1) in twice})


@settings(max_examples=600, deadline=None)
@given(_blocks())
def test_the_lines_holding_a_repeated_value_are_those_the_pattern_finds(block) -> None:
    view, _ = block
    assert repeated_lines(view) == _repeated_lines_by_pattern(view)


@pytest.mark.parametrize(
    ("view", "lines"),
    [
        (b"", []),
        (b"a [1.5] b\nc [1.5]\n", [0, 1]),
        (b"a [1.5] [1.5]\nb [2.5]\n", [0]),  # twice on one line: the line once
        (b"[ 1.5]\n[1.5]\n[1.50]\n", [0, 1]),  # blanks before the value do not count, digits do
        (b"[1.5\n1.5]\n[1.5]\n", []),  # a value does not run across a newline
        (b"[[1.5]\n[1.5]\n", [0, 1]),  # the second `[` opens the value
        (b"[12.34.56]\n[34.56]\n[12.34]\n", []),  # not a value where the first `]` is missing
        (b"x\n" * 5 + b"[7.0]\n" + b"y [7.0]" * 3, [5, 6]),  # the last line without its newline
    ],
)
def test_the_lines_holding_a_repeated_value_in_examples(view: bytes, lines: list[int]) -> None:
    assert repeated_lines(view) == lines == _repeated_lines_by_pattern(view)


_TWO = ["00", "01", "02", "09", "12", "13", "23", "24", "28", "29", "30", "31", "59", "60", "99"]
_LINES = st.tuples(
    st.sampled_from(["2026", "2024", "2000", "1900", "0001", "9999", "0000", "20a6", "\u0662\u0660\u0662\u0666"]),
    st.sampled_from(["-", "/"]),
    st.sampled_from(_TWO),
    st.sampled_from(_TWO),
    st.sampled_from(["T", " ", "t", "_"]),
    st.sampled_from(_TWO),
    st.sampled_from(_TWO),
    st.sampled_from(_TWO),
    st.sampled_from(["", ".", ",", ".1", ",123456", ".1234567", ".123456789", ".1234567890", ".12x"]),
    st.sampled_from(["Z", "z", "+00:00", "-00:00", "+05:30", "+0530", "-08:00", "+23:59", "+24:00", "+05:99", "-23:99",
                     "+5:30", "+05:3", "", "UTC", "+05:", "+05"]),
    st.sampled_from([" ", "\t", "\r", "\n", "", "x", "\x00", "\x0b", "\x0c", "\x1c", " kernel: [ 1.5] x", "\r\n"]),
).map(lambda t: (t[0] + t[1] + t[2] + t[1] + "".join(t[3:5]) + t[5] + ":" + t[6] + ":" + "".join(t[7:])).encode())


def _read_in_c(raw: bytes):  # noqa: ANN202
    micro = iso_time(raw)
    return None if micro is None else EPOCH + timedelta(microseconds=micro)


@settings(max_examples=2000, deadline=None)
@given(_LINES)
def test_a_lines_rfc_3339_stamp_read_in_c_is_the_instant_the_parser_reads(raw: bytes) -> None:
    """`iso_time` gives the parser's instant for a line it reads, or None, leaving the line to the parser; the
    search's reading of a line (`search._line_time`) is the parser's for every line."""
    read = _read_in_c(raw)
    assert read is None or read == line_time(raw, DEFAULT_CONTEXT)
    assert search._line_time(raw, DEFAULT_CONTEXT) == line_time(raw, DEFAULT_CONTEXT)


@pytest.mark.parametrize(
    "raw",
    [
        b"2026-09-09T12:00:05.104642+00:00 worker-01 kernel: x",
        b"2026-09-09 12:00:05,1+0530\tx",
        b"2024-02-29T23:59:59z x",
        b"2026-09-09T12:00:05.123456789-08:00 x",
        b"2026-09-09T12:00:05+05:99 x",  # minutes beyond 59 in an offset: the parser reads 6:39
        b"0001-01-01T00:30:00-00:15 x",
    ],
)
def test_the_usual_stamps_are_read_in_c(raw: bytes) -> None:
    assert _read_in_c(raw) is not None and _read_in_c(raw) == line_time(raw, DEFAULT_CONTEXT)


@pytest.mark.parametrize(
    "raw",
    [
        b"2026-09-09T12:00:05Z",  # no blank behind the stamp
        b"2026-09-09T12:00:05Z\r",  # the parser strips the line's end
        b"2025-02-29T12:00:05Z x",
        b"2026-09-09T24:00:00Z x",
        b"2026-09-09T12:00:60Z x",
        b"2026-09-09T12:00:05+24:00 x",
        b"2026-09-09T12:00:05.1234567890Z x",
        b"0001-01-01T00:00:00+01:00 x",  # before year 1 in UTC
        b"9999-12-31T23:59:59-00:01 x",  # after year 9999 in UTC
        b"2026-09-09T12:00:05\x00Z x",
    ],
)
def test_what_c_does_not_read_is_left_to_the_parser(raw: bytes) -> None:
    assert iso_time(raw) is None
    assert search._line_time(raw, DEFAULT_CONTEXT) == line_time(raw, DEFAULT_CONTEXT)
