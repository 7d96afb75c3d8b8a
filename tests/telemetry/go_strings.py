"""Go string literals read by the Go spec's rules, for the tests of the LogQL the provider writes (written here,
independent of the code under test: what Loki's parser makes of a LogQL string)."""

from __future__ import annotations

SIMPLE_ESCAPES = {"\\": "\\", '"': '"', "n": "\n", "r": "\r", "t": "\t", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


def go_unquote(literal: str) -> str:
    """A Go string literal's value, by the Go spec's rules (written here, independent of the code under test)."""
    if literal[0] == "`":
        assert literal[-1] == "`" and "`" not in literal[1:-1], literal
        return literal[1:-1].replace("\r", "")  # Go drops carriage returns from raw strings
    assert literal[0] == literal[-1] == '"', literal
    body, out, i = literal[1:-1], [], 0
    while i < len(body):
        ch = body[i]
        assert ch not in ('"', "\n"), f"unescaped {ch!r} in {literal!r}"
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        kind = body[i + 1]
        if kind in SIMPLE_ESCAPES:
            out.append(SIMPLE_ESCAPES[kind])
            i += 2
        elif kind in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[kind]
            code = int(body[i + 2 : i + 2 + width], 16)
            assert kind != "x" or code < 0x80, "a \\x escape is a byte, not a character"
            out.append(chr(code))
            i += 2 + width
        else:
            raise AssertionError(f"invalid escape \\{kind} in {literal!r}")
    return "".join(out)
