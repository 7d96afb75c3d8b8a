"""Settings declared as data: each `ATTRIBUTION_*` variable once, with its default, its bounds and one line of help.

The service (`app/settings.py`) and every built-in provider declare their variables as `Setting`s and read them
through `Setting.integer` and `Setting.text`, so one grammar and one message serve every integer. The same
declarations drive the boot's typo check (`app/setting_names.py`), `attribution-adapter check` (which boots the same
way) and the README's table of environment variables, which a test compares with them row by row (`readme_row`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

#: what an integer setting may look like: digits, a minus sign before them allowed (so that -1 is reported out of
#: range), white space around it ignored
_INTEGER = re.compile(r"-?[0-9]+")
#: the most digits (leading zeros aside) an integer setting is read from
_MOST_DIGITS = 20
_UNITS = ((1024**3, "GiB"), (1024**2, "MiB"), (1024, "KiB"))


class SettingError(ValueError):
    """A setting's value is invalid; the message names the variable. Callers re-raise it as their own error type."""


@dataclass(frozen=True)
class Setting:
    """One environment variable: its name, default, integer bounds (None for text) and what it means."""

    name: str
    #: the README's words for what the variable does
    meaning: str
    #: the value used when the variable is unset or blank; None: no default (see `unset`)
    default: int | str | None = None
    #: inclusive bounds of an integer setting; None for a text setting
    low: int | None = None
    high: int | None = None
    #: how the README's default column reads when there is no default: "(unset)" or "(required for ...)"
    unset: str = "(unset)"
    #: a further rule on the value, said after the bounds in the README (e.g. "above `ATTRIBUTION_THREADS`")
    rule: str = ""
    #: a number of bytes: the README writes whole KiB, MiB and GiB bounds in those units
    size: bool = False

    @property
    def is_integer(self) -> bool:
        return self.low is not None and self.high is not None

    def text(self, environ: Mapping[str, str]) -> str | None:
        """The value with surrounding white space removed, or None when unset or blank."""
        raw = environ.get(self.name)
        if raw is None or not raw.strip():
            return None
        return raw.strip()

    def integer(self, environ: Mapping[str, str]) -> int:
        """The value as an integer within the bounds (the default when unset or blank); SettingError otherwise."""
        assert self.is_integer and isinstance(self.default, int), self.name
        raw = self.text(environ)
        if raw is None:
            return self.default
        if not _INTEGER.fullmatch(raw):
            raise SettingError(f"{self.name}={raw!r} is not an integer")
        # more digits than any bound has are out of range (and `int` refuses more than 4,300 of them)
        digits = raw.lstrip("-").lstrip("0") or "0"
        value = (-1 if raw[0] == "-" else 1) * int(digits) if len(digits) <= _MOST_DIGITS else None
        if value is None or not self.low <= value <= self.high:  # type: ignore[operator]
            shown = value if value is not None else f"{raw[:_MOST_DIGITS]}... ({len(raw)} characters)"
            raise SettingError(
                f"{self.name}={shown} is out of range: it must be between {self.low} and {self.high}"
            )
        return value

    def readme_default(self) -> str:
        """The README table's default column: the default in backticks, then the bounds and rule in parentheses."""
        if self.default is None:
            return self.unset
        shown = f"`{self.default}`"
        shown_bound = _size if self.size else str
        notes = [f"{shown_bound(self.low)}..{shown_bound(self.high)}"] if self.is_integer else []
        if self.rule:
            notes.append(self.rule)
        return shown + (f" ({', '.join(notes)})" if notes else "")

    def readme_row(self) -> str:
        return f"| `{self.name}` | {self.readme_default()} | {self.meaning} |"


def _size(value: int | None) -> str:
    """A bound as the README writes it: a whole number of KiB, MiB or GiB in those units, others as they are."""
    assert value is not None
    for unit, name in _UNITS:
        if value >= unit and value % unit == 0:
            return f"{value // unit} {name}"
    return str(value)


def names(declared: Iterable[Setting | str]) -> frozenset[str]:
    """The variable names of a declaration (a plug-in may declare plain names instead of `Setting`s)."""
    return frozenset(item.name if isinstance(item, Setting) else str(item) for item in declared)


__all__ = ["Setting", "SettingError", "names"]
