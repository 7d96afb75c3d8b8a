"""Run a source's backend calls side by side, at most `concurrency` at once, and stop waiting at a given time."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TypeVar

from providers.base import Deadline

T = TypeVar("T")

#: the time kept between the last backend answer taken and the deadline, for the rules and the reply: this share
#: of the time left when the reading starts, at most RESERVE_MAX_S
RESERVE_SHARE = 0.1
RESERVE_MAX_S = 0.25


def until_for(deadline: Deadline) -> float:
    """The `time.monotonic()` value at which a source stops waiting for its backend calls (see RESERVE_SHARE)."""
    until = time.monotonic() + deadline.remaining() * (1 - RESERVE_SHARE)
    return max(until, deadline.expires_at - RESERVE_MAX_S)


class NotFinished(Exception):
    """Stands for a call that had not finished (or not started) when the waiting stopped."""


def fan_out(
    calls: Sequence[Callable[[], T]], concurrency: int, until: float, name: str = "fan-out"
) -> Iterator[tuple[int, T | BaseException]]:
    """Yield `(index, result)` for every call: its return value or the exception it raised, as calls finish.

    At most `concurrency` calls run at once, on threads of their own. At `until` (a `time.monotonic()` value) the
    waiting stops: every call not finished is yielded with a NotFinished, calls not yet started never start, and
    those running are left to end on their own: each call must bound its own time (a deadline on its I/O), so a
    thread never outlives it by much. The consumer of the results runs on the caller's thread, never on two at once.
    """
    if not calls:
        return
    executor = ThreadPoolExecutor(max(1, min(concurrency, len(calls))), thread_name_prefix=name)
    pending: dict[Future[T], int] = {}
    try:
        for index, call in enumerate(calls):
            pending[executor.submit(call)] = index
        while pending:
            left = until - time.monotonic()
            if left <= 0:
                break
            done, _ = wait(pending, timeout=left, return_when=FIRST_COMPLETED)
            for future in sorted(done, key=pending.__getitem__):
                index = pending.pop(future)
                error = future.exception()
                yield index, (error if error is not None else future.result())
        for future, index in sorted(pending.items(), key=lambda item: item[1]):
            future.cancel()
            yield index, NotFinished()
    finally:
        executor.shutdown(wait=False, cancel_futures=True)


__all__ = ["fan_out", "NotFinished", "until_for", "RESERVE_SHARE", "RESERVE_MAX_S"]
