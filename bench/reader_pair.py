"""Benchmark: a node's job-log parse alone, and beside a second process doing the same or a busy loop.

A worker and its scan process read a request's job logs together (providers/telemetry/job_log_share.py); what the
pair reads in a given time depends on how much each slows the other on the machine's cores. Over bench/fleet_jobs.py's
case a tree (`--tree DIR`), `--nodes` nodes' last 64 KiB (whole lines, as the reader takes them) are parsed
(`prefilter.feed_tail` into a `NodeParser`, then `result()`), in this process, for `--seconds` each way:

1. alone;
2. while a second process parses the same tails in a loop;
3. while a second process runs a loop of Python additions (it holds a core, touches little memory).

The three take turns, `--rounds` times (a shared machine's speed moves within seconds: only turns compare); each way's
median over its rounds is printed, and its ratio to alone. The second process is stopped by its PID when its turn
ends (and bounded by time in any case).

    python bench/reader_pair.py --tree /var/tmp/fleet [--nodes 512] [--seconds 3] [--rounds 4]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.fleet import host  # noqa: E402 - after the path tweak that lets the script run from anywhere
from providers.telemetry.collection import collector_paused  # noqa: E402
from providers.telemetry.joblog.files import _whole_lines  # noqa: E402
from providers.telemetry.joblog.lines import NodeParser  # noqa: E402
from providers.telemetry.joblog.nodes import exact_resolver  # noqa: E402
from providers.telemetry.joblog.prefilter import feed_tail  # noqa: E402

TAIL = 64 * 1024


def tails(tree: Path, nodes: int, size: int = TAIL) -> list[tuple[str, bytes]]:
    """Case a's first `nodes` nodes, each with the whole lines of its log's last `size` bytes."""
    folder = tree / "jobs" / "fleet-a" / "0"
    out = []
    for n in range(nodes):
        with open(folder / f"{host(n)}.log", "rb") as f:
            f.seek(-size, os.SEEK_END)
            out.append((host(n), _whole_lines(f.read(), True)))
    return out


def parse_all(items: list[tuple[str, bytes]]) -> float:
    """Seconds to parse every tail once."""
    resolve = exact_resolver([name for name, _ in items])
    t0 = time.perf_counter()
    for name, data in items:
        parser = NodeParser(name, resolve)
        feed_tail(parser, data)
        parser.result()
    return time.perf_counter() - t0


def measured(items: list[tuple[str, bytes]], seconds: float) -> float:
    """The median microseconds a node over the passes that fit in `seconds` (at least three)."""
    passes = []
    end = time.monotonic() + seconds
    while len(passes) < 3 or time.monotonic() < end:
        passes.append(parse_all(items) / len(items) * 1e6)
    return statistics.median(passes)


def neighbour(kind: str, tree: Path, nodes: int, seconds: float) -> None:
    """The second process: parse the same tails, or add numbers, until `seconds` have passed."""
    items = tails(tree, nodes) if kind == "parse" else []
    end = time.monotonic() + seconds
    with collector_paused():
        while time.monotonic() < end:
            if items:
                parse_all(items)
            else:
                total = 0
                for i in range(100_000):
                    total += i


def beside(kind: str, args: argparse.Namespace, items: list[tuple[str, bytes]]) -> float:
    child = subprocess.Popen([sys.executable, __file__, "--neighbour", kind, "--tree", str(args.tree), "--nodes",
                              str(args.nodes), "--seconds", str(args.seconds + 30)])  # fmt: skip
    try:
        time.sleep(1.0)  # its tails read and its loop started
        return measured(items, args.seconds)
    finally:
        os.kill(child.pid, signal.SIGTERM)
        child.wait(timeout=30)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", type=Path, required=True, help="bench/fleet_jobs.py's --tree (case a written)")
    parser.add_argument("--nodes", type=int, default=512)
    parser.add_argument("--seconds", type=float, default=3.0, help="each turn's measuring time")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--neighbour", choices=("parse", "spin"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.neighbour:
        neighbour(args.neighbour, args.tree, args.nodes, args.seconds)
        return
    print(f"load average {os.getloadavg()}, {os.cpu_count()} cores", flush=True)
    items = tails(args.tree, args.nodes)
    ways: dict[str, list[float]] = {"alone": [], "parse": [], "spin": []}
    with collector_paused():  # as the provider parses (providers/telemetry/collection.py)
        parse_all(items)  # the reader's patterns compiled and cached
        for _ in range(args.rounds):
            ways["alone"].append(measured(items, args.seconds))
            ways["parse"].append(beside("parse", args, items))
            ways["spin"].append(beside("spin", args, items))
    alone = statistics.median(ways["alone"])
    said = {"alone": "alone", "parse": "beside a second process parsing the same tails",
            "spin": "beside a second process adding numbers"}  # fmt: skip
    for way, values in ways.items():
        median = statistics.median(values)
        print(f"{said[way]}: {median:.0f} us a node ({median / alone:.2f}x; rounds {[round(v) for v in values]}; "
              f"{args.nodes} nodes' last 64 KiB)", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
