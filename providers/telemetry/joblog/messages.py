"""The readers of the catalogues' message lines: pure functions of a line's message text, each returning a `Message`.

The node parser hands each function the line's text after the collector's, `[rankN]:`, `<host>:` and `N:` prefixes
(its *body*) and dispatches by the `parse` value of the rows whose markers the line holds:

- `read_nccl` (`nccl`, `nccl_net` rows): the message of an NCCL line (after `NCCL WARN ` or `NCCL INFO `, the host
  and the CUDA device of NCCL's prefix before it; inside XLA's `Last NCCL warning(error) log entry '...'`; or the
  whole body, for the line after PyTorch's `Last error:`), read by the NCCL row whose format matches it;
- `read_format` (`format` rows): the message a row's markers found, read by that row's format wherever in the line
  it stands (inside an exception, after srun's label).

A row's format is its matcher (`formats.py`, run by RE2: linear in the line); where several rows match, the one whose
match covers the most literal text wins (the table's order breaks a tie). The fields a row names become the record's
(`host`, `ranks`, `device`, `exit`, `peer`), and a `code` field is looked up in the catalogue the row's `code` column
names: when the row says `by:`, the code's row is the line's meaning.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import re2

from providers.telemetry.digits import is_number, number, signed_number
from providers.telemetry.joblog.cuda_errors import kind_for_code
from providers.telemetry.joblog.formats import compile_format
from providers.telemetry.joblog.patterns import NCCL_ORIGIN
from providers.telemetry.joblog.records import Message
from providers.telemetry.joblog.signals import (
    BY_MARKER,
    CUDA_CODES,
    SIGNALS,
    SLURM_STYLE,
    Signal,
    re2_options,
    value_row,
)

NCCL_WARN = "NCCL WARN "
NCCL_INFO = "NCCL INFO "
#: XLA quotes NCCL's last warning (`nccl_errors.h`): `... Last NCCL warning(error) log entry (may be unrelated) '<m>'`
XLA_QUOTE = "Last NCCL warning(error)"
#: the catalogues whose rows are read by `read_nccl`
NCCL_CATALOGUES = frozenset({"nccl_warn", "nccl_info"})
#: ranks of one task list kept (srun's `tasks 0-1023`)
MAX_RANKS = 64


@dataclass(frozen=True)
class Matcher:
    """A row's compiled format: RE2 searches it; `fields` name its groups `c0`, `c1`, ...; `literal` is the literal
    text of its first line."""

    row: Signal
    regex: re2._Regexp  # type: ignore[name-defined]
    fields: tuple[str, ...]
    literal: int


@functools.cache
def matcher(row_id: str) -> Matcher:
    """The compiled format of a row (the loader has checked that it compiles)."""
    row = _ROWS[row_id]
    compiled = compile_format(row.format, row.fields, slurm=row.catalogue in SLURM_STYLE)
    return Matcher(row, re2.compile(compiled.pattern), compiled.fields, compiled.literal)


_ROWS = {s.id: s for s in SIGNALS if s.format}
#: the NCCL rows a message is matched against, in table order
NCCL_ROWS: tuple[Signal, ...] = tuple(
    s for s in SIGNALS if s.catalogue in NCCL_CATALOGUES and s.format and s.parse != "unread"
)


@functools.cache
def _nccl_set() -> re2.Set:
    """Every NCCL row's format as one RE2 set, anchored at the message's start: one pass finds the rows it matches."""
    found = re2.Set.MatchSet(re2_options())
    for row in NCCL_ROWS:
        found.Add(matcher(row.id).regex.pattern)
    found.Compile()
    return found


def nccl_message(body: str, bare: bool = False) -> tuple[str, str | None, int | None] | None:
    """(message, host, device) of an NCCL line: after NCCL's `NCCL WARN ` / `NCCL INFO ` with the host and device of
    its prefix, or inside XLA's quote; the whole body when `bare` (the line after PyTorch's `Last error:`)."""
    for level in (NCCL_WARN, NCCL_INFO):
        pos = body.find(level)
        if pos >= 0:
            host, device = nccl_origin(body[:pos])
            message = body[pos + len(level) :]
            if level == NCCL_INFO:
                message = _without_location(message)
            return message, host, device
    pos = body.find(XLA_QUOTE)
    if pos >= 0:
        start = body.find("'", pos)
        if start >= 0:
            quoted = body[start + 1 :].rstrip()
            for end in ("'.", "'"):
                if quoted.endswith(end):
                    quoted = quoted[: -len(end)]
                    break
            return quoted, None, None
    if bare:
        return body.strip(), None, None
    return None


def nccl_origin(head: str) -> tuple[str | None, int | None]:
    """The host and the CUDA device of NCCL's prefix `<host>:<pid>:<tid> [<dev>]` in the text before its level."""
    host: str | None = None
    device: int | None = None
    for token in head.split():
        if host is None:
            m = NCCL_ORIGIN.fullmatch(token)
            if m:
                host = m.group("host")
                continue
        elif device is None and token.startswith("[") and token.endswith("]"):
            device = number(token[1:-1], 6)
    return host, device


