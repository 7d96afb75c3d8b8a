"""Benchmark: read, parse and conclude on the job logs of a large job (default 1,024 nodes x 64 MiB per file).

Each node's file is `<tmp>/bench-job/0/node-NNNN.log`, 64 MiB long: a sparse head (a hole, which costs no disk) and
a tail of real text -- eight ranks' training lines, NCCL INFO lines, then the failure: every rank's NCCL watchdog
timeout and progress line, torchelastic's summary (SIGABRT) -- except one node whose ranks fell silent. The real
text is always longer than what the reader takes of a file, so every byte read is text. The read, parse and rules
run in a child process (the garbage collector paused, as the provider runs them), which reports its wall and CPU
time, bytes read and peak RSS. The folder is removed afterwards.

    python bench/joblog_scan.py [--nodes 1024] [--file-mib 64] [--tail-mib 1] [--silent-node 537]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from providers.base import Deadline  # noqa: E402 - after the path tweak that lets the script run from anywhere
from providers.telemetry.collection import collector_paused  # noqa: E402
from providers.telemetry.joblog import (  # noqa: E402
    MAX_NODE_BYTES,
    MAX_REQUEST_BYTES,
    conclude,
    scan_job_logs,
)
from providers.telemetry.joblog.files import ReadLimits, shared_bytes  # noqa: E402

RANKS_PER_NODE = 8
WORKLOAD = "bench-job"
MIB = 1024 * 1024


def node_name(i: int) -> str:
    return f"node-{i:04d}"


def _training_block(node: int, step: int) -> str:
    lines = []
    for local in range(RANKS_PER_NODE):
        rank = node * RANKS_PER_NODE + local
        lines.append(
            f"[rank{rank}]: {{'loss': 2.{(step * 7 + rank) % 1000:03d}, 'grad_norm': 0.{step % 97:02d}, "
            f"'learning_rate': 1.2e-05, 'epoch': 0.{step % 89:02d}, 'step': {step}}}"
        )
    lines.append(f"{node_name(node)}:{4100 + node}:{4200 + node} [0] NCCL INFO comm 0x5568d8a0 rank "
                 f"{node * RANKS_PER_NODE} nranks {RANKS_PER_NODE * 1024} cudaDev 0 busId 18000 - Init COMPLETE")
    return "\n".join(lines) + "\n"


def _failure(node: int) -> str:
    """Every rank's watchdog timeout and progress line (the same numbers everywhere), then torchelastic's summary."""
    lines = []
    for local in range(RANKS_PER_NODE):
        rank = node * RANKS_PER_NODE + local
        lines.append(
            f"[rank{rank}]:[E321 02:07:08.414640780 ProcessGroupNCCL.cpp:607] [Rank {rank}] Watchdog caught "
            "collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, "
            "NumelOut=466119168, Timeout(ms)=600000) ran for 600067 milliseconds before timing out."
        )
        lines.append(
            f"[rank{rank}]:[E321 02:07:08.465224069 ProcessGroupNCCL.cpp:1664] [PG 0 Rank {rank}] Exception "
            "(either an error or timeout) detected by watchdog at work: 1580, last enqueued NCCL work: 1582, last "
            "completed NCCL work: 1579."
        )
    first = node * RANKS_PER_NODE
    lines += [
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "============================================================",
        "train.py FAILED",
        "------------------------------------------------------------",
        "Failures:",
        "  <NO_OTHER_FAILURES>",
        "------------------------------------------------------------",
        "Root Cause (first observed failure):",
        "[0]:",
        "  time      : 2024-03-21_02:07:09",
        f"  host      : {node_name(node)}",
        f"  rank      : {first} (local_rank: 0)",
        f"  exitcode  : -6 (pid: {9000 + node})",
        "  error_file: <N/A>",
        f"  traceback : Signal 6 (SIGABRT) received by PID {9000 + node}",
        "============================================================",
    ]
    return "\n".join(lines) + "\n"


def generate(root: Path, nodes: int, file_bytes: int, tail_bytes: int, silent: int) -> int:
    """Write every node's file; returns the bytes of real text written."""
    folder = root / WORKLOAD / "0"
    folder.mkdir(parents=True)
    written = 0
    for n in range(nodes):
        failure = "" if n == silent else _failure(n)
        block = _training_block(n, 0)
        body_bytes = tail_bytes - len(failure.encode())
        repeats = max(1, body_bytes // len(block.encode()))
        text = "".join(_training_block(n, step) for step in range(repeats)) + failure
        data = text.encode()
        with (folder / f"{node_name(n)}.log").open("wb") as f:
            f.truncate(max(0, file_bytes - len(data)))  # the head: a hole
            f.seek(0, 2)
            f.write(data)
        written += len(data)
    return written


def scan(root: Path, nodes: int) -> dict[str, object]:
    """The measured part, in its own process: read + parse + rules."""
    names = [node_name(i) for i in range(nodes)]
    ranks = list(range(nodes * RANKS_PER_NODE))
    cpu_start = time.process_time()
    start = time.perf_counter()
    with collector_paused():  # as the provider runs them
        result = scan_job_logs(root, WORKLOAD, 0, names, Deadline.after_ms(600_000))
        read_s = time.perf_counter() - start
        out = conclude(names, ranks, result.logs)
    total_s = time.perf_counter() - start
    return {
        "seconds": round(total_s, 2),
        "cpu_seconds": round(time.process_time() - cpu_start, 2),
        "read_and_parse_seconds": round(read_s, 2),
        "bytes_read": result.read.bytes_read,
        "nodes_read": len(result.read.nodes),
        "nodes_cut": sum(1 for r in result.read.nodes.values() if r.cut),
        "lines": sum(log.lines for log in result.logs.values()),
        "findings": [(f.node, f.category) for f in out.nodes],
        "job": out.job.category if out.job else None,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1024)
    parser.add_argument("--file-mib", type=int, default=64)
    parser.add_argument("--tail-mib", type=float, default=1.0, help="real text at the end of each file")
    parser.add_argument("--silent-node", type=int, default=537)
    parser.add_argument("--scan", metavar="DIR", help=argparse.SUPPRESS)  # the child's entry
    args = parser.parse_args()
    if args.scan:
        print(json.dumps(scan(Path(args.scan), args.nodes)))
        return
    share = min(MAX_NODE_BYTES, shared_bytes(args.nodes, ReadLimits()) // args.nodes)
    tail_bytes = max(int(args.tail_mib * MIB), 2 * share)  # every byte the reader takes is real text
    root = Path(tempfile.mkdtemp(prefix="joblog-bench-"))
    try:
        start = time.perf_counter()
        written = generate(root, args.nodes, args.file_mib * MIB, tail_bytes, args.silent_node)
        generated = time.perf_counter() - start
        child = subprocess.run(
            [sys.executable, __file__, "--scan", str(root), "--nodes", str(args.nodes)],
            check=True, capture_output=True, text=True,
        )
        figures = json.loads(child.stdout)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"job logs: {args.nodes} nodes x {args.file_mib} MiB = {args.nodes * args.file_mib / 1024:.0f} GiB of "
          f"files ({written / MIB:.0f} MiB real text at their ends, the rest sparse), generated in {generated:.1f} s")
    print(f"bounds: {MAX_NODE_BYTES // 1024} KiB per node, {MAX_REQUEST_BYTES // MIB} MiB per request "
          f"-> {share // 1024} KiB per node here")
    print(f"read + parse + rules: {figures['seconds']} s wall, {figures['cpu_seconds']} s CPU "
          f"(read + parse {figures['read_and_parse_seconds']} s wall), "
          f"{figures['bytes_read'] / MIB:.1f} MiB read, {figures['lines']} lines, "
          f"{figures['nodes_cut']}/{figures['nodes_read']} files cut at the bound, "
          f"peak RSS {figures['peak_rss_mib']} MiB; "
          f"{figures['bytes_read'] / MIB / max(figures['read_and_parse_seconds'], 0.01):.0f} MiB/s read and parsed")
    print(f"conclusions: nodes {figures['findings']}, job {figures['job']}")


if __name__ == "__main__":
    main()
