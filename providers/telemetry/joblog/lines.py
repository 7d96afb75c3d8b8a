"""Job-log lines: the node parser, which reads a node's lines oldest first into a `NodeLog`.

A node's file holds the interleaved output of every rank that ran there, as a log collector wrote it. `NodeParser`
takes its lines oldest first and keeps, bounded, what the rules need: which ranks wrote there, NCCL watchdog
timeouts and their sequence numbers, PyTorch's desync report, torchelastic's failure summary, NCCL network
warnings (`network.py` reads them), CUDA errors and the last Python traceback of each rank. The line shapes are in
`patterns.py`, the records it keeps in `records.py`.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from providers.telemetry.joblog import kinds
from providers.telemetry.joblog.cuda_errors import cuda_error_in
from providers.telemetry.joblog.messages import (
    Message,
    code_of,
    nccl_message,
    nccl_origin,
    own_marker_in,
    read_format,
    read_nccl,
)
from providers.telemetry.joblog.network import is_address, nccl_warning
from providers.telemetry.joblog.nodes import NodeResolver
from providers.telemetry.joblog.patterns import (
    CRI_HOST,
    ELASTIC_ENTRY,
    ELASTIC_EXIT,
    ELASTIC_FIELD,
    ELASTIC_KEYS,
    ELASTIC_RANK,
    ELASTIC_SIGNAL,
    ELASTIC_TIME,
    EXCEPTION_HEAD,
    HOST_CHARS,
    LOKI_STAMP,
    LOKI_TIME,
    MARKER,
    MAX_BLOCK_LINES,
    MAX_LINE_CHARS,
    MAX_RECORDS,
    MAX_TEXT,
    PREFIX_SCAN,
    RANK_PREFIX,
    ROLE_PREFIX,
    SRUN_LABEL,
    STAMP,
    classify_exception,
    elastic_value,
    parse_stamp,
    sanitize,
    stamp_time,
)
from providers.telemetry.joblog.records import (
    CudaError,
    DesyncReport,
    ElasticFailure,
    GroupRank,
    LogLine,
    NcclNetworkError,
    NetworkKind,
    NodeLog,
    PythonTraceback,
    RankSighting,
    SignalHit,
    WatchdogTimeout,
    WorkProgress,
)
from providers.telemetry.joblog.signals import BY_ID, CHECK_SITE, MARKERS, Hits, hits_in, hits_of, signals_in

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


#: the collector's time of a line: a `_TS` match or Loki's time as its text (`LOKI_STAMP` characters, `summary`), each
#: parsed (`_observed`) only when the line becomes evidence; a parsed time; or None
_Stamp = re.Match[str] | str | datetime | None
#: a line taken apart: (text to show, content after collector prefixes, its collector time)
_Split = tuple[str, str, _Stamp]


#: what a search of a line's bytes found in it (`prefilter.feed_tail`): the ids of the table's markers it matched
#: (their indices in `signals.MARKERS`), in the order found; the first start and the last end among those matches,
#: relative to the line's start; every match as (end, id) in the data, where the line starts in it, and each id's
#: length in bytes
Marks = tuple[tuple[int, ...], int, int, list[tuple[int, int]], int, tuple[int, ...]]
_TABLE_MARKERS = len(MARKERS)
#: the rows of a line's markers by the ids the search found, in the order found (lines of one shape repeat them)
_BY_FOUND: dict[tuple[int, ...], Hits] = {}
_BY_FOUND_MAX = 4096


def _marked(marks: Marks, low: int, high: int) -> Hits:
    """The rows of the table's markers a search found between `low` and `high` of the line (its message text)."""
    found, first, last, every, head, lengths = marks
    if first < low or last > high:  # a match in a prefix, or past where the line is cut
        low, high = low + head, high + head
        return hits_of(tuple(sorted(
            {i for end, i in every if i < _TABLE_MARKERS and end <= high and end - lengths[i] >= low}
        )))
    return _found_hits(found)


def _found_hits(found: tuple[int, ...]) -> Hits:
    """The rows of the markers a search found in a line, by their ids in the order found."""
    hits = _BY_FOUND.get(found)
    if hits is None:
        if len(_BY_FOUND) >= _BY_FOUND_MAX:
            _BY_FOUND.clear()
        hits = _BY_FOUND[found] = hits_of(tuple(sorted(set(found))))
    return hits


