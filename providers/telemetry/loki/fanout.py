"""Run a source's backend calls side by side, at most `concurrency` at once, and stop waiting at a given time.

Two sources reading one backend at once (the kernel logs and the job logs from one Loki) share its bound: each call
then also holds one of a shared `Slots` while it runs.
"""

from __future__ import annotations

import threading
import time
from collections import deque
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


class Slots:
    """At most `size` backend calls at once across the pools that share this object, taken in the order they were
    asked for: a pool whose threads ask again the moment they give a slot back cannot keep the other pool's calls
    waiting (the kernel logs' few queries behind the job logs' many)."""

    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self._free = self.size
        self._queue: deque[object] = deque()  # the calls waiting, first asked first
        self._changed = threading.Condition()

    @property
    def waiting(self) -> int:
        """Calls waiting for a slot now."""
        with self._changed:
            return len(self._queue)

    def run(self, call: Callable[[], T], until: float) -> T:
        """`call()` once a slot is free and every call that asked before has one; NotFinished when that does not
        happen before `until` (a `time.monotonic()` value)."""
        ticket = object()
        with self._changed:
            self._queue.append(ticket)
            try:
                turn = self._changed.wait_for(
                    lambda: self._free > 0 and self._queue[0] is ticket, max(0.0, until - time.monotonic())
                )
                if not turn:
                    raise NotFinished()
                self._free -= 1
            finally:
                self._queue.remove(ticket)
                self._changed.notify_all()  # the next in line may now have its turn
        try:
            return call()
        finally:
            with self._changed:
                self._free += 1
                self._changed.notify_all()


class Pool:
    """Backend calls run side by side, at most `concurrency` at once, and more may be added while results come in.

    `results()` yields `(tag, result)` for every call added: its return value or the exception it raised, as calls
    finish; the consumer may `add` more calls between two results (a follow-up query once an answer is in). At
    `until` (a `time.monotonic()` value) the waiting stops: every call not finished, or finished while the consumer
    was busy and not yet yielded, is yielded with a NotFinished (the time to take it is over), calls not yet started
    never start, and those running are left to end on their own: each call must bound its own time (a deadline on
    its I/O), so a thread never outlives it by much. The consumer runs on the caller's thread.
    """

    def __init__(self, concurrency: int, until: float, name: str = "fan-out", slots: Slots | None = None) -> None:
        self.until = until
        self._executor = ThreadPoolExecutor(max(1, concurrency), thread_name_prefix=name)
        self._pending: dict[Future[object], tuple[int, object]] = {}
        self._added = 0
        self._slots = slots

    def add(self, call: Callable[[], object], tag: object = None) -> None:
        if self._slots is not None:
            future = self._executor.submit(self._slots.run, call, self.until)
        else:
            future = self._executor.submit(call)
        self._pending[future] = (self._added, tag)
        self._added += 1

    def results(self) -> Iterator[tuple[object, object]]:
        try:
            while self._pending:
                left = self.until - time.monotonic()
                if left <= 0:
                    break
                done, _ = wait(self._pending, timeout=left, return_when=FIRST_COMPLETED)
                for future in sorted(done, key=lambda f: self._pending[f][0]):
                    if time.monotonic() >= self.until:
                        break  # the consumer took the time: what is left, finished or not, is not taken
                    _, tag = self._pending.pop(future)
                    error = future.exception()
                    yield tag, (error if error is not None else future.result())
            for future, (_, tag) in sorted(self._pending.items(), key=lambda item: item[1][0]):
                future.cancel()
                yield tag, NotFinished()
            self._pending.clear()
        finally:
            self._executor.shutdown(wait=False, cancel_futures=True)


def fan_out(
    calls: Sequence[Callable[[], T]], concurrency: int, until: float, name: str = "fan-out", slots: Slots | None = None
) -> Iterator[tuple[int, T | BaseException]]:
    """Yield `(index, result)` for every call, as `Pool.results` does for calls all added at once."""
    if not calls:
        return
    pool = Pool(min(concurrency, len(calls)), until, name, slots)
    for index, call in enumerate(calls):
        pool.add(call, index)
    for index, result in pool.results():
        yield index, result  # type: ignore[misc]


__all__ = ["fan_out", "Pool", "NotFinished", "Slots", "until_for", "RESERVE_SHARE", "RESERVE_MAX_S"]
