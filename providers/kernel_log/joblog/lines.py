"""Job-log lines: collector prefixes, rank markers, and the failure records of PyTorch, NCCL and torchelastic.

A node's file holds the interleaved output of every rank that ran there, as a log collector wrote it. `NodeParser`
takes its lines oldest first and keeps, bounded, what the rules need: which ranks wrote there, NCCL watchdog
timeouts and their sequence numbers, PyTorch's desync report, torchelastic's failure summary, NCCL network
warnings, CUDA errors and the last Python traceback of each rank.

Every regular expression here is applied with `match` at a known position (found with `str.find`), every
quantifier is bounded and possessive, and no quantifier holds another one that can repeat: a match costs at most
one pass over the (bounded) line, whatever the line holds. `tests/joblog/test_patterns.py` checks this on the
compiled patterns. Formats and the public reports they were taken from are listed in `docs/job-logs.md`.
"""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from providers.kernel_log.joblog import cuda_errors
from providers.kernel_log.joblog.cuda_errors import CudaErrorKind
from providers.kernel_log.joblog.nodes import NodeResolver

#: characters of one line ever looked at; the reader cuts longer lines before they get here
MAX_LINE_CHARS = 16 * 1024
#: how far into a line a rank prefix or a process-group marker is looked for
PREFIX_SCAN = 512
#: records of one kind kept per node (a log that repeats a line forever must not grow memory)
MAX_RECORDS = 4096
#: lines of one traceback, torchelastic entry or CRI partial line followed at most
MAX_BLOCK_LINES = 512
#: characters kept of a record's line (the contract's evidence bound)
MAX_TEXT = 4096

# ---------------------------------------------------------------- patterns

