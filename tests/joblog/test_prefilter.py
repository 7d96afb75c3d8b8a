"""The byte-level reader of a node's tail finds exactly what the parser finds when it reads every line.

Each scenario is a node's tail as bytes: the real lines of tests/joblog/fixtures.py and of the incident corpus,
each behind and before training output in the shapes collectors write (bare, CRI with and without a host, a stamp,
torchrun's role prefix, srun's label, Docker JSON), and generated logs holding every line shape the bulk step must
not take for a plain training line (two prefixes on a line, a prefix too far in, a malformed one, a CRI line in
parts, terminal escapes, NULs, invalid UTF-8, long lines, open tracebacks and summaries). `feed_tail` must give the
`NodeLog` -- records, rank sightings with their last lines, line numbers and counts -- that feeding each decoded line
gives.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable

import pytest

from bench.joblog_scan import _failure, _training_block, node_name
from providers.telemetry.joblog import prefilter
from providers.telemetry.joblog.lines import NodeParser, parse_lines
from providers.telemetry.joblog.nodes import exact_resolver
from providers.telemetry.joblog.patterns import MAX_LINE_CHARS
from providers.telemetry.joblog.prefilter import text_lines
from providers.telemetry.joblog.records import NodeLog
from tests.incidents.corpus import cases
from tests.joblog.fixtures import BASICSR_737, LLAMAFACTORY_6269
from tests.joblog.support import fixture_groups, loki_stamp

NODE = "node-a"
RESOLVE = exact_resolver([NODE, "node-b"])


class _CountingParser(NodeParser):
    fed = 0

    by_kind = 0  # of `fed`, the lines read by their shape (`NodeParser.kind_lines`)

    def feed(self, raw: str, marks=None) -> None:
        self.fed += 1
        super().feed(raw, marks)

    def kind_lines(self, lines) -> int:
        taken = super().kind_lines(lines)
        self.fed += taken
        self.by_kind += taken
        return taken

    root_cause_only = 0  # summaries read at once in torchelastic's own template (`_ROOT_CAUSE_ONLY`)

    def _root_cause_only(self, lines, stamps, root) -> None:
        self.root_cause_only += 1
        super()._root_cause_only(lines, stamps, root)


def _both(
    data: bytes, node: str = NODE, resolve: Callable[[str], str | None] = RESOLVE
) -> tuple[NodeLog, NodeLog, int]:
    """(what feed_tail finds, what a parse of every line finds, lines parsed one by one by feed_tail: fed, or read by
    their shape)."""
    parser = _CountingParser(node, resolve)
    prefilter.feed_tail(parser, data)
    return parser.result(), parse_lines(node, text_lines(data), resolve), parser.fed


def _training(steps: int, first: int = 0) -> list[str]:
    return [f"[rank{r}]: {{'loss': 2.{s % 1000:03d}, 'step': {s}}}" for s in range(first, first + steps)
            for r in range(8)]


#: collector shapes: each turns a job's line into the line a file holds
SHAPES: dict[str, Callable[[str, int], str]] = {
    "bare": lambda line, i: line,
    "cri": lambda line, i: f"2026-09-09T11:{i // 60 % 60:02d}:{i % 60:02d}.{i:06d}Z stderr F {line}",
    "cri-host": lambda line, i: f"2026-09-09T11:58:{i % 60:02d}.5+02:00 node-a stdout F {line}",
    "stamp-host": lambda line, i: f"2026-09-09 11:58:{i % 60:02d},123 node-a: {line}",
    "role": lambda line, i: f"[default{i % 8}]:{line}",
    "srun": lambda line, i: f"{i % 16:>2}: {line}",
    "loki": lambda line, i: f"2026-09-09T11:{i // 60 % 60:02d}:{i % 60:02d}.{i:06d}Z {line}",  # loki._joined
}


def _encode(lines: list[str], shape: Callable[[str, int], str]) -> bytes:
    return "".join(shape(line, i) + "\n" for i, line in enumerate(lines)).encode()


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_real_lines_of_the_reports_give_what_every_line_gives(shape: str) -> None:
    for name, lines in fixture_groups():
        for where, log in (("at the end", _training(30) + list(lines)),
                           ("before noise", _training(30) + list(lines) + _training(30, 30))):
            got, want, _ = _both(_encode(log, SHAPES[shape]))
            assert got == want, (name, where)


def test_the_incident_corpus_gives_what_every_line_gives() -> None:
    compared = 0
    for case in cases():
        resolve = exact_resolver(case.nodes)
        for node, lines in case.logs.items():
            data = "".join(line + "\n" for line in lines).encode()
            got, want, _ = _both(data, node, resolve)
            assert got == want, (case.id, node)
            compared += 1
    assert compared >= 61


def test_a_generated_fleet_gives_what_every_line_gives_and_only_its_failure_lines_are_parsed() -> None:
    nodes = [node_name(n) for n in range(4)]
    resolve = exact_resolver(nodes)
    for n in range(4):
        text = "".join(_training_block(n, step) for step in range(400)) + ("" if n == 3 else _failure(n))
        data = text.encode()
        got, want, fed = _both(data, nodes[n], resolve)
        assert got == want
        assert want.lines == text.count("\n") >= 3_600
        # the training lines (and the NCCL INFO lines between them) are taken in bulk: the failure's lines are fed
        assert fed == 0 if n == 3 else 0 < fed <= len(_failure(n).splitlines())
        assert set(got.ranks) == set(range(n * 8, n * 8 + 8))


#: line shapes the bulk step must not take for plain training lines, each made from a rank and a line number
TRICKY: tuple[Callable[[int, int], str], ...] = (
    lambda r, i: f"[rank{r}]: quoting [rank{r + 1}]: in a message",  # two prefixes on one line
    lambda r, i: " " * 505 + f"[rank{r}]: far in",  # the prefix at the edge of where the parser looks
    lambda r, i: " " * 520 + f"[rank{r}]: too far in",
    lambda r, i: f"[rankX]: malformed, then [rank{r}]: a real one",
    lambda r, i: f"[rank{r}]: \x1b[32mgreen\x1b[0m text",
    lambda r, i: f"[rank{r}]: a NUL\x00 inside",
    lambda r, i: f"2026-09-09T11:58:0{i % 10}.1Z stderr P [rank{r}]: the first half of a ",  # a CRI line in parts
    lambda r, i: "x" * 20_000 + f" [rank{r}]: beyond the line bound",
    lambda r, i: f"[rank{r}]: Traceback (most recent call last):",
    lambda r, i: f'[rank{r}]:   File "train.py", line {i}, in <module>',
    lambda r, i: f"[rank{r}]: RuntimeError: CUDA error: an illegal memory access was encountered",
    lambda r, i: "Traceback (most recent call last):",
    lambda r, i: json.dumps({"log": f"[rank{r}]: in a JSON line\n", "stream": "stderr",
                             "time": "2026-09-09T11:58:00.1Z"}),
    lambda r, i: f"[rank{r:03d}]: a zero-padded rank",
    lambda r, i: f"[default{r}]:[rank{r}]: behind torchrun's prefix",
    lambda r, i: f"[rank{r}]: caf\u00e9 \u2588\u2588 {i}",
    lambda r, i: "Failures:",
    lambda r, i: f"[PG ID 0 PG GUID 0(default_pg) Rank {r}] ProcessGroupNCCL initialized",
    lambda r, i: f"[rank{r}]: step {i}\r",
    lambda r, i: f"{r:>2}: [rank{r}]: under srun's label",
    lambda r, i: f"[rank{r}]: {{'loss': 1.{i:04d}}}",
)


#: the shapes of TRICKY that open a block the parser follows (after one, lines are fed one by one until it ends)
BLOCK_KINDS = frozenset({6, 8, 11, 16})


def _mixed(seed: int, kinds: range | frozenset[int], share: float) -> list[str]:
    rng = random.Random(seed)
    lines: list[str] = []
    for i in range(1_500):
        if rng.random() < share:
            kind = rng.choice(sorted(kinds))
            lines.append(TRICKY[kind](rng.randrange(12), i))
        else:
            lines.append(f"[rank{rng.randrange(12)}]: plain {i}")
    return lines


@pytest.mark.parametrize("seed", range(8))
def test_lines_the_bulk_step_must_not_take_for_training_lines_give_what_every_line_gives(seed: int) -> None:
    lines = _mixed(seed, frozenset(range(len(TRICKY))) - BLOCK_KINDS, 0.08)
    data = "\n".join(lines).encode()  # the last line without its newline
    if seed % 3 == 0:
        data += b"\n\xff\xfe[rank3]: after invalid bytes\n\n"
    got, want, fed = _both(data)
    assert got == want
    assert fed < len(lines) * 3 // 5  # many lines were taken in bulk, around the tricky ones


@pytest.mark.parametrize("seed", range(8))
def test_blocks_among_tricky_lines_give_what_every_line_gives(seed: int) -> None:
    lines = _mixed(seed, range(len(TRICKY)), 0.05 + seed / 100)
    got, want, _ = _both("\n".join(lines).encode())
    assert got == want


@pytest.mark.parametrize("seed", range(6))
def test_runs_of_candidate_lines_give_what_every_line_gives(seed: int) -> None:
    # most lines candidates: runs of them one after the other (one search match each), blocks opening and closing
    # inside a run, runs at the start and at the end of the tail (with and without its last newline)
    lines = _mixed(seed, range(len(TRICKY)), 0.5 + seed / 15)
    data = "\n".join(lines).encode() + (b"\n" if seed % 2 else b"")
    got, want, fed = _both(data)
    assert got == want
    assert fed > len(lines) // 3  # the runs' lines were fed one by one


def test_invalid_utf8_before_a_prefix_and_an_empty_tail() -> None:
    data = b"\xff\xff\xff[rank2]: after three invalid bytes\n[rank2]: plain\n\n\n"
    got, want, fed = _both(data)
    assert got == want and got.ranks[2].last.number == 2 and got.lines == 4 and fed == 0
    got, want, fed = _both(b"")
    assert got == want and got.lines == 0


def test_each_candidate_word_is_a_marker_of_the_table_or_a_structural_one() -> None:
    from providers.telemetry.joblog.signals import STANDALONE

    words = prefilter.candidate_words()
    assert set(STANDALONE) <= set(words)
    assert set(words) == set(STANDALONE) | set(prefilter.STRUCTURAL) | set(prefilter.REREAD)


#: torchelastic summaries the buffer reader cuts out whole, and variants it must hand to the parser line by line
SUMMARY = [
    "Failures:", "  <NO_OTHER_FAILURES>", "-" * 60, "Root Cause (first observed failure):", "[0]:",
    "  time      : 2026-09-09_17:59:59", "  host      : node-a", "  rank      : 3 (local_rank: 3)",
    "  exitcode  : -6 (pid: 9001)", "  error_file: <N/A>", "  traceback : Signal 6 (SIGABRT) received by PID 9001",
    "=" * 60,
]


@pytest.mark.parametrize("variant", [
    lambda lines: lines,
    lambda lines: [*lines[:10], "  traceback : RuntimeError: ncclSystemError: unhandled system error", lines[-1]],
    lambda lines: [*lines[:6], "node-a: stray output of the node's own host", *lines[6:]],
    lambda lines: [*lines[:6], "[rank2]: a rank's line cut into the summary", *lines[6:]],
    lambda lines: [*lines[:6], " 3: srun's label", *lines[6:]],
    lambda lines: [*lines[:6], "[default3]:a role's line", *lines[6:]],
    lambda lines: [*lines[:6], "Traceback (most recent call last):", *lines[6:]],
    lambda lines: [*lines[:6], "  host      : node-b\r", *lines[6:]],
    lambda lines: [*lines[:6], "  host\t    : node-b", *lines[6:]],
    lambda lines: [*lines[:6], '{"log": "a JSON line"}', *lines[6:]],
    lambda lines: [*lines[:6], "3 a line starting with a digit", *lines[6:]],
    lambda lines: [*lines[:6], "[PG 0 Rank 3] a marker", *lines[6:]],
    lambda lines: [lines[0], "  caf\u00e9", *lines[1:]],
    lambda lines: lines[:-1],  # no closing line: fed one by one
])
def test_torchelastic_s_summary_cut_out_of_the_buffer_gives_what_every_line_gives(variant) -> None:
    for before in ([], _training(3), ["Traceback (most recent call last):"]):
        lines = [*before, *variant(SUMMARY), *_training(2)]
        got, want, _ = _both("\n".join(lines).encode())
        assert got == want


@pytest.mark.parametrize(("line", "at_once"), [
    (None, True),
    ("  traceback : RuntimeError: ncclSystemError: unhandled system error", False),  # another kind's marker
    ("  note      : Timed out waiting for job step to complete", False),  # a marker the search found mid-line
    ("(rank 3) a line of its own", True),  # ` (rank ` is a marker of the table: here the newline takes its blank
])
def test_a_summary_is_taken_at_once_unless_the_search_found_another_kinds_marker_in_it(line, at_once: bool) -> None:
    lines = [*SUMMARY[:10], line, SUMMARY[-1]] if line else SUMMARY
    got, want, fed = _both("\n".join([*_training(2), *lines, *_training(1)]).encode())
    assert got == want
    assert (fed == 0) is at_once


def _summary_lines(rng: random.Random) -> list[str]:
    """A torchelastic summary in its own template, each part now and then another way (a step off the template, or
    another shape the summary's lines take: other failures, a traceback over several lines)."""

    def pick(usual: str, *others: str) -> str:
        return rng.choice(others) if rng.random() < 0.06 else usual

    values = {
        "time": pick("2026-09-09_17:59:59", "", "  2026-09-09_17:59:59  "),
        "host": pick(rng.choice([NODE, "node-b", "other-host", "node-a.cluster"]), "x" * 5000),
        "rank": pick(f"{rng.randrange(64)} (local_rank: {rng.randrange(8)})", "3", "3 (local_rank: x)"),
        "exitcode": pick(f"{rng.choice([-6, -9, 1, 137])} (pid: {rng.randrange(1, 99999)})", "-6"),
        "error_file": pick("<N/A>", "/tmp/torchelastic_x/error.json"),
        "traceback": pick("Signal 6 (SIGABRT) received by PID 9001", "To enable traceback see: https://x/y",
                          "Traceback (most recent call last):", "RuntimeError: boom"),
    }
    fields = [f"  {key}{' ' * (10 - len(key))}: {value}" for key, value in values.items()]
    if rng.random() < 0.05:
        fields[rng.randrange(6)] = fields[rng.randrange(6)]  # a field twice, another missing
    if rng.random() < 0.05:
        fields.insert(6, "    File \"train.py\", line 3, in <module>")  # a traceback over several lines
    if rng.random() < 0.15:  # the padding before `:`, up to past what a field's pattern takes
        at = rng.randrange(6)
        fields[at] = fields[at].replace(" :", rng.choice([":", "  :", " :  ", "   :", "    :", "     :"]), 1)
    failures = [pick("  <NO_OTHER_FAILURES>", "<NO_OTHER_FAILURES>", "  <NO_OTHER_FAILURES> ")]
    if rng.random() < 0.08:
        failures = ["[1]:", *fields[:5]]  # another failure before the root cause
    entry = pick(f"[{rng.randrange(1_000_000)}]:", "[1234567]:", " [0]:", "[0]: ")
    return [pick("Failures:", "Failures: ", " Failures:"), *failures, pick("-" * 60, "-" * 60 + " ", "-"),
            pick("Root Cause (first observed failure):", "Root Cause:", "Root Cause (first observed failure): "),
            entry, *fields, pick("=" * 60, "= " * 30, "=")]  # fmt: skip


def test_generated_summaries_read_at_once_in_their_template_give_what_every_line_gives() -> None:
    rng = random.Random(20261207)
    at_once = refused = 0
    for i in range(1_500):
        lines = _summary_lines(rng)
        if i % 3 == 0:
            lines = _loki(lines)
        data = "\n".join([*_training(1), *lines, *_training(1)]).encode()
        parser = _CountingParser(NODE, RESOLVE)
        prefilter.feed_tail(parser, data)
        assert parser.result() == parse_lines(NODE, text_lines(data), RESOLVE), lines
        at_once += parser.root_cause_only
        refused += not parser.root_cause_only
    assert at_once > 300 and refused > 300, (at_once, refused)


def _loki(lines: list[str]) -> list[str]:
    """`lines` as the Loki source hands them over: each entry's time in front (`loki._joined`'s shape)."""
    return [f"2026-09-09T11:58:{i % 60:02d}.{i:06d}Z {line}" for i, line in enumerate(lines)]


@pytest.mark.parametrize(("variant", "at_once"), [
    (lambda lines: lines, True),
    (lambda lines: [*lines[:6], "2026-09-09T11:58:06.5+00:00 " + lines[6][28:], *lines[7:]], True),  # another time
    (lambda lines: [*lines[:6], "2026-13-09" + lines[6][10:], *lines[7:]], True),  # in Loki's shape, no real time
    (lambda lines: [*lines[:6], lines[6][:27] + "  " + lines[6][28:], *lines[7:]], True),  # two blanks after it
    (lambda lines: [*lines[:6], lines[6][:28] + "stderr " + lines[6][28:], *lines[7:]], False),  # a stream
    (lambda lines: [*lines[:6], lines[6][:28] + "node-a stdout F" + lines[6][28:], *lines[7:]], False),  # CRI
    (lambda lines: [*lines[:6], lines[6][28:], *lines[7:]], False),  # a line without a time
    (lambda lines: [*lines[:6], lines[6][:28] + " 3: srun's label", *lines[7:]], False),
    (lambda lines: [*lines[:6], lines[6][:28] + "node-a: stray output of the node's own host", *lines[7:]], False),
    (lambda lines: [*lines[:6], lines[6][:28] + "[rank2]: a rank's line", *lines[7:]], False),
    (lambda lines: lines[:-1], False),  # no closing line
    # another kind's marker in a line's text; the table's marker ` (rank ` across a line's time and its text is in
    # neither the line's text nor the time: the line is a summary's line
    (lambda lines: [*lines[:10], lines[10][:28] + "  traceback : RuntimeError: ncclSystemError: x", lines[11]], False),
    (lambda lines: [*lines[:10], lines[10][:27] + " (rank 3) a line after its time", lines[11]], True),
])
def test_a_summary_behind_lokis_time_is_taken_at_once_with_what_every_line_gives(variant, at_once: bool) -> None:
    # the Loki source's lines each carry Loki's time in front: the parser reads it as the line's time
    lines = variant(_loki(SUMMARY))
    got, want, fed = _both("\n".join(lines).encode())
    assert got == want
    assert want.failures and want.failures[0].lines[0].observed_at is not None
    assert (fed == 0) is at_once


def _catalogue_lines() -> list[list[str]]:
    """Each searched row's example, in every shape a log puts it and quoted as PyTorch and XLA quote NCCL's last
    warning, each group of lines as `tests/joblog/test_signals.py` reads it."""
    from tests.joblog import test_signals as ts

    groups: list[list[str]] = []
    for row in ts.SEARCHED:
        example = ts._lines(row.id)
        for _, prefix in ts.SHAPES:
            if row.parse not in ts.NO_RANK or not prefix:
                groups.append([prefix + line for line in example])
        groups.append([f"[rank1]: RuntimeError: {line}" for line in example])
        if row.catalogue == "nccl_warn" and " NCCL WARN " in row.example:
            message = row.example.split(" NCCL WARN ", 1)[1]
            groups.append(["[rank2]:ncclInternalError: Internal check failed.", "[rank2]:Last error:",
                           "[rank0]:a line of another rank", f"[rank2]:{message}"])
            groups.append([f"[rank2]:INTERNAL: NCCL operation ncclAllReduce failed: internal error. Last NCCL "
                           f"warning(error) log entry (may be unrelated) '{message}'."])
    return groups


def test_every_row_of_the_catalogues_between_training_lines_gives_what_every_line_gives() -> None:
    # a few rows at a time (so that no record bound is reached), each group behind and before training output
    groups = _catalogue_lines()
    assert len(groups) > 5_000
    for start in range(0, len(groups), 40):
        lines: list[str] = []
        for number, group in enumerate(groups[start : start + 40]):
            lines += _training(2, number) + group
        got, want, _ = _both(("\n".join(lines) + "\n").encode())
        assert got == want, start


@pytest.mark.parametrize("ranks", [3, 20, 300])
def test_ranks_that_first_write_deep_in_a_gap_give_what_every_line_gives(ranks: int) -> None:
    # the search for unknown keys starts from the keys of the gap's first lines: ranks that first write further on
    # are found by it (a few at a time), and a node whose ranks keep appearing is placed by the byte patterns
    lines = []
    for i in range(3_000):
        joined = min(ranks, 1 + i // 10)  # rank k first writes at line 10 k
        rank = [1, 12, 123, 7, 70][i % 5] if i % 7 == 0 else i % joined
        lines.append(f"[rank{rank}]: plain {i}" if i % 11 else f"[rank{rank:03d}]: zero-padded {i}")
    for data in ("\n".join(lines).encode(), ("\n".join(lines) + "\n[rankX]: malformed at the end\n").encode()):
        got, want, fed = _both(data)
        assert got == want
        assert fed < 50


def _by_shape(lines: list[str]) -> tuple[NodeLog, NodeLog, int]:
    """(what feed_tail finds, what a parse of every line finds, lines read by their shape) for `lines` behind some
    training lines."""
    data = "".join(f"{line}\n" for line in _training(20) + lines).encode()
    parser = _CountingParser(NODE, RESOLVE)
    prefilter.feed_tail(parser, data)
    return parser.result(), parse_lines(NODE, text_lines(data), RESOLVE), parser.by_kind


#: PyTorch 2.6's watchdog timeout and progress lines (three ranks each) and 2.5's `Timeout at NCCL work` lines
_KIND_LINES = [*LLAMAFACTORY_6269, *BASICSR_737]


def test_watchdog_and_progress_lines_are_read_by_their_shape_with_what_every_line_gives() -> None:
    got, want, by_shape = _by_shape(_KIND_LINES)
    assert got == want
    assert len(want.timeouts) == 6 and len(want.progress) == 7
    assert by_shape == 13  # every timeout and progress line; `Some NCCL operations have failed` is fed


_WATCHDOG = LLAMAFACTORY_6269[0]
_PROGRESS = LLAMAFACTORY_6269[1]
_SEQ_ID_TAIL = (
    " failure detected by watchdog at work sequence id: 9 PG status: last enqueued work: 9, last completed work: 8"
)


@pytest.mark.parametrize(
    ("change", "by_shape"),
    [
        # read by their shape: what every line gives, the same line read another way
        (lambda w, p: (w.replace(" ProcessGroupNCCL", " 4321 ProcessGroupNCCL"), p), 13),  # a thread id in the header
        (lambda w, p: (w.removesuffix("."), p.removesuffix(".")), 13),  # a line cut before its period
        (lambda w, p: (w, p.replace("completed NCCL work: 7752", "completed NCCL work: -1")), 13),
        (lambda w, p: (w.replace("SeqNum=7753, ", ""), p), 13),  # PyTorch 2.1's line: no sequence number
        (lambda w, p: (w.replace("[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] ", ""), p), 13),  # no header
        (lambda w, p: (w.replace("_REDUCE_SCATTER_BASE", "A" * 41), p), 13),  # an op's first 40 letters, as read
        (lambda w, p: (w.replace("NumelIn", "Tag=T, Timeout(ms) TTimeout(ms, NumelIn"), p), 13),  # `T`s, no tail
        # one step off the shape: the line is fed, and gives what every line gives
        (lambda w, p: (w.replace("Watchdog", "\x1b[31mWatchdog"), p), 12),  # a terminal escape
        (lambda w, p: (w.replace("Watchdog", "W\u00e4tchdog Watchdog"), p), 12),  # not ASCII
        (lambda w, p: (w.replace("OpType", "Note=Timeout(ms)=soon, OpType"), p), 12),
        (lambda w, p: (w.replace("NumelIn", "Timeout(ms)=soon, NumelIn"), p), 12),  # a first tail that is none
        (lambda w, p: (w.replace("SeqNum=7753", "SeqNum=" + "7" * 20), p), 12),  # more digits than the reader reads
        (lambda w, p: (w.replace("[Rank 0]", "[Rank 0] [PG 1 Rank 0]"), p), 12),  # two markers
        (lambda w, p: (w.replace("[rank0]:", "[rank0]:  "), p), 12),  # two blanks after the prefix
        (lambda w, p: (w.replace("ProcessGroupNCCL.cpp", "[PG 3] ProcessGroupNCCL.cpp"), p), 12),  # a marker's text
        (lambda w, p: (w, p.replace("[PG 1 Rank 0]", "[PG 1 (a[b) Rank 0]")), 12),  # a bracket in the group's name
        (lambda w, p: (w, p + _SEQ_ID_TAIL), 12),  # a second progress shape behind it
        (lambda w, p: (w + " CUDA error: an illegal memory access was encountered", p), 12),  # another row's marker
        (lambda w, p: (w + " " + "x" * MAX_LINE_CHARS, p), 12),  # past MAX_LINE_CHARS: read cut
    ],
)
def test_a_kind_line_read_by_its_shape_or_fed_gives_what_every_line_gives(change, by_shape: int) -> None:
    watchdog, progress = change(_WATCHDOG, _PROGRESS)
    lines = [watchdog, progress, *_KIND_LINES[2:]]
    got, want, taken = _by_shape(lines)
    assert got == want
    assert taken == by_shape


def test_a_kind_line_inside_a_block_is_fed() -> None:
    # rank 0's traceback is open (it never closes here): every line after it is followed one by one
    got, want, taken = _by_shape(["[rank0]: Traceback (most recent call last):", *_KIND_LINES])
    assert got == want
    assert taken == 0


def test_loki_stamped_kind_lines_are_read_by_their_shape_with_what_every_line_gives() -> None:
    # the Loki source puts each entry's time in front of its line (`loki._joined`): the sighting and the records
    # carry that time, as the parser reads it
    stamped = [f"2026-09-09T11:58:{i:02d}.{i:06d}Z {line}" for i, line in enumerate(_KIND_LINES)]
    got, want, taken = _by_shape(stamped)
    assert got == want
    assert taken == 13
    assert {t.line.observed_at.second for t in want.timeouts} == {
        i for i, line in enumerate(_KIND_LINES) if "Watchdog caught" in line
    }
    # a time the Loki source never writes (an offset, a stream after it) is fed, and read as every line reads it
    for other in ("2026-09-09T11:58:00.000000+00:00 ", "2026-09-09T11:58:00.000000Z stderr "):
        got, want, taken = _by_shape([other + line for line in _KIND_LINES])
        assert got == want
        assert taken == 0


def test_lokis_time_in_front_of_a_kind_line_is_the_sources_own_and_a_time_that_is_none_gives_none() -> None:
    from providers.telemetry.joblog.patterns import LOKI_STAMP

    assert {len(loki_stamp(ns)) for ns in (0, 1_789_000_000_123_456_789, 253_402_300_799_999_999_999)} == {LOKI_STAMP}
    # a 13th month and a 61st second: read by the shape, no time, as the parser reads them
    stamped = [f"2026-13-09T11:58:{i:02d}.{i:06d}Z {line}" for i, line in enumerate(_KIND_LINES)]
    stamped[3] = "2026-09-09T11:58:61.000003Z " + _KIND_LINES[3]
    got, want, taken = _by_shape(stamped)
    assert got == want
    assert taken == 13
    assert all(t.line.observed_at is None for t in want.timeouts)


def test_a_run_of_kind_lines_broken_by_a_time_the_parser_does_not_read_is_taken_on_both_sides_of_it() -> None:
    # the shape's lines are read as a run, one after the other; a line whose time in front is not Loki's ends the run
    # (it is fed), and the lines after it start another
    stamped = [f"2026-09-09T11:58:{i:02d}.{i:06d}Z {line}" for i, line in enumerate(_KIND_LINES)]
    stamped[5] = "2026-09-09T11:58:05.000005+00:00 " + _KIND_LINES[5]
    got, want, taken = _by_shape(stamped)
    assert got == want
    assert taken == 12  # 13 lines in the shape, one of them fed
    assert stamped[5] in {t.line.text for t in want.timeouts} | {p.line.text for p in want.progress}


def test_the_loki_sources_own_buffer_is_read_by_the_shape() -> None:
    # what the Loki source hands the reader (`loki._joined`: each entry's time in front of it)
    from providers.telemetry.joblog.loki import _joined

    base = 1_789_000_000_000_000_000  # ns
    entries = [(base + i * 1_000_000_007, line) for i, line in enumerate(_training(20) + list(_KIND_LINES))]
    data = _joined(entries)
    parser = _CountingParser(NODE, RESOLVE)
    prefilter.feed_tail(parser, data)
    assert parser.result() == parse_lines(NODE, text_lines(data), RESOLVE)
    assert parser.by_kind == 13