def _observed(stamp: _Stamp) -> datetime | None:
    if stamp is None or isinstance(stamp, datetime):
        return stamp
    return stamp_time(stamp) if isinstance(stamp, str) else parse_stamp(stamp)


class NodeParser:
    """Reads one node's job-log lines, oldest first, into a `NodeLog`."""

    def __init__(self, node: str, resolve: NodeResolver) -> None:
        self.node = node
        self._resolve = resolve
        self._number = 0
        # rank -> [number of its last line, its text, its stamp, marker only, that line as evidence where it was made]
        self._seen: dict[int, list[Any]] = {}
        self._current: tuple[str, _Stamp] = ("", None)
        self._current_line: LogLine | None = None
        self._timeouts: list[WatchdogTimeout] = []
        self._progress: list[WorkProgress] = []
        self._desync: list[DesyncReport] = []
        self._failures: list[ElasticFailure] = []
        self._network: list[NcclNetworkError] = []
        self._cuda: list[CudaError] = []
        self._tracebacks: list[PythonTraceback] = []
        self._signals: list[SignalHit] = []
        self._open_tracebacks: dict[int | None, _Traceback] = {}
        self._elastic_section: bool | None = None  # None: outside a summary; else "in the root cause section"
        self._elastic_entry: _ElasticEntry | None = None
        self._last_prefixed_rank: int | None = None
        self._pending_desync: dict[int | None, list[tuple[LogLine, tuple[int, ...]]]] = {}
        self._partial: dict[str, list[str]] = {}  # CRI partial lines per stream
        #: rank -> the number of its `Last error:` line: its next line is NCCL's last warning, as PyTorch quotes it
        self._last_error: dict[int | None, int] = {}

    # ------------------------------------------------------------ input

    def feed(self, raw: str, marks: Marks | None = None) -> None:
        """Take the next line (without its newline). `marks`, from a search of the line's bytes that already found
        the markers it holds (`prefilter.feed_tail`), are (start, end, id) of each match in the line: a marker of
        the signal table has its index in `signals.MARKERS` as id."""
        self._number += 1
        if (
            raw[:5] == "[rank"
            and not (self._pending_desync or self._open_tracebacks or self._last_error)
            and raw.isprintable()
        ):
            m = RANK_PREFIX.match(raw)
            if m is not None:
                self._ranked(raw if len(raw) <= MAX_LINE_CHARS else raw[:MAX_LINE_CHARS], m, marks)
                return
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
        if marks is not None and raw.isascii() and text == raw[:MAX_LINE_CHARS] and text.endswith(body):
            hits = _marked(marks, len(text) - len(body), len(text))  # the line as it stands: the search's markers
        else:
            hits = hits_in(body)
        group = self._marker(body) if rank is None or hits.rows or self._pending_desync else None
        if rank is not None:
            self._last_prefixed_rank = rank
            self._sighting(rank, text, stamp, marker_only=False)
        elif group is not None and (group.pg is None or group.default_group):
            self._sighting(group.rank, text, stamp, marker_only=True)
        if self._pending_desync:
            self._resolve_desync(rank, group)
        if rank is None and (self._elastic_section is not None or body.startswith(("Failures:", "Root Cause"))):
            self._elastic(body)
        if self._open_tracebacks or body.startswith("Traceback"):
            self._traceback(rank, body)
        quoted = bool(self._last_error) and self._quoted(rank, group, body)
        if hits.rows:
            self._records(rank, group, body, self._line(), hits, quoted)

    def _ranked(self, text: str, m: re.Match[str], marks: Marks | None) -> None:
        """`feed` for the usual line of a rank, `[rankN]:` first, nothing to clean, no traceback open and no desync
        report waiting for its process group, no `Last error:` waiting for its quote: the same steps, without those that
        cannot apply."""
        rank = int(m.group("rank"))
        body = text[m.end() :]
        if body[:1] == " ":
            body = body[1:]
        self._current = (text, None)
        self._current_line = None
        if marks is not None and text.isascii():
            hits = _marked(marks, len(text) - len(body), len(text))
        else:
            hits = hits_in(body)
        self._last_prefixed_rank = rank
        self._own_sighting(rank, text, None)
        if body.startswith("Traceback"):
            self._traceback(rank, body)
        if hits.rows:
            self._records(rank, self._marker(body), body, self._line(), hits)

    def kind_lines(self, lines: list[KindLine]) -> int:
        """`feed` for a run of lines `prefilter` read by their shape (`prefilter.read_kind_line`), one after the
        other: each with Loki's time in front where its flag says so, `[rankN]:`, a C++ log header, a process-group
        marker (its text before `Rank `, and its rank) and a watchdog timeout or progress message, printable ASCII,
        read while no block is followed and no desync report waits (`plain`, which they leave as it is), whose markers
        are those of the one kind it is (`kind_of`), with what that kind's reader gives for its message.
        What `feed` keeps of each: the rank's sighting and the kind's record. Loki's time is the line's first
        `LOKI_STAMP` characters (`dddd-dd-ddTdd:dd:dd.ddddddZ`), then a blank and the prefix, as the reader checks: the
        parser reads it as a collector's time with no stream, and keeps it parsed (each line becomes evidence). Return
        how many were taken: all of them."""
        seen, timeouts, progress = self._seen, self._timeouts, self._progress
        number = start = self._number
        line = current = None
        for text, stamped, rank, head, group_rank, watchdog, values in lines:
            stamp: _Stamp = stamp_time(text[:LOKI_STAMP]) if stamped else None
            current = (text, stamp)
            number += 1
            line = LogLine(text[:MAX_TEXT], stamp, number)
            entry = seen.get(rank)
            if entry is not None:
                entry[0], entry[1], entry[2], entry[3], entry[4] = number, text, stamp, False, line
            elif len(seen) < MAX_RECORDS:
                seen[rank] = [number, text, stamp, False, line]
            records = timeouts if watchdog else progress
            if len(records) < MAX_RECORDS:
                found = _group_head(head)
                group = None if found is None else GroupRank(found[0], group_rank, found[1])
                records.append((WatchdogTimeout if watchdog else WorkProgress)(line, rank, group, *values))
            self._last_prefixed_rank = rank
        if current is not None:
            self._number = number
            self._current = current
            self._current_line = line
        return number - start

    @property
    def plain(self) -> bool:
        """Whether the next line is read by itself: no block followed, no desync report waiting for its group."""
        return not (self._pending_desync or self.in_block)

    def summary(self, lines: list[str], stamped: bool = False) -> bool:
        """Take torchelastic's failure summary, cut out of the buffer (`prefilter.feed_tail`), as `feed` would take
        its lines one by one, when no step but the summary's own can apply to them: no block open and no desync
        report waiting, and no line with a collector prefix, a rank prefix or marker, a process-group marker, a
        traceback, or a marker of the signal table but torchelastic's (which gives no record by itself). With
        `stamped`, every line has a collector's time in front (Loki's, as the Loki source puts it), which `feed`
        reads as the line's time, and nothing else: no stream, no CRI shape. False (and nothing taken) otherwise:
        the lines are then fed."""
        if self.in_block or self._pending_desync or len(lines) > MAX_BLOCK_LINES:
            return False
        stamps: list[_Stamp] = [None] * len(lines)
        bodies = lines
        if stamped:
            text = "\n".join(lines)
            cri = " stdout " in text or " stderr " in text  # else no line can be in CRI's shape (`_cri`)
            if not cri and _LOKI_LINES.fullmatch(text):
                # Every line is Loki's time, a blank and the rest (the Loki source's shape): `STAMP` takes the time
                # and the blank, no stream's word can follow (none is in the text), so each body is the rest and each
                # time its first LOKI_STAMP characters, parsed only for a line that becomes evidence.
                stamps = [line[:LOKI_STAMP] for line in lines]
                bodies = [line[LOKI_STAMP + 1 :] for line in lines]
            else:
                bodies = []
                for i, line in enumerate(lines):
                    stamp = STAMP.match(line)
                    if stamp is None or stamp.group("stream") or (cri and _cri(line, stamp) is not None):
                        return False
                    stamps[i] = stamp
                    bodies.append(line[stamp.end() :])  # what `_split` leaves of it, the checks below holding
        joined = "\n" + "\n".join(bodies)  # a newline before each line: its start is searched for as a literal
        if (
            not joined.isascii()
            or any(m in joined for m in _NOT_SUMMARY)
            or not joined.replace("\n", "").isprintable()
            or _NOT_SUMMARY_START.search(joined)
        ):
            return False
        if any(s.parse not in _SUMMARY_PARSES for s in signals_in(joined)):
            return False
        for line in _LETTER_FIRST.findall(joined):
            if self._own_host_off(line) is not line:
                return False
        root = _ROOT_CAUSE_ONLY.fullmatch(joined)
        if root is not None:
            self._root_cause_only(lines, stamps, root)
            return True
        for line, body, stamp in zip(lines, bodies, stamps, strict=True):
            self._number += 1
            self._current = (line, stamp)
            self._current_line = None
            if self._elastic_section is not None or body.startswith(("Failures:", "Root Cause")):
                self._elastic(body)
        return True

    def _root_cause_only(self, lines: list[str], stamps: list[_Stamp], root: re.Match[str]) -> None:
        """`summary` for a summary in torchelastic's own template with no other failure (`_ROOT_CAUSE_ONLY`): what
        its lines' steps give, at once. The entry's line and its six fields' are its evidence; the summary is closed."""
        base = self._number
        entry = _ElasticEntry(root=True)
        entry.lines = [LogLine(lines[i][:MAX_TEXT], _observed(stamps[i]), base + i + 1) for i in _ROOT_ENTRY_LINES]
        entry.values = {key: root.group(key).strip() for key in ELASTIC_KEYS}
        self._elastic_entry = entry
        self._close_elastic_entry()
        self._number = base + len(lines)
        self._current = (lines[-1], stamps[-1])
        self._current_line = None

    @property
    def in_block(self) -> bool:
        """Whether the next lines may continue a block being followed (a traceback, torchelastic's summary, a CRI
        line in parts): such lines must be fed one by one, whatever they hold."""
        return bool(self._open_tracebacks or self._partial or self._last_error) or (
            self._elastic_section is not None or self._elastic_entry is not None
        )

    def absorb(self, lines: int, seen: dict[int, tuple[int, str]], last_rank: int | None) -> None:
        """Take `lines` lines at once that hold no marker and open no block (`prefilter.feed_tail` finds them):
        they only place ranks. `seen` maps each rank that prefixes some of them to (the 1-based position of its last
        one, that line's text), in order of first sight; `last_rank` is the rank of the last prefixed line."""
        base = self._number
        for rank, (index, raw) in seen.items():
            split = self._split(raw)
            if split is None:  # a CRI partial line is never absorbed; read it as fed, should one come
                continue
            text, _, stamp = split
            entry = self._seen.get(rank)
            if entry is None:
                if len(self._seen) >= MAX_RECORDS:
                    continue
                self._seen[rank] = [base + index, text, stamp, False, None]
            else:
                entry[0], entry[1], entry[2], entry[3], entry[4] = base + index, text, stamp, False, None
        self._number = base + lines
        if last_rank is not None:
            self._last_prefixed_rank = last_rank

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
                rank: RankSighting(
                    LogLine(text[:MAX_TEXT], _observed(stamp), number) if line is None else line, marker_only
                )
                for rank, (number, text, stamp, marker_only, line) in self._seen.items()
            },
            timeouts=tuple(self._timeouts),
            progress=tuple(self._progress),
            desync=tuple(self._desync),
            failures=tuple(self._failures),
            network=tuple(self._network),
            cuda=tuple(self._cuda),
            tracebacks=tuple(self._tracebacks),
            signals=tuple(self._signals),
        )

    # ------------------------------------------------------------ prefixes

    def _split(self, raw: str) -> _Split | None:
        if raw[:1] == "[" and raw.isprintable():
            # Nothing to clean (`sanitize` only cuts it), and no collector prefix starts with `[` (most job-log
            # lines: `[rankN]:`, `[default0]:`, glog's `[E...]`)
            text = raw[:MAX_LINE_CHARS]
            return text, text, None
        text = sanitize(raw)
        if not text:
            return text, text, None
        first = text[0]
        if first == "{" and text.startswith('{"log":'):
            return self._docker_json(text)
        if first.isdigit():
            m = STAMP.match(text)  # a collector's time starts the line (CRI's among them)
            if m is not None:
                cri = _cri(text, m)
                if cri is None:
                    return text, self._own_host_off(_label_off(text[m.end() :])), m
                end, stream, flag = cri
                content = text[end:]
                if flag == "P":
                    parts = self._partial.setdefault(stream, [])
                    if len(parts) < MAX_BLOCK_LINES:
                        parts.append(content)
                    return None
                parts = self._partial.pop(stream, None)
                if parts:
                    content = ("".join(parts) + content)[:MAX_LINE_CHARS]
                    text = (text[:end] + content)[:MAX_LINE_CHARS]
                return text, content, m
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
        except (ValueError, RecursionError):  # (brackets nested deeper than the decoder goes)
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
        """The first process-group marker within the line's first `PREFIX_SCAN` characters, if it is well formed."""
        pg = body.find("[PG ", 0, PREFIX_SCAN)
        plain = body.find("[Rank ", 0, PREFIX_SCAN if pg < 0 else pg)
        start = plain if plain >= 0 else pg
        if start < 0:
            return None
        close = body.find("]", start, start + _MARKER_CHARS)  # a marker holds no `]` before its last character
        return _group(body[start : close + 1]) if close >= 0 else None

    def _own_sighting(self, rank: int, text: str, stamp: _Stamp) -> None:
        """The rank's sighting is the current line, one of its own (`_sighting` of a line with its prefix)."""
        seen = self._seen.get(rank)
        if seen is None:
            if len(self._seen) < MAX_RECORDS:
                self._seen[rank] = [self._number, text, stamp, False, None]
        else:
            seen[0], seen[1], seen[2], seen[3], seen[4] = self._number, text, stamp, False, None

    def _sighting(self, rank: int, text: str, stamp: _Stamp, marker_only: bool) -> None:
        seen = self._seen.get(rank)
        if seen is None:
            if len(self._seen) >= MAX_RECORDS:
                return
            self._seen[rank] = [self._number, text, stamp, marker_only, None]
        else:
            seen[0], seen[1], seen[2], seen[4] = self._number, text, stamp, None
            seen[3] = seen[3] and marker_only

    def _keep(self, records: list[Any], record: object) -> None:
        if len(records) < MAX_RECORDS:
            records.append(record)

    # ------------------------------------------------------------ records

    def _records(
        self, rank: int | None, group: GroupRank | None, body: str, line: LogLine, hits: Hits, quoted: bool = False
    ) -> None:
        """Read a line by what its rows say: each `parse` kind by its own reader, `text` rows as they are."""
        parses = hits.parses
        if "watchdog" in parses:
            found = kinds.watchdog(body)
            if found is not None:
                self._keep(self._timeouts, WatchdogTimeout(line, rank, group, *found))
        if "progress" in parses:
            found = kinds.progress(body)
            if found is not None:
                self._keep(self._progress, WorkProgress(line, rank, group, *found))
        if "desync" in parses:
            found = kinds.desync(body)
            if found is not None:
                reporter = rank if rank is not None else self._last_prefixed_rank
                pending = self._pending_desync.setdefault(reporter, [])
                if len(pending) < MAX_BLOCK_LINES:
                    pending.append((line, found))
        if not quoted and ("nccl" in parses or "nccl_net" in parses):
            self._nccl(rank, group, body, line, hits)
        if "last_error" in parses:
            self._open_last_error(rank, group, body, line)
        if "cuda" in parses:
            cuda = cuda_error_in(body)
            if cuda is not None:
                where = nccl_message(body)
                host, device = nccl_origin(body[: body.find("NCCL ")]) if where else (None, None)
                site = self._check_site(body, hits) if where else None
                self._keep(self._cuda, CudaError(line, rank, group, cuda[0], cuda[1], host, device, site))
        if "format" in parses:
            message = read_format(body, hits.format_rows)
            if message is not None:
                self._keep(self._signals, self._hit(message, line, rank, group))
        for signal in hits.text_rows:
            self._keep(self._signals, SignalHit(signal.id, line, rank, group))

    @staticmethod
    def _check_site(body: str, hits: Hits) -> str | None:
        """The `nccl_check_site` row of an NCCL warning that is a check macro's own `Cuda failure` (not a message
        of NCCL's that quotes a CUDA error: its row says what it means)."""
        site = next((r.id for r in hits.rows if r.catalogue == CHECK_SITE), None)
        if site is None:
            return None
        message = read_nccl(body)
        return site if message is not None and BY_ID[message.format].parse == "cuda" else None

    def _nccl(self, rank: int | None, group: GroupRank | None, body: str, line: LogLine, hits: Hits | None,
              bare: bool = False) -> None:
        """An NCCL warning: the row whose format its message matches; a network warning's record names the peer."""
        message = read_nccl(body, bare)
        row = BY_ID[message.format] if message is not None else None
        if row is not None and row.parse == "cuda":
            return  # `Cuda failure`: the CUDA reader takes the line, which holds its marker
        if (row is None or row.parse == "nccl_net") and self._nccl_net(body, line, message):
            return
        if message is None and hits is not None:
            # no format of the catalogue matches (a wrapper quoting the message another way): a row whose own
            # marker, other than the shared `NCCL WARN`, the line holds
            row = next((r for r in hits.rows if r.parse == "nccl" and own_marker_in(r, body)), None)
            message = Message(row.id, row.id) if row is not None else None
        if message is not None:
            self._keep(self._signals, self._hit(message, line, rank, group))

    def _nccl_net(self, body: str, line: LogLine, message: Message | None) -> bool:
        found = nccl_warning(body)
        if message is not None and BY_ID[message.format].code == IB_EVENTS:
            # an asynchronous event of the device: the event's own row says whether it is a sign of the node's device
            if not BY_ID[message.signal].meaning.names_node:
                return False
            origin = nccl_message(body)
            found = (origin[1] if origin else None, NetworkKind.ASYNC_EVENT, None, None)
        if found is None:
            return False
        host, kind, peer, status = found
        peer_node = None
        if peer:
            name = peer.split("<", 1)[0]
            peer_node = self._resolve(name) if name and not is_address(name) else None
        signal = message.signal if message is not None else kind.value
        device = message.device if message is not None else None
        fmt = message.format if message is not None and message.format != signal else None
        code = message.code if message is not None else None
        if code is None and status is not None:
            code = code_of(IB_STATUS, str(status))  # a release whose wording no format holds: the status it gave
        self._keep(self._network,
                   NcclNetworkError(line, kind, host, peer, peer_node, status, signal, device, fmt, code))
        return True

    def _open_last_error(self, rank: int | None, group: GroupRank | None, body: str, line: LogLine) -> None:
        """PyTorch's `Last error:` (NCCL's last warning on the next line of the rank) or XLA's inline quote."""
        if nccl_message(body) is not None:
            self._nccl(rank, group, body, line, None)
            return
        pos = body.find(LAST_ERROR)
        rest = body[pos + len(LAST_ERROR) :].strip() if pos >= 0 else ""
        if rest:
            self._nccl(rank, group, rest, line, None, bare=True)
        elif len(self._last_error) < MAX_RECORDS:
            self._last_error[rank] = self._number

    def _quoted(self, rank: int | None, group: GroupRank | None, body: str) -> bool:
        """Whether this line is the NCCL warning a `Last error:` of its rank announced (and read it as one)."""
        opened = self._last_error.pop(rank, None)
        for other in [r for r, n in self._last_error.items() if self._number - n > LAST_ERROR_LINES]:
            del self._last_error[other]
        if opened is None or self._number - opened > LAST_ERROR_LINES:
            return False
        self._nccl(rank, group, body, self._line(), None, bare=True)
        return True

    def _hit(self, message: Message, line: LogLine, rank: int | None, group: GroupRank | None) -> SignalHit:
        host = message.host
        node = self._resolve(host) if host and not is_address(host) and "[" not in host else None
        return SignalHit(
            message.signal, line, rank, group, host, node, message.device, message.ranks, message.code, message.exit,
            message.peer, message.format if message.format != message.signal else None,
        )

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
        entry = self._elastic_entry
        if entry is not None and body[:2] == "  " and len(entry.lines) < MAX_BLOCK_LINES:
            # an open entry's field, most of a summary's lines: none of the steps below reads it another way (a field
            # starts with its key, no section's heading, line of dashes, entry or `<NO_OTHER_FAILURES>`)
            m = ELASTIC_FIELD.match(body)
            if m:
                self._field(entry, m)
                return
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
        if not stripped.strip("-") or not stripped.strip("="):  # a line of dashes, or of `=`
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
            self._field(entry, m)
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

    def _field(self, entry: _ElasticEntry, m: re.Match[str]) -> None:
        """An entry's field (`ELASTIC_FIELD`): its value kept, its line as evidence."""
        key, value = m.group("key", "value")
        value = value.strip()
        entry.values[key] = value
        entry.lines.append(self._line())
        entry.in_traceback = key == "traceback"
        if entry.in_traceback and value.startswith("Traceback"):
            entry.traceback_exception = None

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


