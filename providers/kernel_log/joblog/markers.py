"""The literal markers of the job-log signals: a line holding none of them gives the node parser nothing but a count.

A backend that can filter lines before sending them (Loki's `|~`) keeps only the lines holding one of these texts;
`tests/joblog/test_markers.py` checks, on the real and generated job logs of the tests, that the parser finds the
same records in the lines kept as in all lines. Two kinds of line carry no literal marker and are read another way
by such a backend: lines that only place a rank (`[rankN]: ...` training output: every line of a rank has the
prefix, so it marks nothing) and the entry headers of torchelastic's summary (`[0]:`); the Loki job-log source reads
them in the newest lines of each node, unfiltered (`providers/kernel_log/joblog/loki.py`).
"""

from __future__ import annotations


def markers() -> tuple[str, ...]:
    """The texts of which a job-log line holds at least one when the node parser may take a record from it."""
    return (
        # NodeParser._records, through lines._interesting:
        "Watchdog caught",  # _watchdog_line: the NCCL watchdog's timeout (patterns.WATCHDOG)
        "ast enqueued",  # _progress_line: the watchdog's progress line, `Last`/`last enqueued` (PROGRESS_*)
        "NCCL WARN",  # _nccl_warn: NCCL's network warnings (IB_COMPLETION, PEER_AFTER, VERBS_CALL)
        "didn't",  # _desync_line: the desync report's lagging ranks (DESYNC_LAGGING)
        "lagging ranks",  # _desync_line: the desync report's missing ranks (DESYNC_MISSING)
        "CUDA",  # cuda_error_in: `CUDA error: `, `CUDA out of memory`, `CUDA_ERROR_` (CUDA_ERROR_TEXT, ...)
        "Cuda failure",  # cuda_error_in: NCCL's `Cuda failure 'text'` (CUDA_FAILURE)
        "cudaError",  # cuda_error_in: the runtime's error names (CUDA_SEARCH_HINT)
        "cuda runtime error",  # cuda_error_in: old PyTorch's `cuda runtime error (N) : text` (OLD_CUDA_RUNTIME)
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
    )


__all__ = ["markers"]
