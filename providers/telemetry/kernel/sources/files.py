"""The `files` source: a central rsyslog server's directory, read by a search on byte offsets.

A request's cost follows its window: a file is found by a search on its lines' times, and inside the window
the lines of a host's file that carry one timestamp shape, hold no keyword (collect.KEYWORDS) and share their kernel
stamp with no other line are counted from their timestamps alone; only the other lines go through the line parser.
Directory listings and what the search learnt about a file are kept between requests, keyed by the file's identity
(device, inode, size, modification time). A plain file is read on a fixed grid of READ_CHUNK bytes, so its blocks of
whole lines fall in the same places whatever the window; a summary of what a block holds apart from any window is
kept too (blocks.py), a few hundred bytes a block, so that a request over unchanged or appended logs, with any
window, counts the blocks wholly inside its window from their summaries, reads again only the blocks at its edges,
and analyses only the blocks no earlier request met; its cost grows with its hosts, not past a cache size.
"""

from __future__ import annotations

import logging
import re
import zlib
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from pathlib import Path

from providers.base import (
    Deadline,
    ProviderProcessingError,
    SourceFailure,
    TraceContext,
    shifted,
)
from providers.telemetry.cache import Bounded
from providers.telemetry.kernel.collect import Collector
from providers.telemetry.kernel.sources.blocks import (
    BLOCK_CACHE_BYTES,
    BlockCache,
    host_names,
)
from providers.telemetry.kernel.sources.facts import (
    CACHE_ENTRIES,
    FactCache,
    Proof,
)
from providers.telemetry.kernel.sources.reader import Reader
from providers.telemetry.kernel.sources.search import (
    ORDER_SLACK,
    UnknownFormat,
    check_deadline,
)

log = logging.getLogger("attribution_adapter.telemetry")

#: default base names of files that hold many hosts
DEFAULT_COMBINED = ("kern.log", "kernel.log", "syslog", "messages", "all.log")


# `<base>` with an optional rotation suffix: `.N`, `-YYYYMMDD` (logrotate dateext), then `.gz`.
_ROTATED = re.compile(r"^(?P<base>.+?)(?:\.(?P<num>[0-9]+)|-(?P<date>[0-9]{8}))?(?P<gz>\.gz)?$")


@dataclass(frozen=True)
class LogFile:
    path: str
    origin: str  # the path relative to the directory, as warnings and evidence name it
    gz: bool
    order: tuple[int, int]  # newest first when sorted ascending


@dataclass(frozen=True)
class LogName:
    """How the source reads a file name: its rotation group, whether it is gzip, its place in the rotation."""

    base: str
    gz: bool
    order: tuple[int, int]  # newest first when sorted ascending
    #: the host a top-level per-host file names (`<host>[.log]`); None for a combined file or inside a host folder
    host: str | None


@lru_cache(maxsize=4096)
def _rotation(name: str) -> tuple[str, bool, tuple[int, int]]:
    m = _ROTATED.match(name)
    assert m is not None  # the pattern matches every non-empty name
    if m.group("num"):
        order = (1, int(m.group("num")))
    elif m.group("date"):
        order = (2, -int(m.group("date")))
    else:
        order = (0, 0)
    return m.group("base"), bool(m.group("gz")), order


