"""Where dumps are found and how each is read: `<dir>/<workload_id>/<attempt_index>/<node>/<files>`, bounded.

A node's folder holds the dumps its ranks wrote (that is where a rank's node comes from); a dump is a regular file
whose name ends with the writer's global rank (`nccl_trace_rank_12`, `comm_lib_trace_rank_12`, `_dump_12`), pickled
as PyTorch writes it, or JSON when it ends in `.json` (`..._12.json`). Nothing else is opened: an entry that is not
a regular file (a FIFO, a socket, a device, a symbolic link) is skipped without being opened, and a file is opened
with O_NOFOLLOW and O_NONBLOCK and read only if `fstat` says it is regular. Each file is read up to
`MAX_FILE_BYTES` (a larger pickle from its two ends, `dumps.read_tail`); a file that cannot be read, or is not a
dump, is a note naming it, and no rank of it is concluded from.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from providers.base import Deadline
from providers.telemetry.flight_recorder.dumps import (
    MAX_HEAD_BYTES,
    TAIL_ENTRIES,
    WHOLE_BYTES,
    Dump,
    ReadCache,
    Unreadable,
    entries_begin,
    read_json,
    read_pickle,
    read_tail,
)

#: bytes of one dump file at most: a larger file is refused with a note (2,000 entries with stack frames take
#: about 2 MiB)
MAX_FILE_BYTES = 64 * 1024 * 1024
#: dump files read per node folder at most (the rest are named in a note)
MAX_FILES_PER_NODE = 64
#: dump files read per request at most
MAX_FILES = 262144
#: time the analysis takes a dump read, kept back from the reading so that the answer comes by the deadline (16,384
#: dumps analysed in 0.5-1.3 s on the project's shared machine, bench/flight_recorder.py: 30-80 us a dump; the
#: provider keeps time of its own to merge and answer, `provider.answer_by`)
ANALYSIS_S_PER_DUMP = 90e-6
#: bytes before the previous dump's entries list from which the next dump's is looked for (`dumps.tail_pattern`)
NEAR_BYTES = 4096
#: the global rank at the end of a dump's name, before an optional `.json`
_NAME = re.compile(r"^(?P<prefix>.*?[^0-9])?(?P<rank>[0-9]{1,7})(?P<json>\.json)?$")


@dataclass
class DumpsRead:
    """What one request read of the dumps: per rank its dump and node folder, and what could not be read."""

    #: rank -> its dump
    dumps: dict[int, Dump] = field(default_factory=dict)
    #: rank -> the node folder its dump lies in
    node_of: dict[int, str] = field(default_factory=dict)
    #: node folders found, with the files read in each
    folders: dict[str, int] = field(default_factory=dict)
    #: sentences on files not read or not understood, each naming the file
    unreadable: list[str] = field(default_factory=list)
    #: node folders the deadline came before
    late: list[str] = field(default_factory=list)
    #: ranks whose dump file could not be read: not blamed, not counted as without a dump
    failed: set[int] = field(default_factory=set)
    #: whether the attempt's folder exists
    found: bool = False
    notes: list[str] = field(default_factory=list)


def attempt_folder(root: Path, workload_id: str, attempt_index: int) -> Path | None:
    """The attempt's folder, or None when a name would leave the root (a workload id is the caller's text)."""
    if workload_id in (".", "..") or "/" in workload_id or "\0" in workload_id:
        return None
    return root / workload_id / str(attempt_index)


def rank_of(name: str) -> tuple[int, bool] | None:
    """The global rank a dump's file name ends with, and whether it is JSON; None for a name of no dump."""
    m = _NAME.match(name)
    if m is None:
        return None
    return int(m.group("rank")), m.group("json") is not None


def read_dumps(folder: Path, deadline: Deadline, *, max_file_bytes: int = MAX_FILE_BYTES) -> DumpsRead:
    """Every node folder's dumps under the attempt's `folder`, node by node, until only the time their analysis takes
    is left of the deadline (the nodes it came before are `late`: neither read nor counted as without dumps)."""
    out = DumpsRead()
    try:
        nodes = sorted(os.scandir(folder), key=lambda e: e.name)
    except FileNotFoundError:
        return out
    except OSError as exc:
        out.found = True
        out.unreadable.append(f"{folder.name}/ cannot be listed ({exc.strerror})")
        return out
    out.found = True
    cache = ReadCache()
    files = 0
    loose = 0
    for entry in nodes:
        if not entry.is_dir(follow_symlinks=False):
            loose += rank_of(entry.name) is not None
            continue
        if _out_of_time(deadline, out) or files >= MAX_FILES:
            out.late.append(entry.name)
            continue
        files += _read_node(entry, out, cache, deadline, max_file_bytes)
    if loose:
        # a rank's node comes from the folder its dump lies in: a dump beside the node folders names none
        out.unreadable.append(
            f"{loose} file(s) named like dumps lie in {folder.parent.name}/{folder.name}/ itself, not in a node's "
            "folder, and were not read (the layout is <dir>/<workload_id>/<attempt_index>/<node>/<dumps>)"
        )
    return out


