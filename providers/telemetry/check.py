"""`check` for the open provider: each signal's own check, walked in turn, and one report.

Each signal checks what it would read, the way its reader reads it (`kernel/check.py`, `kernel/check_loki.py` and
`kernel/check_journal.py`, `dcgm/check.py`, `joblog/check.py`, `flight_recorder/check.py`), with the shared checker
and bounded readers (`checking.py`, `reading.py`).
It only reads, and every read is bounded. Nothing here is used when answering requests.
"""

from __future__ import annotations

from datetime import tzinfo
from pathlib import Path
from typing import Any

from providers.base import CheckReport, Deadline
from providers.telemetry.checking import ERROR, Checker
from providers.telemetry.dcgm.check import check_epilog
from providers.telemetry.flight_recorder.check import check_flight_recorder
from providers.telemetry.joblog.check import check_job_logs
from providers.telemetry.joblog.loki import LokiJobLogSource
from providers.telemetry.joblog.source import FileJobLogSource
from providers.telemetry.kernel.check import check_files
from providers.telemetry.kernel.check_journal import check_journals
from providers.telemetry.kernel.check_loki import check_loki
from providers.telemetry.kernel.sources.files import FileSource
from providers.telemetry.kernel.sources.journal import JournalSource
from providers.telemetry.kernel.sources.loki import LokiSource


def check(
    source: object, epilog_dir: Path | None, zone: tzinfo, deadline: Deadline, job_logs: object | None = None,
    flight_recorder_dir: Path | None = None,
) -> CheckReport:
    """Check the configured log source and epilog directory; see the module docstring and docs/cli.md."""
    c = Checker(deadline, zone)
    details: dict[str, Any] = {}
    if isinstance(source, FileSource):
        details["kernel_logs"] = check_files(c, source)
    elif isinstance(source, LokiSource):
        details["kernel_logs"] = check_loki(c, source)
    elif isinstance(source, JournalSource):
        details["kernel_logs"] = check_journals(c, source)
    else:
        c.say(f"kernel logs: a {type(source).__name__} source, which check does not know")
        details["kernel_logs"] = None
    details["epilog"] = check_epilog(c, epilog_dir)
    if isinstance(job_logs, FileJobLogSource):
        details["job_logs"] = check_job_logs(c, job_logs.root)
    elif isinstance(job_logs, LokiJobLogSource):
        c.say(f"job logs: Loki streams {job_logs.template} (read per request; not queried by check)")
        details["job_logs"] = {"loki_selector": job_logs.template}
    if flight_recorder_dir is not None:
        details["flight_recorder"] = check_flight_recorder(c, flight_recorder_dir)
    problems = sorted(c.problems, key=lambda p: p.severity is not ERROR)  # errors first, each kind in walk order
    errors = sum(p.severity is ERROR for p in problems)
    warnings = len(problems) - errors
    summary = f"{errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)}"
    return CheckReport(
        checked=True, summary=summary, text=tuple(c.text), verbose_text=tuple(c.full), details=details,
        problems=tuple(problems),
    )


__all__ = ["check"]
