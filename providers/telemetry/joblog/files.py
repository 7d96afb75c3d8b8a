"""The job-log files: the tail of `<dir>/<workload_id>/<attempt_index>/<node>.log` and its rotated files.

A failed attempt's evidence sits at the end of each node's output, so only a bounded tail of it is read: the
current file from its end and, when that is shorter than the node's share, the rotated files before it, newest
first (`<node>.log.1`, `<node>.log.2.gz`, ...). The tail is handed on oldest line first. Nothing read from the
files ever goes into the service's own logs: a file that cannot be read is named (by its path relative to the
job-log directory) and skipped, and only the error's class is logged.
"""

from __future__ import annotations

import logging
import os
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Protocol

from providers.base import Deadline, ProviderProcessingError, ProviderTimeoutError, SourceFailure
from providers.telemetry.joblog.nodes import NodeResolver, is_safe_component
from providers.telemetry.reading import GzipReader

log = logging.getLogger("attribution_adapter.telemetry.joblog")

#: bytes of one node's output kept, from its end (the current file and, newest first, its rotated files)
MAX_NODE_BYTES = 4 * 1024 * 1024
#: bytes read for one request in all: the nodes that have files share it evenly (a node that needs less leaves
#: its rest to the others)
MAX_REQUEST_BYTES = 256 * 1024 * 1024
#: a rotated `.gz` file cannot be read from its end: it is decompressed at most this far while its tail is kept
MAX_GZ_INFLATED_BYTES = 64 * 1024 * 1024
#: entries of one attempt directory looked at
MAX_DIR_ENTRIES = 256 * 1024
#: rotated files of one node considered (newest first)
MAX_ROTATED_FILES = 16
READ_CHUNK = 1024 * 1024
#: when the shares are smaller than a node's bound, 1/FURTHER_SHARE of the request's bound is kept back for reading
#: further back the nodes whose share does not settle them
FURTHER_SHARE = 8

#: where a node's tail goes: its pieces oldest first (one per file read), each holding whole lines (the first one
#: complete, the last one maybe without its newline; `prefilter.text_lines` gives them as text). A call replaces
#: what an earlier call for the node gave, and says whether the tail settles the node (`NodeLog.settled`); when it
#: does not and older output lies behind, the node is read further back and handed over again.
TailSink = Callable[[list[bytes]], bool]


@dataclass(frozen=True)
class ReadLimits:
    """The byte bounds of one read; a provider may set them lower than the defaults, never higher."""

    node_bytes: int = MAX_NODE_BYTES
    request_bytes: int = MAX_REQUEST_BYTES

    def __post_init__(self) -> None:
        if not 1 <= self.node_bytes <= MAX_NODE_BYTES:
            raise ValueError(f"node_bytes must be between 1 and {MAX_NODE_BYTES}")
        if not 1 <= self.request_bytes <= MAX_REQUEST_BYTES:
            raise ValueError(f"request_bytes must be between 1 and {MAX_REQUEST_BYTES}")


@dataclass(frozen=True)
class NodeRead:
    """What was read of one node's files."""

    node: str
    #: files read, newest first, as paths relative to the job-log directory
    files: tuple[str, ...]
    bytes_read: int
    #: older output lies beyond the bound (the node's share, or a `.gz` too large to reach its end) and was not read
    cut: bool
    #: files skipped because they could not be read, were corrupt, or vanished (relative paths)
    skipped: tuple[str, ...] = ()
    #: read further back than its share because its share did not settle it
    further: bool = False
    #: older output was not read and what was read does not settle the node (a rank whose lines were read has no
    #: line that decides for it: `NodeLog.settled`)
    undecided: bool = False


@dataclass(frozen=True)
class JobLogRead:
    """The outcome of one read: which scope nodes had job logs and what was left out, and why."""

    #: the attempt's directory exists
    found: bool
    #: scope nodes with at least one file, read or skipped
    nodes: dict[str, NodeRead] = field(default_factory=dict)
    #: scope nodes without any file in the attempt's directory
    without_files: tuple[str, ...] = ()
    #: scope nodes whose name cannot be a file name (a separator, `..`, ...): never looked for
    refused: tuple[str, ...] = ()
    bytes_read: int = 0
    #: the request's bound stopped reading before every planned byte was read
    request_cut: bool = False
    #: scope nodes with files that the deadline came before (or in the middle of): not read, not used
    late: tuple[str, ...] = ()
    #: sentences for the answer or a log; they hold node names and counts, never log text
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class LogFile:
    path: str  # as listed (a str: a `Path` a file cost about a third of a 4,096-node plan)
    rel: str
    gz: bool
    order: tuple[int, str]  # newest first when sorted ascending


