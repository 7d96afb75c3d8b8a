"""Benchmark: a node's job-log parse with its lines as collectors write them, against `grep -c` over the same bytes.

Over bench/fleet_jobs.py's case a tree (`--tree DIR`), `--nodes` nodes' last 48 KiB (whole lines) are rewritten in
each shape a collector writes a line in, in memory:

- bare: as the job printed it (a node's file);
- cri: behind the container runtime's time and stream (`2026-12-07T10:00:07.000000007Z stdout F `), as Kubernetes
  keeps a container's log;
- loki: behind the time the Loki source puts in front of each line (`2026-12-07T10:00:07.000007Z `).

Each shape's tails are parsed (`reader_pair.parse_all`: `prefilter.feed_tail` into a `NodeParser`, then
`result()`), and the same bytes, written to a temporary file, are searched by `grep -c -F 'NCCL work'`; the shapes
take turns `--rounds` times and each figure is the median of its rounds: microseconds a node, and the ratio to grep
over the same bytes.

    python bench/reader_shapes.py --tree /var/tmp/fleet [--nodes 512] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.reader_pair import parse_all, tails  # noqa: E402 - after the path tweak that lets the script run from anywhere
from providers.telemetry.collection import collector_paused  # noqa: E402

TAIL = 48 * 1024

SHAPES: dict[str, Callable[[int], bytes]] = {
    "bare": lambda i: b"",
    "cri": lambda i: b"2026-12-07T10:%02d:%02d.%09dZ stdout F " % (i // 60 % 60, i % 60, i),
    "loki": lambda i: b"2026-12-07T10:%02d:%02d.%06dZ " % (i // 60 % 60, i % 60, i % 1_000_000),
}


def shaped_tails(tree: Path, nodes: int, shape: Callable[[int], bytes]) -> list[tuple[str, bytes]]:
    """Each node's last TAIL bytes (whole lines, `reader_pair.tails`), every line behind `shape(its index)`."""
    return [
        (name, b"".join(shape(i) + line + b"\n" for i, line in enumerate(data.split(b"\n")[:-1])))
        for name, data in tails(tree, nodes, TAIL)
    ]


def grep(path: str) -> float:
    started = time.perf_counter()
    subprocess.run(["grep", "-c", "-F", "NCCL work", path], capture_output=True, check=False, timeout=60)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", type=Path, required=True, help="bench/fleet_jobs.py's --tree (case a written)")
    parser.add_argument("--nodes", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    shaped = {name: shaped_tails(args.tree, args.nodes, shape) for name, shape in SHAPES.items()}
    parse_times: dict[str, list[float]] = {name: [] for name in SHAPES}
    grep_times: dict[str, list[float]] = {name: [] for name in SHAPES}
    with tempfile.TemporaryDirectory(prefix="reader-shapes-") as folder:
        files = {}
        for name, items in shaped.items():
            files[name] = str(Path(folder) / f"{name}.log")
            Path(files[name]).write_bytes(b"".join(data for _, data in items))
        for _ in range(args.rounds):
            for name, items in shaped.items():
                with collector_paused():  # as the provider parses (providers/telemetry/collection.py)
                    parse_times[name].append(parse_all(items))
                grep_times[name].append(grep(files[name]))
    for name, items in shaped.items():
        size = sum(len(data) for _, data in items)
        parsed, searched = statistics.median(parse_times[name]), statistics.median(grep_times[name])
        print(
            f"{name}: {args.nodes} nodes, {size / 2**20:.1f} MiB: the parse {parsed / args.nodes * 1e6:.0f} us a node "
            f"({parsed * 1000:.0f} ms), grep -c {searched * 1000:.0f} ms, ratio {parsed / searched:.1f}x "
            f"(medians of {args.rounds} rounds in turns)"
        )


if __name__ == "__main__":
    main()
