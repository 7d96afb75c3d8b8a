"""Job-log line shapes: the bounds, the collector prefixes and rank markers, the failure lines of PyTorch, NCCL and
torchelastic as compiled patterns, and the small parsers over them.

Every regular expression here is applied with `match` at a known position (found with `str.find`), every
quantifier is bounded and possessive, and no quantifier holds another one that can repeat: a match costs at most
one pass over the (bounded) line, whatever the line holds. An optional part that holds alternatives is a choice
with an empty alternative (`(?:a|b|)`), never a possessive `(?:a|b)?+`: CPython before 3.11.5 (Debian bookworm's
is 3.11.2) matches a possessive part that can backtrack wrongly. `tests/joblog/test_patterns.py` and
`tests/robustness/test_patterns_on_python_3_11_2.py` check both on the compiled patterns. Formats and the public
reports they were taken from are listed in `docs/job-logs.md`.
"""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime

from providers.telemetry.digits import is_number
from providers.telemetry.joblog.cuda_errors import is_cuda_text
from providers.telemetry.joblog.records import ExceptionKind
from providers.telemetry.joblog.signals import SignalMeaning, signals_in

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

#: the longest host name a collector puts after its time (a DNS name's bound)
HOST_CHARS = 253

_TS = (
    r"(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2})[T ](?P<clock>[0-9]{2}:[0-9]{2}:[0-9]{2})(?:[.,](?P<frac>[0-9]{1,9}+))?+"
    r"(?:(?P<zone>Z|[+-][0-9]{2}:?+[0-9]{2})|)"
)
#: the length of Loki's time as the Loki source puts it in front of a line (`loki._joined`:
#: `dddd-dd-ddTdd:dd:dd.ddddddZ`, RFC 3339, microseconds, UTC)
LOKI_STAMP = 27
#: that time and the blank after it, as a pattern
LOKI_TIME = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z "
#: Kubernetes CRI (`<RFC 3339> stdout|stderr F|P <line>`), also with the host a collector put after the time
CRI = re.compile(_TS + r" (?P<stream>stdout|stderr) (?P<flag>[FP]) ")
CRI_HOST = re.compile(_TS + rf" (?P<host>[^\s]{{1,{HOST_CHARS}}}+) (?P<stream>stdout|stderr) (?P<flag>[FP]) ")
#: any other collector that starts a line with an RFC 3339 time (and maybe `stdout`/`stderr`)
STAMP = re.compile(_TS + r" (?:(?P<stream>stdout|stderr) |)")
#: `srun --label` puts the task number before each line
SRUN_LABEL = re.compile(r" {0,8}+[0-9]{1,7}+: ")
#: PyTorch 2.2+ puts the global rank before every line a rank writes
RANK_PREFIX = re.compile(r"\[rank(?P<rank>[0-9]{1,9}+)\]:")
#: torchrun's own per-worker prefix, `[<role><local rank>]:` (a local rank: never used as a rank)
ROLE_PREFIX = re.compile(r"\[[A-Za-z_][A-Za-z0-9_-]{0,63}+\]:")
#: ProcessGroupNCCL's log prefix: `[Rank N]`, `[PG 1 Rank N]`, `[PG 0 (default_pg) Rank N]`,
#: `[PG ID 0 PG GUID 0(default_pg) Rank N]` (N is the rank within that process group)
MARKER = re.compile(
    r"\[(?:PG (?:ID )?+(?P<pg>[0-9]{1,9}+)(?: PG GUID (?P<guid>[^\]\s]{1,128}+)| \((?P<name>[^)\]]{1,128}+)\)|) |)"
    r"Rank (?P<rank>[0-9]{1,9}+)\]"
)
WATCHDOG = re.compile(
    r"Watchdog caught collective operation timeout: WorkNCCL\((?:SeqNum=(?P<seq>[0-9]{1,19}+), )?+"
    r"OpType=(?P<op>[A-Z_]{1,40}+)"
)
WATCHDOG_TAIL = re.compile(
    r"Timeout\(ms\)=(?P<timeout>[0-9]{1,12}+)\) ran for (?P<ran>[0-9]{1,15}+) milliseconds before timing out"
)
#: the watchdog's progress line in its four real shapes (PyTorch 2.3 to 2.7), each matched where its text starts
_NUMBERS = r"(?P<enq>-?+[0-9]{1,19}+), last completed NCCL work: (?P<done>-?+[0-9]{1,19}+)"
PROGRESS_DETECTED = re.compile(
    r"detected by watchdog at work: (?P<work>-?+[0-9]{1,19}+), last enqueued NCCL work: " + _NUMBERS
)
PROGRESS_TIMEOUT = re.compile(r"Timeout at NCCL work: (?P<work>-?+[0-9]{1,19}+), last enqueued NCCL work: " + _NUMBERS)
PROGRESS_SEQ_ID = re.compile(
    r"failure detected by watchdog at work sequence id: (?P<work>-?+[0-9]{1,19}+) PG status: "
    r"last enqueued work: (?P<enq>-?+[0-9]{1,19}+), last completed work: (?P<done>-?+[0-9]{1,19}+)"
)
PROGRESS_DUMP = re.compile(r"Last enqueued NCCL work: " + _NUMBERS)
#: PyTorch's desync report (TORCH_NCCL_DESYNC_DEBUG), ranks within the process group
DESYNC_LAGGING = re.compile(
    r"(?:- )?+\[(?P<ranks>[0-9, ]{1,8192}+)\] (?:joined but didn't finish collective #(?P<started>[0-9]{1,19}+)"
    r"|finished collective #(?P<finished>[0-9]{1,19}+), but didn't join collective #[0-9]{1,19}+)"
)
DESYNC_MISSING = re.compile(
    r"To our best knowledge, ranks \[(?P<ranks>[0-9, ]{1,8192}+)\] are the lagging ranks "
    r"that caused this timeout"
)
#: torchelastic's failure summary (ChildFailedError): the fields of an entry, in its template's order
#: (torch/distributed/elastic/multiprocessing/errors: `_FAILURE_FORMAT_TEMPLATE`)
ELASTIC_KEYS = ("time", "host", "rank", "exitcode", "error_file", "traceback")


