"""The job-log line kinds: how the message text of a line is read once a marker of the signal table is found in it.

Each row of the signal table names a `parse` kind. A kind whose line stands alone is read by a pure function of the
line's message text (what follows the collector prefixes, `[rankN]:`, `<host>:` or `N:`), which returns the values
the node parser keeps (a tuple) or None when the text is not in the kind's shape; the parser calls it by the row's
`parse` value (`KIND_READERS`), so a new kind is a function here and a row in the table. The kinds that follow a
block of lines (`elastic`: torchelastic's summary; `exception`: a Python traceback) are read by the parser itself,
and `text` rows are kept as they are, by their markers alone. The patterns are in `patterns.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from providers.telemetry.joblog.network import nccl_warning
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
    cuda_error_in,
)

#: a kind's reader: the line's message text -> the values it holds, or None
KindReader = Callable[[str], Any]


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


#: the readers of the kinds whose lines stand alone, by the signal table's `parse` value
KIND_READERS: dict[str, KindReader] = {
    "watchdog": watchdog,
    "progress": progress,
    "desync": desync,
    "nccl_net": nccl_warning,
    "cuda": cuda_error_in,
}
#: kinds the node parser reads across lines (a block), not line by line
BLOCK_KINDS = frozenset({"elastic", "exception"})
#: the kind of rows kept by their markers alone
TEXT = "text"

__all__ = ["BLOCK_KINDS", "KIND_READERS", "TEXT", "KindReader", "desync", "progress", "watchdog"]
