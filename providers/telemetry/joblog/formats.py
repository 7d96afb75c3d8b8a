"""printf-style format strings of the catalogues turned into RE2 matchers, and lines built from them.

A catalogue row of a message (NCCL's `WARN`s, Slurm's step lines, the MPI launchers' aborts) gives the format string
its program prints, as its source writes it: C escapes (`\\n`, `\\"`), printf conversions (`%d`, `%lu`, `%s`,
`%p`, `%m`), Slurm's own `%ps` / `%pJ` (a step or job id) and NCCL's `{name}` (the name of the call a check macro
wraps). `compile_format` turns it into a regular expression for RE2 (linear in the line, whatever the format):
literal parts escaped, each conversion a pattern of what it can print, captured in order. A format that prints
several lines (`\\n`) matches its first line, and the lines after it too where a log puts them on the same line.

`fields` names the conversions a record keeps (`host`, `ranks`, `device`, `code`, `exit`, `peer`; `_` for the
others): a named conversion gets the pattern of what it names (a host name, a task list), which keeps the match
from running over text that is not it. `example_line` builds a line from a format the way its program fills it in,
for the tests that read every row back from its own format.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import re2

#: the conversions a record can keep, and what each one's text is read as
FIELDS = frozenset({"host", "ranks", "device", "code", "exit", "peer", "_"})

_CONVERSION = re.compile(
    r"%(?P<flags>[-+ #0']*)(?P<width>\*|\d+)?(?:\.(?P<prec>\*|\d+))?"
    r"(?P<length>hh|h|ll|l|j|z|t|L|q)?(?P<conv>[diouxXeEfFgGaAcspnm%])"
    r"|\{(?P<macro>[A-Za-z_][A-Za-z0-9_]*)\}"
)
#: what each printf conversion can print, for RE2
_PRINTS = {
    "d": r"[-+]?\d+",
    "i": r"[-+]?\d+",
    "u": r"\d+",
    "o": r"[0-7]+",
    "x": r"(?:0[xX])?[0-9a-fA-F]+",
    "X": r"(?:0[xX])?[0-9a-fA-F]+",
    "f": r"[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|inf|nan)",
    "c": r".",
    "p": r"(?:0x[0-9a-fA-F]+|\(nil\)|[0-9a-fA-F]+)",
    "s": r".*?",
    "m": r".*?",
}
for _c in "FeEgGaA":
    _PRINTS[_c] = _PRINTS["f"]
#: what a named conversion prints, where it is narrower than its conversion's
_FIELD_PRINTS = {
    "host": r"[A-Za-z0-9_.\-\[\],]+",  # a host name, an address or a Slurm host list (`node[01-04]`)
    "ranks": r"\d[0-9,\-]*",  # a rank, or srun's task list (`0-3,5`)
    "device": r"\d+",
    "exit": r"[-+]?\d+",
    "peer": r"\S+",
}
_SAMPLES = {
    "d": "7", "i": "7", "u": "7", "o": "17", "x": "1f", "X": "1F", "f": "1.5", "c": "x", "p": "0x7f3a2c001000",
    "s": "abc", "m": "No such file or directory",
}
for _c in "FeEgGaA":  # every floating conversion prints what %f can, as _PRINTS reads it
    _SAMPLES[_c] = _SAMPLES["f"]
_FIELD_SAMPLES = {"host": "node-b", "ranks": "3", "device": "2", "exit": "1", "peer": "10.0.0.7<43121>"}


class FormatError(ValueError):
    """A format string this reader cannot turn into a matcher (found when the catalogue is loaded)."""


@dataclass(frozen=True)
class Compiled:
    """A format as RE2 source: the pattern (its groups `c0`, `c1`, ... the conversions in order), the name of each
    conversion's field, and how many literal characters the matched line's first line holds (a longer literal is a
    more specific row: it wins over a shorter one that also matches)."""

    pattern: str
    fields: tuple[str, ...]
    literal: int


def unescape(text: str) -> str:
    """A C string literal's text as the program prints it (`\\n`, `\\t`, `\\"`, `\\\\`)."""
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            out.append({"n": "\n", "t": "\t", '"': '"', "\\": "\\", "'": "'"}.get(nxt, "\\" + nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _tokens(segment: str, slurm: bool) -> list[tuple[str, str]]:
    """(`lit`, text) and (`conv`, conversion letter or `macro`/`slurm`) tokens of one line of a format."""
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(segment):
        if slurm and segment.startswith("%p", pos) and pos + 2 < len(segment) and segment[pos + 2].isalpha():
            out.append(("conv", "slurm"))
            pos += 3
            continue
        m = _CONVERSION.search(segment, pos)
        if m is None:
            out.append(("lit", segment[pos:]))
            break
        if m.start() > pos:
            out.append(("lit", segment[pos : m.start()]))
        if m.group("macro"):
            out.append(("conv", "macro"))
        elif m.group("conv") == "%":
            out.append(("lit", "%"))
        elif m.group("conv") == "n":
            pass  # %n prints nothing
        else:
            out.append(("conv", m.group("conv")))
        pos = m.end()
    merged: list[tuple[str, str]] = []
    for kind, text in out:
        if kind == "lit" and merged and merged[-1][0] == "lit":
            merged[-1] = ("lit", merged[-1][1] + text)
        else:
            merged.append((kind, text))
    return merged


def _conv_pattern(conv: str, field: str, greedy: bool) -> str:
    if field in _FIELD_PRINTS:
        return _FIELD_PRINTS[field]
    if conv in ("macro", "slurm"):
        return r"\S+"
    pattern = _PRINTS[conv]
    return ".*" if pattern == ".*?" and greedy else pattern


def segments(fmt: str) -> list[str]:
    """The lines a format prints (its C escapes undone, the spaces that end a line left out: logs drop them), the
    empty ones left out."""
    return [s.rstrip() for s in unescape(fmt).split("\n") if s.strip()]


def conversions(fmt: str, slurm: bool = False) -> int:
    """How many conversions the format's lines hold."""
    return sum(1 for seg in segments(fmt) for kind, _ in _tokens(seg, slurm) if kind == "conv")


def compile_format(fmt: str, fields: tuple[str, ...] = (), *, slurm: bool = False) -> Compiled:
    """The RE2 source of a format's matcher; `fields` names its conversions in order (missing ones are `_`)."""
    lines = segments(fmt)
    if not lines:
        raise FormatError(f"format {fmt!r} prints nothing")
    tokens = [_tokens(seg, slurm) for seg in lines]
    count = sum(1 for line in tokens for kind, _ in line if kind == "conv")
    if len(fields) > count:
        raise FormatError(f"format {fmt!r} has {count} conversions, not {len(fields)} fields")
    if any(f not in FIELDS for f in fields):
        raise FormatError(f"format {fmt!r}: unknown field in {fields!r}")
    names = tuple(fields) + ("_",) * (count - len(fields))
    index = 0
    parts: list[str] = []
    for number, line in enumerate(tokens):
        piece: list[str] = []
        for position, (kind, text) in enumerate(line):
            if kind == "lit":
                if position == len(line) - 1 and position and _closing(text):
                    # the punctuation that closes a line (`).`, `'`) may be cut off or left out by a log
                    piece.append(f"(?:{_literal(text)})?")
                else:
                    piece.append(_literal(text))
                continue
            # a text conversion takes all it can when the line ends with it or another conversion follows it
            # (`%s%s`: the first one holds the text, the second what is left, such as srun's ` (core dumped)`)
            last = number == len(tokens) - 1 and position == len(line) - 1
            followed = position + 1 < len(line) and line[position + 1][0] == "conv"
            piece.append(f"(?P<c{index}>{_conv_pattern(text, names[index], last or followed)})")
            index += 1
        parts.append("".join(piece))
    # The first line must match; the next ones may follow on the same line (a log that joined them), each only
    # after the one before it.
    pattern = parts[0]
    tail = ""
    for part in reversed(parts[1:]):
        tail = f"(?:\\s+{part}{tail})?"
    literal = sum(len(text.strip()) for kind, text in tokens[0] if kind == "lit")
    return Compiled(pattern + tail, names, literal)


def _closing(text: str) -> bool:
    """Whether a line's last literal is only the punctuation that closes it."""
    return 0 < len(text.strip()) <= 3 and not any(c.isalnum() for c in text)


def _literal(text: str) -> str:
    """A literal part: escaped, a run of spaces matching a run of at least one space (logs and viewers that join or
    realign output change runs of spaces, never drop the only one)."""
    out: list[str] = []
    for chunk in re.split(r"( +)", text):
        if not chunk:
            continue
        out.append(" +" if chunk.startswith(" ") else re2.escape(chunk))
    return "".join(out)


def literal_pieces(fmt: str, slurm: bool = False) -> list[str]:
    """The literal runs of a format's first line, in order (what a marker can be taken from)."""
    lines = segments(fmt)
    if not lines:
        return []
    return [text for kind, text in _tokens(lines[0], slurm) if kind == "lit"]


def example_line(fmt: str, fields: tuple[str, ...] = (), values: dict[str, str] | None = None, *,
                 slurm: bool = False) -> str:
    """The first line a program prints for `fmt`, each conversion filled with a value of its kind (`values` maps
    field names to the text to print for them, e.g. a code's text)."""
    lines = segments(fmt)
    tokens = _tokens(lines[0], slurm)
    index = 0
    out: list[str] = []
    for position, (kind, text) in enumerate(tokens):
        if kind == "lit":
            out.append(text)
            continue
        field = fields[index] if index < len(fields) else "_"
        if field == "_" and text == "s" and position and tokens[position - 1][0] == "conv":
            out.append("")  # a text right after another conversion is its suffix (srun's ` (core dumped)`)
        elif values and field in values:
            out.append(values[field])
        elif field in _FIELD_SAMPLES:
            out.append(_FIELD_SAMPLES[field])
        elif text == "macro":
            out.append("ibv_reg_mr")
        elif text == "slurm":
            out.append("StepId=1234.0")
        else:
            out.append(_SAMPLES[text])
        index += 1
    return "".join(out)
