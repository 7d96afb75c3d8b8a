"""Dev-only. Dumps written by PyTorch's own flight recorder and pickler, a process a rank: version 2.1 by 2.4
(fr24.cpp), version 2.4 by 2.5 (fr25.cpp, pickled and JSON), chosen by the module built (`build.py`):

    python scen24.py BUILD_DIR SCENARIO RANK OUT [fr24|fr25]

Eight ranks on two nodes (four a node), groups named as `new_group` names them ("0" the default group, then "1".."8"
in creation order), with Megatron's descriptions: tensor-parallel pairs, data-parallel groups of four, and
pipeline pairs that exchange point to point. Scenario `gpu_fault` (the kind NVIDIA injects as GPU_ERROR): rank 6's
watchdog saw nothing of its groups complete after a point while its peers went on, so they wait in collectives it
never issued or never finished; every other rank's pipeline send and recv are matched. `stopped` (the kind of
LOCK_GIL): rank 3 issued nothing after seq 20 of its groups and is idle; its peers wait. Each dump holds only the
entries not completed, as a dump on timeout with `onlyActive` holds them, except `full`, which holds all.
"""

import importlib
import os
import subprocess
import sys

import torch  # (loads the libraries the module links against)

sys.path.insert(0, sys.argv[1])
fr = importlib.import_module(sys.argv[5] if len(sys.argv) > 5 else "fr24")
if fr.__name__ == "fr25":
    # 2.5's recorder is reached by its offsets from an exported neighbour in libtorch_cuda.so's symbol table
    lib = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cuda.so")
    table = subprocess.run(["nm", "-C", lib], capture_output=True, text=True, check=True).stdout.splitlines()

    def at(name: str) -> int:
        return next(int(line.split(" ", 2)[0], 16) for line in table if line.split(" ", 2)[2] == name)

    def first(prefix: str) -> int:
        return next(
            int(line.split(" ", 2)[0], 16)
            for line in table
            if line.split(" ", 2)[2].startswith(prefix) and "[clone" not in line
        )

    fr.locate(
        lib,
        at("c10d::dump_nccl_trace(bool, bool, bool)"),
        at("c10d::NCCLTraceBuffer::get()"),
        first("c10d::NCCLTraceBuffer::record("),
        first("c10d::NCCLTraceBuffer::retire_id("),
        first("c10d::NCCLTraceBuffer::record_pg_ranks("),
    )

scenario, rank, out = sys.argv[2], int(sys.argv[3]), sys.argv[4]
only_active = scenario != "full"
TP = [(0, 1), (2, 3), (4, 5), (6, 7)]
DP = [(0, 2, 4, 6), (1, 3, 5, 7)]
PP = [(0, 4), (1, 5), (2, 6), (3, 7)]
groups = {"0": ("default_pg", tuple(range(8)))}
for i, r in enumerate(TP):
    groups[str(1 + i)] = ("TENSOR_MODEL_PARALLEL_GROUP", r)
for i, r in enumerate(DP):
    groups[str(5 + i)] = ("DATA_PARALLEL_GROUP", r)
for i, r in enumerate(PP):
    groups[str(7 + i)] = ("PIPELINE_MODEL_PARALLEL_GROUP", r)
mine = {name: (desc, ranks) for name, (desc, ranks) in groups.items() if rank in ranks}
for name, (desc, ranks) in mine.items():
    fr.pg_ranks(name, desc, list(ranks))
ids = {name: i for i, name in enumerate(mine)}
op_ids = {name: 0 for name in mine}


def coll(name, seq, op, sizes, state):
    op_ids[name] += 1
    desc = mine[name][0]
    fr.record(
        ids[name], name, desc, seq, 0, op_ids[name], op, sizes, sizes, "BFloat16", state, state == "completed", False
    )


def p2p(name, seq, p2p_seq, kind, peer, state):
    desc, ranks = mine[name]
    me = ranks.index(rank)
    arrow = f"{me}->{peer}" if kind == "send" else f"{me}<-{peer}"
    op_ids[name] += 1
    fr.record(
        ids[name],
        name,
        desc,
        seq,
        p2p_seq,
        op_ids[name],
        f"nccl:{kind} {arrow}",
        [[4096, 1024]],
        [[4096, 1024]],
        "BFloat16",
        state,
        state == "completed",
        True,
    )


tp = next(n for n, (d, r) in mine.items() if d.startswith("TENSOR"))
dp = next(n for n, (d, r) in mine.items() if d.startswith("DATA"))
pp = next(n for n, (d, r) in mine.items() if d.startswith("PIPE"))
last = {tp: 0, dp: 0}


def step(n_tp, n_dp, state_of):
    for _ in range(n_tp):
        last[tp] += 1
        coll(tp, last[tp], "nccl:_all_gather_base", [[2048, 1024]], state_of(tp, last[tp]))
    for _ in range(n_dp):
        last[dp] += 1
        coll(dp, last[dp], "nccl:all_reduce", [[1 << 20]], state_of(dp, last[dp]))


if scenario in ("gpu_fault", "full", "missing"):
    culprit = 6

    def state_of(g, s):
        if rank == culprit:
            return "completed" if s <= (10 if g == tp else 4) else "scheduled"
        if g == tp and rank == 7:
            return "completed" if s <= 13 else "scheduled"
        if g == dp and rank in (0, 2, 4):
            return "completed" if s <= 5 else "scheduled"
        return "completed" if s <= (13 if g == tp else 5) else "scheduled"

    for _ in range(3):
        step(4, 1, state_of)
    if rank == culprit:
        step(1, 1, state_of)  # tp 13, dp 4: its last issued
    else:
        step(2, 3, state_of)  # tp 14, dp 6
    # pipeline: each pair sends one way and receives back, both pending (matched)
    p_ranks = mine[pp][1]
    peer = 1 - p_ranks.index(rank)
    p2p(pp, 0, 1, "send" if p_ranks.index(rank) == 0 else "recv", peer, "scheduled")
elif scenario == "stopped":
    culprit = 3

    def state_of(g, s):
        return "completed" if s <= 20 else "scheduled"

    for _ in range(5):
        step(4, 1 if rank != culprit else 0, state_of)
    if rank != culprit:
        step(1, 0, state_of)
    last_dp = last[dp]
    if rank == culprit:
        step(0, 5, lambda g, s: "completed")  # its data-parallel ones, all done: it stopped after tp 20, dp 5
    else:
        step(0, 1, state_of)
node = os.path.join(out, scenario, f"node-{rank // 4}")
os.makedirs(node, exist_ok=True)
if fr.__name__ == "fr25":
    from torch._C._distributed_c10d import _dump_nccl_trace, _dump_nccl_trace_json

    with open(os.path.join(node, f"_dump_{rank}"), "wb") as f:
        f.write(_dump_nccl_trace(True, False, only_active))
    if scenario == "stopped":  # the JSON writer's dumps of one scenario, in a folder of their own
        node = os.path.join(out + "-json", scenario, f"node-{rank // 4}")
        os.makedirs(node, exist_ok=True)
        with open(os.path.join(node, f"_dump_{rank}.json"), "wb") as f:
            f.write(_dump_nccl_trace_json(True, only_active))
else:
    with open(os.path.join(node, f"_dump_{rank}"), "wb") as f:
        f.write(fr.dump(False, only_active))