def _out_of_time(deadline: Deadline, out: DumpsRead) -> bool:
    """Whether the time left is only what the analysis of the dumps read will take."""
    return deadline.remaining() <= len(out.dumps) * ANALYSIS_S_PER_DUMP


def _read_node(
    entry: os.DirEntry[str], out: DumpsRead, cache: ReadCache, deadline: Deadline, max_file_bytes: int
) -> int:
    node = entry.name
    try:
        names = sorted(os.scandir(entry.path), key=lambda e: e.name)
    except OSError as exc:
        out.unreadable.append(f"{node}/ cannot be listed ({exc.strerror})")
        return 0
    read = 0
    out.folders[node] = 0
    dumps = [(e, rank_of(e.name)) for e in names]
    dumps = [(e, r) for e, r in dumps if r is not None]
    if len(dumps) > MAX_FILES_PER_NODE:
        out.unreadable.append(
            f"{node}/ holds {len(dumps)} dump files: only the first {MAX_FILES_PER_NODE} by name were read"
        )
        dumps = dumps[:MAX_FILES_PER_NODE]
    for e, (rank, is_json) in dumps:
        where = f"{node}/{e.name}"
        try:
            mode = e.stat(follow_symlinks=False).st_mode
        except OSError as exc:
            out.unreadable.append(f"{where} cannot be read ({exc.strerror})")
            continue
        if not stat.S_ISREG(mode):
            out.unreadable.append(f"{where} is not a regular file and was not opened")
            out.failed.add(rank)
            continue
        if rank in out.dumps:
            out.unreadable.append(f"{where} is a second dump of rank {rank} (the one in {out.node_of[rank]}/ was read)")
            continue
        try:
            dump = read_file(e.path, rank, is_json, cache, max_file_bytes)
        except Unreadable as exc:
            out.unreadable.append(f"{where} was not read as a flight-recorder dump: {exc}")
            out.failed.add(rank)
            continue
        out.dumps[rank] = dump
        out.node_of[rank] = node
        out.folders[node] += 1
        read += 1
        if _out_of_time(deadline, out):
            break
    return read


def read_file(path: str, rank: int, is_json: bool, cache: ReadCache, max_file_bytes: int = MAX_FILE_BYTES) -> Dump:
    """One dump file, opened only if it is a regular file, read within `max_file_bytes`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise Unreadable(f"it cannot be opened ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Unreadable("it is not a regular file")
        size = st.st_size
        if size == 0:
            raise Unreadable("it is empty")
        if size > max_file_bytes:
            raise Unreadable(f"it holds {size} bytes, more than the {max_file_bytes} read of a dump")
        if is_json:
            return read_json(_pread(fd, 0, size), rank, cache)
        if size <= WHOLE_BYTES:
            return read_pickle(_pread(fd, 0, size), rank, cache)
        # The part before the entries (its group table may hold every rank's number) up to the second entry's start,
        # then the end: four times more of either while what was read does not settle the dump.
        # The previous dump's head size first (the dumps of one job have group tables of one size), and its entries
        # list's place to look from.
        head_bytes = cache.head_bytes
        near = max(0, cache.entries_at - NEAR_BYTES)
        head = _pread(fd, 0, min(size, head_bytes))
        begun = entries_begin(head, near)
        while not begun and head_bytes < min(size, MAX_HEAD_BYTES):
            head_bytes *= 4
            head = _pread(fd, 0, min(size, head_bytes))
            begun = entries_begin(head, near)
        if begun:
            cache.head_bytes = head_bytes
        want = TAIL_ENTRIES
        tail_bytes = WHOLE_BYTES // 2
        while tail_bytes < size and begun:
            tail = _pread(fd, size - tail_bytes, tail_bytes)
            dump = read_tail(head, tail, rank, cache, want, near=near)
            if dump is not None:
                return dump
            tail_bytes *= 4
            want *= 4
        return read_pickle(_pread(fd, 0, size), rank, cache)
    except OSError as exc:
        raise Unreadable(f"it cannot be read ({exc.strerror})") from None
    finally:
        os.close(fd)


def _pread(fd: int, offset: int, size: int) -> bytes:
    parts = []
    while size > 0:
        chunk = os.pread(fd, min(size, 1 << 22), offset)
        if not chunk:
            break
        parts.append(chunk)
        offset += len(chunk)
        size -= len(chunk)
    return b"".join(parts)
