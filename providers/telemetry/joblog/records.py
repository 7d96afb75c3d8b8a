"""Job-log records: what the node parser keeps of a node's lines, and what the job-log rules read.

The records a node's lines give are slotted and not frozen (a frozen dataclass sets each field through
`object.__setattr__`, a cost on each decisive line); nothing changes them once the parser has made them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime

from providers.telemetry.joblog.cuda_errors import CudaErrorKind


@dataclass(slots=True)
class LogLine:
    """One line as evidence: its text, the time a collector stamped on it (if any, with a zone) and its position."""

    text: str
    observed_at: datetime | None
    number: int


@dataclass(slots=True, unsafe_hash=True)  # not frozen, as the records (above); hashed by its process group and rank
class GroupRank:
    """A ProcessGroupNCCL marker: the process group's id (None for `[Rank N]`), the rank within it, and the group's
    identity as the line names it (`PG GUID 55(mesh_replicate)` gives `55(mesh_replicate)`, `[PG 0 (default_pg) ...]`
    gives `default_pg`; None when the line names only the id).

    The id is a per-process creation counter (`process_group_id++`): the same number on two ranks need not be the
    same communicator. The identity (the group's GUID or name) is the same on every rank of the group.
    """

    pg: str | None
    rank: int
    identity: str | None = field(default=None, compare=False)

    @property
    def default_group(self) -> bool:
        """The default process group (id 0, `default_pg`), whose ranks are the global ranks."""
        return self.pg == "0" or self.identity in ("default_pg", "0(default_pg)")

    @property
    def key(self) -> str | None:
        """The group's identity across ranks: its GUID or name, `default_pg` for the default group, or None when the
        line names neither (its sequence numbers cannot be placed in a group)."""
        if self.default_group:
            return "default_pg"
        return self.identity


@dataclass(slots=True)
class WatchdogTimeout:
    line: LogLine
    rank: int | None  # global rank, from the `[rankN]:` prefix
    group: GroupRank | None
    seq: int | None
    op: str
    timeout_ms: int
    ran_ms: int


@dataclass(slots=True)
class WorkProgress:
    """A watchdog line with the process group's `last enqueued` / `last completed` work numbers."""

    line: LogLine
    rank: int | None
    group: GroupRank | None
    work: int | None
    last_enqueued: int
    last_completed: int


@dataclass(slots=True)
class DesyncReport:
    """Ranks PyTorch's desync report names as lagging, within the process group of the reporting line."""

    line: LogLine
    reporter: int | None  # global rank of the rank that printed it
    group: GroupRank | None  # the reporter's next marker: which process group the named ranks belong to
    lagging: tuple[int, ...]


class ExceptionKind(enum.StrEnum):
    APPLICATION = "application"  # the program raised it
    COMMUNICATION = "communication"  # a collective, the store or a peer failed under it: a consequence
    CUDA = "cuda"  # a CUDA error (classified by the CUDA table)
    LAUNCHER = "launcher"  # torchrun's own (ChildFailedError, SignalException)


@dataclass(slots=True)
class PythonTraceback:
    line: LogLine  # the exception line
    rank: int | None
    first: LogLine
    last_frame: str | None
    exception: str
    kind: ExceptionKind


@dataclass(slots=True)
class ElasticFailure:
    """One entry of torchelastic's failure summary."""

    root: bool
    lines: tuple[LogLine, ...]
    host: str | None
    host_node: str | None  # the scope node `host` names, or None
    rank: int | None
    local_rank: int | None
    exitcode: int | None
    pid: int | None
    signal: str | None  # e.g. SIGKILL, when the process died of a signal
    time_text: str | None  # torchelastic's own time: the launcher's local time, no zone
    traceback_exception: str | None  # the exception line of the traceback in the entry, if it holds one
    traceback_kind: ExceptionKind | None

    @property
    def reported_at(self) -> datetime | None:
        """The first collector time (with a zone) on the entry's lines."""
        return next((ln.observed_at for ln in self.lines if ln.observed_at is not None), None)


class NetworkKind(enum.StrEnum):
    """NCCL network warnings, each the signal table row of the same meaning."""

    IB_COMPLETION = "nccl_ib_completion_error"  # NET/IB work completion with an error status
    ASYNC_EVENT = "nccl_ib_async_port_event"  # the InfiniBand device raised a port error or a fatal event
    PEER_CLOSED = "nccl_socket_peer_closed"  # a socket peer closed or reset the connection
    CONNECT = "nccl_socket_connect_failed"  # connecting to a peer failed
    VERBS_CALL = "nccl_verbs_call_failed"  # a local ibv_* call failed


@dataclass(slots=True)
class NcclNetworkError:
    line: LogLine
    kind: NetworkKind
    host: str | None  # the host NCCL names in its prefix
    peer: str | None  # the peer as the line names it (`ip<port>` or `host<port>`)
    peer_node: str | None  # the scope node the peer's name names, when it is a name and matches
    status: int | None  # the ibv work-completion status (12 is IBV_WC_RETRY_EXC_ERR)
    #: the signal table row whose meaning the line has: the row its format matched (`data/nccl.csv`), the row of the
    #: event it names when that row's code decides, or the family's row when no format matched
    signal: str | None = None
    device: int | None = None  # the CUDA device NCCL's prefix names
    format: str | None = None  # the row whose format the line matched, when it is not `signal`
    code: str | None = None  # the row of the status or event the line carries (`data/ib.csv`)


@dataclass(frozen=True, slots=True)
class Message:
    """What a catalogue's message line says, read by the row whose format it matched (a pure reading of the line's
    text: `messages.py`).

    `signal` is the row whose meaning the line has: the row itself, or the row of the code it carries when the row's
    code decides (an NCCL `Got non-fatal async event: port error(10)` is `IBV_EVENT_PORT_ERR`'s); `format` is the row
    whose format matched. The rest is what the line names, where it names it.
    """

    signal: str
    format: str
    host: str | None = None  # the host the line names (NCCL's prefix, srun's `<node>: task`, `on node X`, `[host]`)
    device: int | None = None  # the CUDA device (GPU) the line names
    ranks: tuple[int, ...] = ()  # the ranks or tasks the message names (srun's `tasks 0-3`)
    code: str | None = None  # the row of the code the line carries (a signal, an errno, a status, a CUDA error)
    exit: int | None = None  # the exit code the line gives
    peer: str | None = None  # the peer a network message names


@dataclass(slots=True)
class CudaError:
    line: LogLine
    rank: int | None
    group: GroupRank | None
    kind: CudaErrorKind | None  # None: a CUDA error the table does not know (points at nothing by itself)
    text: str  # the error text as logged
    host: str | None = None  # the host the line names (NCCL's prefix on a `Cuda failure` warning)
    device: int | None = None  # the CUDA device the line names (NCCL's prefix)
    #: the `nccl_check_site` row of the line (NCCL's check of the CUDA driver at a site whose failures NCCL's own text
    #: explains), read when the error alone names no single cause
    site: str | None = None


@dataclass(slots=True)
class SignalHit:
    """A line holding a signal table row: read by its markers alone (parse `text`, `nccl_result`), or by the row's
    format (a catalogue's message: `Message`, with what the line names)."""

    signal: str  # the row whose meaning the line has
    line: LogLine
    rank: int | None  # the global rank of the line's `[rankN]:` prefix
    group: GroupRank | None
    host: str | None = None  # the host the line itself names, as written
    node: str | None = None  # the scope node `host` names, when it names one
    device: int | None = None  # the CUDA device the line names
    ranks: tuple[int, ...] = ()  # the ranks or tasks the message names
    code: str | None = None  # the row of the code the line carries
    exit: int | None = None  # the exit code the line gives
    peer: str | None = None  # the peer a network message names
    format: str | None = None  # the row whose format the line matched, when it is not `signal`


@dataclass(slots=True)
class RankSighting:
    """Where a rank's own lines were seen in one node's file: its last line."""

    last: LogLine
    marker_only: bool  # only `[Rank N]` markers (no `[rankN]:` prefix) named it


@dataclass(frozen=True)
class NodeLog:
    """What one node's job-log tail holds, for the rules."""

    node: str
    lines: int
    ranks: dict[int, RankSighting]
    timeouts: tuple[WatchdogTimeout, ...]
    progress: tuple[WorkProgress, ...]
    desync: tuple[DesyncReport, ...]
    failures: tuple[ElasticFailure, ...]
    network: tuple[NcclNetworkError, ...]
    cuda: tuple[CudaError, ...]
    tracebacks: tuple[PythonTraceback, ...]
    signals: tuple[SignalHit, ...] = ()

    @property
    def settled(self) -> bool:
        """Whether every rank whose own (`[rankN]:`) lines the tail holds has a record of its own -- a watchdog
        timeout or progress line, a CUDA error, a traceback or another signal line; torchelastic's entry for it says
        that it ended, not why, and does not count --, or, when no rank prefixes its lines, whether it holds any
        record. A tail that is not settled may end in output printed after the lines that decide (a hung rank's
        stack dump): the reader reads further back."""
        ranks = {rank for rank, seen in self.ranks.items() if not seen.marker_only}
        if not ranks:
            return self.reported
        own: set[int] = set()
        for records in (self.timeouts, self.progress, self.cuda, self.signals):
            for record in records:
                rank = record.rank
                if rank is None and record.group is not None and record.group.default_group:
                    rank = record.group.rank
                if rank is not None:
                    own.add(rank)
        own.update(t.rank for t in self.tracebacks if t.rank is not None)
        return ranks <= own

    @property
    def reported(self) -> bool:
        """Whether the tail holds any record: a watchdog or progress line, a desync report, a launcher summary, a
        network or CUDA error, a traceback or another signal of the table."""
        return bool(
            self.timeouts or self.progress or self.desync or self.failures or self.network or self.cuda
            or self.tracebacks or self.signals
        )


