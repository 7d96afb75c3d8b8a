"""Dev-only. Version-1.4 dumps written by PyTorch 2.3's own flight recorder and pickler (fr23.cpp), a process a rank.

Four ranks on two nodes, groups: default (0-3, pg 0), pairs {0,1} (pg 1 on ranks 0,1) and {2,3} (pg 1 on ranks 2,3).
Scenario `behind`: every rank completed default-group collectives 1-6; ranks 0,1,3 completed 7 and wait in 8;
rank 2's watchdog saw nothing complete after 6 (its 7 and 8 are scheduled): it is behind in sequence, as a GPU
fault leaves a rank. Scenario `p2p`: rank 1 waits in a recv from rank 0 that rank 0 never posted (0 waits in
nothing: idle); the pair group's all_reduces all completed.
"""

import os
import sys

sys.path.insert(0, sys.argv[1])
import fr23
import torch  # noqa: F401  (loads the libraries fr23 links against)

scenario, rank, out = sys.argv[2], int(sys.argv[3]), sys.argv[4]
fr23.pg_ranks(0, [0, 1, 2, 3])
fr23.pg_ranks(1, [0, 1] if rank < 2 else [2, 3])


def ar(seq, state, pg=0, n=1024):
    fr23.record(pg, seq, seq, "nccl:all_reduce", [[n]], [[n]], state, state == "completed")


if scenario == "behind":
    for s in range(1, 7):
        ar(s, "completed")
        ar(s, "completed", pg=1, n=64)
    if rank == 2:
        ar(7, "scheduled")
        ar(8, "scheduled")
    else:
        ar(7, "completed")
        ar(8, "started")
elif scenario == "p2p":
    for s in range(1, 4):
        ar(s, "completed")
    if rank == 1:
        fr23.record(1, 4, 4, "nccl:recv 1<-0", [[16]], [[16]], "scheduled", False)
    if rank in (2, 3):
        ar(4, "completed", pg=1, n=64)
node = os.path.join(out, scenario, f"node-{rank // 2}")
os.makedirs(node, exist_ok=True)
open(os.path.join(node, f"nccl_trace_rank_{rank}"), "wb").write(fr23.dump())
