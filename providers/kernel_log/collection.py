"""Python's cyclic garbage collector paused while a request is read and concluded.

A large request makes millions of small objects that live until it is answered: each node's records, lines and
rank sightings (a 16,384-node job holds about two million). The collector's full passes, run each time the number of
live objects has grown by a quarter, walk all of them again and again, and took about a third of such a request's
time (the rules over 131,072 ranks: 4.4 s with them, 0.8 s without). These objects form no reference cycles, so
reference counting frees them when the answer is made (a cycle made on the way is collected once the collector
runs again); the collector is paused meanwhile and resumed after. Requests
that run side by side in a worker's threads share one pause: the collector resumes when the last of them ends, and
only if it was running when the first began (an operator may have turned it off).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_holders = 0
_resume = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause automatic garbage collection for the duration of the block (shared by concurrent blocks)."""
    global _holders, _resume
    with _lock:
        if _holders == 0:
            _resume = gc.isenabled()
            gc.disable()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _resume:
                gc.enable()


__all__ = ["collector_paused"]
