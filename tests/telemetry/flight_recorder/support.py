"""What the flight-recorder tests share: the fixtures' folder, a request's reading of a tree, and a writer of the
protocol-2 bytes TorchScript's C++ pickler writes (strings memoized by value, nothing else), for synthetic dumps."""

from __future__ import annotations

import shutil
import struct
import time
from datetime import UTC, datetime
from pathlib import Path

from providers.base import Deadline
from providers.telemetry.flight_recorder import FlightRecorderResult, conclude, read_dumps

FIXTURES = Path(__file__).parent / "fixtures"
DETECTED = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def tree(tmp: Path, case: str, workload: str = "job-1", attempt: int = 0) -> Path:
    """A copy of fixture `case` (`v2.10/not_reached`) laid out as `<dir>/<workload>/<attempt>/<node>/`; returns
    the attempt's folder."""
    folder = tmp / workload / str(attempt)
    shutil.copytree(FIXTURES / case, folder)
    return folder


def conclude_folder(
    folder: Path,
    nodes: list[str] | None = None,
    rank_nodes: dict[int, str] | None = None,
    ranks: list[int] | None = None,
) -> FlightRecorderResult:
    read = read_dumps(folder, Deadline(time.monotonic() + 60))
    scope = nodes if nodes is not None else sorted(p.name for p in folder.iterdir() if p.is_dir())
    return conclude(read, scope, ranks or [], rank_nodes or {}, DETECTED)


class Pickler:
    """Plain data as protocol-2 bytes the way the C++ pickler lays them out (containers are never memoized here)."""

    def __init__(self) -> None:
        self.out = bytearray(b"\x80\x02")
        self.memo: dict[str, int] = {}

    def push(self, v: object) -> None:
        out = self.out
        if v is None:
            out += b"N"
        elif v is True:
            out += b"\x88"
        elif v is False:
            out += b"\x89"
        elif isinstance(v, int):
            if 0 <= v < 256:
                out += b"K" + bytes([v])
            elif 0 <= v < 65536:
                out += b"M" + struct.pack("<H", v)
            elif -(2**31) <= v < 2**31:
                out += b"J" + struct.pack("<i", v)
            else:
                out += b"\x8a\x08" + struct.pack("<q", v)
        elif isinstance(v, float):
            out += b"G" + struct.pack(">d", v)
        elif isinstance(v, str):
            if v in self.memo:
                i = self.memo[v]
                out += b"h" + bytes([i]) if i < 256 else b"j" + struct.pack("<I", i)
                return
            b = v.encode()
            out += b"X" + struct.pack("<I", len(b)) + b
            i = self.memo[v] = len(self.memo)
            out += b"q" + bytes([i]) if i < 256 else b"r" + struct.pack("<I", i)
        elif isinstance(v, tuple):
            for x in v:
                self.push(x)
            out += {1: b"\x85", 2: b"\x86", 3: b"\x87"}[len(v)]
        elif isinstance(v, list):
            out += b"]("
            for x in v:
                self.push(x)
            out += b"e"
        elif isinstance(v, dict):
            out += b"}("
            for k, x in v.items():
                self.push(k)
                self.push(x)
            out += b"u"
        else:
            raise TypeError(type(v))

    def dumps(self, v: object) -> bytes:
        self.push(v)
        self.out += b"."
        return bytes(self.out)


def pickled(v: object) -> bytes:
    return Pickler().dumps(v)


def entry(
    group: str,
    seq: int,
    state: str = "completed",
    op: str = "nccl:all_reduce",
    size: int = 1024,
    record: int = 0,
    desc: str = "default_pg",
    created: int = 1_790_000_000_000_000_000,
) -> dict[str, object]:
    """One 2.10 entry, fields in the order PyTorch writes them."""
    return {
        "record_id": record,
        "pg_id": 0,
        "process_group": (group, desc),
        "thread_name": "pt_main_thread",
        "thread_id": "140000000000000",
        "collective_seq_id": seq,
        "p2p_seq_id": 0,
        "op_id": seq,
        "profiling_name": op,
        "time_created_ns": created + seq * 1_000_000,
        "input_sizes": [[size]],
        "input_dtypes": ["Float"],
        "output_sizes": [[size]],
        "output_dtypes": ["Float"],
        "state": state,
        "time_discovered_started_ns": None,
        "time_discovered_completed_ns": None,
        "retired": state == "completed",
        "timeout_ms": 600000,
        "is_p2p": False,
    }


