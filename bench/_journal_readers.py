"""Journal readers compared by bench/journal_read.py: each reads the entries of the scope's hosts from `lo` to the
first entry past `hi` of every file, by seeking the file's time index, and returns (entries read, hosts seen)."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from providers.base import Deadline
from providers.telemetry.kernel.collect import Collector
from providers.telemetry.kernel.sources import journal as journal_module
from providers.telemetry.kernel.sources.journal import JournalSource
from providers.telemetry.window import Window
from tests.telemetry.journals import usec


def journal_source(files: list[str], scope: list[str], lo: datetime, hi: datetime) -> tuple[int, int]:
    """The journal source itself (cysystemd, a reader per file), into a Collector as a request reads: the entries
    it decodes are counted."""
    decoded = [0]
    real_entry_of = journal_module.entry_of

    def counting(realtime: int, data: dict) -> journal_module.Entry:
        decoded[0] += 1
        return real_entry_of(realtime, data)

    journal_module.entry_of = counting
    try:
        collector = Collector(scope, Window(lo, hi))
        JournalSource(Path(files[0]).parent).scan(collector, Deadline.after_ms(600_000), None)
        collector.finish()
    finally:
        journal_module.entry_of = real_entry_of
    return decoded[0], len(collector.with_telemetry())


def cysystemd_per_file(files: list[str], scope: list[str], lo: datetime, hi: datetime) -> tuple[int, int]:
    """cysystemd (a wheel bundling libsystemd): one reader per file, every entry's host read (it has no way to ask
    a file which hosts it holds), the scope's kept."""
    from cysystemd.reader import JournalReader

    wanted = set(scope)
    lo_us, hi_us = usec(lo), usec(hi)
    entries, hosts = 0, set()
    for path in files:
        reader = JournalReader()
        reader.open_files(os.path.realpath(path))  # cysystemd dies on a symbolic link (see sources/journal.py)
        reader.seek_realtime_usec(lo_us)
        for entry in reader:
            entries += 1
            host = entry.data.get("_HOSTNAME")
            if host in wanted:
                hosts.add(host)
            if entry.get_realtime_usec() > hi_us:
                break
    return entries, len(hosts)


def systemd_python_per_file(files: list[str], scope: list[str], lo: datetime, hi: datetime) -> tuple[int, int]:
    """systemd-python (built against libsystemd-dev): one reader per file, the file's hosts asked from its field
    index, matches on the scope's ones."""
    from systemd import journal

    wanted = set(scope)
    lo_us, hi_us = usec(lo), usec(hi)
    entries, hosts = 0, set()
    for path in files:
        reader = journal.Reader(files=[os.path.realpath(path)], converters={"__REALTIME_TIMESTAMP": int})
        mine = [h for h in reader.query_unique("_HOSTNAME") if (h.decode() if isinstance(h, bytes) else h) in wanted]
        if not mine:
            reader.close()
            continue
        for h in mine:
            reader.add_match(_HOSTNAME=h)
        reader.seek_realtime(lo_us / 1e6)
        while True:
            entry = reader.get_next()
            if not entry:
                break
            entries += 1
            hosts.add(entry["_HOSTNAME"])
            if entry["__REALTIME_TIMESTAMP"] > hi_us:
                break
        reader.close()
    return entries, len(hosts)


READERS = {
    "the journal source (cysystemd, a reader per file)": journal_source,
    "cysystemd, a reader per file": cysystemd_per_file,
    "systemd-python, a reader per file with host matches": systemd_python_per_file,
}