class _Budget:
    """Bytes left for the request."""

    def __init__(self, total: int) -> None:
        self.left = total
        self.cut = False

    def take(self, want: int) -> int:
        got = min(want, self.left)
        if got < want:
            self.cut = True
        self.left -= got
        return got

    def give(self, unused: int) -> None:
        """Give back bytes taken and not read."""
        self.left += unused


def read_job_logs(
    root: Path,
    workload_id: str,
    attempt_index: int,
    nodes: Sequence[str],
    resolve: NodeResolver,
    sink_for: Callable[[str], TailSink],
    deadline: Deadline,
    limits: ReadLimits | None = None,
) -> JobLogRead:
    """Read the tail of every scope node's job log of one attempt into the sinks `sink_for(node)` returns.

    `resolve` decides which scope node a file's stem names (whole names only). Nodes are read in scope order; once
    the deadline has passed the nodes not yet read (and one cut in the middle) are left out and named in `late`,
    and what was read stands. Raises `ProviderTimeoutError` when the deadline passes while the folder is listed,
    and `ProviderProcessingError` when a directory exists but cannot be listed; a file that cannot be read is
    skipped with a warning, never the whole answer.
    """
    plan = plan_job_logs(root, workload_id, attempt_index, nodes, resolve, deadline, limits)
    reads: dict[str, NodeRead] = {}
    late: list[str] = []
    read_planned(plan, range(len(plan.order)), sink_for, deadline, reads, late)
    return plan.outcome(reads, late)


class Bytes(Protocol):
    """Bytes left for a request's reads: one process's (`_Budget`), or shared by two under a lock."""

    @property
    def left(self) -> int: ...

    @property
    def cut(self) -> bool: ...

    def take(self, want: int) -> int: ...

    def give(self, unused: int) -> None: ...


@dataclass
class JobLogPlan:
    """What one read of an attempt's job logs will read: each node's files and byte share, and the request's bounds.

    `order` holds the scope nodes with files in scope order; `read_planned` reads any part of it, so that two
    readers can share one plan (each claiming nodes of `order`), and `outcome` says what all of them read.
    """

    found: bool
    nodes: tuple[str, ...]
    refused: tuple[str, ...]
    notes: tuple[str, ...]
    folder: str = ""
    attempt_dir: Path | None = None
    groups: dict[str, list[LogFile]] = field(default_factory=dict)
    order: tuple[str, ...] = ()
    shares: dict[str, int] = field(default_factory=dict)
    node_bytes: int = MAX_NODE_BYTES
    #: the bytes the shares are taken from, and the bytes kept back for reading further back
    budget: Bytes = field(default_factory=lambda: _Budget(0))
    reserve: Bytes = field(default_factory=lambda: _Budget(0))

    def outcome(self, reads: dict[str, NodeRead], late: Sequence[str]) -> JobLogRead:
        """What was read (`reads`, in any order) and left out (`late`), with the sentences that say so."""
        notes = list(self.notes)
        if not self.found:
            return JobLogRead(found=False, refused=self.refused, notes=tuple(notes))
        place = {node: index for index, node in enumerate(self.order)}
        late = sorted(late, key=place.__getitem__)
        reads = {node: reads[node] for node in self.order if node in reads}
        if late:
            notes.append(
                f"the deadline came before the job logs of {len(late)} of {len(self.groups)} node(s) with files "
                f"were read: {_names(late)}"
            )
        cut_nodes = sum(1 for r in reads.values() if r.cut)
        if cut_nodes:
            notes.append(f"older output of {cut_nodes} node(s) lies beyond the read bound and was not read")
        undecided = [r.node for r in reads.values() if r.undecided]
        if undecided:
            notes.append(
                f"within the read bound of the job logs of {len(undecided)} node(s), some rank that wrote there has "
                f"no watchdog, progress or error line, and older output was not read: {_names(undecided)}"
            )
        skipped = sum(len(r.skipped) for r in reads.values())
        if skipped:
            notes.append(f"{skipped} job-log file(s) could not be read and were skipped")
        return JobLogRead(
            found=True,
            nodes=reads,
            without_files=tuple(n for n in self.nodes if n not in self.groups and n not in self.refused),
            refused=self.refused,
            bytes_read=sum(r.bytes_read for r in reads.values()),
            request_cut=self.budget.cut,
            late=tuple(late),
            notes=tuple(notes),
        )


