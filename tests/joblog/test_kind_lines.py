"""The compiled reading of PyTorch's watchdog timeout and progress lines (`prefilter.read_kind_line`, built from
`_kind_lines.c`) against a regular expression of the same shape, on generated lines, on lines one step off, and on
any bytes.

`SHAPE` below says the shape as a pattern (possessive repeats: a digit run longer than its bound fails the line, as
the compiled reading does); `by_pattern` is what the reading must give for a line. That the shape gives what the
node parser gives for every such line is `tests/joblog/test_prefilter.py`'s part.
"""

from __future__ import annotations

import random
import re

import pytest

from providers.telemetry.joblog.patterns import MAX_LINE_CHARS
from providers.telemetry.joblog.prefilter import _LOKI_TIME, read_kind_line

SHAPE = re.compile(
    rb"(?P<prefix>(?P<stamp>" + _LOKI_TIME + rb")?\[rank(?P<rank>\d{1,9}+)\]: ?+)"
    rb"(?:\[[IWEF]\d{3,4}+ \d\d:\d\d:\d\d\.\d{1,9}+ (?:\d{1,10}+ )?[A-Za-z_][A-Za-z0-9_.]{0,63}+:\d{1,6}+\] )?"
    rb"(?P<head>\[(?:PG (?:ID )?\d{1,9}+ (?:PG GUID [!-Z\\^-~]{1,128}+ |\([ -(*-Z\\^-~]{1,128}+\) )?)?)"
    rb"Rank (?P<group_rank>\d{1,9}+)\] "
    rb"(?:Watchdog caught collective operation timeout: WorkNCCL\((?:SeqNum=(?P<seq>\d{1,19}+), )?"
    rb"OpType=(?P<op>[A-Z_]{1,40}+)[ -SU-~]*+(?:T(?!imeout\(ms\)=)[ -SU-~]*+)*"
    rb"Timeout\(ms\)=(?P<timeout>\d{1,12}+)\) ran for (?P<ran>\d{1,15}+) milliseconds before timing out\.?"
    rb"|(?:Exception \(either an error or timeout\) detected by watchdog at work|Timeout at NCCL work): "
    rb"(?P<work>-?\d{1,19}+), last enqueued NCCL work: (?P<enq>-?\d{1,19}+), "
    rb"last completed NCCL work: (?P<done>-?\d{1,19}+)\.?)"
)


def by_pattern(data: bytes, start: int, end: int, low: int, watchdog: bool, max_chars: int) -> tuple | None:
    """What `read_kind_line` must give, read with `SHAPE`."""
    if end - start > max_chars:
        return None
    m = SHAPE.fullmatch(data, start, end)
    if m is None or low < m.end("prefix") - start:
        return None
    if watchdog != (m["op"] is not None):
        return None
    if watchdog:
        values = (None if m["seq"] is None else int(m["seq"]), m["op"].decode(), int(m["timeout"]), int(m["ran"]))
    else:
        values = (int(m["work"]), int(m["enq"]), int(m["done"]))
    return (data[start:end].decode("ascii"), m["stamp"] is not None, int(m["rank"]), m["head"].decode("ascii"),
            int(m["group_rank"]), watchdog, values)  # fmt: skip


# ---------------------------------------------------------------- generated lines


#: how often a part of a generated line is one step off its shape (each line has about a dozen parts)
_OFF = 0.02


def _off(rng: random.Random) -> bool:
    return rng.random() < _OFF


def _digits(rng: random.Random, low: int, high: int) -> str:
    """A digit run within its bounds (now and then with leading zeros), or now and then one digit shorter or longer."""
    n = rng.choice([max(0, low - 1), high + 1]) if _off(rng) else rng.choice([low, high, rng.randint(low, high)])
    text = "".join(rng.choice("0123456789") for _ in range(n))
    return ("00" + text)[:n] if rng.random() < 0.1 else text


def _text(rng: random.Random, alphabet: str, low: int, high: int) -> str:
    n = rng.choice([max(0, low - 1), high + 1]) if _off(rng) else rng.choice([low, high, rng.randint(low, high)])
    return "".join(rng.choice(alphabet) for _ in range(n))


def _pick(rng: random.Random, usual: list[str], off: list[str]) -> str:
    """One of the usual texts, or now and then one a step off."""
    return rng.choice(off) if _off(rng) else rng.choice(usual)


