"""Line parsing cannot blow up: every pattern is linear by construction, and pathological lines are bounded."""

import re
import re._constants as c  # the compiled form of a pattern, as `re` itself parses it
import re._parser as sre_parse
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from providers.telemetry.joblog import patterns as lines
from providers.telemetry.joblog.lines import NodeParser
from providers.telemetry.joblog.nodes import exact_resolver
from providers.telemetry.joblog.patterns import MAX_LINE_CHARS, PATTERNS
from tests.joblog import fixtures as fx

_REPEATS = (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT)


def _problems(tree: sre_parse.SubPattern, inside_repeat: bool, out: list[str]) -> None:
    """Collect constructs that can backtrack: a non-possessive variable repeat, an unbounded repeat, a repeat
    that can repeat inside another that can."""
    for op, av in tree:
        if op in _REPEATS:
            low, high, sub = av
            if high == c.MAXREPEAT:
                out.append("unbounded repeat")
            if low != high and op is not c.POSSESSIVE_REPEAT:
                out.append(f"backtracking repeat {{{low},{high}}}")
            if inside_repeat and high > 1:
                out.append("repeat inside a repeat")
            _problems(sub, inside_repeat or high > 1, out)
        elif op is c.SUBPATTERN:
            _problems(av[-1], inside_repeat, out)
        elif op is c.BRANCH:
            for branch in av[1]:
                _problems(branch, inside_repeat, out)
        elif op in (c.ATOMIC_GROUP,):
            _problems(av, inside_repeat, out)
        elif op in (c.ASSERT, c.ASSERT_NOT):
            _problems(av[1], inside_repeat, out)


@pytest.mark.parametrize("pattern", [*PATTERNS, lines._CSI], ids=lambda p: p.pattern[:40])
def test_every_pattern_is_possessive_bounded_and_flat(pattern: re.Pattern[str]) -> None:
    found: list[str] = []
    _problems(sre_parse.parse(pattern.pattern), False, found)
    assert found == []


def test_the_check_catches_what_it_is_for() -> None:
    for bad in (r"(a+)+b", r"\d{1,9}x", r"(?:\d{1,3}+,){0,9}+", r".*+"):
        found: list[str] = []
        _problems(sre_parse.parse(bad), False, found)
        assert found, bad


def _feed(raw: str) -> NodeParser:
    parser = NodeParser("node-a", exact_resolver(["node-a"]))
    parser.feed(raw)
    return parser