def _label_off(text: str) -> str:
    """`text` without srun's `--label` prefix (`12: `), which may follow a collector's time."""
    if text[:1].isdigit() or text[:1] == " ":
        m = SRUN_LABEL.match(text)
        if m:
            return text[m.end() :]
    return text


def _cri(text: str, stamped: re.Match[str]) -> tuple[int, str, str] | None:
    """(where the content starts, the stream, the flag) of a line that starts with a collector's time (`STAMP`) when
    it is in Kubernetes CRI's shape (`CRI`, or `CRI_HOST` with a host after the time), else None."""
    end, stream = stamped.end(), stamped.group("stream")
    if stream and text.startswith(("F ", "P "), end):
        return end + 2, stream, text[end]
    host = end - len(stream) - 1 if stream else end  # where a host after the time would start (`stdout` is a name)
    space = text.find(" ", host, host + HOST_CHARS + 1)  # a host holds no space: the stream must follow the first
    if space < 0 or not text.startswith((" stdout ", " stderr "), space):
        return None
    m = CRI_HOST.match(text)
    return (m.end(), m.group("stream"), m.group("flag")) if m else None


#: lines joined by newlines, each Loki's time as the Loki source writes it and a blank (`LOKI_TIME`), then the rest
_LOKI_LINES = re.compile(LOKI_TIME + r"[^\n]*+(?:\n" + LOKI_TIME + r"[^\n]*+)*")
#: texts that make a summary line more than a summary line (`NodeParser.summary`): a rank prefix, a process-group
#: marker, a torchrun role prefix
_NOT_SUMMARY = ("[rank", "[PG ", "[Rank ")
#: a line of a summary's lines joined (ASCII, printable, a newline before each) that `feed` reads another way than
#: the summary's own: one that starts with a digit, `{` or `Traceback`, or with srun's label (SRUN_LABEL: its blanks
#: before a digit) or torchrun's role prefix (ROLE_PREFIX)
_NOT_SUMMARY_START = re.compile(r"\n(?:[0-9{]|Traceback| {1,8}+[0-9]{1,7}+: |\[[A-Za-z_][A-Za-z0-9_-]{0,63}+\]:)")
#: a line of a summary's lines joined (a newline before each) that starts with a letter: it may start with a host
#: name (`_own_host_off`)
_LETTER_FIRST = re.compile(r"\n([A-Za-z][^\n]*+)")
#: the signal table's kinds a summary line may hold a marker of (they give no record of their own)
_SUMMARY_PARSES = frozenset({"elastic"})
#: torchelastic's summary with no other failure than its root cause, in the message's own template, a summary's lines
#: joined as `NodeParser.summary` joins them (a newline before each): its sections, the root cause's entry and its six
#: fields, each read as `ELASTIC_FIELD` reads it (its value's first 4,096 characters, the rest of the line not read),
#: the traceback on one line, the closing line of `=`. Every line as the summary's steps read it one by one: the
#: headings and lines of dashes and `=` whole, `<NO_OTHER_FAILURES>` indented by two, the entry `[N]:` alone.
_ROOT_CAUSE_ONLY = re.compile(
    r"\nFailures:\n  <NO_OTHER_FAILURES>\n-++\nRoot Cause \(first observed failure\):\n\[[0-9]{1,6}+\]:"
    + "".join(rf"\n  {key}" + elastic_value(key) + r"[^\n]*+" for key in ELASTIC_KEYS)
    + r"\n=++"
)
#: the lines of such a summary that are its entry's evidence: `[N]:` and its six fields
_ROOT_ENTRY_LINES = range(4, 11)