def elastic_value(group: str) -> str:
    """A field's text after its key, its value (the first 4,096 characters) in the named `group`."""
    return rf" {{0,8}}+: ?+(?P<{group}>[^\n]{{0,4096}}+)"


ELASTIC_FIELD = re.compile(rf" {{2}}(?P<key>{'|'.join(ELASTIC_KEYS)})" + elastic_value("value"))
ELASTIC_ENTRY = re.compile(r"\[(?P<idx>[0-9]{1,6}+)\]:")
ELASTIC_RANK = re.compile(r"(?P<rank>[0-9]{1,9}+) \(local_rank: (?P<local>[0-9]{1,9}+)\)")
ELASTIC_EXIT = re.compile(r"(?P<code>-?+[0-9]{1,4}+) \(pid: (?P<pid>[0-9]{1,10}+)\)")
ELASTIC_SIGNAL = re.compile(r"Signal (?P<num>[0-9]{1,3}+) \((?P<name>[A-Z0-9_<>/]{1,16}+)\) received by PID")
ELASTIC_TIME = re.compile(r"(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2})_(?P<clock>[0-9]{2}:[0-9]{2}:[0-9]{2})")
#: NCCL's debug prefix `<host>:<pid>:<tid> [<cuda dev>]`
NCCL_ORIGIN = re.compile(r"(?P<host>[^\s:]{1,253}+):(?P<pid>[0-9]{1,10}+):(?P<tid>[0-9]{1,10}+)")
IB_COMPLETION = re.compile(
    r"NET/IB[A-Za-z/]{0,8}+ ?+: ?+Got completion from peer (?P<peer>[^\s]{1,300}+) "
    r"with (?:error |status=)(?:[A-Z_]{1,40}+\()?+(?P<status>[0-9]{1,4}+)"
)
IB_COMPLETION_OLD = re.compile(r"Got completion with error (?P<status>[0-9]{1,4}+)")
PEER_AFTER = re.compile(r" ?+(?P<peer>[^\s]{1,300}+)")
VERBS_CALL = re.compile(r"Call to (?P<call>ibv_[a-z_]{1,64}+) failed")
#: the kernel OOM killer's victim (`Out of memory: Killed process N`, `Memory cgroup out of memory: Killed
#: process N`, older `Killed process N (comm)`)
OOM_KILLED = re.compile(r"Killed process (?P<pid>[0-9]{1,10}+)")
#: a Python exception line: a dotted name, then `:` or the end of the line
EXCEPTION_HEAD = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_.]{0,199}+)(?::|$)")

