"""A request's job-log files read by a worker and its scan process together: nodes claimed from both ends of a plan.

The worker plans the read (lists the attempt's folder, shares the bytes: `joblog.files.plan_job_logs`) and hands the
plan to its scan process, which takes it up once its kernel-log scan is done. Both then claim parts of the plan's
nodes, CLAIM_NODES at a time, the worker from the start and the process from the end, through two counters in memory
shared before the fork, under one lock beside the request's byte bounds (so that the two read what one reader would:
the same shares, the same bound for reading further back). The process parses its parts as the worker would and
sends each part's `NodeRead`s and `NodeLog`s as JSON (`joblog/wire.py`, written and read by orjson) through a pipe of
its own, enlarged so that a part seldom waits for the worker to read it; the worker adds them between its own parts.
When the claims meet, the worker waits for the process's last parts; a part the process could not read, or whose
answer is missing or does not decode, is read by the worker itself.

A process that holds the lock longer than LOCK_WAIT_S (one stopped or killed while it held it) is given up: the
worker goes on without the lock, reads what is not answered, and stops the process (`ScanProcess._lost`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import multiprocessing
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import Connection
from typing import Any

import orjson

from providers.base import Deadline
from providers.telemetry.joblog.files import JobLogPlan, NodeRead, read_planned
from providers.telemetry.joblog.records import NodeLog
from providers.telemetry.joblog.scan import sinks
from providers.telemetry.joblog.source import FileJobLogSource, resolver
from providers.telemetry.joblog.wire import (
    node_log_from_wire,
    node_log_to_wire,
    node_read_from_wire,
    node_read_to_wire,
    plan_from_wire,
    plan_to_wire,
)

log = logging.getLogger("attribution_adapter.telemetry")

#: nodes a reader claims at a time: when the claims meet, the worker waits at most for one part of the process
CLAIM_NODES = 16
#: the size asked for the pipe that carries the process's parts (Linux lets a process ask up to 1 MiB)
PIPE_BYTES = 1024 * 1024
#: seconds a reader waits for the shared lock before it takes the other reader as gone
LOCK_WAIT_S = 1.0
#: the shared cells: the plan's generation, the next node of the worker's claims, the end of the process's, and
#: the two byte bounds (bytes left, cut)
_GEN, _FRONT, _BACK, _BUDGET, _BUDGET_CUT, _RESERVE, _RESERVE_CUT = range(7)


class SharedState:
    """The claims and byte bounds both readers use, in shared memory: made before the scan process is forked."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("fork")
        self._lock = context.Lock()
        self._cells = context.RawArray("q", 7)
        #: the lock was not had within LOCK_WAIT_S once: the other reader is taken as gone
        self.lost = False

    @contextlib.contextmanager
    def _held(self) -> Iterator[Any]:
        if self.lost:
            yield self._cells
            return
        if not self._lock.acquire(timeout=LOCK_WAIT_S):
            self.lost = True
            log.warning("the job-log share's lock was held for over %.1f s: the other reader is given up", LOCK_WAIT_S)
            yield self._cells
            return
        try:
            yield self._cells
        finally:
            self._lock.release()

    def begin(self, plan: JobLogPlan) -> int:
        """A new plan: every node unclaimed, the plan's byte bounds shared. Its generation is returned."""
        with self._held() as cells:
            cells[_GEN] += 1
            cells[_FRONT], cells[_BACK] = 0, len(plan.order)
            cells[_BUDGET], cells[_BUDGET_CUT] = plan.budget.left, int(plan.budget.cut)
            cells[_RESERVE], cells[_RESERVE_CUT] = plan.reserve.left, int(plan.reserve.cut)
            return int(cells[_GEN])

    def stop(self, gen: int) -> None:
        """No node of plan `gen` is left to claim (a reader gave the plan up)."""
        with self._held() as cells:
            if cells[_GEN] == gen:
                cells[_BACK] = cells[_FRONT]

    def claim(self, gen: int, count: int, from_end: bool) -> range | None:
        """The next `count` unclaimed nodes (at most) from the start or the end of plan `gen`, or None."""
        with self._held() as cells:
            front, back = cells[_FRONT], cells[_BACK]
            if cells[_GEN] != gen or front >= back:
                return None
            if from_end:
                cells[_BACK] = start = max(front, back - count)
                return range(start, back)
            cells[_FRONT] = stop = min(back, front + count)
            return range(front, stop)

    def theirs(self) -> int:
        """Where the process's claims start (once no node is left to claim, its parts are every node from there)."""
        with self._held() as cells:
            return int(cells[_BACK])

    def bytes(self) -> tuple[SharedBytes, SharedBytes]:
        """The request's byte bounds: the shares', and the one for reading further back."""
        return SharedBytes(self, _BUDGET, _BUDGET_CUT), SharedBytes(self, _RESERVE, _RESERVE_CUT)