_PRINTABLE = "".join(chr(c) for c in range(0x20, 0x7F))
_GUID = "".join(c for c in _PRINTABLE if c not in " []")
_NAME = "".join(c for c in _PRINTABLE if c not in ")[]")


def _prefix(rng: random.Random) -> str:
    stamp = ""
    if rng.random() < 0.3:
        stamp = f"2026-09-09T11:58:{_digits(rng, 2, 2)}.{_digits(rng, 6, 6)}Z "
        stamp = stamp.replace("Z ", _pick(rng, ["Z "], ["+00:00 ", "Z", "Z  ", "z "]))
    return f"{stamp}[rank{_digits(rng, 1, 9)}]:" + _pick(rng, ["", " "], ["  ", "\t"])


def _header(rng: random.Random) -> str:
    if rng.random() < 0.25:
        return ""
    thread = f"{_digits(rng, 1, 10)} " if rng.random() < 0.3 else ""
    name = _pick(rng, list("Aa_"), list("9.")) + _text(rng, "abcXYZ019_.", 0, 63) + _pick(rng, [""], ["-x", " "])
    return (f"[{_pick(rng, list('IWEF'), list('XP'))}{_digits(rng, 3, 4)} {_digits(rng, 2, 2)}:{_digits(rng, 2, 2)}:"
            f"{_digits(rng, 2, 2)}.{_digits(rng, 1, 9)} {thread}{name}:{_digits(rng, 1, 6)}]"
            + _pick(rng, [" "], ["", "  "]))  # fmt: skip


def _marker(rng: random.Random) -> str:
    kind = rng.randrange(5)
    pg = ""
    if kind >= 1:
        pg = f"PG {'ID ' if rng.random() < 0.5 else ''}{_digits(rng, 1, 9)} "
    if kind == 3:
        pg += f"PG GUID {_text(rng, _GUID, 1, 128)} "
    elif kind == 4:
        pg += f"({_text(rng, _NAME, 1, 128)}) "
    return f"[{pg}Rank {_digits(rng, 1, 9)}]" + _pick(rng, [" "], ["", "  "])