def plan_job_logs(
    root: Path,
    workload_id: str,
    attempt_index: int,
    nodes: Sequence[str],
    resolve: NodeResolver,
    deadline: Deadline,
    limits: ReadLimits | None = None,
) -> JobLogPlan:
    """List the attempt's folder and share the request's bytes among the scope nodes with files (`read_job_logs`
    says what it raises); the tails of the nodes' current files are asked to be read ahead."""
    limits = limits or ReadLimits()
    nodes = tuple(nodes)
    refused = tuple(n for n in nodes if not is_safe_component(n))
    notes: list[str] = []
    if refused:
        notes.append(f"{len(refused)} scope node name(s) cannot name a job-log file and were not looked for")
    if not is_safe_component(workload_id):
        notes.append("the workload id cannot name a job-log folder: no job logs were looked for")
        return JobLogPlan(False, nodes, refused, tuple(notes))
    attempt_dir = root / workload_id / str(attempt_index)
    folder = _rel(root, attempt_dir)
    groups = _plan(attempt_dir, folder, resolve, set(nodes) - set(refused), deadline)
    if groups is None:
        notes.append("no job-log folder for this workload attempt")
        return JobLogPlan(False, nodes, refused, tuple(notes))
    shared = shared_bytes(len(groups), limits)
    shares = _shares(groups, limits, shared)
    _read_ahead(nodes, groups, shares, deadline)
    return JobLogPlan(
        True, nodes, refused, tuple(notes), folder, attempt_dir, groups, tuple(n for n in nodes if groups.get(n)),
        shares, limits.node_bytes, _Budget(shared), _Budget(limits.request_bytes - shared),
    )  # fmt: skip


def read_planned(
    plan: JobLogPlan, part: range, sink_for: Callable[[str], TailSink], deadline: Deadline,
    reads: dict[str, NodeRead], late: list[str],
) -> None:
    """Read the nodes `plan.order[part]` into `reads`; those the deadline came before (or in the middle of) go to
    `late`: what was read so far stands."""
    for index in part:
        node = plan.order[index]
        if deadline.expired:
            late.append(node)
            continue
        try:
            reads[node] = _read_node(
                node, plan.groups[node], plan.shares[node], plan.budget, plan.reserve, plan.node_bytes, sink_for,
                deadline,
            )
        except ProviderTimeoutError:
            late.append(node)  # cut in the middle: none of this node's lines are used


# ---------------------------------------------------------------- layout


def _plan(
    attempt_dir: Path, folder: str, resolve: NodeResolver, wanted: set[str], deadline: Deadline
) -> dict[str, list[LogFile]] | None:
    """The files of each scope node, newest first; None when the attempt has no folder. `folder` is the attempt's
    path relative to the job-log directory: each file's name is shown behind it."""
    groups: dict[str, list[LogFile]] = {}
    try:
        iterator = os.scandir(attempt_dir)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None
    except OSError as exc:
        raise ProviderProcessingError(
            "the job-log folder of this attempt could not be read", kind=SourceFailure.UNREADABLE
        ) from exc
    with iterator:
        for count, entry in enumerate(iterator):
            if count >= MAX_DIR_ENTRIES:
                log.warning(
                    "job-log folder %s has more than %d entries; the rest were not looked at",
                    folder,
                    MAX_DIR_ENTRIES,
                )
                break
            if count % 4096 == 0:
                _check(deadline)
            parsed = parse_file_name(entry.name)
            if parsed is None:
                continue
            stem, rotation, gz = parsed
            node = resolve(stem)
            if node is None or node not in wanted:
                continue  # a file of another host: never opened
            try:
                if not entry.is_file():
                    continue
            except OSError:
                continue
            file = LogFile(entry.path, f"{folder}/{entry.name}", gz, (rotation, entry.name))
            groups.setdefault(node, []).append(file)
    for files in groups.values():
        files.sort(key=lambda f: f.order)
        del files[MAX_ROTATED_FILES + 1 :]
    return groups


def parse_file_name(name: str) -> tuple[str, int, bool] | None:
    """(node stem, rotation number (0 for the current file), gzip) of `<node>.log[.<N>][.gz]`, else None."""
    gz = name.endswith(".gz")
    base = name[:-3] if gz else name
    rotation = 0
    head, dot, tail = base.rpartition(".")
    if dot and tail.isascii() and tail.isdigit() and len(tail) <= 6 and head.endswith(".log"):
        rotation, base = int(tail), head
    if not base.endswith(".log") or len(base) == len(".log"):
        return None
    return base[: -len(".log")], rotation, gz


