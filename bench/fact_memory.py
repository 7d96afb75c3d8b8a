"""Benchmark: the memory the `files` kernel source's kept file facts may take (facts.py `FactCache`), by a walk of the
objects one entry holds (`sys.getsizeof` of each object reached once, the shared time zone and TimeContext left out).

Printed: a file's entry at its bounds (CACHE_SEARCHES searches, CACHE_POINTS lines, its first line's probe), a host
folder's entry (a listing of two files), and what CACHE_ENTRIES of them take: every entry a file (the bound), and a
folder with two files for each of a third of them (the largest scope, 16,384 hosts, with a rotated file each).

    python bench/fact_memory.py
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from providers.telemetry.kernel.parse import TimeContext  # noqa: E402 - after the path tweak
from providers.telemetry.kernel.sources.facts import (  # noqa: E402
    CACHE_ENTRIES,
    CACHE_POINTS,
    CACHE_SEARCHES,
    FileFacts,
)

FOLDER = "/var/log/hosts/worker-16383"


def size(obj: object, seen: set[int]) -> int:
    """The bytes of `obj` and of every object it reaches not in `seen` (each counted once)."""
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    total = sys.getsizeof(obj)
    if isinstance(obj, dict):
        total += sum(size(k, seen) + size(v, seen) for k, v in obj.items())
    elif isinstance(obj, list | tuple | set | frozenset):
        total += sum(size(item, seen) for item in obj)
    elif hasattr(obj, "__slots__"):
        total += sum(size(getattr(obj, name), seen) for name in obj.__slots__ if hasattr(obj, name))
    elif hasattr(obj, "__dict__"):
        total += size(vars(obj), seen)
    return total


def file_entry(ctx: TimeContext) -> object:
    """A file's entry as FactCache keeps it, at its bounds: ((kind, path), (signature, facts))."""
    path = f"{FOLDER}/kern.log"
    facts = FileFacts(lineage=123456, size=10**9)
    first = datetime(2026, 9, 9, tzinfo=UTC)
    facts.probes[(0, 10**9)] = (0, first, None)
    for i in range(CACHE_SEARCHES):
        facts.searches[(first + timedelta(hours=12, seconds=3.7 * i), ctx)] = 5 * 10**8 + i * 16384
    for i in range(CACHE_POINTS):
        facts.points[5 * 10**8 + i * 4000] = first + timedelta(hours=12, seconds=i)
    return ("file", path), ((2049, 10**7, 10**9, 1_789_000_000_000_000_000), facts)


def folder_entry() -> object:
    names = ("kern.log", "kern.log.1")
    listing = [(name, f"{FOLDER}/{name}", False, True) for name in names]
    return ("dir", FOLDER), ((2049, 10**7, 1_789_000_000_000_000_000, 0), listing)


def main() -> None:
    ctx = TimeContext(UTC, datetime(2026, 9, 9, tzinfo=UTC))
    shared = {id(ctx), id(UTC)}
    per_file = size(file_entry(ctx), set(shared)) + 100  # 100: the entry's slot in the cache's ordered dict
    per_folder = size(folder_entry(), set(shared)) + 100
    print(f"a file's entry at its bounds ({CACHE_SEARCHES} searches, {CACHE_POINTS} lines): {per_file} bytes")
    print(f"a host folder's entry (two files listed): {per_folder} bytes")
    print(f"{CACHE_ENTRIES} entries, every one a file: {CACHE_ENTRIES * per_file / 2**20:.0f} MiB")
    hosts = CACHE_ENTRIES // 3
    mixed = hosts * (per_folder + 2 * per_file)
    print(f"{hosts} hosts, a folder and two files each: {mixed / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
