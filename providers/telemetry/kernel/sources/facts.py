"""What the `files` source keeps about files and folders between requests: directory listings and each file's
facts (the window search's probes and answers, a gzip file's first time), keyed by identity (device, inode, size,
modification time); the facts of a plain file appended to carry over to its grown self (files.py reads them). And
the Proof of a scan: every folder listed and file read, by identity, for an answer kept while they stay unchanged."""

from __future__ import annotations

import os
import time
from array import array
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar

from providers.telemetry.cache import Bounded
from providers.telemetry.kernel.parse import TimeContext

K = TypeVar("K")
V = TypeVar("V")

#: files and folders whose facts are kept between requests (least recently used dropped first): a host's folder, its
#: current file and a rotated one for the largest scope (16,384 nodes), so that a scope finds its own kept (a request
#: reads each folder and file in turn: a bound below its scope would drop every one before its reuse; at 16,384 hosts
#: the former bound of 16,384 entries kept none, and each request probed every file anew). By a walk of the objects
#: (bench/fact_memory.py): a file's entry at its bounds takes 2.8 KiB, so at most 134 MiB were every entry a file,
#: 107 MiB for a folder and two files of each of 16,384 hosts; 53 MiB measured after four requests over 16,384 hosts
CACHE_ENTRIES = 3 * 16384
#: probes kept per file: the search's own probes are kept as the lines they found (`FileFacts.points`); what is left
#: is the probe for the file's first line, made by each request
CACHE_PROBES = 4
#: searches' answers kept per file (the same window asked again, as retries and the next phase do)
CACHE_SEARCHES = 4
#: lines the window search found kept per file (each where it starts and its time): those nearest the latest answer
#: bound the next search, which for a window moved by less than a few lines' time then makes no probe
CACHE_POINTS = 8
#: blocks of whole lines in time order kept per file as spans (where each starts and ends, and the times of its first
#: and last lines): the first ones a reading of the file met, from where its window starts, the oldest learnt
#: dropped first. A window whose start falls inside one is found without a probe (search.search_offset): the next
#: failure's, minutes later, starts inside the blocks read after the last window's start (8 blocks of the read
#: grid: 128 KiB)
CACHE_SPANS = 8
#: a listing or a file modified less than this long ago is not cached: a change within one tick of a coarse
#: file-system clock would leave its modification time unchanged
CACHE_SETTLE_NS = 2_000_000_000


class Proof:
    """The folders a scan listed and the files it read, each with its identity (device, inode, size, modification
    and change times): while `holds`, a scan of the same window would read the same bytes. A folder's times change
    when an entry is added, removed or renamed; a file's change time at every write, truncation or chmod, and no
    call sets it back. `sound` is False once anything was seen that these times cannot vouch for: a folder holding
    a symbolic link (its target can change while the folder does not), or a folder or file changed less than
    CACHE_SETTLE_NS ago (a change within one tick of a coarse file-system clock would leave its times unchanged)."""

    __slots__ = ("items", "sound", "_settled")

    def __init__(self) -> None:
        self.items: list[tuple[str, tuple[int, ...]]] = []
        self.sound = True
        self._settled = time.time_ns() - CACHE_SETTLE_NS  # changed after this: not settled

    def saw(self, path: str, st: os.stat_result) -> None:
        """`path` was listed or read with status `st`."""
        if st.st_mtime_ns > self._settled or st.st_ctime_ns > self._settled:
            self.sound = False
        self.items.append((path, _identity(st)))

    def holds(self) -> bool:
        """Every folder and file seen still has the identity it had (each looked up again by its path)."""
        for path, identity in self.items:
            try:
                st = os.stat(path)
            except OSError:
                return False
            if _identity(st) != identity:
                return False
        return True


