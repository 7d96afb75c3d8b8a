"""Benchmark: the memory the `files` kernel source's kept file facts may take (facts.py `FactCache`), by a walk of the
objects one entry holds (`sys.getsizeof` of each object reached once, the shared time zone and TimeContext left out).

Printed: a file's entry at its bounds (CACHE_SEARCHES searches, CACHE_POINTS lines, CACHE_SPANS blocks, its first
line's probe), a host folder's entry (a listing of two files), and what CACHE_ENTRIES of them take: every entry a
file (the bound), and a folder with two files for each of a third of them (the largest scope, 16,384 hosts, with a
rotated file each).

With `--tree DIR` (a kernel tree of bench/fleet.py's shape, such as bench/fleet_jobs.py's case c under
`--tree`), the provider also reads `--requests` windows of its hosts, each its failure time 3.7 s after the one
before, and the walk measures what the source then keeps: its file facts and its folders' groups of files.

    python bench/fact_memory.py [--tree /var/tmp/fleet/kernel-16384x256 --hosts 16384 --requests 4]
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from providers.telemetry.kernel.parse import TimeContext  # noqa: E402 - after the path tweak
from providers.telemetry.kernel.sources.facts import (  # noqa: E402
    CACHE_ENTRIES,
    CACHE_POINTS,
    CACHE_SEARCHES,
    CACHE_SPANS,
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
    for i in range(CACHE_SPANS):  # blocks of 16 KiB, their first and last stamps' instants in microseconds
        start = 5 * 10**8 + i * 16384
        at = 1_789_000_000_000_000 + i * 10**8
        facts.spans.extend((start, start + 16384, at, at + 99))
    return ("file", path), ((2049, 10**7, 10**9, 1_789_000_000_000_000_000), facts)


def folder_entry() -> object:
    names = ("kern.log", "kern.log.1")
    listing = [(name, f"{FOLDER}/{name}", False, True) for name in names]
    return ("dir", FOLDER), ((2049, 10**7, 1_789_000_000_000_000_000, 0), listing)


def kept_after_requests(tree: Path, hosts: int, requests: int) -> tuple[int, int, int]:
    """(bytes of the file facts, bytes of the folders' groups, entries) the files source keeps after `requests`
    fast windows over `hosts` hosts of `tree`."""
    from bench.fleet import FIRST_FAILURE, STEP, host
    from providers.base import AttributionRequest, Deadline, FailureContext, Phase, Scope, WorkloadContext
    from providers.telemetry import TelemetryProvider
    from providers.telemetry.collection import collector_paused
    from providers.telemetry.window import fast_window

    provider = TelemetryProvider.from_options({"ATTRIBUTION_KERNEL_LOG_SOURCE": "files",
                                               "ATTRIBUTION_KERNEL_LOG_DIR": str(tree)})  # fmt: skip
    names = tuple(host(n) for n in range(hosts))
    for k in range(requests):
        request = AttributionRequest(
            workload_id="fleet", scope=Scope(nodes=names, ranks=()),
            failure_context=FailureContext(detected_at=FIRST_FAILURE + k * STEP, detection_signal="application_error"),
            timeout_ms=600_000, workload_context=WorkloadContext(workflow_id="fleet", attempt_index=0),
            phase=Phase.FAST,
        )  # fmt: skip
        window = fast_window(request, provider.settings.lookback, provider.settings.grace)
        with collector_paused():
            provider.collect(names, window, Deadline.after_ms(600_000), None)  # type: ignore[arg-type]
    source = provider.settings.source
    seen: set[int] = set()
    facts = size(source.cache._items._items, seen)  # type: ignore[attr-defined]
    groups = size(source._groups._items, seen)  # type: ignore[attr-defined]
    return facts, groups, len(source.cache._items)  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, help="a kernel tree to read (bench/fleet.py's shape)")
    parser.add_argument("--hosts", type=int, default=16384)
    parser.add_argument("--requests", type=int, default=4)
    args = parser.parse_args()
    ctx = TimeContext(UTC, datetime(2026, 9, 9, tzinfo=UTC))
    shared = {id(ctx), id(UTC)}
    per_file = size(file_entry(ctx), set(shared)) + 100  # 100: the entry's slot in the cache's ordered dict
    per_folder = size(folder_entry(), set(shared)) + 100
    bounds = f"{CACHE_SEARCHES} searches, {CACHE_POINTS} lines, {CACHE_SPANS} blocks"
    print(f"a file's entry at its bounds ({bounds}): {per_file} bytes")
    print(f"a host folder's entry (two files listed): {per_folder} bytes")
    print(f"{CACHE_ENTRIES} entries, every one a file: {CACHE_ENTRIES * per_file / 2**20:.0f} MiB")
    hosts = CACHE_ENTRIES // 3
    mixed = hosts * (per_folder + 2 * per_file)
    print(f"{hosts} hosts, a folder and two files each: {mixed / 2**20:.0f} MiB")
    if args.tree is not None:
        facts, groups, entries = kept_after_requests(args.tree, args.hosts, args.requests)
        print(f"kept after {args.requests} requests over {args.hosts} hosts of {args.tree}: {entries} entries, "
              f"{facts / 2**20:.1f} MiB of file facts and {groups / 2**20:.1f} MiB of folders' groups")


if __name__ == "__main__":
    main()
