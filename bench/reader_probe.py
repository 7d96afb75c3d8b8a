"""Benchmark: where the job-log reader's time goes, against the C tools and a probe of the cheapest design, in turns.

Over bench/fleet_jobs.py's case a tree (`--tree DIR`, written by that benchmark: 4,096 nodes' 8 MiB job logs), each
node's tail of the bytes the reader takes (the request's bound shared out: 56 KiB), four readers measured in turn,
`--rounds` times, each's median printed with the load average:

1. `tail -q -c <share> <every node's log> | grep -c -F -e 'NCCL work'`: the C tools over the same bytes;
2. the probe: a loop that `pread`s each tail and runs one compiled pattern (Python's `re`, its literal prefix) for the
   progress line's `last completed NCCL work: N`, converting only the matches to numbers: it reads one line shape,
   knows nothing of the signal table, of where a rank wrote, of collector prefixes or of blocks;
3. the exact reader's byte-level part alone: the same reads, the search for every marker of the signal table
   (Hyperscan, `prefilter._SEARCH`: each match with its marker, the candidate lines found), the lines before the
   first candidate placed by the compiled gap pass (`_gaps.place`: the count of lines, each rank's last line), nothing
   parsed;
4. the same search by RE2 (one pattern of every candidate word, as the reader searched before it used Hyperscan),
   for the engines' comparison;
5. the reader itself (`scan_job_logs`, no deadline): (3), plus every candidate line parsed into records.

    python bench/reader_probe.py --tree /var/tmp/fleet [--rounds 3] [--nodes 4096]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import re2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.fleet import host  # noqa: E402 - after the path tweak that lets the script run from anywhere
from providers.base import Deadline  # noqa: E402
from providers.telemetry.collection import collector_paused  # noqa: E402
from providers.telemetry.joblog import ReadLimits, scan_job_logs  # noqa: E402
from providers.telemetry.joblog._gaps import place  # noqa: E402
from providers.telemetry.joblog.files import shared_bytes  # noqa: E402
from providers.telemetry.joblog.prefilter import _RANK_REACH, _SEARCH, candidate_words  # noqa: E402

PROGRESS = re.compile(rb"last completed NCCL work: (\d+)")


def _tails(paths: list[str], share: int) -> list[tuple[int, int]]:
    """(fd, offset) of each tail; the caller closes the descriptors."""
    out = []
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        out.append((fd, max(0, os.fstat(fd).st_size - share)))
    return out


def probe(paths: list[str], share: int) -> int:
    """The issue's probe: one pattern over each tail, only its matches turned into numbers."""
    found = 0
    for fd, at in _tails(paths, share):
        data = os.pread(fd, share, at)
        os.close(fd)
        found += sum(1 for m in PROGRESS.finditer(data) if int(m.group(1)) >= 0)
    return found


def byte_level(paths: list[str], share: int) -> int:
    """The exact reader's byte-level work: the table's search, the ranks placed, the lines counted."""
    runs = 0
    for fd, at in _tails(paths, share):
        data = os.pread(fd, share, at)
        os.close(fd)
        data = data[data.find(b"\n") + 1 :]
        candidates = _SEARCH.lines(data)
        runs += len(candidates)
        first = candidates[0][0] if candidates else len(data)
        if first:
            place(data, 0, first, _RANK_REACH)
    return runs


def re2_search(paths: list[str], share: int) -> int:
    """The same search by RE2: one pattern of every candidate word, each match run to the end of its line."""
    word = b"(?:" + b"|".join(re2.escape(w.encode()) for w in candidate_words()) + b")"
    search = re2.compile(word + b"[^\n]*")
    runs = 0
    for fd, at in _tails(paths, share):
        data = os.pread(fd, share, at)
        os.close(fd)
        runs += sum(1 for _ in search.finditer(data))
    return runs


def reader(jobs: Path, names: list[str]) -> int:
    with collector_paused():
        scan = scan_job_logs(jobs, "fleet-a", 0, names, Deadline.after_ms(600_000), limits=ReadLimits())
    return sum(len(log.progress) for log in scan.logs.values())


def c_tools(paths: list[str], share: int) -> int:
    tail = subprocess.Popen(["tail", "-q", "-c", str(share), *paths], stdout=subprocess.PIPE)
    out = subprocess.run(["grep", "-c", "-F", "-e", "NCCL work"], stdin=tail.stdout, capture_output=True, check=False)
    tail.wait()
    return int(out.stdout or 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", type=Path, required=True, help="bench/fleet_jobs.py's --tree")
    parser.add_argument("--nodes", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    jobs = args.tree / "jobs"
    names = [host(n) for n in range(args.nodes)]
    paths = [str(jobs / "fleet-a" / "0" / f"{name}.log") for name in names]
    share = shared_bytes(len(names), ReadLimits()) // len(names)
    runs: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    steps = {
        "tail -c | grep -c (C tools)": lambda: c_tools(paths, share),
        "probe: pread + one re pattern, matches to numbers": lambda: probe(paths, share),
        "exact reader's byte level: Hyperscan's search, ranks placed, lines counted": lambda: byte_level(paths, share),
        "the same search by RE2 (one pattern)": lambda: re2_search(paths, share),
        "the reader (scan_job_logs)": lambda: reader(jobs, names),
    }
    print(f"{len(names)} nodes, {share} bytes a node ({share * len(names) / 2**20:.0f} MiB), load {os.getloadavg()}")
    for _ in range(args.rounds):
        for name, step in steps.items():
            started = time.perf_counter()
            counts[name] = step()
            runs.setdefault(name, []).append(time.perf_counter() - started)
    reference = statistics.median(runs["tail -c | grep -c (C tools)"])
    for name, times in runs.items():
        median = statistics.median(times)
        print(f"{name}: {median * 1000:.0f} ms ({median / reference:.1f}x the C tools; rounds "
              f"{[round(t * 1000) for t in times]} ms; counted {counts[name]})")
    print(f"load {os.getloadavg()}")


if __name__ == "__main__":
    main()