_TS = (
    r"(?P<date>\d{4}-\d{2}-\d{2})[T ](?P<clock>\d{2}:\d{2}:\d{2})(?:[.,](?P<frac>\d{1,9}+))?+"
    r"(?P<zone>Z|[+-]\d{2}:?+\d{2})?+"
)
#: Kubernetes CRI (`<RFC 3339> stdout|stderr F|P <line>`), also with the host a collector put after the time
CRI = re.compile(_TS + r" (?P<stream>stdout|stderr) (?P<flag>[FP]) ")
CRI_HOST = re.compile(_TS + r" (?P<host>[^\s]{1,253}+) (?P<stream>stdout|stderr) (?P<flag>[FP]) ")
#: any other collector that starts a line with an RFC 3339 time (and maybe `stdout`/`stderr`)
STAMP = re.compile(_TS + r" (?:(?:stdout|stderr) )?+")
#: `srun --label` puts the task number before each line
SRUN_LABEL = re.compile(r" {0,8}+\d{1,7}+: ")
#: PyTorch 2.2+ puts the global rank before every line a rank writes
RANK_PREFIX = re.compile(r"\[rank(?P<rank>\d{1,9}+)\]:")
#: torchrun's own per-worker prefix, `[<role><local rank>]:` (a local rank: never used as a rank)
ROLE_PREFIX = re.compile(r"\[[A-Za-z_][A-Za-z0-9_-]{0,63}+\]:")
#: ProcessGroupNCCL's log prefix: `[Rank N]`, `[PG 1 Rank N]`, `[PG 0 (default_pg) Rank N]`,
#: `[PG ID 0 PG GUID 0(default_pg) Rank N]` (N is the rank within that process group)
MARKER = re.compile(
    r"\[(?:PG (?:ID )?+(?P<pg>\d{1,9}+)(?: PG GUID (?P<guid>[^\]\s]{1,128}+)| \((?P<name>[^)\]]{1,128}+)\))?+ )?+"
    r"Rank (?P<rank>\d{1,9}+)\]"
)
WATCHDOG = re.compile(
    r"Watchdog caught collective operation timeout: WorkNCCL\((?:SeqNum=(?P<seq>\d{1,19}+), )?+"
    r"OpType=(?P<op>[A-Z_]{1,40}+)"
)
WATCHDOG_TAIL = re.compile(
    r"Timeout\(ms\)=(?P<timeout>\d{1,12}+)\) ran for (?P<ran>\d{1,15}+) milliseconds before timing out"
)
#: the watchdog's progress line in its four real shapes (PyTorch 2.3 to 2.7), each matched where its text starts
_NUMBERS = r"(?P<enq>-?+\d{1,19}+), last completed NCCL work: (?P<done>-?+\d{1,19}+)"
PROGRESS_DETECTED = re.compile(
    r"detected by watchdog at work: (?P<work>-?+\d{1,19}+), last enqueued NCCL work: " + _NUMBERS
)
PROGRESS_TIMEOUT = re.compile(r"Timeout at NCCL work: (?P<work>-?+\d{1,19}+), last enqueued NCCL work: " + _NUMBERS)
PROGRESS_SEQ_ID = re.compile(
    r"failure detected by watchdog at work sequence id: (?P<work>-?+\d{1,19}+) PG status: "
    r"last enqueued work: (?P<enq>-?+\d{1,19}+), last completed work: (?P<done>-?+\d{1,19}+)"
)
PROGRESS_DUMP = re.compile(r"Last enqueued NCCL work: " + _NUMBERS)
#: PyTorch's desync report (TORCH_NCCL_DESYNC_DEBUG), ranks within the process group
DESYNC_LAGGING = re.compile(
    r"(?:- )?+\[(?P<ranks>[0-9, ]{1,8192}+)\] (?:joined but didn't finish collective #(?P<started>\d{1,19}+)"
    r"|finished collective #(?P<finished>\d{1,19}+), but didn't join collective #\d{1,19}+)"
)
DESYNC_MISSING = re.compile(
    r"To our best knowledge, ranks \[(?P<ranks>[0-9, ]{1,8192}+)\] are the lagging ranks "
    r"that caused this timeout"
)
#: torchelastic's failure summary (ChildFailedError)
ELASTIC_FIELD = re.compile(
    r" {2}(?P<key>time|host|rank|exitcode|error_file|traceback) {0,8}+: ?+(?P<value>[^\n]{0,4096}+)"
)
ELASTIC_ENTRY = re.compile(r"\[(?P<idx>\d{1,6}+)\]:")
ELASTIC_RANK = re.compile(r"(?P<rank>\d{1,9}+) \(local_rank: (?P<local>\d{1,9}+)\)")
ELASTIC_EXIT = re.compile(r"(?P<code>-?+\d{1,4}+) \(pid: (?P<pid>\d{1,10}+)\)")
ELASTIC_SIGNAL = re.compile(r"Signal (?P<num>\d{1,3}+) \((?P<name>[A-Z0-9_<>/]{1,16}+)\) received by PID")
ELASTIC_TIME = re.compile(r"(?P<date>\d{4}-\d{2}-\d{2})_(?P<clock>\d{2}:\d{2}:\d{2})")
#: NCCL's debug prefix `<host>:<pid>:<tid> [<cuda dev>]`
NCCL_ORIGIN = re.compile(r"(?P<host>[^\s:]{1,253}+):(?P<pid>\d{1,10}+):(?P<tid>\d{1,10}+)")
IB_COMPLETION = re.compile(
    r"NET/IB[A-Za-z]{0,8}+ ?+: ?+Got completion from peer (?P<peer>[^\s]{1,300}+) "
    r"with (?:error |status=)(?P<status>\d{1,4}+)"
)
PEER_AFTER = re.compile(r" ?+(?P<peer>[^\s]{1,300}+)")
VERBS_CALL = re.compile(r"Call to (?P<call>ibv_[a-z_]{1,64}+) failed")
CUDA_ERROR_TEXT = re.compile(r"CUDA error: (?P<msg>[^\n]{1,512}+)")
CUDA_FAILURE = re.compile(r"Cuda failure (?:\d{1,4}+ )?+'(?P<msg>[^']{1,512}+)'")
CUDA_SEARCH_HINT = re.compile(r"Search for `(?P<name>cudaError[A-Za-z]{1,64}+)'")
CUDA_DRIVER_NAME = re.compile(r"(?P<name>CUDA_ERROR_[A-Z_]{1,64}+)")
OLD_CUDA_RUNTIME = re.compile(r"cuda runtime error \(\d{1,4}+\) : (?P<msg>[^\n]{1,512}+)")
#: the kernel OOM killer's victim (`Out of memory: Killed process N`, `Memory cgroup out of memory: Killed
#: process N`, older `Killed process N (comm)`)
OOM_KILLED = re.compile(r"Killed process (?P<pid>\d{1,10}+)")
#: a Python exception line: a dotted name, then `:` or the end of the line
EXCEPTION_HEAD = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_.]{0,199}+)(?::|$)")