def _identity(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@dataclass(slots=True)
class FileFacts:
    """What reading one file taught, valid while its identity is unchanged: the search's probes and the lines they
    found, a gzip head."""

    #: (offset, end) -> (line start, its time, the TimeContext the time depends on or None when it depends on none)
    probes: dict[tuple[int, int], tuple[int, datetime | None, TimeContext | None]] = field(default_factory=dict)
    #: a gzip file's first time (or UnknownFormat's line number) and the TimeContext it depends on
    gz_first: tuple[datetime | None, int | None, TimeContext | None] | None = None
    #: (search target, TimeContext) -> the offset the search found (the same probes give the same answer)
    searches: dict[tuple[datetime, TimeContext], int] = field(default_factory=dict)
    #: line start -> its time: lines the search's probes found whose time was read without the TimeContext (a time
    #: that depends on it, a year-less stamp's, may read otherwise in another request)
    points: dict[int, datetime] = field(default_factory=dict)
    #: blocks of lines in time order whose times were read without the TimeContext, at most CACHE_SPANS, in the
    #: order learnt: four numbers each (where it starts, where it ends, its first and its last line's time in
    #: microseconds since the epoch), flat (32 bytes a block, where tuples of datetimes took 190)
    spans: array[int] = field(default_factory=lambda: array("q"))
    #: the block lineage of the plain file these facts were made for (BlockCache.lineage; 0: none) and its size then
    lineage: int = 0
    size: int = 0

    def carried(self, size: int) -> FileFacts:
        """Fresh facts for this file grown to `size` bytes, its first `self.size` unchanged (appended to): what
        does not depend on its end carries over. A search's offset lies at or before the first line at or after
        its target, and a line appended later is later still; the first line stays the first line."""
        grown = FileFacts(lineage=self.lineage, size=size)
        grown.searches = dict(self.searches)  # each offset a line start before the former end
        grown.points = dict(self.points)  # each a line before the former end, with its time
        spans = self.spans[:]  # a copy taken at once: another thread reading the file may learn a block meanwhile
        grown.spans = array("q")
        for k in range(0, len(spans), 4):
            if spans[k + 1] <= self.size:  # a block before the former end
                grown.spans.extend(spans[k : k + 4])
        first = self.probes.get((0, self.size))
        if first is not None and first[1] is not None and first[0] < self.size:
            grown.probes[(0, size)] = first
        return grown


class FactCache:
    """Directory listings and FileFacts between requests, least recently used dropped first; thread-safe."""

    def __init__(self, entries: int = CACHE_ENTRIES) -> None:
        self.entries = entries
        #: ("dir" | "file", path) -> (signature, listing or FileFacts); ("live", path) -> ((), FileFacts) for a plain
        #: file modified too recently to be kept by its signature (a live log), used only once the file is known to
        #: have been appended to since (`facts`)
        self._items: Bounded[tuple[str, str], tuple[tuple[int, ...], object]] = Bounded(entries)

    def _get(self, key: tuple[str, str], sig: tuple[int, ...]) -> object | None:
        item = self._items.get(key)
        return None if item is None or item[0] != sig else item[1]

    def _any(self, key: tuple[str, str]) -> object | None:
        item = self._items.peek(key)
        return None if item is None else item[1]

    def _put(self, key: tuple[str, str], sig: tuple[int, ...], mtime_ns: int | None, value: object) -> None:
        """Keep `value` under `key` (`mtime_ns` None: whatever the modification time)."""
        if self.entries <= 0 or (mtime_ns is not None and time.time_ns() - mtime_ns < CACHE_SETTLE_NS):
            return
        self._items.put(key, (sig, value))

    def listing(self, path: str, strict: bool, proof: Proof | None = None) -> list[tuple[str, str, bool, bool]]:
        """(name, path, is_dir, is_file) of a directory's entries; `strict`: an entry that cannot be typed raises
        OSError, else it is left out. Kept while the directory's own modification time and inode stay. The folder
        is recorded in `proof`, if given."""
        st = os.stat(path)
        if proof is not None:
            proof.saw(path, st)
        sig = (st.st_dev, st.st_ino, st.st_mtime_ns, int(strict))
        cached = self._get(("dir", path), sig)
        if cached is not None:
            return cached  # type: ignore[return-value]  # kept only when it held no link
        out: list[tuple[str, str, bool, bool]] = []
        links = False
        with os.scandir(path) as it:
            for entry in it:
                try:
                    links = links or entry.is_symlink()
                    out.append((entry.name, entry.path, entry.is_dir(), entry.is_file()))
                except OSError:
                    if strict:
                        raise
        if not links:  # a link's target can change without the directory changing
            self._put(("dir", path), sig, st.st_mtime_ns, out)
        elif proof is not None:
            proof.sound = False
        return out

    def facts(self, path: str, st: os.stat_result, lineage: int = 0, valid: int = 0) -> FileFacts:
        """The facts of the file `path` opened with status `st` (fresh ones when it changed or is new). A plain
        file's block `lineage` and the end of its bytes known unchanged (`valid`, BlockCache.lineage) let the facts
        of a file appended to carry over."""
        sig = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        cached = self._get(("file", path), sig)
        if isinstance(cached, FileFacts):
            return cached
        facts = FileFacts(lineage=lineage, size=st.st_size)
        if not lineage:
            self._put(("file", path), sig, st.st_mtime_ns, facts)
            return facts
        before = self._any(("live", path)) or self._any(("file", path))
        if isinstance(before, FileFacts) and before.lineage == lineage and 0 < before.size <= valid:
            facts = before.carried(st.st_size)
        if time.time_ns() - st.st_mtime_ns < CACHE_SETTLE_NS:
            self._put(("live", path), (), None, facts)
        else:
            self._items.pop(("live", path))
            self._put(("file", path), sig, st.st_mtime_ns, facts)
        return facts
