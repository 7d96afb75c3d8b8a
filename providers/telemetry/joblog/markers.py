"""The literal markers of the job-log signals: a line holding none of them gives the node parser nothing but a count.

A backend that can filter lines before sending them (Loki's `|~`) keeps only the lines holding one of these texts;
`tests/joblog/test_markers.py` checks, on the real and generated job logs of the tests, that the parser finds the
same records in the lines kept as in all lines. Two kinds of line carry no literal marker and are read another way
by such a backend: lines that only place a rank (`[rankN]: ...` training output: every line of a rank has the
prefix, so it marks nothing) and the entry headers of torchelastic's summary (`[0]:`); the Loki job-log source reads
them in the newest lines of each node, unfiltered (`providers/telemetry/joblog/loki.py`).
"""

from __future__ import annotations

from providers.telemetry.joblog.signals import ANCHORS


def markers() -> tuple[str, ...]:
    """The texts of which a job-log line holds at least one when the node parser may take a record from it (each
    once: an anchor of the table may also be a structural marker)."""
    return tuple(dict.fromkeys((
        # The signal table's records (signals.signals_in): every marker of the table holds one of its anchors
        # (signals.anchors_for), so a line a record comes from holds one of these
        *ANCHORS,
        # NodeParser._marker: process-group markers (a rank named by `[Rank N]` only; the group of a desync report)
        "[PG ",  # patterns.MARKER, `[PG 1 Rank 0]`, `[PG ID 0 PG GUID 0(default_pg) Rank 1]`
        "[Rank ",  # patterns.MARKER, `[Rank 0]`
        # NodeParser._traceback: a Python traceback, its frames, its code lines and its exception line
        "Traceback",  # `Traceback (most recent call last):`, and torchelastic's `traceback :` field
        'File "',  # a frame (the last one is kept)
        'File \\"',  # a frame in a Docker JSON line, where the quote is escaped
        "    ",  # the code lines under a frame, and a summary's traceback lines (indented): counted in the bound
        "Error",  # the exception line: a name ending in one of _EXCEPTION_SUFFIXES, then `:` or the end
        "Exception",
        "Interrupt",
        "Exit",
        "Iteration",
        "Warning",
        "Failure",  # `Failures:` of torchelastic's summary too
        "Timeout",
        # NodeParser._elastic: torchelastic's failure summary (patterns.ELASTIC_FIELD and its section lines)
        "Root Cause",  # `Root Cause (first observed failure):`
        "<NO_OTHER_FAILURES>",
        "-----",  # the lines that end an entry
        "=====",  # the line that ends the summary
        "  time",  # the entry's fields: `  time      : ...`
        "  host",
        "  rank",
        "exitcode",
        "error_file",
        "traceback",
    )))


__all__ = ["markers"]
