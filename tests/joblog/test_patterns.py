"""Line parsing cannot blow up: every pattern is linear by construction, and pathological lines are bounded."""

import re
import re._constants as c  # the compiled form of a pattern, as `re` itself parses it
import re._parser as sre_parse

import pytest

from providers.kernel_log.joblog import patterns as lines
from providers.kernel_log.joblog.lines import NodeParser
from providers.kernel_log.joblog.nodes import exact_resolver
from providers.kernel_log.joblog.patterns import MAX_LINE_CHARS, PATTERNS
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
