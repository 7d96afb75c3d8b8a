"""What every signal's `check` shares: the checker that collects problems and text, and how a time is shown."""

from __future__ import annotations

import os
from datetime import UTC, datetime, tzinfo
from pathlib import Path

from providers.base import CheckProblem, CheckSeverity, Deadline
from providers.telemetry.reading import list_folder

ERROR, WARNING = CheckSeverity.ERROR, CheckSeverity.WARNING

#: files listed (and read) per host, newest first; the rest are counted
MAX_FILES_PER_HOST = 8
#: host names listed per combined file, and skipped entries listed per directory; the rest are counted
MAX_HOSTS_LISTED = 16
MAX_SKIPPED_LISTED = 32


def tally(counts: dict[str, int]) -> str:
    """`6 ok, 1 corrupt`: each status with its count, most first (then by name)."""
    return ", ".join(f"{n} {k}" for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def span(first: datetime | None, last: datetime | None) -> str:
    """The time span lines cover, as the summary says it."""
    return f"{stamp(first)} .. {stamp(last)}" if first is not None and last is not None else "none"


def stamp(value: datetime | None) -> str | None:
    if value is None:
        return None
    text = value.astimezone(UTC).isoformat()
    return text.replace("+00:00", "Z")


class Checker:
    """Collects problems and text lines while the check walks what the provider would read."""

    def __init__(self, deadline: Deadline, zone: tzinfo) -> None:
        self.deadline = deadline
        #: the zone of log formats that carry none
        self.zone = zone
        self.problems: list[CheckProblem] = []
        #: the report's summary lines (what `check` prints)
        self.text: list[str] = []
        #: the summary and the per-host and per-file lines, in order (what `check --verbose` prints)
        self.full: list[str] = []
        self.out_of_time = False

    def say(self, line: str) -> None:
        """A line of the summary (printed by default, and with the details)."""
        self.text.append(line)
        self.full.append(line)

    def detail(self, line: str) -> None:
        """A per-host or per-file line: printed with `--verbose` only (a fleet has thousands)."""
        self.full.append(line)

    def problem(self, severity: CheckSeverity, where: str, message: str) -> None:
        self.problems.append(CheckProblem(severity, where, message))

    def expired(self, what: str) -> bool:
        if self.deadline.expired and not self.out_of_time:
            self.out_of_time = True
            self.problem(ERROR, what, "the check ran out of time before it read everything; give it more (--timeout)")
        return self.out_of_time

    def folder(self, root: Path, what: str) -> list[os.DirEntry[str]] | None:
        """The entries of the configured directory `root`, or None once a problem says the `what` cannot be read."""
        try:
            return list_folder(root)
        except OSError as exc:
            self.problem(ERROR, str(root), f"the {what} cannot be read ({exc.strerror}): give the Adapter read access")
            return None