class FileSource:
    """Reads `<dir>/<host>/*`, `<dir>/<host>[.log]*` and combined files such as `<dir>/kern.log*`."""

    evidence_source = "syslog"

    def __init__(
        self,
        root: Path,
        combined: tuple[str, ...] = DEFAULT_COMBINED,
        cache_entries: int = CACHE_ENTRIES,
        by_stamps: bool = True,
        block_bytes: int = BLOCK_CACHE_BYTES,
    ) -> None:
        self.root = root
        self.combined = frozenset(combined)
        #: listings and per-file facts kept between requests (0 entries: nothing kept)
        self.cache = FactCache(cache_entries)
        #: summaries of per-host files' blocks kept between requests (0 bytes: nothing kept)
        self.blocks = BlockCache(block_bytes if cache_entries > 0 else 0)
        #: count blocks of plain noise lines from their timestamps (False: parse every line of the window)
        self.by_stamps = by_stamps
        #: host folder name -> (the listing it was worked out from, its files by rotation group): one a host of the
        #: largest scope, a third of the facts kept (a folder, a file and a rotated one a host)
        self._groups: Bounded[str, tuple[list[tuple[str, str, bool, bool]], list[tuple[str, list[LogFile]]]]] = (
            Bounded(self.cache.entries // 3)
        )
        #: the directory's listing as last planned and its entries' positions by lowered short name ("": combined)
        self._index: tuple[list[tuple[str, str, bool, bool]], dict[str, list[int]]] | None = None
        #: the directory's listing as last asked about and whether it holds a combined file (`holds_combined`)
        self._holds: tuple[list[tuple[str, str, bool, bool]], bool] | None = None

    # ------------------------------------------------------------ layout

    def plan(self, collector: Collector, proof: Proof | None = None) -> list[tuple[str | None, list[LogFile]]]:
        """The rotation groups to read: (forced node or None for combined files, files newest first). The folders
        listed are recorded in `proof`, if given."""
        groups: dict[tuple[str, str | None, str], list[LogFile]] = {}
        try:
            entries = self.cache.listing(str(self.root), strict=False, proof=proof)
        except OSError as exc:
            raise ProviderProcessingError(
                "the kernel log directory could not be read", kind=SourceFailure.UNREADABLE
            ) from exc
        for name, path, is_dir, is_file in self._candidates(entries, collector.names.short_names):
            if is_dir:
                node = collector.node_for(name)
                if node is None:
                    continue  # a host outside the scope: never opened
                try:
                    inner = self.cache.listing(path, strict=True, proof=proof)
                except OSError:
                    log.warning("kernel log folder %s could not be read; skipped", name)
                    collector.mark_unreadable(node)
                    continue
                for base, files in self._folder_groups(name, inner):
                    groups[(name, node, base)] = files
            elif is_file:
                base, gz, order = _rotation(name)
                if base in self.combined:
                    node = None
                else:
                    stem = base[: -len(".log")] if base.endswith(".log") else base
                    node = collector.node_for(stem)
                    if node is None:
                        continue
                groups.setdefault(("", node, base), []).append(LogFile(path, name, gz, order))
        return [
            (node, files if name else sorted(files, key=lambda f: f.order))
            for (name, node, _), files in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][2]))
        ]

    def holds_combined(self) -> bool:
        """Whether the log directory holds a combined file (one of many hosts): worked out once for each listing the
        cache hands out (kept while the directory's inode and modification time stay, once settled, and never for a
        directory holding a symbolic link: `FactCache.listing`). OSError when the directory cannot be listed."""
        entries = self.cache.listing(str(self.root), strict=False)
        known = self._holds
        if known is None or known[0] is not entries:
            found = any(is_file and self.read_name(name, top_level=True).host is None
                        for name, _, _, is_file in entries)  # fmt: skip
            known = self._holds = (entries, found)
        return known[1]

    def _candidates(
        self, entries: list[tuple[str, str, bool, bool]], shorts: frozenset[str]
    ) -> list[tuple[str, str, bool, bool]]:
        """The entries of the directory's listing that can be the scope's (a name naming a scope node holds its
        short name: identity.NodeNames) and the combined files, in the listing's order. A small part of a large
        directory is looked up by short name (the listing's index by short name worked out once per listing),
        instead of every entry being matched against the scope."""
        if len(shorts) * 8 > len(entries):
            return entries
        known = self._index
        if known is None or known[0] is not entries:
            index: dict[str, list[int]] = {}
            for i, (name, _, is_dir, is_file) in enumerate(entries):
                if is_dir:
                    key = name
                elif is_file:
                    base = _rotation(name)[0]
                    key = "" if base in self.combined else base[: -len(".log")] if base.endswith(".log") else base
                else:
                    continue
                index.setdefault(key.lower().rstrip(".").split(".", 1)[0] if key else "", []).append(i)
            known = self._index = (entries, index)
        index = known[1]
        found = [i for short in ("", *shorts) for i in index.get(short, ())] if shorts else index.get("", [])
        return [entries[i] for i in sorted(found)]

    def _folder_groups(self, name: str, listing: list[tuple[str, str, bool, bool]]) -> list[tuple[str, list[LogFile]]]:
        """A host folder's files by rotation group, each newest first; worked out once for each listing the cache
        hands out (a changed folder is listed again, as a new list)."""
        known = self._groups.peek(name)
        if known is not None and known[0] is listing:
            return known[1]
        groups: dict[str, list[LogFile]] = {}
        for sub_name, sub_path, _, is_file in listing:
            if is_file:
                base, gz, order = _rotation(sub_name)
                groups.setdefault(base, []).append(LogFile(sub_path, f"{name}/{sub_name}", gz, order))
        out = [(base, sorted(files, key=lambda f: f.order)) for base, files in groups.items()]
        self._groups.put(name, (listing, out))
        return out

    def read_name(self, name: str, top_level: bool) -> LogName:
        """How a file `name` found at the top of the directory (or inside a host folder) is read; for `check`."""
        base, gz, order = _rotation(name)
        host = None
        if top_level and base not in self.combined:
            host = base[: -len(".log")] if base.endswith(".log") else base
        return LogName(base, gz, order, host)

    # ------------------------------------------------------------ reading

    def scan(
        self, collector: Collector, deadline: Deadline, trace: TraceContext | None = None, proof: Proof | None = None
    ) -> None:
        """Read the window of every planned file into the collector; every folder listed and file read is recorded
        in `proof`, if given."""
        for node, files in self.plan(collector, proof):
            self._read_group(node, files, collector, deadline, proof)
        collector.finish()

    def _read_group(
        self, node: str | None, files: list[LogFile], collector: Collector, deadline: Deadline, proof: Proof | None
    ) -> None:
        lo = shifted(collector.window.start, -ORDER_SLACK)
        hi = shifted(collector.window.end, ORDER_SLACK)
        newer_first: datetime | None = None  # first line time of the next newer file of the rotation
        for log_file in files:
            check_deadline(deadline)
            # File times are not used: copies and checkouts reset them; the lines' own times decide.
            if newer_first is not None and newer_first < lo:
                break  # everything in this and older files precedes the newer file's first line
            reader = Reader(collector, node, log_file.origin, hi, deadline, proof)
            if not self.by_stamps:
                reader._shape = False
            elif node is None:  # a combined file: only lines that can be the scope's hosts' are parsed
                reader.hosts = host_names(collector.names.short_names)
            if node is None:
                reader.since = lo
            try:
                if log_file.gz:
                    newer_first = reader.read_gz(log_file.path, lo, self.cache)
                else:
                    newer_first = reader.read_plain(log_file.path, lo, self.cache, self.blocks)
            except UnknownFormat as exc:
                log.warning(
                    "kernel log file %s has no line in a known format (first unreadable line %d); skipped",
                    reader.origin,
                    exc.line_no,
                )
                collector.mark_unreadable(node)
                newer_first = None
            except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
                # One broken, corrupt or vanished file breaks only itself: the other files' lines stand.
                log.warning("kernel log file %s could not be read (%s); skipped", reader.origin, type(exc).__name__)
                collector.mark_unreadable(node)
                newer_first = None
            finally:
                reader.close()