#: every pattern, for the construction check
PATTERNS: tuple[re.Pattern[str], ...] = (
    CRI, CRI_HOST, STAMP, SRUN_LABEL, RANK_PREFIX, ROLE_PREFIX, MARKER, WATCHDOG, WATCHDOG_TAIL,
    PROGRESS_DETECTED, PROGRESS_TIMEOUT, PROGRESS_SEQ_ID, PROGRESS_DUMP, DESYNC_LAGGING, DESYNC_MISSING,
    ELASTIC_FIELD, ELASTIC_ENTRY, ELASTIC_RANK, ELASTIC_EXIT, ELASTIC_SIGNAL, ELASTIC_TIME, NCCL_ORIGIN,
    IB_COMPLETION, PEER_AFTER, VERBS_CALL, CUDA_ERROR_TEXT, CUDA_FAILURE, CUDA_SEARCH_HINT, CUDA_DRIVER_NAME,
    OLD_CUDA_RUNTIME, OOM_KILLED, EXCEPTION_HEAD,
)

_CONTROL = {c: "\ufffd" for c in range(0x20) if c != 0x09} | {0x7F: "\ufffd", 0x00: None}
_CSI = re.compile(r"\x1b\[[0-9;?]{0,32}+[ -/]{0,4}+[@-~]")

# ---------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class LogLine:
    """One line as evidence: its text, the time a collector stamped on it (if any, with a zone) and its position."""

    text: str
    observed_at: datetime | None
    number: int


@dataclass(frozen=True, slots=True)
class GroupRank:
    """A ProcessGroupNCCL marker: the process group's id (None for `[Rank N]`) and the rank within it."""

    pg: str | None
    rank: int

    @property
    def default_group(self) -> bool:
        """The default process group (id 0, `default_pg`), whose ranks are the global ranks."""
        return self.pg == "0"


@dataclass(frozen=True, slots=True)
class WatchdogTimeout:
    line: LogLine
    rank: int | None  # global rank, from the `[rankN]:` prefix
    group: GroupRank | None
    seq: int | None
    op: str
    timeout_ms: int
    ran_ms: int


@dataclass(frozen=True, slots=True)
class WorkProgress:
    """A watchdog line with the process group's `last enqueued` / `last completed` work numbers."""

    line: LogLine
    rank: int | None
    group: GroupRank | None
    work: int | None
    last_enqueued: int
    last_completed: int


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
class PythonTraceback:
    line: LogLine  # the exception line
    rank: int | None
    first: LogLine
    last_frame: str | None
    exception: str
    kind: ExceptionKind


@dataclass(frozen=True, slots=True)
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
    IB_COMPLETION = "ib_completion"  # NET/IB work completion with an error status
    PEER_CLOSED = "peer_closed"  # a socket peer closed or reset the connection
    CONNECT = "connect"  # connecting to a peer failed
    VERBS_CALL = "verbs_call"  # a local ibv_* call failed


@dataclass(frozen=True, slots=True)
class NcclNetworkError:
    line: LogLine
    kind: NetworkKind
    host: str | None  # the host NCCL names in its prefix
    peer: str | None  # the peer as the line names it (`ip<port>` or `host<port>`)
    peer_node: str | None  # the scope node the peer's name names, when it is a name and matches
    status: int | None  # the ibv work-completion status (12 is IBV_WC_RETRY_EXC_ERR)


@dataclass(frozen=True, slots=True)
class CudaError:
    line: LogLine
    rank: int | None
    group: GroupRank | None
    kind: CudaErrorKind | None  # None: a CUDA error the table does not know (points at nothing by itself)
    text: str  # the error text as logged


@dataclass(frozen=True, slots=True)
class RankSighting:
    """Where a rank's own lines were seen in one node's file."""

    lines: int
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
    #: some kind of record exceeded MAX_RECORDS and later ones were dropped
    records_cut: bool = False


# ---------------------------------------------------------------- small parsers


def parse_stamp(match: re.Match[str]) -> datetime | None:
    """The UTC time of a `_TS` match, or None when it carries no zone (it cannot be placed in time)."""
    zone = match.group("zone")
    if zone is None:
        return None
    try:
        y, mo, d = (int(x) for x in match.group("date").split("-"))
        h, mi, s = (int(x) for x in match.group("clock").split(":"))
        frac = match.group("frac") or ""
        micro = int((frac + "000000")[:6])
        if zone == "Z":
            tz: timezone = UTC
        else:
            digits = zone[1:].replace(":", "")
            offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
            tz = timezone(offset if zone[0] == "+" else -offset)
        return datetime(y, mo, d, h, mi, s, micro, tzinfo=tz).astimezone(UTC)
    except ValueError:
        return None