class SharedBytes:
    """Bytes left for a request's reads, shared by both readers (`joblog.files.Bytes`)."""

    def __init__(self, state: SharedState, left: int, cut: int) -> None:
        self._state, self._left, self._cut = state, left, cut

    @property
    def left(self) -> int:
        return int(self._state._cells[self._left])

    @property
    def cut(self) -> bool:
        return self._state._cells[self._cut] != 0

    def take(self, want: int) -> int:
        with self._state._held() as cells:
            got = max(0, min(want, cells[self._left]))
            if got < want:
                cells[self._cut] = 1
            cells[self._left] -= got
            return int(got)

    def give(self, unused: int) -> None:
        with self._state._held() as cells:
            cells[self._left] += unused


def job_pipe() -> tuple[Connection, Connection]:
    """(the worker's end, the process's end) of the pipe that carries the process's parts, enlarged when allowed."""
    ours, theirs = multiprocessing.Pipe(duplex=False)
    with contextlib.suppress(OSError, AttributeError):
        fcntl.fcntl(theirs.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)  # type: ignore[attr-defined]
    return ours, theirs


# ---------------------------------------------------------------- the worker's side


class WorkerShare:
    """The worker's side of one plan read together (`joblog.scan.Share`)."""

    def __init__(self, state: SharedState, gen: int, plan: JobLogPlan, conn: Connection, lost: Callable[[str], None],
                 grace_s: float) -> None:  # fmt: skip
        self.state, self.gen, self.plan, self.conn = state, gen, plan, conn
        self._lost, self._grace_s = lost, grace_s
        self._answered: list[range] = []  # the process's parts handed over
        self._failed: list[range] = []  # the process's parts it could not read
        self._done = False  # the process said it is done, or is taken as gone
        self.finished = False

    def claim(self) -> range | None:
        return self.state.claim(self.gen, CLAIM_NODES, from_end=False)

    def receive(self, reads: dict[str, NodeRead], logs: dict[str, NodeLog], late: list[str]) -> None:
        try:
            while not self._done and self.conn.poll(0):
                self._take(self.conn.recv_bytes(), reads, logs, late)
        except (EOFError, OSError) as exc:
            self._gone(f"its job-log parts could not be read: {exc!r}")

    def finish(
        self, reads: dict[str, NodeRead], logs: dict[str, NodeLog], late: list[str], deadline: Deadline
    ) -> list[range]:
        self.finished = True
        start, end = self.state.theirs(), len(self.plan.order)
        self._wait(lambda: _covers(self._answered + self._failed, start, end), reads, logs, late, deadline,
                   "it did not hand over its job-log parts by the deadline")  # fmt: skip
        if self.state.lost:
            self._gone("it held the job-log share's lock")
        return _missing(self._answered, start, end)

    def abandon(self, deadline: Deadline) -> None:
        """The worker gives the plan up before `finish` (its request failed): no node is left to claim, and what the
        process sends of it is read and dropped until it says it is done (by `deadline` and the grace, else it is
        stopped), so that it never waits on a full pipe and the pipe is clear for the next request."""
        if self.finished:
            return
        self.finished = True
        self.state.stop(self.gen)
        ignored: dict[str, Any] = {}
        self._wait(lambda: False, ignored, ignored, [], deadline,
                   "it did not end its share of the job logs by the deadline")  # fmt: skip

    def _wait(
        self, enough: Callable[[], bool], reads: dict[str, NodeRead], logs: dict[str, NodeLog], late: list[str],
        deadline: Deadline, late_why: str,
    ) -> None:
        """Take the process's messages until `enough()` or it says it is done; one that sends nothing by `deadline`
        and the grace is taken as gone (`late_why`)."""
        try:
            while not self._done and not enough():
                if not self.conn.poll(max(deadline.remaining(), 0.0) + self._grace_s):
                    self._gone(late_why)
                    return
                self._take(self.conn.recv_bytes(), reads, logs, late)
        except (EOFError, OSError) as exc:
            self._gone(f"its job-log parts could not be read: {exc!r}")

    def _gone(self, why: str) -> None:
        self._done = True
        self._lost(why)

    def _take(self, message: bytes, reads: dict[str, NodeRead], logs: dict[str, NodeLog], late: list[str]) -> None:
        """Add one part the process handed over; one that does not decode is left for the worker to read."""
        try:
            value = decode_part(message)
            if value.get("gen") != self.gen:
                return  # a part of an earlier plan
            if value.get("done") is True:
                self._done = True
                return
            part = _part(value["part"], len(self.plan.order))
            if value.get("failed") is True:
                self._failed.append(part)
                return
            got_reads = [node_read_from_wire(r) for r in value["reads"]]
            got_logs = [node_log_from_wire(x) for x in value["logs"]]
            got_late = value["late"]
            nodes = set(self.plan.order[part.start : part.stop])
            read_nodes = [r.node for r in got_reads]
            if not isinstance(got_late, list) or sorted(read_nodes + got_late) != sorted(nodes):
                raise ValueError("a part whose nodes are not the ones it claimed")
            if not {x.node for x in got_logs} <= set(read_nodes):
                raise ValueError("a parsed log of a node the part did not read")
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            log.warning("a job-log part of the scan process could not be read (%s): the worker reads it", exc)
            return
        reads.update((r.node, r) for r in got_reads)
        logs.update((x.node, x) for x in got_logs)
        late.extend(got_late)
        self._answered.append(part)


