"""The journal source's window read over many hosts' journal files, one file per host as systemd-journal-remote
writes them with --split-mode=host, by each journal reader installed.

    python bench/journal_read.py [--hosts 4096] [--dir DIR] [--scope 8] [--drop-pages]

The files are made once (kept in DIR, by default a folder under the system's temporary directory) by
systemd-journal-remote from Journal Export Format text: every host logs a kernel line every five minutes for a day
and a line of sshd every seven; eight hosts log an Xid 79 just before the failure time. Each file is written with
8 MiB allocated; `fallocate --dig-holes` gives the zero blocks back, but a file's data hash table (3.6 MiB, its
items spread over it) keeps most of its blocks: 4,096 files take 9.0 GiB of disk (measured on ext4; made in 4 min 20 s
on 2 cores).
`--use N` reads only the first N of the files (N files whose pages fit in the page cache, for example). Prints, for
each reader: the time to read the fast window of a scope of `--scope` hosts and of every host (twice:
the second pass finds the files' pages in the page cache, where memory allows), the entries read and the hosts seen.
systemd-python is measured where it is installed (it builds against libsystemd-dev; it is not in the requirements).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.telemetry.journals import JOURNAL_REMOTE, export_entry  # noqa: E402

FAILURE = datetime(2026, 9, 9, 12, 0, tzinfo=UTC)
DAY_START = FAILURE - timedelta(hours=20)
LOOKBACK = timedelta(seconds=900)
GRACE = timedelta(seconds=120)


def host_name(i: int) -> str:
    return f"gpu-node-{i:05d}"


def host_export(i: int) -> bytes:
    host = host_name(i)
    entries = []
    for k in range(24 * 12):
        at = DAY_START + timedelta(minutes=5 * k, microseconds=1000 * i)
        entries.append((at, {"_HOSTNAME": host, "_TRANSPORT": "kernel", "SYSLOG_IDENTIFIER": "kernel",
                             "PRIORITY": "6", "_SOURCE_MONOTONIC_TIMESTAMP": str(600_000_000_000 + k * 300_000_000),
                             "MESSAGE": f"mlx5_core 0000:0c:00.0: mlx5_fw_tracer_handle_traces:751: FW tracer {k}"}))
    for k in range(24 * 60 // 7):
        at = DAY_START + timedelta(minutes=7 * k, seconds=3)
        entries.append((at, {"_HOSTNAME": host, "_TRANSPORT": "syslog", "SYSLOG_IDENTIFIER": "sshd",
                             "PRIORITY": "6", "MESSAGE": f"Accepted publickey for ops from 10.0.0.{k % 250} port 22"}))
    if i < 8:
        entries.append((FAILURE - timedelta(seconds=108), {
            "_HOSTNAME": host, "_TRANSPORT": "kernel", "SYSLOG_IDENTIFIER": "kernel", "PRIORITY": "3",
            "_SOURCE_MONOTONIC_TIMESTAMP": "679160239013",
            "MESSAGE": "NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."}))
    entries.sort(key=lambda e: e[0])
    return b"".join(export_entry(at, fields) for at, fields in entries)
# fmt: skip


def make_one(folder: Path, i: int) -> None:
    path = folder / f"remote-{host_name(i)}.journal"
    if path.exists():
        return
    partial = folder / f".{path.name}.partial.journal"
    partial.unlink(missing_ok=True)
    subprocess.run([JOURNAL_REMOTE, f"--output={partial}", "-"], input=host_export(i), check=True,
                   capture_output=True, timeout=60)  # fmt: skip
    subprocess.run(["fallocate", "--dig-holes", str(partial)], check=True, timeout=60)
    partial.rename(path)


def make_files(folder: Path, hosts: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(lambda i: make_one(folder, i), range(hosts)))


def drop_pages(files: list[str]) -> None:
    """Ask the kernel to drop the files' pages from the page cache (POSIX_FADV_DONTNEED: clean pages go at once)."""
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=4096)
    parser.add_argument("--scope", type=int, default=8)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "adapter-bench-journals")
    parser.add_argument("--make-only", action="store_true")
    parser.add_argument("--drop-pages", action="store_true",
                        help="drop the files' pages from the page cache before each first pass (their first read)")
    parser.add_argument("--use", type=int, help="read only the first USE files (symbolic links in a folder beside)")
    args = parser.parse_args()
    folder = args.dir / f"hosts-{args.hosts}"
    started = time.perf_counter()
    make_files(folder, args.hosts)
    print(f"{args.hosts} host files in {folder}: made or found in {time.perf_counter() - started:.1f} s, "
          f"{sum(p.stat().st_blocks for p in folder.iterdir()) * 512 / 2**20:.0f} MiB on disk")  # fmt: skip
    if args.make_only:
        return
    from bench._journal_readers import READERS  # noqa: PLC0415

    lo, hi = FAILURE - LOOKBACK, FAILURE + GRACE
    if args.use is not None and args.use < args.hosts:
        subset = args.dir / f"hosts-{args.hosts}-first-{args.use}"
        subset.mkdir(exist_ok=True)
        for i in range(args.use):
            link = subset / f"remote-{host_name(i)}.journal"
            if not link.exists():
                link.symlink_to(folder / link.name)
        folder = subset
    files = sorted(str(p) for p in folder.glob("*.journal"))
    for name, read in READERS.items():
        missing = False
        for scope_size in (args.scope, len(files)):
            if missing:
                break
            scope = [host_name(i) for i in range(scope_size)]
            for attempt in ("first pass", "second pass"):  # the second with the files' pages in the page cache
                if args.drop_pages and attempt == "first pass":
                    drop_pages(files)
                started = time.perf_counter()
                try:
                    entries, hosts = read(files, scope, lo, hi)
                except ImportError as exc:
                    print(f"{name}: not installed ({exc})")
                    missing = True
                    break
                took = time.perf_counter() - started
                print(f"{name}: scope {scope_size:5d} of {len(files)} files, {attempt}: {took * 1000:8.1f} ms, "
                      f"{entries} entries read, {hosts} hosts seen")  # fmt: skip
    sys.stdout.flush()


if __name__ == "__main__":
    main()