#: the code catalogues of the InfiniBand device's asynchronous events and work completions' statuses (`data/ib.csv`)
IB_EVENTS = "ibv_event_type"
IB_STATUS = "ibv_wc_status"
#: PyTorch's `getNcclErrorDetailStr`: NCCL's last warning follows on the next line
LAST_ERROR = "Last error:"
#: lines of the same rank the warning a `Last error:` announces may come after it (other ranks' lines cut in)
LAST_ERROR_LINES = 8


#: the longest text a `MARKER` match can span (`[PG ID <9 digits> PG GUID <128> Rank <9 digits>]` is 169)
_MARKER_CHARS = 200


def _group(marker: str) -> GroupRank | None:
    """The process group and rank a marker's text names. The text before its rank is read once per distinct text
    (a job's markers differ by their rank only, and a fleet's ranks are more than any cache of whole markers)."""
    at = marker.rfind("Rank ")
    digits = marker[at + 5 : -1]
    if at < 0 or not (0 < len(digits) <= 9 and digits.isdecimal()):
        return _whole_group(marker)
    found = _group_head(marker[:at])
    return None if found is None else GroupRank(found[0], int(digits), found[1])


@functools.lru_cache(maxsize=1024)
def _group_head(head: str) -> tuple[str | None, str | None] | None:
    """(process group, its name) a marker's text before `Rank N]` names, or None when no marker starts so: the rank
    group of `MARKER` ends it, so any rank reads alike."""
    found = _whole_group(head + "Rank 0]")
    return None if found is None else (found.pg, found.identity)


