"""The kernel signal's `journal` source: systemd journal files, as journald keeps them or systemd-journal-remote
gathers them from many nodes (`/var/log/journal/remote/remote-<host>.journal` with `--split-mode=host`).

Every file is read the same way, by libsystemd's own reader (the `cysystemd` wheel, which bundles libsystemd):
seek to the window's start in the file's time index, take the entry just before it (it shows the node's journal
reaching back before the window), then the entries in time order up to the first one past the window's end. No file
is read whole. An entry's node is its `_HOSTNAME` (identity.py's rule, as everywhere); its time is
`__REALTIME_TIMESTAMP`, microseconds since the epoch in UTC, so no time zone is guessed. An entry is a kernel line
when its `_TRANSPORT` is `kernel`, else its tag is its `SYSLOG_IDENTIFIER` (some forwarders write kernel messages
with `SYSLOG_IDENTIFIER=kernel` and no transport) or `_COMM`, exactly as `journalctl -o json` lines are read by the
files source. A multi-line message stays one entry and becomes one record with its lines.

Files are the directory's `*.journal` (current), `*@*.journal` (archived by rotation) and `*.journal~` (left dirty,
renamed by journald), at its top and one folder down (journald's `<machine-id>/`, journal-remote's `remote/`). A
rotation group (a node's current file and its archived ones) is read as the files source reads rotated files: newest
first, by the first entry's time in each file's header, down to the first file that starts before the window; the
older ones are not opened. A file that cannot be opened or read (corrupt, truncated, not a journal) is skipped with
a warning naming it; the others are read.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import stat
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from providers.base import (
    Deadline,
    ProviderConstructionError,
    ProviderProcessingError,
    ProviderTimeoutError,
    SourceFailure,
    TraceContext,
)
from providers.telemetry.cache import Bounded
from providers.telemetry.digits import number
from providers.telemetry.kernel.collect import KERNEL_TAG, Collector
from providers.telemetry.kernel.parse import ParsedLine

log = logging.getLogger("attribution_adapter.telemetry")

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: entries within one file are expected in time order within this much; reading starts this much before the window
ORDER_SLACK = timedelta(seconds=60)
#: the deadline is looked at every this many entries
CHECK_EVERY = 256
#: entries sharing one time stepped over when looking for the entry before a time; past this many the entry
#: before is not looked for (it only shows that the node's journal reaches back before the window)
MAX_SAME_TIME = 4096
#: the kernel's `[seconds]` stamp (and a `[T<pid>]` caller id) at the start of a message, as parse.py reads it
_MESSAGE_STAMP = re.compile(r"\[( *[0-9]+\.[0-9]+)\] (?:\[ *[TC][0-9]+\] )?")
#: a journal file, current, archived (`name@...journal`) or left dirty (`.journal~`)
SUFFIXES = (".journal", ".journal~")
#: how systemd-journal-remote starts the name of the file of one sender (`--split-mode=host`)
REMOTE_PREFIX = "remote-"
#: a folder modified less than this long ago may change again within one tick of a coarse file-system clock without
#: its modification time changing: its listing is not kept
SETTLE_NS = 2_000_000_000
#: what libsystemd and the reader raise for a file they cannot use
READ_ERRORS = (OSError, SystemError, ValueError, RuntimeError)


#: a journal file's header (systemd's "Journal File Format"): the signature, and the realtime of its first and last
#: entries (little-endian, microseconds) at byte 184
SIGNATURE = b"LPKSHHRH"
_HEAD_TAIL = struct.Struct("<QQ")
_HEAD_TAIL_AT = 184
#: the header's `tail_object_offset` (the last object written) at byte 136, and an object's size after its type
_TAIL_OBJECT = struct.Struct("<Q")
_TAIL_OBJECT_AT = 136
#: the header's `data_hash_table_offset` and `data_hash_table_size` (where its items start, and their bytes)
_HASH_TABLE = struct.Struct("<QQ")
_HASH_TABLE_AT = 104
_OBJECT_SIZE_AT = 8
#: ranges of data looked at in a journal file (a sparse file's data between its holes), and the hole between two that
#: is read with them rather than apart
MAX_EXTENTS = 1024
MERGE_GAP = 32 * 1024
#: journal files whose ranges to read ahead are kept (a current and an archived file for 8,192 nodes; a few hundred
#: bytes each)
RANGE_FILES = 16384
_RANGES: Bounded[str, tuple[tuple[int, int, int, int], tuple[tuple[int, int], ...]]] = Bounded(RANGE_FILES)


@dataclass(frozen=True)
class JournalFile:
    path: str
    origin: str  # the path relative to the directory, as warnings and evidence name it

    @property
    def host(self) -> str | None:
        """The host its name names (`named_host`), or None."""
        return named_host(self.origin.rpartition("/")[2])

    @property
    def group(self) -> str:
        """Its rotation group: the folder and the name before `@` (archived, dirty) or the suffix
        (`remote-gpu-1@...journal` and `remote-gpu-1.journal` are one node's files; `system@...journal~` and
        `system.journal` journald's)."""
        folder, _, name = self.origin.rpartition("/")
        base = name.partition("@")[0] if "@" in name else name.removesuffix("~").removesuffix(".journal")
        return f"{folder}/{base}"


def header_times(path: str) -> tuple[int, int] | None:
    """(first, last) entry realtime of a journal file from its header, in µs; None when the header cannot be read,
    is not a journal's, or the file holds no entry (the file is then opened by libsystemd, which says why)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        data = os.pread(fd, _HEAD_TAIL_AT + _HEAD_TAIL.size, 0)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) < _HEAD_TAIL_AT + _HEAD_TAIL.size or data[:8] != SIGNATURE:
        return None
    head, tail = _HEAD_TAIL.unpack_from(data, _HEAD_TAIL_AT)
    return (head, tail) if head and tail else None


def read_ahead(path: str) -> None:
    """Ask the kernel to bring the part of a journal file its objects use into the page cache, and no more.

    journald and journal-remote allocate files in steps of 8 MiB: past the last object lies unused space (zeros, or
    holes). libsystemd reads a file through mappings, and the kernel fills a mapping's missing page with read-around
    of the device's read-ahead size (8 MiB on some volumes): each file then takes its whole allocation in memory, and
    thousands of files do not fit. Read ahead here, on the bytes up to the end of the last object (the header says
    where it is) that hold data, libsystemd then finds its pages in the cache and the unused space is never read.
    The data hash table is left out: libsystemd looks into it only to find a field's value (a match, a write), which
    the source never asks, and it is most of a small file (3.6 of the 3.9 MiB journal-remote writes for a host's
    day; with it, the first read of 1,024 such files took 2.2 GiB from the device, without it 0.18 GiB).
    Nothing is asked when the last object is in the page cache already (libsystemd read the file before); the ranges
    are worked out once per state of the file (its identity, size and modification time)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # this descriptor's own reads: no read-ahead
        head = os.pread(fd, _TAIL_OBJECT_AT + _TAIL_OBJECT.size, 0)
        if len(head) < _TAIL_OBJECT_AT + _TAIL_OBJECT.size or head[:8] != SIGNATURE:
            return
        (tail,) = _TAIL_OBJECT.unpack_from(head, _TAIL_OBJECT_AT)
        st = os.fstat(fd)
        # (a last object outside the file is no journal's, and an offset past 2**63 no system call takes: the reader
        # says what is wrong with such a file)
        if not 0 < tail < st.st_size or _in_cache(fd, tail):
            return
        state = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        known = _RANGES.get(path)
        if known is None or known[0] != state:
            known = (state, _without(_data_ranges(fd, tail, st.st_size), _hash_table(head)))
            _RANGES.put(path, known)
        for start, length in known[1]:
            os.posix_fadvise(fd, start, length, os.POSIX_FADV_WILLNEED)
    except OSError:
        return  # the reader says what is wrong with the file
    finally:
        os.close(fd)


def _hash_table(head: bytes) -> tuple[int, int]:
    """(start, end) of the data hash table's items, from the header ((0, 0) when it names none)."""
    offset, size = _HASH_TABLE.unpack_from(head, _HASH_TABLE_AT)
    return (offset, offset + size) if offset and size else (0, 0)


def _without(ranges: tuple[tuple[int, int], ...], gap: tuple[int, int]) -> tuple[tuple[int, int], ...]:
    """`ranges` ((start, length) each) less the bytes from gap[0] to gap[1]."""
    low, high = gap
    if low >= high:
        return ranges
    out: list[tuple[int, int]] = []
    for start, length in ranges:
        end = start + length
        if start < low:
            out.append((start, min(end, low) - start))
        if end > high:
            out.append((max(start, high), end - max(start, high)))
    return tuple((s, n) for s, n in out if n > 0)


def _in_cache(fd: int, offset: int) -> bool:
    """Whether the byte at `offset` is in the page cache (a read that may not wait for the disk)."""
    try:
        return os.preadv(fd, [bytearray(1)], offset, os.RWF_NOWAIT) == 1
    except OSError:  # BlockingIOError: not in the cache; EOPNOTSUPP: the file system cannot tell
        return False


def _data_ranges(fd: int, tail: int, size: int) -> tuple[tuple[int, int], ...]:
    """The ranges of `fd` before the end of its last object (at `tail`) that hold data (a hole of a sparse copy,
    read, fills the cache with zeros), ranges less than MERGE_GAP apart joined; at most MAX_EXTENTS looked at, then
    the rest in one."""
    found = os.pread(fd, _TAIL_OBJECT.size, tail + _OBJECT_SIZE_AT)
    end = tail + (_TAIL_OBJECT.unpack(found)[0] if len(found) == _TAIL_OBJECT.size else 0)
    if not 0 < end <= size:
        return ()
    ranges: list[list[int]] = []
    at = 0
    for _ in range(MAX_EXTENTS):
        try:
            data = os.lseek(fd, at, os.SEEK_DATA)
        except OSError:  # ENXIO: no data after `at`
            break
        if data >= end:
            break
        hole = min(os.lseek(fd, data, os.SEEK_HOLE), end)
        if ranges and data - ranges[-1][1] < MERGE_GAP:
            ranges[-1][1] = hole
        else:
            ranges.append([data, hole])
        at = hole
    else:
        ranges.append([at, end])
    return tuple((start, stop - start) for start, stop in ranges)


def reading_order(files: list[JournalFile], lo: int) -> list[JournalFile]:
    """The files to open, as the files source reads a rotation: in each rotation group newest first (by the first
    entry's time in the header), down to the first file that starts at or before `lo` (it holds the entry before the
    window); older files hold nothing later and are not opened. A file whose header gives no times is opened."""
    groups: dict[str, list[tuple[int, JournalFile]]] = {}
    order: list[JournalFile] = []
    for journal in files:
        times = header_times(journal.path)
        if times is None:
            order.append(journal)
        else:
            groups.setdefault(journal.group, []).append((times[0], journal))
    for members in groups.values():
        for head, journal in sorted(members, key=lambda m: m[0], reverse=True):
            order.append(journal)
            if head <= lo:
                break
    return sorted(order, key=lambda j: j.origin)


@dataclass(frozen=True)
class Entry:
    """What the source uses of one journal entry."""

    realtime_usec: int
    host: str | None
    tag: str | None
    message: str
    #: the kernel's own `[seconds.micro]` stamp, from `_SOURCE_MONOTONIC_TIMESTAMP`, as dmesg and syslog print it
    mono: str | None


def named_host(name: str) -> str | None:
    """The host a journal file's name names as `systemd-journal-remote --split-mode=host` writes them:
    `remote-<host>.journal`, archived `remote-<host>@<...>.journal`, dirty `...journal~`; None for any other name
    (journald's `system.journal`, ...) and for a sender named by its address (`remote-10.0.0.5.journal`), whose
    entries may be any host's."""
    if not name.startswith(REMOTE_PREFIX):
        return None
    host = name.removesuffix("~").removesuffix(".journal")[len(REMOTE_PREFIX) :].partition("@")[0]
    if not host or ":" in host or all(c.isdigit() or c == "." for c in host):
        return None
    return host


def is_journal_name(name: str) -> bool:
    return name.endswith(SUFFIXES) and not name.startswith(".")


def journal_files(root: Path) -> list[JournalFile]:
    """The journal files at the top of `root` and one folder down, in name order (OSError: `root` unreadable)."""
    found: list[JournalFile] = []
    with os.scandir(root) as entries:
        listing = sorted(entries, key=lambda e: e.name)
    for entry in listing:
        try:
            if entry.is_file() and is_journal_name(entry.name):
                found.append(JournalFile(entry.path, entry.name))
            elif entry.is_dir() and not entry.name.startswith("."):
                try:
                    with os.scandir(entry.path) as inner:
                        names = sorted((e for e in inner if e.is_file() and is_journal_name(e.name)), key=_name)
                except OSError:
                    log.warning("journal folder %s could not be read; skipped", entry.name)
                    continue
                found.extend(JournalFile(e.path, f"{entry.name}/{e.name}") for e in names)
        except OSError:
            continue  # vanished while listed
    return found


def _name(entry: os.DirEntry[str]) -> str:
    return entry.name


def _text(value: Any) -> str | None:
    """A field's value as the reader gives it (a str, or a list when the entry repeats the field): its first."""
    if isinstance(value, list):
        value = value[0] if value else None
    return value if isinstance(value, str) else None


def kernel_stamp(source_monotonic: str | None) -> str | None:
    """`_SOURCE_MONOTONIC_TIMESTAMP` (microseconds since boot) as the kernel prints it: `seconds.micro`."""
    value = None if source_monotonic is None else number(source_monotonic, 20)
    if value is None:
        return None
    return f"{value // 1_000_000:5d}.{value % 1_000_000:06d}"


def entry_of(realtime_usec: int, data: dict[str, Any]) -> Entry:
    """The fields the source reads from one entry's data."""
    if _text(data.get("_TRANSPORT")) == KERNEL_TAG:
        tag: str | None = KERNEL_TAG
    else:
        tag = _text(data.get("SYSLOG_IDENTIFIER")) or _text(data.get("_COMM")) or "-"
    message = (_text(data.get("MESSAGE")) or "").replace("\x00", "")
    mono = None
    if tag == KERNEL_TAG:
        mono = kernel_stamp(_text(data.get("_SOURCE_MONOTONIC_TIMESTAMP")))
        # A forwarder that took the line from a text log keeps the kernel's stamp in the message: read it as
        # the files source reads it, so the message classifies the same and the stamp is written once.
        found = _MESSAGE_STAMP.match(message)
        if found is not None:
            message = message[found.end() :]
            mono = mono or found.group(1)
    return Entry(realtime_usec, _text(data.get("_HOSTNAME")), tag, message, mono)


def render(observed_at: datetime, entry: Entry) -> str:
    """The entry as a syslog server writes it (RSYSLOG_FileFormat, the kernel's stamp in the message), one line per
    line of its message: the evidence text, the same as the same lines read from a text tree."""
    head = f"{observed_at.isoformat(timespec='microseconds')} {entry.host} {entry.tag}: "
    stamp = f"[{entry.mono}] " if entry.mono is not None else ""
    return "\n".join(head + stamp + line for line in entry.message.split("\n"))


def usec(at: datetime) -> int:
    delta = at - EPOCH
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


class JournalReaderFile:
    """One journal file opened by libsystemd (cysystemd); the reader's errors are READ_ERRORS."""

    def __init__(self, path: str) -> None:
        from cysystemd.reader import JournalReader  # imported here: only this source needs the library

        # cysystemd 2.0.5 recurses without end, and the process dies, on a path that is a symbolic link: it gets the
        # file's real path, which must name a regular file (strict: a dangling link or a loop is an OSError here).
        real = os.path.realpath(path, strict=True)
        if os.path.islink(real) or not stat.S_ISREG(os.stat(real).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        self._reader = JournalReader()
        self._reader.open_files(real)

    def entry_before(self, usec_at: int) -> Entry | None:
        """The last entry earlier than `usec_at`, or None."""
        self._reader.seek_realtime_usec(usec_at)
        # After a seek, libsystemd's first step back gives the entry found at the sought time itself, and entries
        # sharing that time come before the earlier one: step back past them (a bounded number of steps).
        for _ in range(MAX_SAME_TIME + 1):
            found = self._reader.previous()
            if found is None:
                return None
            if found.get_realtime_usec() < usec_at:
                return entry_of(found.get_realtime_usec(), found.data)
        return None

    def entries_from(self, usec_at: int) -> Iterator[Entry]:
        """The entries from the first at or after `usec_at` on, in the file's order."""
        self._reader.seek_realtime_usec(usec_at)
        reader = self._reader
        while True:
            found = reader.next()
            if found is None:
                return
            yield entry_of(found.get_realtime_usec(), found.data)

    def first(self) -> Entry | None:
        self._reader.seek_head()
        found = self._reader.next()
        return None if found is None else entry_of(found.get_realtime_usec(), found.data)

    def last(self) -> Entry | None:
        self._reader.seek_tail()
        found = self._reader.previous()
        # libsystemd can stop one entry short of the tail here: step forward to the real last entry.
        for _ in range(4):
            after = self._reader.next()
            if after is None:
                break
            found = after
        return None if found is None else entry_of(found.get_realtime_usec(), found.data)

    def all_entries(self) -> Iterator[Entry]:
        self._reader.seek_head()
        while True:
            found = self._reader.next()
            if found is None:
                return
            yield entry_of(found.get_realtime_usec(), found.data)


def observed(entry: Entry) -> datetime | None:
    try:
        return EPOCH + timedelta(microseconds=entry.realtime_usec)
    except OverflowError:
        return None


class JournalSource:
    """Reads the journal files under `root` (see the module docstring)."""

    evidence_source = "journal"

    def __init__(self, root: Path) -> None:
        self.root = root
        try:
            import cysystemd.reader  # noqa: F401  (the reader must load here, at boot, not at the first request)
        except ImportError as exc:
            raise ProviderConstructionError(
                f"the journal source needs the cysystemd package (requirements.txt), which cannot be loaded: {exc}"
            ) from exc
        #: the directory's files by the short name of the host their name names ("": named for no host), with the
        #: state of the folders they were listed from; worked out again only when a folder changed
        self._listing: tuple[tuple[tuple[str, int, int], ...], dict[str, list[JournalFile]]] | None = None

    def files_for(self, collector: Collector) -> list[JournalFile]:
        """The files that may hold the scope's entries: those named for a scope host and those named for none (a
        file named for another host is never opened). OSError: the directory cannot be read."""
        by_short = self._by_host()
        if len(collector.names.short_names) * 4 > sum(map(len, by_short.values())):
            found = [f for files in by_short.values() for f in files]
        else:
            found = [f for short in ("", *collector.names.short_names) for f in by_short.get(short, ())]
        return [f for f in found if f.host is None or collector.node_for(f.host) is not None]

    def _by_host(self) -> dict[str, list[JournalFile]]:
        """The directory's files by host short name, listed again only when a folder's state changed."""
        known = self._listing
        if known is not None and all(_state(path) == (path, ino, mtime) for path, ino, mtime in known[0]):
            return known[1]
        states = [_state(str(self.root))]
        files = journal_files(self.root)
        folders = sorted({f.path.rpartition("/")[0] for f in files} - {str(self.root)})
        states += [_state(folder) for folder in folders]
        by_short: dict[str, list[JournalFile]] = {}
        for journal in files:
            host = journal.host
            by_short.setdefault(host.lower().partition(".")[0] if host else "", []).append(journal)
        settled = time.time_ns() - SETTLE_NS
        if all(state[1] >= 0 and state[2] < settled for state in states):
            self._listing = (tuple(states), by_short)
        return by_short

    def scan(self, collector: Collector, deadline: Deadline, trace: TraceContext | None = None) -> None:
        try:
            files = self.files_for(collector)
        except OSError as exc:
            raise ProviderProcessingError(
                "the journal directory could not be read", kind=SourceFailure.UNREADABLE
            ) from exc
        lo = usec(max(collector.window.start - ORDER_SLACK, EPOCH))
        hi = collector.window.end + ORDER_SLACK
        for journal in reading_order(files, lo):
            _check(deadline)
            try:
                self._read(journal, collector, lo, hi, deadline)
            except READ_ERRORS as exc:
                # One corrupt, truncated or vanished file breaks only itself: the other files' entries stand.
                log.warning("journal file %s could not be read (%s); skipped", journal.origin, exc)
                collector.mark_unreadable(None)

    def _read(self, journal: JournalFile, collector: Collector, lo: int, hi: datetime, deadline: Deadline) -> None:
        read_ahead(journal.path)
        reader = JournalReaderFile(journal.path)
        nodes: dict[str | None, str | None] = {}
        origin = journal.origin

        def feed(entry: Entry) -> bool:
            """Feed one entry; True once it lies past the window's end."""
            at = observed(entry)
            if at is None:
                return False
            if entry.host not in nodes:
                nodes[entry.host] = collector.node_for(entry.host)
            node = nodes[entry.host]
            if node is not None:
                parsed = ParsedLine(at, entry.host, entry.tag, entry.message, entry.mono)
                collector.add_parsed(node, parsed, render(at, entry), origin)
            return at > hi

        before = reader.entry_before(lo)
        if before is not None:
            feed(before)
        for count, entry in enumerate(reader.entries_from(lo), start=1):
            if count % CHECK_EVERY == 0:
                _check(deadline)
            if feed(entry):
                break
        for node in {n for n in nodes.values() if n is not None}:
            collector.end_origin(node, origin)


def _state(path: str) -> tuple[str, int, int]:
    """(path, inode, modification time in ns) of a folder; -1s when it cannot be looked at (then never kept)."""
    try:
        st = os.stat(path)
    except OSError:
        return path, -1, -1
    return path, st.st_ino, st.st_mtime_ns


def _check(deadline: Deadline) -> None:
    if deadline.expired:
        raise ProviderTimeoutError("reading the kernel logs did not finish in time")