def _without_location(message: str) -> str:
    """An INFO message without the `<file>:<line> ` and `(<function>) ` NCCL's INFO_LOC puts first."""
    token, sep, rest = message.partition(" ")
    if sep and ":" in token and token.rsplit(":", 1)[1].isdigit():
        message = rest
        if message.startswith("("):
            close = message.find(") ")
            if 0 < close < 256:
                message = message[close + 2 :]
    return message


def read_nccl(body: str, bare: bool = False) -> Message | None:
    """The NCCL row an NCCL line's message matches (the most literal text, where several do), or None."""
    found = nccl_message(body, bare)
    if found is None:
        return None
    message, host, device = found
    hits = _nccl_set().Match(message) or ()
    best: tuple[int, int, Matcher, re2._Match] | None = None  # type: ignore[name-defined]
    for index in hits:
        compiled = matcher(NCCL_ROWS[index].id)
        m = compiled.regex.match(message)
        if m is not None:
            key = (literal_matched(m, compiled), -index)
            if best is None or key > best[:2]:
                best = (*key, compiled, m)
    return None if best is None else _message(best[2], best[3], host, device)


def literal_matched(m: re2._Match, compiled: Matcher) -> int:  # type: ignore[name-defined]
    """How much of the text a match covers is the format's literal text (its conversions' text left out): the more,
    the more specific the row (a help text whose next line also matched wins over one whose first line alone did)."""
    span = m.end() - m.start()
    for index in range(len(compiled.fields)):
        text = m.group(f"c{index}")
        if text is not None:
            span -= len(text)
    return span


def read_format(body: str, rows: tuple[Signal, ...]) -> Message | None:
    """The message of `rows` (the `format` rows whose markers `body` holds) whose format matches it; where none does
    (a line a viewer cut in two, another release's wording), the row whose own marker, listed by no other row, the
    line holds, without its fields; else None."""
    best: tuple[Matcher, re2._Match] | None = None  # type: ignore[name-defined]
    score = -1
    for row in rows:
        compiled = matcher(row.id)
        m = compiled.regex.search(body)
        if m is not None and literal_matched(m, compiled) > score:
            best, score = (compiled, m), literal_matched(m, compiled)
    if best is not None:
        return _message(best[0], best[1], None, None)
    row = next((r for r in rows if own_marker_in(r, body)), None)
    return Message(row.id, row.id) if row is not None else None


def own_marker_in(row: Signal, body: str) -> bool:
    """Whether `body` holds a marker of `row` that says what the row says by itself: one that every row listing it
    gives the same meaning (a message's own words, or the words of its releases' wordings; not `NCCL WARN` nor
    `srun: error: `, which rows of every meaning share)."""
    return any(m in body and len({s.meaning for s in BY_MARKER.get(m, ())}) == 1 for m in row.markers)


def _message(compiled: Matcher, m: re2._Match, host: str | None, device: int | None) -> Message:  # type: ignore[name-defined]
    row = compiled.row
    ranks: tuple[int, ...] = ()
    code: str | None = None
    exit_code: int | None = None
    peer: str | None = None
    signal = row.id
    for index, name in enumerate(compiled.fields):
        if name == "_":
            continue
        text = m.group(f"c{index}")
        if text is None:
            continue
        if name == "host":
            host = text
        elif name == "device" and is_number(text, 6):
            device = int(text)
        elif name == "ranks":
            ranks = task_list(text)
        elif name == "exit":
            exit_code = signed_number(text, 12)
        elif name == "peer":
            peer = text
        elif name == "code":
            code_row = code_of(row.code, text)
            if code_row is not None:
                code = code_row
                if row.decides:
                    signal = code_row
    return Message(signal, row.id, host, device, ranks, code, exit_code, peer)


def code_of(catalogue: str, text: str) -> str | None:
    """The id of the row of `catalogue` a code's text names (CUDA's codes by message, name or number)."""
    if catalogue == CUDA_CODES:
        kind = kind_for_code(text)
        return kind.runtime_name if kind is not None else None
    row = value_row(catalogue, text)
    if row is None:
        # a name with its number after it, as NCCL prints a status: `IBV_WC_RETRY_EXC_ERR(12)`
        head = text.split("(", 1)[0]
        row = value_row(catalogue, head) if head != text else None
    return row.id if row is not None else None


def task_list(text: str) -> tuple[int, ...]:
    """The ranks of srun's task list (`3`, `0-3`, `1,5-6`), at most MAX_RANKS."""
    out: list[int] = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        low = number(first, 9)
        high = number(last, 9) if last else low
        if low is None or high is None:
            continue
        for rank in range(low, min(high, low + MAX_RANKS) + 1):
            if len(out) >= MAX_RANKS:
                return tuple(out)
            out.append(rank)
    return tuple(out)


_nccl_set()  # compiled once, when the reader is loaded, not on the first NCCL line a request reads