def _whole_group(marker: str) -> GroupRank | None:
    m = MARKER.match(marker)
    return GroupRank(m.group("pg"), int(m.group("rank")), m.group("guid") or m.group("name")) if m else None


#: how Python exception class names end (builtins and the usual custom ones)
_EXCEPTION_SUFFIXES = ("Error", "Exception", "Interrupt", "Exit", "Iteration", "Warning", "Failure", "Timeout")


def _is_exception_line(body: str) -> bool:
    m = EXCEPTION_HEAD.match(body)
    return m is not None and m.group("name").endswith(_EXCEPTION_SUFFIXES)


#: a line `NodeParser.kind_lines` takes (`prefilter.read_kind_line` reads it): its text, whether Loki's time is in
#: front, its rank, its process-group marker's text before `Rank ` and the marker's rank, whether it is a watchdog
#: timeout (else a progress line), and what its kind's reader gives for its message: (seq, op, timeout, ran) as
#: `kinds.watchdog` reads them, (work, enqueued, completed) as `kinds.progress` does
KindLine = tuple[str, bool, int, str, int, bool, tuple[Any, ...]]
#: the `parse` value of each kind `NodeParser.kind_lines` takes in the signal table: True for the watchdog's timeout
_KIND_PARSES = {"watchdog": True, "progress": False}


@functools.lru_cache(maxsize=4096)
def kind_of(found: tuple[int, ...]) -> bool | None:
    """The kind of a line whose search found the table's markers `found` (ids in `signals.MARKERS`) when their rows
    are all of one kind `NodeParser.kind_lines` takes: True for a watchdog timeout, False for a progress line; None
    when they are of another kind or of more than one, or another row reads the line."""
    hits = _found_hits(found)
    if hits.text_rows or hits.format_rows or len(hits.parses) != 1:
        return None
    (parse,) = hits.parses
    return _KIND_PARSES.get(parse)


def parse_lines(node: str, lines: list[str], resolve: NodeResolver) -> NodeLog:
    """Parse a whole list of lines (tests and small inputs); the reader streams into a `NodeParser` instead."""
    parser = NodeParser(node, resolve)
    for raw in lines:
        parser.feed(raw)
    return parser.result()