MIB = 1024 * 1024
#: lines built to make a backtracking matcher try every split: prefixes and separators repeated for 1 MiB
PATHOLOGICAL = {
    "rank prefixes": "[rank" * (MIB // 5),
    "markers": "[PG ID 1 PG GUID " * (MIB // 17),
    "digits": "2026-09-09T11:58:00." + "1" * MIB,
    "watchdog": ("Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=A" * (MIB // 72)),
    "progress": "last enqueued NCCL work: " + "9" * MIB,
    "desync": "[" + "1, " * (MIB // 3) + "] joined",
    "nccl warn": "h:1:2 [0] NCCL WARN NET/IB : Got completion from peer " + "x" * MIB,
    "cuda": "CUDA error: " + "a" * MIB,
    "elastic": "  traceback : " + " " * MIB,
    "escapes": "\x1b[" * (MIB // 2),
    "json": '{"log":"' + "\\" * MIB,
}


@pytest.mark.parametrize("name", PATHOLOGICAL)
def test_pathological_megabyte_lines_parse_to_nothing_and_are_cut(name: str) -> None:
    parser = _feed(PATHOLOGICAL[name])
    log = parser.result()
    assert log.lines == 1
    assert (log.timeouts, log.progress, log.desync, log.network, log.failures) == ((), (), (), (), ())
    for record in log.cuda:  # "CUDA error: aaa..." is a CUDA error the table does not know
        assert record.kind is None and len(record.line.text) <= MAX_LINE_CHARS


def test_a_real_line_after_a_megabyte_of_padding_is_not_looked_for_but_one_before_it_is() -> None:
    line = fx.LLAMAFACTORY_7396[1].removeprefix("[80747] ")
    assert _feed(" " * MIB + line).result().timeouts == ()  # beyond MAX_LINE_CHARS: never read
    (t,) = _feed(line + " " * MIB).result().timeouts
    assert t.seq == 1580 and len(t.line.text) <= lines.MAX_TEXT


# ---------------------------------------------------------------- collectors' times


def _by_fields(date: str, clock: str, frac: str, zone: str) -> datetime | None:
    """The time a stamp's fields name, read field by field (what parse_stamp must agree with)."""
    if not zone:
        return None
    try:
        if zone == "Z":
            tz = UTC
        else:
            digits = zone[1:].replace(":", "")
            offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
            tz = timezone(offset if zone[0] == "+" else -offset)
        year, month, day = map(int, date.split("-"))
        hour, minute, second = map(int, clock.split(":"))
        micro = int((frac + "00000")[:6]) if frac else 0
        return datetime(year, month, day, hour, minute, second, micro, tzinfo=tz).astimezone(UTC)
    except (ValueError, OverflowError):
        return None


def _two(low: int, high: int) -> st.SearchStrategy[str]:
    """Two digits, mostly within a field's range, sometimes anywhere (a time that names nothing)."""
    return st.one_of(st.integers(low, high), st.integers(low, high), st.integers(0, 99)).map("{:02d}".format)


@settings(max_examples=400, deadline=None)
@given(
    date=st.tuples(st.integers(1, 9999).map("{:04d}".format), _two(1, 12), _two(1, 31)).map("-".join),
    sep=st.sampled_from("T "),
    clock=st.tuples(_two(0, 23), _two(0, 59), _two(0, 59)).map(":".join),
    frac=st.one_of(st.just(""), st.text("0123456789", min_size=1, max_size=9)),
    point=st.sampled_from(".,"),
    zone=st.one_of(
        st.sampled_from(["", "Z"]),
        st.tuples(st.sampled_from("+-"), _two(0, 14), st.sampled_from(["", ":"]), _two(0, 59)).map("".join),
    ),
)
def test_a_collectors_time_is_the_one_its_fields_name(date, sep, clock, frac, point, zone) -> None:
    text = f"{date}{sep}{clock}{point + frac if frac else ''}{zone} stdout F line"
    m = lines.STAMP.match(text)
    assert m is not None
    expected = _by_fields(date, clock, frac, zone)
    assert lines.parse_stamp(m) == expected
    if expected is not None:
        assert lines.parse_stamp(m).tzinfo is UTC


def test_collectors_times_at_the_edges() -> None:
    def read(text: str) -> datetime | None:
        m = lines.STAMP.match(text + " x")
        assert m is not None
        return lines.parse_stamp(m)

    assert read("2024-02-29T23:59:59.9999999Z") == datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=UTC)
    east, west = read("2024-03-01 01:30:00,5+0130"), read("2023-12-31T19:00:00-05:00")
    assert east == datetime(2024, 3, 1, 0, 0, 0, 500000, tzinfo=UTC) and east.tzinfo is UTC
    assert west == datetime(2024, 1, 1, tzinfo=UTC) and west.tzinfo is UTC
    assert read("2023-02-29T00:00:00Z") is None  # no such day
    assert read("2024-01-01T24:00:00Z") is None
    assert read("2024-01-01T23:59:60Z") is None  # a leap second: Python has none
    assert read("2024-01-01T12:00:00+24:00") is None  # an offset of a day
    assert read("2024-01-01T12:00:00") is None  # no zone: not placed in time
    assert read("0001-01-01T00:30:00+01:00") is None  # before year 1 in UTC
    assert read("9999-12-31T23:30:00-01:00") is None  # after year 9999
    assert read("0001-01-01T00:30:00-01:00") == datetime(1, 1, 1, 1, 30, tzinfo=UTC)
