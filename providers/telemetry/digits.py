"""Whole numbers written in what the provider reads (job logs, kernel logs, journals, dumps, a backend's answers).

Every program these texts come from writes its numbers in ASCII digits. `str.isdigit` is also true for digits
`int` refuses (`²`, `④`), and `int` reads the decimal digits of every script (`٣` is 3) and refuses more than 4,300
of them: a reader that checked a field with `isdigit` and then called `int` raised on a line holding such a field
(and the request failed with it), or read as a number what no program wrote. These read ASCII digits only, bounded.
"""

from __future__ import annotations


def number(text: str, most: int) -> int | None:
    """`text` as a whole number when it is 1 to `most` ASCII digits (`is_number`), else None."""
    return int(text) if is_number(text, most) else None


def signed_number(text: str, most: int) -> int | None:
    """`number` with one `-` or `+` in front allowed (`most` counts the digits only)."""
    if text[:1] in ("-", "+"):
        value = number(text[1:], most)
        return None if value is None else -value if text[0] == "-" else value
    return number(text, most)


def is_number(text: str, most: int) -> bool:
    """Whether `text` is 1 to `most` ASCII digits (`number` would read it)."""
    return 0 < len(text) <= most and text.isascii() and text.isdigit()


__all__ = ["is_number", "number", "signed_number"]
