"""`check` for the kernel signal's journal source: what each journal file holds, read as the source reads it.

Per file: whether libsystemd can open it, its time range (its first and last entries), the hosts its entries name,
its entries and those in kernel transport. Every read is bounded: at most MAX_ENTRIES entries of a file are counted
from its head (the counts then say "sampled"), and the check's deadline is looked at between files and entries.
A file the source would skip (cannot be opened or read) is an error, as a corrupt file of a text tree is; a
directory with no journal file, or none that opens, is an error; a file with no kernel entry is a warning.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from providers.telemetry.checking import ERROR, MAX_HOSTS_LISTED, WARNING, Checker, stamp, tally
from providers.telemetry.kernel.collect import KERNEL_TAG
from providers.telemetry.kernel.sources.journal import (
    READ_ERRORS,
    JournalReaderFile,
    JournalSource,
    journal_files,
    observed,
)

#: entries counted per file at most (from its head); the first and last entries are always read
MAX_ENTRIES = 100_000
#: deadline checks every this many entries
CHECK_EVERY = 1024


@dataclass
class JournalReport:
    path: str
    status: str = "ok"  # ok, empty, unreadable
    reason: str | None = None
    first: str | None = None
    last: str | None = None
    entries: int = 0
    kernel_entries: int = 0
    no_hostname: int = 0
    sampled: bool = False
    hosts: Counter[str] = field(default_factory=Counter)

    def to_json(self) -> dict[str, Any]:
        names = sorted(self.hosts)
        return {
            "path": self.path,
            "status": self.status,
            "reason": self.reason,
            "first": self.first,
            "last": self.last,
            "entries": self.entries,
            "kernel_entries": self.kernel_entries,
            "entries_without_hostname": self.no_hostname,
            "sampled": self.sampled,
            "hosts": names[:MAX_HOSTS_LISTED],
            "hosts_not_listed": max(0, len(names) - MAX_HOSTS_LISTED),
        }

    def describe(self) -> str:
        parts = [self.status]
        if self.first is not None:
            parts.append(f"{self.first} .. {self.last}")
        if self.status != "unreadable":
            counted = f"{self.entries} entries{' sampled (from the head)' if self.sampled else ''}"
            parts.append(f"{counted}, {self.kernel_entries} kernel")
            names = sorted(self.hosts)
            shown = ", ".join(names[:MAX_HOSTS_LISTED]) + (
                f" and {len(names) - MAX_HOSTS_LISTED} more" if len(names) > MAX_HOSTS_LISTED else ""
            )
            parts.append(f"hosts: {shown or 'none'}")
        if self.reason:
            parts.append(self.reason)
        return f"{self.path}: " + "; ".join(parts)


def _read(c: Checker, path: str, report: JournalReport) -> None:
    reader = JournalReaderFile(path)
    first, last = reader.first(), reader.last()
    if first is None:
        report.status = "empty"
        return
    report.first = stamp(observed(first))
    report.last = stamp(observed(last)) if last is not None else None
    for count, entry in enumerate(reader.all_entries(), start=1):
        if count > MAX_ENTRIES:
            report.sampled = True
            break
        if count % CHECK_EVERY == 0 and c.expired("journal file " + report.path):
            report.sampled = True
            break
        report.entries += 1
        report.kernel_entries += entry.tag == KERNEL_TAG
        if entry.host:
            report.hosts[entry.host] += 1
        else:
            report.no_hostname += 1


def check_journals(c: Checker, source: JournalSource) -> dict[str, Any]:
    """What the journal source would read under its directory, per file."""
    root = source.root
    details: dict[str, Any] = {"source": "journal", "journal_dir": str(root), "files": []}
    try:
        files = journal_files(root)
    except OSError as exc:
        c.problem(
            ERROR, str(root), f"the journal directory cannot be read ({exc.strerror}): give the Adapter read access"
        )
        return details
    c.say(f"kernel logs: journal source, {root}")
    reports: list[JournalReport] = []
    lines: list[str] = []
    for journal in files:
        if c.expired(journal.origin):
            break
        report = JournalReport(journal.origin)
        try:
            _read(c, journal.path, report)
        except READ_ERRORS as exc:
            report.status = "unreadable"
            report.reason = str(exc) or type(exc).__name__
        reports.append(report)
        lines.append(f"  {report.describe()}")
        if report.status == "unreadable":
            c.problem(
                ERROR,
                journal.origin,
                f"cannot be opened or read as a journal file ({report.reason}); the source skips it: replace or "
                "remove the file (a file still being copied, or cut short, reads this way)",
            )
        elif report.status == "ok":
            if report.kernel_entries == 0:
                c.problem(
                    WARNING,
                    journal.origin,
                    "no entry counted is a kernel message (`_TRANSPORT=kernel`, or `SYSLOG_IDENTIFIER=kernel`); only "
                    "those classify",
                )
            if report.no_hostname:
                c.problem(
                    WARNING,
                    journal.origin,
                    f"{report.no_hostname} entries carry no `_HOSTNAME`; the source cannot name their node and skips "
                    "them",
                )
    if not files:
        c.problem(
            ERROR,
            str(root),
            "holds no journal file the source reads: expected *.journal, *@*.journal or *.journal~ files at its top "
            "or one folder down",
        )
    elif reports and not any(r.status == "ok" for r in reports):
        c.problem(
            ERROR, str(root), "no journal file holds an entry the source can read, so every answer would be empty"
        )
    details["files"] = [r.to_json() for r in reports]
    hosts = {h for r in reports for h in r.hosts}
    firsts = [r.first for r in reports if r.first is not None]
    lasts = [r.last for r in reports if r.last is not None]
    c.say(f"  files: {len(files)}, {len(reports)} read" + (f" ({tally(Counter(r.status for r in reports))})" if reports
          else "") + f"; hosts named in their entries: {len(hosts)}")  # fmt: skip
    c.say(f"  entries span {min(firsts)} .. {max(lasts)}" if firsts and lasts else "  entries span none")
    for line in lines:
        c.detail(line)
    return details
