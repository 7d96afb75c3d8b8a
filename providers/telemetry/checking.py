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
        self.text: list[str] = []
        self.out_of_time = False

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