def _part(value: Any, count: int) -> range:
    start, stop = value
    if type(start) is not int or type(stop) is not int or not 0 <= start < stop <= count:
        raise ValueError("not a part of the plan")
    return range(start, stop)


def _covers(parts: Sequence[range], start: int, end: int) -> bool:
    return not _missing(parts, start, end)


def _missing(parts: Sequence[range], start: int, end: int) -> list[range]:
    """The ranges of `start`..`end` no part covers."""
    out: list[range] = []
    at = start
    for part in sorted(parts, key=lambda p: p.start):
        if part.start > at:
            out.append(range(at, min(part.start, end)))
        at = max(at, part.stop)
    if at < end:
        out.append(range(at, end))
    return [r for r in out if len(r)]


# ---------------------------------------------------------------- the scan process's side


def serve_share(
    source: FileJobLogSource, nodes: Sequence[str], value: Any, state: SharedState, deadline: Deadline,
    send: Callable[[bytes], None],
) -> None:
    """The process's side of one plan (`value`: its generation and the plan as `plan_to_wire` gave it): claim parts
    from the end, read and parse each as the worker would, and send it; then say it is done."""
    gen = value["gen"]
    budget, reserve = state.bytes()
    plan = plan_from_wire(source.root, value["plan"], nodes, budget, reserve)
    resolve = resolver(nodes)
    try:
        while (part := state.claim(gen, CLAIM_NODES, from_end=True)) is not None:
            message: dict[str, Any] = {"gen": gen, "part": [part.start, part.stop]}
            reads: dict[str, NodeRead] = {}
            logs: dict[str, NodeLog] = {}
            late: list[str] = []
            try:
                read_planned(plan, part, sinks(resolve, logs), deadline, reads, late)
                message["reads"] = [node_read_to_wire(r) for r in reads.values()]
                message["logs"] = [node_log_to_wire(x) for node, x in logs.items() if node in reads]
                message["late"] = late
            except Exception:  # noqa: BLE001 - said; the worker reads the part itself and meets it there
                log.exception("the scan process could not read a part of the job logs")
                message = {"gen": gen, "part": [part.start, part.stop], "failed": True}
            send(encode_part(message))
    finally:
        send(encode_part({"gen": gen, "done": True}))


#: the first byte of a message written by the standard library's `json`: one holding an integer beyond 64 bits or a
#: lone surrogate, which orjson refuses to write (and would read such an integer back as a float)
_STDLIB = b"\x00"


def encode_part(message: dict[str, Any]) -> bytes:
    """A message of the process as bytes: orjson's JSON (a part of 16 nodes in a tenth of the standard library's
    time), else the standard library's behind `_STDLIB`."""
    try:
        return orjson.dumps(message)
    except TypeError:  # orjson.JSONEncodeError
        return _STDLIB + json.dumps(message).encode()


def decode_part(data: bytes) -> Any:
    """The message `encode_part` gave (ValueError for bytes that are not JSON)."""
    if data[:1] == _STDLIB:
        return json.loads(data[1:])
    return orjson.loads(data)  # orjson.JSONDecodeError is a ValueError


def plan_message(gen: int, plan: JobLogPlan) -> dict[str, Any]:
    """What the worker sends its process for a plan (`serve_share` reads it)."""
    return {"gen": gen, "plan": plan_to_wire(plan)}


__all__ = ["CLAIM_NODES", "SharedState", "WorkerShare", "job_pipe", "plan_message", "serve_share"]
