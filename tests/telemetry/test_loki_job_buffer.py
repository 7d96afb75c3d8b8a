"""The Loki job-log source hands a node's entries to the buffer reader as one buffer, Loki's time in front of each
line: what it parses equals what feeding each entry as a line gives, also for entries holding a newline, a
carriage return or control characters."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from providers.telemetry.joblog.lines import NodeParser
from providers.telemetry.joblog.loki import LokiJobLogSource, _joined, _Read
from providers.telemetry.joblog.nodes import exact_resolver
from providers.telemetry.loki.client import MAX_NS
from tests.joblog.support import fixture_groups, loki_stamp

NODE = "node-a"
RESOLVE = exact_resolver([NODE])
FIRST_NS = 1_788_955_000_000_000_000


def _one_by_one(entries: list[tuple[int, str]]):
    parser = NodeParser(NODE, RESOLVE)
    for ts, line in sorted(entries, key=lambda e: e[0]):
        parser.feed(f"{loki_stamp(ts)} {line}")
    return parser.result()


def _source(entries: list[tuple[int, str]]):
    got = _Read()
    got.add({NODE: entries})
    return LokiJobLogSource._parse([NODE], got, RESOLVE)[NODE]


def _entries(lines: list[str]) -> list[tuple[int, str]]:
    return [(FIRST_NS + i * 1_000_000 // 3, line) for i, line in enumerate(lines)]


def test_the_real_lines_of_the_reports_parse_as_entries_fed_one_by_one() -> None:
    for name, lines in fixture_groups():
        noise = [f"[rank{r}]: {{'loss': 2.{s:03d}}}" for s in range(20) for r in range(4)]
        entries = _entries(noise + list(lines) + noise)
        assert _source(entries) == _one_by_one(entries), name


@pytest.mark.parametrize("odd", [
    "[rank1]: a line\nholding a newline: NCCL WARN Connection closed by remote peer node-b<4242>",
    "[rank1]: ends in a carriage return ncclSystemError\r",
    "[rank1]: a NUL\x00 and an escape \x1b[31mred\x1b[0m ncclInternalError",
    "",
])
def test_entries_the_buffer_could_misread_parse_as_fed_one_by_one(odd: str) -> None:
    entries = _entries(["[rank0]: before", odd, "[rank1]: after", "Traceback (most recent call last):"])
    assert _source(entries) == _one_by_one(entries)


@settings(max_examples=2000)
@given(st.one_of(st.integers(0, MAX_NS), st.integers(1_700_000_000 * 10**9, 1_900_000_000 * 10**9)))
def test_lokis_time_is_written_as_the_calendar_writes_it(ns: int) -> None:
    # The stamp put in front of each line (its microseconds written from a table of three digits) is the instant's
    # own text, to the microsecond; the buffer holds it the same way.
    seconds, micro = divmod(ns // 1000, 1_000_000)
    expected = datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{micro:06d}Z"
    assert loki_stamp(ns) == expected
    assert _joined([(ns, "a line")]) == f"{expected} a line".encode()


def _joined_in_python(entries: list[tuple[int, str]]) -> bytes:
    """What the compiled `_joined` writes, in Python: each line behind `loki_stamp` and a blank, joined by newlines, a
    newline inside a line written U+FFFD."""
    return "\n".join(f"{loki_stamp(ns)} {line.replace(chr(10), chr(0xFFFD))}" for ns, line in entries).encode("utf-8")


_LINE = st.text(st.sampled_from(["a", " ", "\n", "\r", "\x00", "\u00e9", "\u20ac", "\U0001f600", "\ufffd", "["]),
                max_size=40)


@settings(max_examples=1000)
@given(st.lists(st.tuples(st.integers(0, MAX_NS), _LINE), max_size=12))
def test_the_buffer_is_the_lines_behind_their_times_as_written_in_python(entries: list[tuple[int, str]]) -> None:
    assert _joined(entries) == _joined_in_python(entries)


@pytest.mark.parametrize(("ns", "stamp"), [
    (0, "1970-01-01T00:00:00.000000Z"),
    (999, "1970-01-01T00:00:00.000000Z"),  # nanoseconds cut, not rounded
    (951_782_400 * 10**9 - 1, "2000-02-28T23:59:59.999999Z"),
    (951_782_400 * 10**9, "2000-02-29T00:00:00.000000Z"),  # 2000 is a leap year
    (4_107_542_400 * 10**9, "2100-03-01T00:00:00.000000Z"),  # 2100 is not
    (MAX_NS, "2262-04-11T23:47:16.854775Z"),
])
def test_lokis_time_at_the_calendars_edges(ns: int, stamp: str) -> None:
    assert _joined([(ns, "x")]) == f"{stamp} x".encode()
    assert loki_stamp(ns) == stamp


def test_a_buffer_of_no_entry_is_empty_and_what_is_no_entry_is_refused() -> None:
    assert _joined([]) == b""
    for entries, error in [
        (((1, "x"),), TypeError),  # a list
        ([(1, "x", "y")], TypeError),
        ([("1", "x")], TypeError),
        ([(1, b"x")], TypeError),
        ([(-1, "x")], ValueError),
        ([(MAX_NS + 1, "x")], ValueError),
        ([(1, "a lone surrogate \ud800")], UnicodeEncodeError),
    ]:
        with pytest.raises(error):
            _joined(entries)  # type: ignore[arg-type]