def sanitize(raw: str) -> str:
    """A line fit to show: bounded, no CR at the end, no NUL, no terminal escapes, other controls replaced."""
    line = raw[:MAX_LINE_CHARS]
    if line.endswith("\r"):
        line = line[:-1]
    if "\x1b" in line:
        line = _CSI.sub("", line)
    if not line.isprintable():
        line = line.translate(_CONTROL)
    return line


def oom_killed_pid(kernel_message: str) -> int | None:
    """The pid of the OOM killer's victim in one kernel log message, or None.

    For the provider's kernel side: it turns its kernel lines into `rules.OomKill` inputs. Only lines whose
    syslog tag is `kernel` may be given (any program can `logger` this text).
    """
    text = kernel_message[:MAX_LINE_CHARS]
    pos = text.find("Killed process ")
    if pos < 0:
        return None
    m = OOM_KILLED.match(text, pos)
    return int(m.group("pid")) if m else None


def classify_exception(exception: str) -> ExceptionKind:
    """What a traceback's final exception line says about who failed."""
    head = exception.split(":", 1)[0].strip()
    if _cuda_text(exception):
        return ExceptionKind.CUDA
    if head.endswith(("ChildFailedError", "SignalException")):
        return ExceptionKind.LAUNCHER
    if head.endswith(("DistBackendError", "DistNetworkError", "DistStoreError", "DistError")) or any(
        marker in exception for marker in _COMMUNICATION_MARKERS
    ):
        return ExceptionKind.COMMUNICATION
    return ExceptionKind.APPLICATION


#: exception texts raised by the communication stack, not by the program: they follow someone else's failure
_COMMUNICATION_MARKERS = (
    "NCCL error",
    "NCCL communicator was aborted",
    "Watchdog caught collective operation timeout",
    "ProcessGroupNCCL",
    "Connection reset by peer",
    "Connection closed by peer",
    "Socket Timeout",
)


def _cuda_text(text: str) -> bool:
    return (
        "CUDA error" in text
        or "CUDA out of memory" in text
        or "Cuda failure" in text
        or "CUDA_ERROR_" in text
        or "cuda runtime error" in text
    )


def cuda_error_in(text: str) -> tuple[CudaErrorKind | None, str] | None:
    """(kind or None, the error text) of the CUDA error a line reports, or None when it reports none."""
    if not _cuda_text(text) and "cudaError" not in text:
        return None
    pos = text.find("Search for `cudaError")
    if pos >= 0:
        m = CUDA_SEARCH_HINT.match(text, pos)
        if m and m.group("name") in cuda_errors.BY_NAME:
            kind = cuda_errors.BY_NAME[m.group("name")]
            return kind, m.group("name")
    pos = text.find("CUDA_ERROR_")
    if pos >= 0:
        m = CUDA_DRIVER_NAME.match(text, pos)
        if m:
            return cuda_errors.BY_NAME.get(m.group("name")), m.group("name")
    if "CUDA out of memory" in text:
        return cuda_errors.BY_NAME["cudaErrorMemoryAllocation"], "CUDA out of memory"
    for needle, pattern in (
        ("CUDA error: ", CUDA_ERROR_TEXT),
        ("Cuda failure ", CUDA_FAILURE),
        ("cuda runtime error (", OLD_CUDA_RUNTIME),
    ):
        pos = text.find(needle)
        if pos >= 0:
            m = pattern.match(text, pos)
            if m:
                message = m.group("msg").strip()
                return cuda_errors.kind_for_message(message), message
    return None


def _ranks_list(text: str) -> tuple[int, ...]:
    out = []
    for part in text.split(","):
        part = part.strip()
        if part.isdigit() and len(part) <= 9:
            out.append(int(part))
    return tuple(out)


# ---------------------------------------------------------------- the node parser


@dataclass
class _Traceback:
    first: LogLine
    last_frame: str | None = None
    lines: int = 0


@dataclass
class _ElasticEntry:
    root: bool
    lines: list[LogLine] = field(default_factory=list)
    values: dict[str, str] = field(default_factory=dict)
    traceback_exception: str | None = None
    in_traceback: bool = False


#: the collector's time of a line: a `_TS` match, parsed only when the line becomes evidence; a parsed time; or None
_Stamp = re.Match[str] | datetime | None
#: a line taken apart: (text to show, content after collector prefixes, its collector time)
_Split = tuple[str, str, _Stamp]


def _observed(stamp: _Stamp) -> datetime | None:
    return stamp if stamp is None or isinstance(stamp, datetime) else parse_stamp(stamp)