def _watchdog(rng: random.Random) -> str:
    seq = f"SeqNum={_digits(rng, 1, 19)}, " if rng.random() < 0.7 else ""
    op = _pick(rng, [_text(rng, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_", 1, 40)], ["allreduce", "T"])
    filler = _pick(
        rng, [", NumelIn=466119168, NumelOut=466119168, ", ", ", "", " Tag=T, Timeout(ms) TTimeout(ms, "],
        ["Timeout(ms)=soon, ", ", Note=\x1b[1m, ", ", N\u00e4me, "],
    )
    tail = _pick(rng, [".", ""], ["..", " ", ". extra"])
    return (f"Watchdog caught collective operation timeout: WorkNCCL({seq}OpType={op}{filler}"
            f"Timeout(ms)={_digits(rng, 1, 12)}) ran for {_digits(rng, 1, 15)} milliseconds before timing out{tail}")


def _progress(rng: random.Random) -> str:
    head = _pick(rng, ["Exception (either an error or timeout) detected by watchdog at work", "Timeout at NCCL work"],
                 ["Exception detected by watchdog at work"])  # fmt: skip

    def number() -> str:
        return _pick(rng, ["", "-"], ["--", "+"]) + _digits(rng, 1, 19)

    tail = _pick(rng, [".", ""], ["..", " "])
    return (f"{head}: {number()}, last enqueued NCCL work: {number()}, last completed NCCL work: {number()}{tail}")


def generated_line(rng: random.Random) -> str:
    message = _watchdog(rng) if rng.random() < 0.5 else _progress(rng)
    return _prefix(rng) + _header(rng) + _marker(rng) + message


def _case(rng: random.Random, line: bytes) -> tuple[bytes, int, int, int, bool, int]:
    """The line inside other bytes, with a marker's first start and the kind and length the caller would pass."""
    before = rng.choice([b"", b"x\n", b"[rank1]: before\n" * rng.randrange(1, 3)])
    after = rng.choice([b"", b"\n", b"\nafter"])
    data = before + line + after
    low = rng.choice([len(line)] * 4 + [0, 9, 12, 40])  # mostly past the prefix: the marker is in the message
    max_chars = rng.choice([MAX_LINE_CHARS] * 4 + [len(line), len(line) - 1])
    return data, len(before), len(before) + len(line), low, rng.random() < 0.5, max_chars


def test_generated_lines_read_as_the_pattern_reads_them() -> None:
    rng = random.Random(20261207)
    read = refused = 0
    for _ in range(30_000):
        line = generated_line(rng).encode("utf-8")
        data, start, end, low, watchdog, max_chars = _case(rng, line)
        wanted = []
        for kind in (watchdog, not watchdog):
            want = by_pattern(data, start, end, low, kind, max_chars)
            assert read_kind_line(data, start, end, low, kind, max_chars) == want, (line, low, kind, max_chars)
            wanted.append(want)
        if wanted == [None, None]:
            refused += 1
        else:
            read += 1
    # both ways taken often: the generator is near the shape's edges, not only far inside or outside it
    assert read > 3_000 and refused > 3_000, (read, refused)


def _mutated(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randrange(1, 4)):
        kind, at = rng.randrange(4), rng.randrange(len(out) + 1)
        if kind == 0 and out:
            out[min(at, len(out) - 1)] = rng.choice([rng.randrange(256), 0x54, 0x5B, 0x5D, 0x20, 0x30])
        elif kind == 1:
            out[at:at] = rng.choice([b"T", b"Timeout(ms)=", b"[", b"]", b" ", b"9", b"\n", b"\x00", b"\xc3\xa4"])
        elif kind == 2:
            del out[at : at + rng.randrange(1, 6)]
        else:
            out[at:at] = out[max(0, at - 8) : at]
    return bytes(out)


def test_lines_one_step_off_read_as_the_pattern_reads_them() -> None:
    rng = random.Random(7)
    for _ in range(20_000):
        line = _mutated(rng, generated_line(rng).encode("utf-8"))
        for watchdog in (True, False):
            got = read_kind_line(line, 0, len(line), len(line), watchdog, MAX_LINE_CHARS)
            assert got == by_pattern(line, 0, len(line), len(line), watchdog, MAX_LINE_CHARS), line


_WATCHDOG = (
    b"[rank3]:[E909 17:59:58.000414643 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation "
    b"timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) "
    b"ran for 600067 milliseconds before timing out."
)
_PROGRESS = (
    b"[rank3]:[E909 17:59:58.000465227 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank 3] Exception "
    b"(either an error or timeout) detected by watchdog at work: 1580, last enqueued NCCL work: 1582, last completed "
    b"NCCL work: 1579."
)


def test_pytorchs_own_lines_give_their_values() -> None:
    assert read_kind_line(_WATCHDOG, 0, len(_WATCHDOG), 200, True, MAX_LINE_CHARS) == (
        _WATCHDOG.decode(), False, 3, "[", 3, True, (1580, "ALLREDUCE", 600000, 600067)
    )
    assert read_kind_line(_PROGRESS, 0, len(_PROGRESS), 200, False, MAX_LINE_CHARS) == (
        _PROGRESS.decode(), False, 3, "[PG ID 0 PG GUID 0(default_pg) ", 3, False, (1580, 1582, 1579)
    )
    # the other kind's reading, a marker inside the prefix, a line longer than the caller reads: not read
    assert read_kind_line(_WATCHDOG, 0, len(_WATCHDOG), 200, False, MAX_LINE_CHARS) is None
    assert read_kind_line(_PROGRESS, 0, len(_PROGRESS), 7, False, MAX_LINE_CHARS) is None
    assert read_kind_line(_PROGRESS, 0, len(_PROGRESS), 8, False, MAX_LINE_CHARS) is not None
    assert read_kind_line(_PROGRESS, 0, len(_PROGRESS), 200, False, len(_PROGRESS) - 1) is None


#: a line of each kind with every bounded run in it named, and each run's bound
_TEMPLATE = (
    "[rank{rank}]:[E{level} 17:59:58.{fraction} {thread} {name}:{number}] [PG ID {pg} PG GUID {guid} Rank {group}] "
)
_BOUNDS = {"rank": 9, "level": 4, "fraction": 9, "thread": 10, "name": 64, "number": 6, "pg": 9, "guid": 128,
           "group": 9, "seq": 19, "op": 40, "timeout": 12, "ran": 15, "work": 19}  # fmt: skip


def _bounded(field: str, size: int) -> tuple[bytes, bytes]:
    """A watchdog line and a progress line with `field`'s run `size` long, every other run as short as it may be."""
    runs = {name: ("A" if name in ("name", "guid", "op") else "7") for name in _BOUNDS}
    runs["level"] = "777"
    runs[field] = ("A" if field in ("name", "guid", "op") else "7") * size
    head = _TEMPLATE.format(**runs)
    watchdog = (f"{head}Watchdog caught collective operation timeout: WorkNCCL(SeqNum={runs['seq']}, "
                f"OpType={runs['op']}, NumelIn=1, Timeout(ms)={runs['timeout']}) ran for {runs['ran']} milliseconds "
                "before timing out.")  # fmt: skip
    progress = (f"{head}Timeout at NCCL work: {runs['work']}, last enqueued NCCL work: {runs['work']}, last "
                f"completed NCCL work: -{runs['work']}.")  # fmt: skip
    return watchdog.encode(), progress.encode()


@pytest.mark.parametrize("field", sorted(_BOUNDS))
def test_each_run_is_read_to_its_bound_and_a_longer_one_is_not(field: str) -> None:
    for size, read in ((_BOUNDS[field], True), (_BOUNDS[field] + 1, field == "op")):
        # an op's first 40 letters are the op, the rest is text before `Timeout(ms)=`, as the pattern reads it
        for line, watchdog in zip(_bounded(field, size), (True, False), strict=True):
            got = read_kind_line(line, 0, len(line), len(line), watchdog, MAX_LINE_CHARS)
            assert got == by_pattern(line, 0, len(line), len(line), watchdog, MAX_LINE_CHARS)
            if field not in ("seq", "op", "timeout", "ran") or watchdog:
                if field != "work" or not watchdog:
                    assert (got is not None) == read, (field, size, line)


@pytest.mark.parametrize(
    ("numbers", "values"),
    [
        (b"9999999999999999999, 0, -0", (9999999999999999999, 0, 0)),  # 19 digits: more than 63 bits
        (b"-9999999999999999999, -9223372036854775808, -9223372036854775807", (
            -9999999999999999999, -9223372036854775808, -9223372036854775807)),
        (b"007, 1, 2", (7, 1, 2)),
    ],
)
def test_numbers_are_read_whole(numbers: bytes, values: tuple[int, ...]) -> None:
    work, enq, done = numbers.split(b", ")
    line = (b"[rank0]:[Rank 0] Timeout at NCCL work: " + work + b", last enqueued NCCL work: " + enq
            + b", last completed NCCL work: " + done)  # fmt: skip
    assert read_kind_line(line, 0, len(line), 100, False, MAX_LINE_CHARS)[-1] == values
    assert by_pattern(line, 0, len(line), 100, False, MAX_LINE_CHARS)[-1] == values


def test_any_bytes_read_as_the_pattern_reads_them() -> None:
    rng = random.Random(11)
    pieces = [b"[rank", b"1]:", b" ", b"[Rank 1] ", b"[PG ", b"Timeout at NCCL work: ", b"-", b"9", b", ", b"\xff"]
    for _ in range(5_000):
        data = b"".join(rng.choice(pieces) for _ in range(rng.randrange(1, 20)))
        start = rng.randrange(len(data) + 1)
        end = rng.randrange(start, len(data) + 1)
        for watchdog in (True, False):
            assert read_kind_line(data, start, end, 50, watchdog, MAX_LINE_CHARS) == by_pattern(
                data, start, end, 50, watchdog, MAX_LINE_CHARS
            )


def test_a_call_outside_the_data_or_with_other_arguments_is_refused() -> None:
    with pytest.raises(ValueError, match="within the data"):
        read_kind_line(_WATCHDOG, 0, len(_WATCHDOG) + 1, 0, True, MAX_LINE_CHARS)
    with pytest.raises(ValueError, match="within the data"):
        read_kind_line(_WATCHDOG, 5, 4, 0, True, MAX_LINE_CHARS)
    with pytest.raises(ValueError, match="within the data"):
        read_kind_line(_WATCHDOG, -1, 4, 0, True, MAX_LINE_CHARS)
    with pytest.raises(TypeError, match="6 arguments"):
        read_kind_line(_WATCHDOG, 0, 4)
    with pytest.raises(TypeError):
        read_kind_line("text", 0, 4, 0, True, MAX_LINE_CHARS)
    with pytest.raises(TypeError):
        read_kind_line(_WATCHDOG, "0", 4, 0, True, MAX_LINE_CHARS)
