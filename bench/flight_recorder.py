"""Benchmark: a hang of 16,384 ranks read from their flight-recorder dumps, 2,000 entries each, within the deadline.

The job: 2,048 nodes of 8 ranks, tensor-parallel groups of 8 (a node), pipeline groups of 4, data-parallel groups of
512, the default group of every rank, each in the dumps' group table with its ranks (the default group's ranks text
is 94 KiB in every dump). A training step is 7 operations (4 tensor-parallel all_gathers, a pipeline send and recv,
a data-parallel all_reduce); each dump holds its rank's last 2,000 (every entry kept, completed or not, as a dump
with `onlyActive` off keeps them). The culprit (--culprit, default 11,702) stopped after a step: its 7 node peers
wait in the next step's first all_gather, the 511 other members of its data-parallel group and of each of its peers'
wait in that step's all_reduce; everyone else finished it. The dumps are written as PyTorch's C++ pickler lays them
out, by the tests' writer (`tests/telemetry/flight_recorder/support.py`), into a temporary folder
(`<dir>/job-1/0/node-NNNN/nccl_trace_rank_N`).

Timed, in one process: the provider's `fast` over the tree (`ATTRIBUTION_FLIGHT_RECORDER_DIR`, an empty kernel-log
folder, every node and rank in scope, --timeout-ms), then, untimed by the request, the dumps' reading alone
(`read_dumps`, the bytes it read) and the analysis alone (`conclude`). Printed: the time to answer, whether the
culprit's node was named and nothing else, the reading's time and bytes, the analysis's time, and the tree's size.

    .venv/bin/python bench/flight_recorder.py [--ranks 16384] [--entries 2000] [--timeout-ms 60000] [--dir DIR]

With --dir the tree is kept, and a later run with the same --dir reads it as it lies (its page cache warm).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from providers.base import AttributionRequest, Deadline, FailureContext, Phase, Scope, WorkloadContext  # noqa: E402
from providers.telemetry import TelemetryProvider  # noqa: E402
from providers.telemetry.flight_recorder import conclude, read_dumps  # noqa: E402
from providers.telemetry.flight_recorder import source as fr_source  # noqa: E402
from tests.telemetry.flight_recorder.support import Pickler  # noqa: E402

TP, PP = 8, 4
DETECTED = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
T0 = int((DETECTED - timedelta(minutes=30)).timestamp() * 1e9)


def _groups(rank: int, world: int) -> list[tuple[str, str, list[int]]]:
    dp_size = world // (TP * PP)
    d, rest = divmod(rank, TP * PP)
    p, t = divmod(rest, TP)
    return [
        ("0", "default_pg", list(range(world))),
        (f"tp-{d:04d}-{p}", "TENSOR_MODEL_PARALLEL_GROUP", [d * TP * PP + p * TP + i for i in range(TP)]),
        (f"pp-{d:04d}-{t}", "PIPELINE_MODEL_PARALLEL_GROUP", [d * TP * PP + i * TP + t for i in range(PP)]),
        (f"dp-{p}-{t}", "DATA_PARALLEL_GROUP", [i * TP * PP + p * TP + t for i in range(dp_size)]),
    ]


def _entry(
    group_of: dict[str, tuple[str, str]], kind: str, seq: int, p2p_seq: int, op: str, state: str, record: int
) -> dict[str, object]:
    name, desc = group_of[kind]
    p2p = op.startswith("nccl:send") or op.startswith("nccl:recv")
    return {
        "record_id": record,
        "pg_id": ["0", "tp", "pp", "dp"].index(kind),
        "process_group": (name, desc),
        "thread_name": "pt_main_thread",
        "thread_id": "140000000000000",
        "collective_seq_id": seq,
        "p2p_seq_id": p2p_seq if p2p else 0,
        "op_id": record,
        "profiling_name": op,
        "time_created_ns": T0 + record * 50_000_000,
        "input_sizes": [[4096, 1024]],
        "input_dtypes": ["BFloat16"],
        "output_sizes": [[32768, 1024] if kind == "tp" else [4096, 1024]],
        "output_dtypes": ["BFloat16"],
        "state": state,
        "time_discovered_started_ns": None,
        "time_discovered_completed_ns": None,
        "retired": state == "completed",
        "timeout_ms": 600000,
        "is_p2p": p2p,
    }


def _head(rank: int, world: int) -> Pickler:
    """A writer holding a rank's dump up to its entries list: the top dict, version, group table, group status, and
    the key `entries`. Every rank's head stores the same number of strings in the same order, so the entries after
    it, which name their groups and keys by memo reference, are the same bytes on every rank of a kind."""
    p = Pickler()
    p.out += b"}("
    for key, value in (
        ("version", "2.10"),
        ("pg_config", {name: {"name": name, "desc": desc, "ranks": _text(ranks)}
                       for name, desc, ranks in _groups(rank, world)}),
        ("comm_lib_version", "2.27.3"),
        ("pg_status", {str(i): {"last_enqueued_collective": 0, "last_started_collective": -1,
                                "last_completed_collective": 0} for i in range(4)}),
    ):  # fmt: skip
        p.push(key)
        p.push(value)
    p.push("entries")
    return p


def _text(ranks: list[int]) -> str:
    return "[" + ", ".join(map(str, ranks)) + "]"


def _body(head: Pickler, rank: int, world: int, entries: int, steps: int, last: str) -> bytes:
    """The entries list and the dump's end, for a rank that did `steps` steps, then what `last` says (done: one more
    step finished; dp: that step with its all_reduce unfinished; tp: only its first all_gather, unfinished; stopped:
    nothing more)."""
    groups = _groups(rank, world)
    group_of = {k: (g[0], g[1]) for k, g in zip(("0", "tp", "pp", "dp"), groups, strict=True)}
    step = [("tp", "nccl:_all_gather_base"), ("tp", "nccl:_all_gather_base"), ("pp", "nccl:send 0->1"),
            ("pp", "nccl:recv 0<-1"), ("tp", "nccl:_all_gather_base"), ("tp", "nccl:_all_gather_base"),
            ("dp", "nccl:all_reduce")]  # fmt: skip
    ops = [(k, op, "completed") for _ in range(steps) for k, op in step]
    if last in ("done", "dp"):
        ops.extend((k, op, "completed") for k, op in step)
        if last == "dp":
            ops[-1] = ("dp", "nccl:all_reduce", "scheduled")
    elif last == "tp":
        ops.append(("tp", "nccl:_all_gather_base", "scheduled"))
    seqs = {"tp": 0, "pp": 0, "dp": 0}
    rows = []
    for record, (kind, op, state) in enumerate(ops):
        seqs[kind] += 1
        rows.append(_entry(group_of, kind, seqs[kind], seqs["pp"], op, state, record))
    body = Pickler()
    body.out = bytearray()
    body.memo = dict(head.memo)
    body.push(rows[-entries:])
    return bytes(body.out) + b"u."


def build(root: Path, world: int, entries: int, culprit: int) -> tuple[int, float]:
    """Write the tree; the bytes written and the seconds it took (each kind of entries list is pickled once)."""
    start = time.perf_counter()
    steps = entries // 7 + 2
    groups = _groups(culprit, world)
    tp_peers = set(groups[1][2]) - {culprit}
    waiting_dp: set[int] = set()
    for r in (culprit, *tp_peers):
        waiting_dp.update(_groups(r, world)[3][2])
    bodies: dict[str, bytes] = {}
    total = 0
    folder = root / "job-1" / "0"
    for rank in range(world):
        last = ("stopped" if rank == culprit else "tp" if rank in tp_peers
                else "dp" if rank in waiting_dp else "done")  # fmt: skip
        head = _head(rank, world)
        if last not in bodies:
            bodies[last] = _body(head, rank, world, entries, steps, last)
        data = bytes(head.out) + bodies[last]
        node = folder / f"node-{rank // TP:04d}"
        node.mkdir(parents=True, exist_ok=True)
        (node / f"nccl_trace_rank_{rank}").write_bytes(data)
        total += len(data)
    return total, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, default=16384)
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--culprit", type=int, default=11702)
    parser.add_argument("--timeout-ms", type=int, default=60000)
    parser.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="write the tree here and keep it (a tree already there is read as it "
        "lies); default a temporary folder, removed",
    )
    args = parser.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="fr-bench-"))
    try:
        tree = root / "fr" / "job-1" / "0"
        if args.dir is not None and tree.is_dir():
            # a tree written by an earlier run (same --ranks, --entries and --culprit): read as it lies
            written, took = sum(f.stat().st_size for f in tree.rglob("nccl_trace_rank_*")), 0.0
        else:
            written, took = build(root / "fr", args.ranks, args.entries, args.culprit)
        how = f"written in {took:.1f} s" if took else "read as it lies (written by an earlier run)"
        print(f"tree: {args.ranks} dumps, {args.entries} entries each, {written / 2**20:.0f} MiB, {how}", flush=True)
        (root / "kernel").mkdir(exist_ok=True)
        nodes = [f"node-{n:04d}" for n in range(args.ranks // TP)]
        provider = TelemetryProvider.from_options(
            {
                "ATTRIBUTION_KERNEL_LOG_SOURCE": "files",
                "ATTRIBUTION_KERNEL_LOG_DIR": str(root / "kernel"),
                "ATTRIBUTION_FLIGHT_RECORDER_DIR": str(root / "fr"),
            }
        )
        request = AttributionRequest(
            workload_id="job-1",
            scope=Scope(tuple(nodes), tuple(range(args.ranks))),
            failure_context=FailureContext(DETECTED, "collective_timeout"),
            timeout_ms=args.timeout_ms,
            workload_context=WorkloadContext("bench", 0),
            phase=Phase.FAST,
        )
        start = time.perf_counter()
        outcome = provider.fast(request, Deadline.after_ms(args.timeout_ms), None)
        answered = time.perf_counter() - start
        culprit_node = f"node-{args.culprit // TP:04d}"
        named = [getattr(f.target, "name", "AllJobResources") for f in outcome.attributions]
        print(
            f"fast: answered in {answered:.2f} s (timeout_ms {args.timeout_ms}); named {named[:4]}"
            f"{' (the culprit, alone)' if named == [culprit_node] else ' (culprit ' + culprit_node + ')'}"
        )
        if outcome.attributions:
            print(f"  first evidence: {outcome.attributions[0].evidence[0].message[:200]}")
        late = re.search(r"the flight-recorder dumps of (\d+) node folder\(s\) were not read", str(outcome.error))
        print(f"  node folders not read before the deadline: {late.group(1) if late else 0} of {len(nodes)}")
        read_bytes = 0
        pread = fr_source._pread

        def counting(fd: int, offset: int, size: int) -> bytes:
            nonlocal read_bytes
            data = pread(fd, offset, size)
            read_bytes += len(data)
            return data

        fr_source._pread = counting  # type: ignore[assignment]
        start = time.perf_counter()
        read = read_dumps(root / "fr" / "job-1" / "0", Deadline(time.monotonic() + 3600))
        reading = time.perf_counter() - start
        fr_source._pread = pread  # type: ignore[assignment]
        start = time.perf_counter()
        result = conclude(read, nodes, range(args.ranks), {}, DETECTED)
        analysing = time.perf_counter() - start
        whole = sum(d.whole for d in read.dumps.values())
        entries = sum(len(d.entries) for d in read.dumps.values())
        print(
            f"reading alone: {reading:.2f} s for {len(read.dumps)} dumps ({reading / max(1, len(read.dumps)) * 1e6:.0f}"
            f" us a dump), {read_bytes / 2**20:.0f} MiB read of {written / 2**20:.0f} MiB, {entries} entries "
            f"({entries / max(1, len(read.dumps)):.1f} a dump), {whole} dumps read whole"
        )
        print(f"analysis alone: {analysing:.2f} s; named {sorted(result.node_items)[:4]}; load {os.getloadavg()}")
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