def _interesting(body: str) -> bool:
    """Whether a line may hold a record: most lines of a training log hold none and are only counted."""
    return (
        "CUDA" in body
        or "Watchdog caught" in body
        or "ast enqueued" in body
        or "NCCL WARN" in body
        or "Cuda failure" in body
        or "cudaError" in body
        or "cuda runtime error" in body
        or "didn't" in body
        or "lagging ranks" in body
    )


class NodeParser:
    """Reads one node's job-log lines, oldest first, into a `NodeLog`."""

    def __init__(self, node: str, resolve: NodeResolver) -> None:
        self.node = node
        self._resolve = resolve
        self._number = 0
        self._seen: dict[int, list[Any]] = {}  # rank -> [lines, number of the last, its text, its stamp, marker only]
        self._current: tuple[str, _Stamp] = ("", None)
        self._current_line: LogLine | None = None
        self._timeouts: list[WatchdogTimeout] = []
        self._progress: list[WorkProgress] = []
        self._desync: list[DesyncReport] = []
        self._failures: list[ElasticFailure] = []
        self._network: list[NcclNetworkError] = []
        self._cuda: list[CudaError] = []
        self._tracebacks: list[PythonTraceback] = []
        self._cut = False
        self._open_tracebacks: dict[int | None, _Traceback] = {}
        self._elastic_section: bool | None = None  # None: outside a summary; else "in the root cause section"
        self._elastic_entry: _ElasticEntry | None = None
        self._last_prefixed_rank: int | None = None
        self._pending_desync: dict[int | None, list[tuple[LogLine, tuple[int, ...]]]] = {}
        self._partial: dict[str, list[str]] = {}  # CRI partial lines per stream

    # ------------------------------------------------------------ input

    def feed(self, raw: str) -> None:
        """Take the next line (without its newline)."""
        self._number += 1
        split = self._split(raw)
        if split is None:
            return  # a CRI partial line: it continues in the next record of its stream
        text, body, stamp = split
        self._current = (text, stamp)
        self._current_line = None
        rank = None
        pos = body.find("[rank", 0, PREFIX_SCAN)
        if pos >= 0:
            m = RANK_PREFIX.match(body, pos)
            if m:
                rank = int(m.group("rank"))
                body = body[m.end() :]
                if body.startswith(" "):
                    body = body[1:]  # Python output gets `[rankN]: `, C++ glog lines `[rankN]:[E...`
        elif body.startswith("["):
            m = ROLE_PREFIX.match(body)
            if m:
                body = body[m.end() :].removeprefix(" ")
        interesting = _interesting(body)
        group = self._marker(body) if rank is None or interesting or self._pending_desync else None
        if rank is not None:
            self._last_prefixed_rank = rank
            self._sighting(rank, text, stamp, marker_only=False)
        elif group is not None and (group.pg is None or group.default_group):
            self._sighting(group.rank, text, stamp, marker_only=True)
        if self._pending_desync:
            self._resolve_desync(rank, group)
        if rank is None:
            self._elastic(body)
        if self._open_tracebacks or body.startswith("Traceback"):
            self._traceback(rank, body)
        if interesting:
            self._records(rank, group, body, self._line())

    def _line(self) -> LogLine:
        """The current line as evidence (built once, and only for lines that become evidence)."""
        if self._current_line is None:
            text, stamp = self._current
            self._current_line = LogLine(text[:MAX_TEXT], _observed(stamp), self._number)
        return self._current_line

    def result(self) -> NodeLog:
        """What was read; open blocks at the end of the text are closed as they stand."""
        self._close_elastic_entry()
        self._flush_desync()
        return NodeLog(
            node=self.node,
            lines=self._number,
            ranks={
                rank: RankSighting(count, LogLine(text[:MAX_TEXT], _observed(stamp), number), marker_only)
                for rank, (count, number, text, stamp, marker_only) in self._seen.items()
            },
            timeouts=tuple(self._timeouts),
            progress=tuple(self._progress),
            desync=tuple(self._desync),
            failures=tuple(self._failures),
            network=tuple(self._network),
            cuda=tuple(self._cuda),
            tracebacks=tuple(self._tracebacks),
            records_cut=self._cut,
        )

    # ------------------------------------------------------------ prefixes

    def _split(self, raw: str) -> _Split | None:
        text = sanitize(raw)
        if not text:
            return text, text, None
        first = text[0]
        if first == "{" and text.startswith('{"log":'):
            return self._docker_json(text)
        if first.isdigit():
            m = CRI.match(text) or CRI_HOST.match(text)
            if m:
                content = text[m.end() :]
                stream = m.group("stream")
                if m.group("flag") == "P":
                    parts = self._partial.setdefault(stream, [])
                    if len(parts) < MAX_BLOCK_LINES:
                        parts.append(content)
                    return None
                parts = self._partial.pop(stream, None)
                if parts:
                    content = ("".join(parts) + content)[:MAX_LINE_CHARS]
                    text = (text[: m.end()] + content)[:MAX_LINE_CHARS]
                return text, content, m
            m = STAMP.match(text)
            if m:
                return text, self._own_host_off(text[m.end() :]), m
        if first == " " or first.isdigit():
            m = SRUN_LABEL.match(text)
            if m:
                return text, text[m.end() :], None
        return text, self._own_host_off(text), None

    def _own_host_off(self, text: str) -> str:
        """`text` without a leading `<host> ` or `<host>: ` that names this node (a collector's or pdsh's prefix)."""
        if not text[:1].isalnum():
            return text  # host names start with a letter or digit; most lines start with `[`
        token, sep, rest = text.partition(" ")
        if sep and token and len(token) <= 254 and self._resolve(token.removesuffix(":")) == self.node:
            return rest
        return text

    @staticmethod
    def _docker_json(text: str) -> _Split:
        try:
            record = json.loads(text)
        except ValueError:
            return text, text, None
        if not isinstance(record, dict) or not isinstance(record.get("log"), str):
            return text, text, None
        content = sanitize(record["log"].rstrip("\n"))
        observed = None
        stamp = record.get("time")
        if isinstance(stamp, str):
            m = STAMP.match(stamp + " ")
            observed = parse_stamp(m) if m else None
        return content, content, observed

    @staticmethod
    def _marker(body: str) -> GroupRank | None:
        best = -1
        for needle in ("[PG ", "[Rank "):
            pos = body.find(needle, 0, PREFIX_SCAN)
            if pos >= 0 and (best < 0 or pos < best):
                best = pos
        if best < 0:
            return None
        m = MARKER.match(body, best)
        if not m:
            return None
        return GroupRank(m.group("pg"), int(m.group("rank")))

    def _sighting(self, rank: int, text: str, stamp: _Stamp, marker_only: bool) -> None:
        seen = self._seen.get(rank)
        if seen is None:
            if len(self._seen) >= MAX_RECORDS:
                self._cut = True
                return
            self._seen[rank] = [1, self._number, text, stamp, marker_only]
        else:
            seen[0] += 1
            seen[1], seen[2], seen[3] = self._number, text, stamp
            seen[4] = seen[4] and marker_only

    def _keep(self, records: list[Any], record: object) -> None:
        if len(records) < MAX_RECORDS:
            records.append(record)
        else:
            self._cut = True

    # ------------------------------------------------------------ records

    def _records(self, rank: int | None, group: GroupRank | None, body: str, line: LogLine) -> None:
        if "Watchdog caught" in body:
            self._watchdog_line(rank, group, body, line)
        if "ast enqueued" in body:
            self._progress_line(rank, group, body, line)
        if "didn't" in body or "lagging ranks" in body:
            self._desync_line(rank, body, line)
        if "NCCL WARN" in body:
            self._nccl_warn(body, line)
        found = cuda_error_in(body)
        if found is not None:
            self._keep(self._cuda, CudaError(line, rank, group, found[0], found[1]))

    def _watchdog_line(self, rank: int | None, group: GroupRank | None, body: str, line: LogLine) -> None:
        pos = body.find("Watchdog caught collective operation timeout")
        head = WATCHDOG.match(body, pos) if pos >= 0 else None
        if head is None:
            return
        pos = body.find("Timeout(ms)=", head.end())
        tail = WATCHDOG_TAIL.match(body, pos) if pos >= 0 else None
        if tail is None:
            return
        seq = head.group("seq")
        self._keep(
            self._timeouts,
            WatchdogTimeout(
                line, rank, group, int(seq) if seq else None, head.group("op"),
                int(tail.group("timeout")), int(tail.group("ran")),
            ),
        )

    def _progress_line(self, rank: int | None, group: GroupRank | None, body: str, line: LogLine) -> None:
        for needle, pattern in (
            ("failure detected by watchdog at work sequence id: ", PROGRESS_SEQ_ID),
            ("detected by watchdog at work: ", PROGRESS_DETECTED),
            ("Timeout at NCCL work: ", PROGRESS_TIMEOUT),
            ("Last enqueued NCCL work: ", PROGRESS_DUMP),
        ):
            pos = body.find(needle)
            m = pattern.match(body, pos) if pos >= 0 else None
            if m:
                work = int(m.group("work")) if "work" in pattern.groupindex else None
                self._keep(
                    self._progress,
                    WorkProgress(line, rank, group, work, int(m.group("enq")), int(m.group("done"))),
                )
                return

    def _desync_line(self, rank: int | None, body: str, line: LogLine) -> None:
        text = body.lstrip(" \t")
        reporter = rank if rank is not None else self._last_prefixed_rank
        pos = text.find("To our best knowledge, ranks [")
        m = DESYNC_MISSING.match(text, pos) if pos >= 0 else DESYNC_LAGGING.match(text)
        ranks = _ranks_list(m.group("ranks")) if m else ()
        if ranks:
            pending = self._pending_desync.setdefault(reporter, [])
            if len(pending) < MAX_BLOCK_LINES:
                pending.append((line, ranks))

    def _resolve_desync(self, rank: int | None, group: GroupRank | None) -> None:
        """A desync report belongs to the process group of its reporter's next marked line."""
        if group is None or not self._pending_desync:
            return
        reporter = rank if rank is not None else self._last_prefixed_rank
        pending = self._pending_desync.pop(reporter, None)
        for line, ranks in pending or ():
            self._keep(self._desync, DesyncReport(line, reporter, group, ranks))

    def _flush_desync(self) -> None:
        for reporter, pending in self._pending_desync.items():
            for line, ranks in pending:
                self._keep(self._desync, DesyncReport(line, reporter, None, ranks))
        self._pending_desync.clear()

    def _nccl_warn(self, body: str, line: LogLine) -> None:
        pos = body.find("NCCL WARN ")
        if pos < 0:
            return
        head, message = body[:pos], body[pos + len("NCCL WARN ") :]
        host = None
        for token in head.split():
            m = NCCL_ORIGIN.fullmatch(token)
            if m:
                host = m.group("host")
                break
        found = self._network_message(message)
        if found is None:
            return
        kind, peer, status = found
        peer_node = None
        if peer:
            name = peer.split("<", 1)[0]
            peer_node = self._resolve(name) if name and not _looks_like_address(name) else None
        self._keep(self._network, NcclNetworkError(line, kind, host, peer, peer_node, status))

    @staticmethod
    def _network_message(message: str) -> tuple[NetworkKind, str | None, int | None] | None:
        pos = message.find("Got completion from peer")
        if pos >= 0:
            start = message.rfind("NET/IB", 0, pos)
            m = IB_COMPLETION.match(message, start) if start >= 0 else None
            if m:
                return NetworkKind.IB_COMPLETION, m.group("peer"), int(m.group("status"))
        for needle in ("Connection closed by remote peer", "Connection reset by peer"):
            pos = message.find(needle)
            if pos >= 0:
                peer = None
                if needle.startswith("Connection closed"):
                    m = PEER_AFTER.match(message, pos + len(needle))
                    peer = m.group("peer") if m else None
                else:
                    start = message.find("Call to recv from ")
                    if 0 <= start < pos:
                        m = PEER_AFTER.match(message, start + len("Call to recv from"))
                        peer = m.group("peer") if m else None
                return NetworkKind.PEER_CLOSED, peer, None
        pos = message.find("Connect to ")
        if pos >= 0 and "failed" in message:
            m = PEER_AFTER.match(message, pos + len("Connect to"))
            return NetworkKind.CONNECT, m.group("peer") if m else None, None
        pos = message.find("Call to ibv_")
        if pos >= 0 and VERBS_CALL.match(message, pos):
            return NetworkKind.VERBS_CALL, None, None
        if "transport retry counter exceeded" in message:
            return NetworkKind.IB_COMPLETION, None, 12
        return None

    # ------------------------------------------------------------ blocks

    def _traceback(self, rank: int | None, body: str) -> None:
        """Follow each rank's Python traceback to its exception line (ranks interleave in one file)."""
        open_tb = self._open_tracebacks.get(rank)
        if body.startswith("Traceback (most recent call last):"):
            self._open_tracebacks[rank] = _Traceback(first=self._line())
            return
        if open_tb is None:
            return
        open_tb.lines += 1
        if open_tb.lines > MAX_BLOCK_LINES:
            del self._open_tracebacks[rank]
            return
        if not body or body[0] in " \t":
            stripped = body.strip()
            if stripped.startswith('File "'):
                open_tb.last_frame = stripped[:MAX_TEXT]
            return
        if not _is_exception_line(body):
            return  # chained-exception text, or another process's line cut into an unprefixed traceback
        del self._open_tracebacks[rank]
        exception = body[:MAX_TEXT]
        self._keep(
            self._tracebacks,
            PythonTraceback(
                self._line(), rank, open_tb.first, open_tb.last_frame, exception, classify_exception(exception)
            ),
        )

    def _elastic(self, body: str) -> None:
        """torchelastic's summary: `Failures:` entries, then `Root Cause (first observed failure):` and its entry."""
        if self._elastic_section is None and not body.startswith(("Failures:", "Root Cause")):
            return
        stripped = body.strip()
        if stripped == "Failures:":
            self._close_elastic_entry()
            self._elastic_section = False
            return
        if stripped.startswith("Root Cause") and stripped.endswith(":"):
            self._close_elastic_entry()
            self._elastic_section = True
            return
        if self._elastic_section is None:
            return
        if not stripped:
            return
        if set(stripped) <= {"-"} or set(stripped) <= {"="}:
            self._close_elastic_entry()
            if stripped[0] == "=":
                self._elastic_section = None
            return
        m = ELASTIC_ENTRY.fullmatch(stripped)
        if m:
            self._close_elastic_entry()
            self._elastic_entry = _ElasticEntry(root=bool(self._elastic_section))
            self._elastic_entry.lines.append(self._line())
            return
        entry = self._elastic_entry
        if entry is None:
            if stripped != "<NO_OTHER_FAILURES>":
                self._elastic_section = None
            return
        if len(entry.lines) >= MAX_BLOCK_LINES:
            self._close_elastic_entry()
            self._elastic_section = None
            return
        m = ELASTIC_FIELD.match(body)
        if m:
            key, value = m.group("key"), m.group("value").strip()
            entry.values[key] = value
            entry.lines.append(self._line())
            entry.in_traceback = key == "traceback"
            if entry.in_traceback and value.startswith("Traceback"):
                entry.traceback_exception = None
            return
        if entry.in_traceback and body.startswith("  "):
            inner = body[2:]
            entry.lines.append(self._line())
            if inner and inner[0] not in " \t" and not inner.startswith("Traceback"):
                entry.traceback_exception = inner[:MAX_TEXT]  # the last unindented line is the exception
            return
        # Anything else ends the summary (output of another process cut into it).
        self._close_elastic_entry()
        self._elastic_section = None

    def _close_elastic_entry(self) -> None:
        entry = self._elastic_entry
        self._elastic_entry = None
        if entry is None or not entry.values:
            return
        values = entry.values
        host = values.get("host") or None
        rank = local = code = pid = None
        m = ELASTIC_RANK.match(values.get("rank", ""))
        if m:
            rank, local = int(m.group("rank")), int(m.group("local"))
        m = ELASTIC_EXIT.match(values.get("exitcode", ""))
        if m:
            code, pid = int(m.group("code")), int(m.group("pid"))
        signal = None
        m = ELASTIC_SIGNAL.match(values.get("traceback", ""))
        if m:
            signal = m.group("name")
        m = ELASTIC_TIME.match(values.get("time", ""))
        time_text = m.group(0) if m else None
        exception = entry.traceback_exception
        self._keep(
            self._failures,
            ElasticFailure(
                root=entry.root,
                lines=tuple(entry.lines),
                host=host,
                host_node=self._resolve(host) if host else None,
                rank=rank,
                local_rank=local,
                exitcode=code,
                pid=pid,
                signal=signal,
                time_text=time_text,
                traceback_exception=exception,
                traceback_kind=classify_exception(exception) if exception else None,
            ),
        )


#: how Python exception class names end (builtins and the usual custom ones)
_EXCEPTION_SUFFIXES = ("Error", "Exception", "Interrupt", "Exit", "Iteration", "Warning", "Failure", "Timeout")


def _is_exception_line(body: str) -> bool:
    m = EXCEPTION_HEAD.match(body)
    return m is not None and m.group("name").endswith(_EXCEPTION_SUFFIXES)


def _looks_like_address(name: str) -> bool:
    """An IPv4 or IPv6 address (NCCL names IB peers by address): it names no host."""
    return all(c.isdigit() or c == "." for c in name) or ":" in name


def parse_lines(node: str, lines: list[str], resolve: NodeResolver) -> NodeLog:
    """Parse a whole list of lines (tests and small inputs); the reader streams into a `NodeParser` instead."""
    parser = NodeParser(node, resolve)
    for raw in lines:
        parser.feed(raw)
    return parser.result()