#: every pattern, for the construction check
PATTERNS: tuple[re.Pattern[str], ...] = (
    CRI, CRI_HOST, STAMP, SRUN_LABEL, RANK_PREFIX, ROLE_PREFIX, MARKER, WATCHDOG, WATCHDOG_TAIL,
    PROGRESS_DETECTED, PROGRESS_TIMEOUT, PROGRESS_SEQ_ID, PROGRESS_DUMP, DESYNC_LAGGING, DESYNC_MISSING,
    ELASTIC_FIELD, ELASTIC_ENTRY, ELASTIC_RANK, ELASTIC_EXIT, ELASTIC_SIGNAL, ELASTIC_TIME, NCCL_ORIGIN,
    IB_COMPLETION, IB_COMPLETION_OLD, PEER_AFTER, VERBS_CALL, OOM_KILLED, EXCEPTION_HEAD,
)

_CONTROL = {c: "\ufffd" for c in range(0x20) if c != 0x09} | {0x7F: "\ufffd", 0x00: None}
_CSI = re.compile(r"\x1b\[[0-9;?]{0,32}+[ -/]{0,4}+[@-~]")


# ---------------------------------------------------------------- small parsers


def parse_stamp(match: re.Match[str]) -> datetime | None:
    """The UTC time of a `_TS` match, or None when it carries no zone (it cannot be placed in time) or names no real
    time (a 13th month, a 61st second, an offset of a day or more, a time that in UTC falls outside years 1 to
    9999)."""
    end = match.end("zone")
    if end < 0:
        return None
    return stamp_time(match.string[match.start("date") : end])


@functools.lru_cache(maxsize=4096)
def stamp_time(text: str) -> datetime | None:
    """The UTC time of a `_TS` text with its zone, parsed once per distinct text (a node's ranks log in bursts of
    one microsecond, and Loki's entries share their instants), or None when it names no real time."""
    try:  # Python's ISO 8601 reader takes every `_TS` shape: `T` or a space, `.` or `,`, 1 to 9 digits (cut to 6)
        moment = datetime.fromisoformat(text)
        return moment if moment.tzinfo is UTC else moment.astimezone(UTC)
    except (ValueError, OverflowError):  # OverflowError: in UTC it falls before year 1 or after year 9999
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
    """What a traceback's final exception line says about who failed.

    A CUDA error is `CUDA` (the CUDA rows decide); torchrun's own exceptions and those a signal raises are
    `LAUNCHER`; an exception that holds a marker of a signal table row that is not the application's (a
    communication, store, configuration or network error: it follows another failure or the job's setup), or a
    `torch.distributed` error class, is `COMMUNICATION`; anything else the program raised is `APPLICATION`.
    """
    head = exception.split(":", 1)[0].strip()
    if is_cuda_text(exception):
        return ExceptionKind.CUDA
    if head.endswith(_LAUNCHER_EXCEPTIONS):
        return ExceptionKind.LAUNCHER
    if head.endswith(("DistBackendError", "DistNetworkError", "DistStoreError", "DistError")):
        return ExceptionKind.COMMUNICATION
    if any(s.meaning is not SignalMeaning.APPLICATION for s in signals_in(exception)):
        return ExceptionKind.COMMUNICATION
    return ExceptionKind.APPLICATION


#: exceptions of torchrun itself, or raised in a worker by a signal it was sent (a scheduler's, an operator's)
_LAUNCHER_EXCEPTIONS = ("ChildFailedError", "SignalException", "KeyboardInterrupt", "SystemExit")


def _ranks_list(text: str) -> tuple[int, ...]:
    out = []
    for part in text.split(","):
        part = part.strip()
        if is_number(part, 9):
            out.append(int(part))
    return tuple(out)


