"""What a large request may hold of a worker's memory: the garbage collector paused, one large request at a time.

A large request makes millions of small objects that live until it is answered: each node's records, lines and
rank sightings (a 16,384-node job holds about two million). The collector's full passes, run each time the number of
live objects has grown by a quarter, walk all of them again and again, and took about a third of such a request's
time (the rules over 131,072 ranks: 4.4 s with them, 0.8 s without). These objects form no reference cycles, so
reference counting frees them when the answer is made (a cycle made on the way is collected once the collector
runs again); the collector is paused meanwhile and resumed after. Requests
that run side by side in a worker's threads share one pause: the collector resumes when the last of them ends, and
only if it was running when the first began (an operator may have turned it off).

A request over more than LARGE_SCOPE_NODES nodes holds hundreds of MiB at its peak (16,384 nodes with job logs:
about 430 MiB above the worker's idle size), so a worker reads one such request at a time: the others wait for it,
within their own deadline (`ProviderTimeoutError` when it passes first: nothing was read). A worker's threads share
one interpreter lock, so reading two large requests side by side would not answer either sooner; one at a time,
the worker's peak is one large request's, which the Deployment's memory is sized from (README, "Worst-case memory
of a worker").
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from providers.base import Deadline, ProviderTimeoutError

#: a scope of more nodes than this is read one at a time in a worker
LARGE_SCOPE_NODES = 1024
_large = threading.Lock()

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


@contextmanager
def one_large_at_a_time(nodes: int, deadline: Deadline) -> Iterator[None]:
    """Run the block at once for a scope of at most LARGE_SCOPE_NODES nodes; for a larger one, once no other large
    request of this worker runs, waiting until `deadline` at most."""
    if nodes <= LARGE_SCOPE_NODES:
        yield
        return
    if not _large.acquire(timeout=max(0.0, deadline.remaining())):
        raise ProviderTimeoutError(
            f"another request of more than {LARGE_SCOPE_NODES} nodes was read by this worker until the deadline"
        )
    try:
        yield
    finally:
        _large.release()


__all__ = ["LARGE_SCOPE_NODES", "collector_paused", "one_large_at_a_time"]