def dump_210(entries: list[dict[str, object]], ranks: str = "[0, 1, 2, 3]") -> dict[str, object]:
    return {
        "version": "2.10",
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": ranks}},
        "comm_lib_version": "2.27.3",
        "pg_status": {
            "0": {"last_enqueued_collective": 0, "last_started_collective": -1, "last_completed_collective": 0}
        },
        "entries": entries,
    }


def step_job(culprit: int, *, tp: int = 2, fault: str = "stopped", steps: int = 3) -> dict[int, bytes]:
    """A hang of 8 ranks as version-2.10 NCCL dumps (rank -> pickle): tensor-parallel groups of `tp` consecutive
    ranks, data-parallel groups of the ranks `tp` apart, each in every member's group table with the default group; a
    step is a tensor-parallel all_gather, then a data-parallel all_reduce. After `steps` steps:

    - `stopped` (the kind NVIDIA injects as LOCK_GIL): the culprit issues nothing more; its tensor-parallel peers wait
      in the next all_gather; every other rank finished that all_gather and waits in the all_reduce (for the culprit,
      or for the culprit's peers, which never reached it);
    - `gpu` (as GPU_ERROR): the culprit's next all_gather never completes on it (it ran on its peers, which went on:
      they finished the all_reduce and wait in the all_gather after it); the culprit's data-parallel peers wait for it
      in the all_reduce, and their tensor-parallel peers for them in the all_gather after it.
    """
    world = 8
    everyone = list(range(world))

    def tp_of(r: int) -> list[int]:
        return list(range(r - r % tp, r - r % tp + tp))

    def dp_of(r: int) -> list[int]:
        return list(range(r % tp, world, tp))

    out = {}
    for rank in everyone:
        groups = {
            "0": ("default_pg", everyone),
            f"tp{tp_of(rank)[0]}": ("TENSOR_MODEL_PARALLEL_GROUP", tp_of(rank)),
            f"dp{dp_of(rank)[0]}": ("DATA_PARALLEL_GROUP", dp_of(rank)),
        }
        rows: list[dict[str, object]] = []

        def add(kind: str, seq: int, state: str, rank: int = rank, groups: dict = groups, rows: list = rows) -> None:
            group = f"tp{tp_of(rank)[0]}" if kind == "tp" else f"dp{dp_of(rank)[0]}"
            op = "nccl:_all_gather_base" if kind == "tp" else "nccl:all_reduce"
            rows.append(entry(group, seq, state, op, record=len(rows), desc=groups[group][0]))
            rows[-1]["time_created_ns"] = 1_790_000_000_000_000_000 + len(rows) * 1_000_000

        for step in range(1, steps + 1):
            add("tp", step, "completed")
            add("dp", step, "completed")
        s = steps + 1
        if rank == culprit:
            if fault == "gpu":
                add("tp", s, "scheduled")
        elif fault == "stopped" and rank in tp_of(culprit):
            add("tp", s, "scheduled")
        elif fault == "stopped" or rank in dp_of(culprit):
            add("tp", s, "completed")
            add("dp", s, "scheduled")
        else:
            add("tp", s, "completed")
            add("dp", s, "completed")
            add("tp", s + 1, "scheduled")
        dump = dump_210(rows)
        dump["pg_config"] = {
            name: {"name": name, "desc": desc, "ranks": "[" + ", ".join(map(str, ranks)) + "]"}
            for name, (desc, ranks) in groups.items()
        }
        out[rank] = pickled(dump)
    return out


def write_job(folder: Path, dumps: dict[int, bytes], node_of: dict[int, str]) -> Path:
    """`dumps` laid out as `<folder>/<node>/nccl_trace_rank_<rank>` by `node_of`; returns `folder`."""
    for rank, data in dumps.items():
        (folder / node_of[rank]).mkdir(parents=True, exist_ok=True)
        (folder / node_of[rank] / f"nccl_trace_rank_{rank}").write_bytes(data)
    return folder
