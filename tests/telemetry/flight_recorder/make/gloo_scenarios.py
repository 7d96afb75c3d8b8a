# Dev-only: writes the fixtures of ../fixtures (see its README); needs a PyTorch with a recording gloo backend.
"""Flight-recorder dumps from real PyTorch runs: several processes on 127.0.0.1, the gloo backend, the recorder on.

Dev-only: run with a PyTorch whose gloo backend records (2.8 and later), e.g.

    python gloo_scenarios.py OUT [SCENARIO ...]

Each scenario starts its ranks as processes of this script (`--rank`), each writes its dump the way PyTorch names
them (`nccl_trace_rank_<rank>`, pickled by PyTorch's own writer, or `<rank>.json` from its JSON writer) into
`OUT/<scenario>/<node>/`, two ranks a node (`node-0`, `node-1`, ...). A rank that times out in a collective writes
its dump then (gloo has no watchdog dump of its own); the rank that never reached the collective writes its dump
after its peers timed out.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from datetime import timedelta

TIMEOUT_S = 4
RANKS_PER_NODE = 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _dump(out: str, rank: int, json_too: bool) -> None:
    from torch._C import _distributed_c10d as c10d

    dump = getattr(c10d, "_dump_fr_trace", None) or c10d._dump_nccl_trace
    node = os.path.join(out, f"node-{rank // RANKS_PER_NODE}")
    os.makedirs(node, exist_ok=True)
    with open(os.path.join(node, f"nccl_trace_rank_{rank}"), "wb") as f:
        f.write(dump())
    if json_too:
        text = (getattr(c10d, "_dump_fr_trace_json", None) or c10d._dump_nccl_trace_json)()
        with open(os.path.join(node, f"nccl_trace_rank_{rank}.json"), "wb") as f:
            f.write(text if isinstance(text, bytes) else text.encode())


def _steps(torch, dist, n: int, group=None, numel: int = 8) -> None:
    t = torch.ones(numel)
    for _ in range(n):
        dist.all_reduce(t, group=group)


def run_rank(scenario: str, rank: int, world: int, port: int, out: str) -> None:
    import torch
    import torch.distributed as dist

    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=TIMEOUT_S),
    )
    json_too = scenario in ("not_reached", "mismatch_size")
    culprit = None
    try:
        if scenario == "completed":
            _steps(torch, dist, 5)
            dist.broadcast(torch.zeros(4), 0)
            dist.barrier()
        elif scenario == "not_reached":
            # rank 3 stops before the sixth all_reduce of the default group that its peers started
            culprit = 3
            _steps(torch, dist, 5)
            if rank == culprit:
                time.sleep(TIMEOUT_S + 3)
            else:
                _steps(torch, dist, 1)
        elif scenario == "behind":
            # rank 2 issued two all_reduces fewer than its peers in the default group, then stopped
            culprit = 2
            _steps(torch, dist, 3 if rank == culprit else 5)
            if rank == culprit:
                time.sleep(TIMEOUT_S + 3)
        elif scenario == "groups":
            # tensor-parallel pairs {0,1} {2,3} {4,5}, data-parallel {0,2,4} {1,3,5}; rank 5 stops before its
            # data-parallel all_reduce, so rank 1 and 3 wait there, and the others wait behind them
            culprit = 5
            tp = [dist.new_group(r, group_desc="tp") for r in ([0, 1], [2, 3], [4, 5])]
            dp = [dist.new_group(r, group_desc="dp") for r in ([0, 2, 4], [1, 3, 5])]
            my_tp = tp[rank // 2]
            my_dp = dp[rank % 2]
            for _ in range(3):
                _steps(torch, dist, 2, my_tp)
                _steps(torch, dist, 1, my_dp)
            if rank == culprit:
                time.sleep(TIMEOUT_S + 3)
            else:
                _steps(torch, dist, 2, my_tp)
                _steps(torch, dist, 1, my_dp)
                _steps(torch, dist, 1)
        elif scenario in ("mismatch_size", "mismatch_dtype", "mismatch_op"):
            _steps(torch, dist, 3)
            if scenario == "mismatch_size":
                t = torch.ones(16 if rank == 1 else 8)
                dist.all_reduce(t)
            elif scenario == "mismatch_dtype":
                t = torch.ones(8, dtype=torch.float64 if rank == 1 else torch.float32)
                dist.all_reduce(t)
            elif rank == 1:
                dist.broadcast(torch.ones(8), 0)
            else:
                dist.all_reduce(torch.ones(8))
        else:
            raise SystemExit(f"unknown scenario {scenario}")
    except RuntimeError:
        pass  # a peer's collective timed out or failed: dump what the recorder holds, as a watchdog would
    _dump(out, rank, json_too)
    os._exit(0)  # the process group may be broken; leave without its teardown


SCENARIOS = {
    "completed": 4,
    "not_reached": 4,
    "behind": 4,
    "groups": 6,
    "mismatch_size": 4,
    "mismatch_dtype": 4,
    "mismatch_op": 4,
}


def main() -> None:
    if sys.argv[1] == "--rank":
        scenario, rank, world, port, out = (
            sys.argv[2],
            int(sys.argv[3]),
            int(sys.argv[4]),
            int(sys.argv[5]),
            sys.argv[6],
        )
        run_rank(scenario, rank, world, port, out)
        return
    out = sys.argv[1]
    names = sys.argv[2:] or list(SCENARIOS)
    env = dict(os.environ, TORCH_FR_BUFFER_SIZE="2000", TORCH_NCCL_TRACE_BUFFER_SIZE="2000")
    for name in names:
        world = SCENARIOS[name]
        port = _free_port()
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-W",
                    "ignore",
                    __file__,
                    "--rank",
                    name,
                    str(r),
                    str(world),
                    str(port),
                    os.path.join(out, name),
                ],
                env=env,
            )
            for r in range(world)
        ]
        for p in procs:
            p.wait(timeout=120)
        print(name, [p.returncode for p in procs])


if __name__ == "__main__":
    main()
