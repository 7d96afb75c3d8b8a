"""The readers of ProcessGroupNCCL's watchdog lines: pure functions of a line's message text.

The node parser (`lines.NodeParser._records`) calls each by the `parse` value of the rows whose markers the line
holds (`watchdog`, `progress`, `desync`); each returns the values the parser keeps (a tuple) or None when the text is
not in the kind's shape. The catalogues' kinds are read in `messages.py` and `cuda_errors.py`, the kinds that follow a
block of lines (`elastic`, `exception`) by the parser itself. The patterns are in `patterns.py`.
"""

from __future__ import annotations

from providers.telemetry.joblog.patterns import (
    DESYNC_LAGGING,
    DESYNC_MISSING,
    PROGRESS_DETECTED,
    PROGRESS_DUMP,
    PROGRESS_SEQ_ID,
    PROGRESS_TIMEOUT,
    WATCHDOG,
    WATCHDOG_TAIL,
    _ranks_list,
)


def watchdog(message: str) -> tuple[int | None, str, int, int] | None:
    """(SeqNum or None, OpType, Timeout(ms), ran for ms) of the NCCL watchdog's timeout line."""
    pos = message.find("Watchdog caught collective operation timeout")
    head = WATCHDOG.match(message, pos) if pos >= 0 else None
    if head is None:
        return None
    pos = message.find("Timeout(ms)=", head.end())
    tail = WATCHDOG_TAIL.match(message, pos) if pos >= 0 else None
    if tail is None:
        return None
    seq = head.group("seq")
    return int(seq) if seq else None, head.group("op"), int(tail.group("timeout")), int(tail.group("ran"))


#: the progress line's four shapes, each found by the text it starts with (PyTorch 2.3 to 2.7)
_PROGRESS = (
    ("failure detected by watchdog at work sequence id: ", PROGRESS_SEQ_ID, True),
    ("detected by watchdog at work: ", PROGRESS_DETECTED, True),
    ("Timeout at NCCL work: ", PROGRESS_TIMEOUT, True),
    ("Last enqueued NCCL work: ", PROGRESS_DUMP, False),
)


def progress(message: str) -> tuple[int | None, int, int] | None:
    """(the work the watchdog names or None, last enqueued, last completed) of a watchdog progress line."""
    for needle, pattern, named in _PROGRESS:
        pos = message.find(needle)
        m = pattern.match(message, pos) if pos >= 0 else None
        if m:
            return int(m.group("work")) if named else None, int(m.group("enq")), int(m.group("done"))
    return None


def desync(message: str) -> tuple[int, ...] | None:
    """The ranks (within the process group) PyTorch's desync report names as lagging."""
    text = message.lstrip(" \t")
    pos = text.find("To our best knowledge, ranks [")
    m = DESYNC_MISSING.match(text, pos) if pos >= 0 else DESYNC_LAGGING.match(text)
    ranks = _ranks_list(m.group("ranks")) if m else ()
    return ranks or None


__all__ = ["desync", "progress", "watchdog"]