def shared_bytes(nodes: int, limits: ReadLimits) -> int:
    """The part of the request's bound split into the shares of `nodes` nodes with files: all of it when the shares
    reach a node's bound, else all but an eighth, kept back for reading further back the nodes whose share does not
    settle them."""
    if nodes == 0 or limits.request_bytes // nodes >= limits.node_bytes:
        return limits.request_bytes
    return limits.request_bytes - limits.request_bytes // FURTHER_SHARE


def _shares(groups: dict[str, list[LogFile]], limits: ReadLimits, total: int) -> dict[str, int]:
    """Each node's byte share: `total` split evenly, what a node does not need going to the others."""
    demand: dict[str, int] = {}
    for node, files in groups.items():
        need = 0
        for f in files:
            if f.gz:
                need = limits.node_bytes  # its inflated size is unknown until read
                break
            try:
                need += os.stat(f.path).st_size
            except OSError:
                continue
        demand[node] = min(need, limits.node_bytes)
    shares: dict[str, int] = {}
    left = total
    ordered = sorted(demand.items(), key=lambda kv: kv[1])
    for i, (node, need) in enumerate(ordered):
        fair = left // (len(ordered) - i)
        shares[node] = min(need, fair)
        left -= shares[node]
    return shares


def _read_ahead(
    nodes: Sequence[str], groups: dict[str, list[LogFile]], shares: dict[str, int], deadline: Deadline
) -> None:
    """Ask the kernel to read the tail of each node's current file (its share, where its lines will be read) ahead,
    in the order the nodes are read: a worker whose files are not in the page cache (their first read, or after
    other files took their place) has them read while the nodes before are parsed, instead of one read at a time.
    A few microseconds a file when they are cached."""
    for count, node in enumerate(nodes):
        files = groups.get(node)
        if not files or files[0].gz or not shares.get(node):
            continue
        if count % 4096 == 0 and deadline.expired:
            return
        try:
            fd = os.open(files[0].path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            continue  # the read itself says what is wrong
        try:
            size = os.fstat(fd).st_size
            os.posix_fadvise(fd, max(0, size - shares[node]), shares[node], os.POSIX_FADV_WILLNEED)
        except OSError:
            pass
        finally:
            os.close(fd)


def _rel(root: Path, path: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return path.name


def _check(deadline: Deadline) -> None:
    if deadline.expired:
        raise ProviderTimeoutError("reading the job logs did not finish in time")


# ---------------------------------------------------------------- reading


def _read_node(
    node: str, files: list[LogFile], share: int, budget: Bytes, reserve: Bytes, ceiling: int,
    sink_for: Callable[[str], TailSink], deadline: Deadline,
) -> NodeRead:
    """Read the newest `share` bytes of a node's files and hand them over, oldest first.

    When the sink says they do not settle the node (a rank whose lines they hold has no line that decides for it)
    and older output lies behind them, the node is read further back, four times as far each time, up to `ceiling`
    bytes, the extra bytes taken from `reserve`: a node whose last lines are a hung rank's stack dump or teardown
    output still gives the lines that decide. The bytes read again are counted once.
    """
    sink = sink_for(node)
    tail = _tail(files, share, budget, deadline)
    further = False
    settled = _hand_over(tail, sink, deadline) or not tail.cut  # a node read whole is as settled as it can be
    while not settled and tail.size < ceiling:
        want = min(ceiling, max(tail.size, 1) * 4)
        extra = reserve.take(want - tail.size)
        if extra <= 0:
            break
        _check(deadline)
        tail = _tail(files, tail.size + extra, _Budget(tail.size + extra), deadline)
        further = True
        settled = _hand_over(tail, sink, deadline) or not tail.cut
    return NodeRead(
        node, tuple(tail.files), tail.bytes_read, tail.cut, tuple(tail.skipped), further=further,
        undecided=not settled,
    )


def _hand_over(tail: _Tail, sink: TailSink, deadline: Deadline) -> bool:
    _check(deadline)
    return sink([piece for piece in (_whole_lines(data, partial) for data, partial in reversed(tail.pieces)) if piece])


@dataclass
class _Tail:
    """The newest bytes of a node's files: pieces newest first, each (bytes, starts mid-line)."""

    pieces: list[tuple[bytes, bool]] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    bytes_read: int = 0
    size: int = 0
    cut: bool = False


def _tail(files: list[LogFile], share: int, budget: Bytes, deadline: Deadline) -> _Tail:
    """The newest `share` bytes of a node's files (newest file first), within `budget`."""
    tail = _Tail()
    need = share
    for index, f in enumerate(files):
        _check(deadline)
        if need <= 0:
            tail.cut = _holds_bytes(files[index:])  # older files beyond the share; empty ones hold nothing unread
            break
        try:
            if f.gz:
                data, partial, used, complete = _gz_tail(f.path, need, budget, deadline)
                if not complete:
                    tail.cut = True
            else:
                data, partial, used = _plain_tail(f.path, need, budget)
        except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
            log.warning("skipped job-log file %s: %s", f.rel, _describe(exc))
            tail.skipped.append(f.rel)
            continue
        tail.bytes_read += used
        tail.files.append(f.rel)
        tail.pieces.append((data, partial))
        tail.size += len(data)
        need -= len(data)
        if partial:
            tail.cut = True
            break
        if budget.left <= 0 and index + 1 < len(files):
            tail.cut = True
            break
    return tail


def _holds_bytes(files: list[LogFile]) -> bool:
    """Whether any of `files` may hold a byte (a `.gz`, an unreadable file or a non-empty one)."""
    for f in files:
        if f.gz:
            return True
        try:
            if os.stat(f.path).st_size > 0:
                return True
        except OSError:
            return True
    return False


def _plain_tail(path: str, need: int, budget: Bytes) -> tuple[bytes, bool, int]:
    """(the last `need` bytes at most, whether they start inside the file, bytes read), read by `pread` (no file
    object: a node's tail is one read)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        want = budget.take(min(need, size))
        start = size - want
        chunks = []
        at = start
        while at < size:
            chunk = os.pread(fd, min(size - at, READ_CHUNK), at)
            if not chunk:
                break  # the file shrank while it was read
            chunks.append(chunk)
            at += len(chunk)
    finally:
        os.close(fd)
    data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    return data, start > 0, len(data)


class _CountingReader:
    """A read-only wrapper that counts the compressed bytes gzip pulls and stops at the request's bound."""

    def __init__(self, raw: BinaryIO, budget: Bytes) -> None:
        self._raw = raw
        self._budget = budget
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        size = READ_CHUNK if size is None or size < 0 else size
        allowed = self._budget.take(size) if size else 0
        data = self._raw.read(allowed) if allowed else b""
        self._budget.give(allowed - len(data))  # what the file did not have
        self.count += len(data)
        return data


def _gz_tail(path: str, need: int, budget: Bytes, deadline: Deadline) -> tuple[bytes, bool, int, bool]:
    """(the last `need` inflated bytes, whether they start inside the file, compressed bytes read, reached end)."""
    tail = bytearray()
    with open(path, "rb") as raw:
        counter = _CountingReader(raw, budget)
        reader = GzipReader(counter, max_inflated=MAX_GZ_INFLATED_BYTES)  # type: ignore[arg-type]
        while True:
            _check(deadline)
            if budget.left <= 0 or reader.at_bound:
                # The end was not reached: what was kept is not the file's tail, so none of it is used.
                return b"", False, counter.count, False
            try:
                chunk = reader.read(READ_CHUNK)
            except EOFError:
                if budget.cut:
                    return b"", False, counter.count, False
                raise
            if not chunk:
                break
            tail += chunk
            if len(tail) > need:
                del tail[: len(tail) - need]
    return bytes(tail), reader.inflated > len(tail), counter.count, True


def _whole_lines(data: bytes, partial: bool) -> bytes:
    """`data` without a first line that was cut by the tail's start."""
    if partial:
        first = data.find(b"\n")
        return b"" if first < 0 else data[first + 1 :]
    return data


def _describe(exc: BaseException) -> str:
    """The error's class (and OS reason): never its text, which may quote the file's bytes."""
    reason = getattr(exc, "strerror", None)
    return f"{type(exc).__name__} ({reason})" if isinstance(reason, str) else type(exc).__name__


def _names(nodes: Sequence[str], shown: int = 8) -> str:
    """The first `shown` node names, and how many more."""
    more = len(nodes) - shown
    return ", ".join(nodes[:shown]) + (f" and {more} more" if more > 0 else "")
