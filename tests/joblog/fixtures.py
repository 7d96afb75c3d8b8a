"""Real job-log lines from public reports, each group with the address it was taken from.

Lines are copied as the reports show them (including the odd prefix a reporter's viewer added). Where a report
wrapped one log line over two, that is said beside it. Tests assemble scenarios from these lines; a scenario that
mixes reports says so.
"""

# ---------------------------------------------------------------- NCCL watchdog, PyTorch 2.x

#: https://github.com/hiyouga/LlamaFactory/issues/7396 (PyTorch 2.6, one node, 8 ranks; `[8074x] ` is the
#: reporter's line numbering). Every rank reports work 1580, enqueued 1582, completed 1579.
LLAMAFACTORY_7396 = (
    "[80746] [rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, "
    "Timeout(ms)=600000) ran for 600060 milliseconds before timing out.",
    "[80747] [rank4]:[E321 02:07:08.414640780 ProcessGroupNCCL.cpp:607] [Rank 4] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, "
    "Timeout(ms)=600000) ran for 600067 milliseconds before timing out.",
    "[80748] [rank0]:[E321 02:07:08.465150152 ProcessGroupNCCL.cpp:1664] [PG 1 Rank 0] Exception (either an error "
    "or timeout) detected by watchdog at work: 1580, last enqueued NCCL work: 1582, last completed NCCL work: 1579.",
    "[80749] [rank3]:[E321 02:07:08.465224069 ProcessGroupNCCL.cpp:1664] [PG 1 Rank 3] Exception (either an error "
    "or timeout) detected by watchdog at work: 1580, last enqueued NCCL work: 1582, last completed NCCL work: 1579.",
)

#: https://github.com/hiyouga/LlamaFactory/issues/6269 (work 7753, enqueued 7755, completed 7752 on every rank)
LLAMAFACTORY_6269 = (
    "[rank0]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=7753, OpType=_REDUCE_SCATTER_BASE, NumelIn=544997376, NumelOut=68124672, "
    "Timeout(ms)=600000) ran for 600061 milliseconds before timing out.",
    "[rank0]:[E1206 18:44:12.715588844 ProcessGroupNCCL.cpp:1664] [PG 1 Rank 0] Exception (either an error or "
    "timeout) detected by watchdog at work: 7753, last enqueued NCCL work: 7755, last completed NCCL work: 7752.",
    "[rank4]:[E1206 18:44:12.755262105 ProcessGroupNCCL.cpp:607] [Rank 4] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=7753, OpType=_REDUCE_SCATTER_BASE, NumelIn=544997376, NumelOut=68124672, "
    "Timeout(ms)=600000) ran for 600099 milliseconds before timing out.",
    "[rank4]:[E1206 18:44:12.755468433 ProcessGroupNCCL.cpp:1664] [PG 1 Rank 4] Exception (either an error or "
    "timeout) detected by watchdog at work: 7753, last enqueued NCCL work: 7755, last completed NCCL work: 7752.",
    "[rank3]:[E1206 18:44:13.275158817 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=7753, OpType=_REDUCE_SCATTER_BASE, NumelIn=544997376, NumelOut=68124672, "
    "Timeout(ms)=600000) ran for 600089 milliseconds before timing out.",
    "[rank0]:[E1206 18:44:16.994932383 ProcessGroupNCCL.cpp:1709] [PG 1 Rank 0] Timeout at NCCL work: 7753, last "
    "enqueued NCCL work: 7755, last completed NCCL work: 7752.",
    "[rank0]:[E1206 18:44:16.994957078 ProcessGroupNCCL.cpp:621] [Rank 0] Some NCCL operations have failed or "
    "timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on "
    "corrupted/incomplete data.",
    "[rank2]:[E1206 18:44:16.994961143 ProcessGroupNCCL.cpp:1709] [PG 1 Rank 2] Timeout at NCCL work: 7753, last "
    "enqueued NCCL work: 7755, last completed NCCL work: 7752.",
    "[rank6]:[E1206 18:44:16.995042142 ProcessGroupNCCL.cpp:1709] [PG 1 Rank 6] Timeout at NCCL work: 7753, last "
    "enqueued NCCL work: 7755, last completed NCCL work: 7752.",
)

#: https://github.com/XPixelGroup/BasicSR/issues/737 (PyTorch 2.6 `[PG ID 0 PG GUID 0(default_pg) Rank N]`)
BASICSR_737 = (
    "[rank1]:[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=9801523, NumelOut=9801523, Timeout(ms)=600000) ran "
    "for 600020 milliseconds before timing out.",
    "[rank1]:[E626 06:24:44.906457629 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank 1] Exception "
    "(either an error or timeout) detected by watchdog at work: 808, last enqueued NCCL work: 811, last completed "
    "NCCL work: 807.",
    "[rank0]:[E626 06:24:44.159932949 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=9801523, NumelOut=9801523, Timeout(ms)=600000) ran "
    "for 600030 milliseconds before timing out.",
    "[rank0]:[E626 06:24:44.160366013 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank 0] Exception "
    "(either an error or timeout) detected by watchdog at work: 808, last enqueued NCCL work: 811, last completed "
    "NCCL work: 807.",
    "[rank2]:[E626 06:24:44.173078629 ProcessGroupNCCL.cpp:616] [Rank 2] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=9801523, NumelOut=9801523, Timeout(ms)=600000) ran "
    "for 600061 milliseconds before timing out.",
)

#: https://github.com/NVIDIA/nccl/issues/1504 (first collective never completed: `last completed NCCL work: -1`)
NCCL_1504 = (
    "[rank1]:[E1103 07:34:57.460801783 ProcessGroupNCCL.cpp:1834] [PG ID 0 PG GUID 0(default_pg) Rank 1] Timeout "
    "at NCCL work: 1, last enqueued NCCL work: 1, last completed NCCL work: -1.",
    "[rank1]:[E1103 07:34:57.462234381 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) Rank 1] Process "
    "group watchdog thread terminated with exception: [Rank 1] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=1, OpType=COALESCED, NumelIn=18446744073709551615, NumelOut=18446744073709551615, "
    "Timeout(ms)=1800000) ran for 1800014 milliseconds before timing out.",
)

#: https://github.com/sgl-project/sglang/issues/1693 (the C++ runtime's `what():` line carries no `[rankN]:`)
SGLANG_1693_WHAT = (
    "  what():  [PG 3 Rank 5] Process group watchdog thread terminated with exception: [Rank 5] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=9141, OpType=_ALLGATHER_BASE, NumelIn=19008, NumelOut=152064, "
    "Timeout(ms)=600000) ran for 600020 milliseconds before timing out."
)

#: https://github.com/mila-iqia/milabench/pull/269 (a collector's `<job>.<node>.nolog [stderr] ` prefix; the report
#: wraps this line after `last enqueued `, joined here)
MILABENCH_269 = (
    "dinov2-giant-nodes.cn-d003.nolog [stderr] [rank3]:[E909 09:55:46.996672294 ProcessGroupNCCL.cpp:1709] "
    "[PG 0 (default_pg) Rank 3] Timeout at NCCL work: 2070, last enqueued NCCL work: 2082, last completed NCCL "
    "work: 2069."
)

#: https://github.com/KaiqiangXiong/CL-MVSNet/issues/14 (PyTorch 2.5 progress and flight-recorder dump lines)
CL_MVSNET_14 = (
    "[rank0]:[E1213 17:24:49.082111648 ProcessGroupNCCL.cpp:2241] [PG ID 0 PG GUID 0(default_pg) Rank 0]  failure "
    "detected by watchdog at work sequence id: 716 PG status: last enqueued work: 747, last completed work: 715",
    "[rank0]:[E1213 17:24:49.082137518 ProcessGroupNCCL.cpp:730] Stack trace of the failed collective not found, "
    "potentially because FlightRecorder is disabled. You can enable it by setting TORCH_NCCL_TRACE_BUFFER_SIZE to a "
    "non-zero value.",
    "[rank0]:[E1213 17:24:49.328237228 ProcessGroupNCCL.cpp:1858] [PG ID 0 PG GUID 0(default_pg) Rank 0] Received a "
    "dump signal due to a collective timeout from this local rank and we will try our best to dump the debug info. "
    "Last enqueued NCCL work: 747, last completed NCCL work: 715.This is most likely caused by incorrect usages of "
    "collectives, e.g., wrong sizes used across ranks, the order of collectives is not same for all ranks or the "
    "scheduled collective, for some reason, didn't run. Additionally, this can be caused by GIL deadlock or other "
    "reasons such as network errors or bugs in the communications library (e.g. NCCL), etc. ",
)

#: https://github.com/pytorch/pytorch/issues/152623 (TORCH_NCCL_DESYNC_DEBUG report: rank 7 lags; the report's
#: continuation lines carry no `[rankN]:` prefix)
PYTORCH_152623_DESYNC = (
    "[rank0]:[E515 18:36:47.341808597 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=241, OpType=ALLREDUCE, NumelIn=6, NumelOut=6, Timeout(ms)=600000) ran for 600086 "
    "milliseconds before timing out.",
    "[rank0]:[E515 18:36:47.343377708 ProcessGroupNCCL.cpp:1937] Rank 0",
    "         - [0] Timeout at collective: ALLREDUCE, #315",
    "         - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:",
    "             [7] finished collective #182, but didn't join collective #183 (count from 1)",
    "         - Snapshot of ranks' latest states:",
    "           #182 finished ranks:",
    "             [7] finished ALLREDUCE",
    "           #315 started ranks:",
    "             [0, 1, 2] started ALLREDUCE",
    "           #317 started ranks:",
    "             [3, 4, 5, 6] started _ALLGATHER_BASE",
    "[rank0]:[E515 18:36:47.343391940 ProcessGroupNCCL.cpp:2268] [PG ID 0 PG GUID 0(default_pg) Rank 0]  failure "
    "detected by watchdog at work sequence id: 241 PG status: last enqueued work: 315, last completed work: 183",
)

# ---------------------------------------------------------------- NCCL watchdog, older PyTorch (`[Rank N]` only)

#: https://github.com/pytorch/pytorch/issues/118369 (PyTorch 2.1: sequence numbers differ, no process group named)
PYTORCH_118369 = (
    "[E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=96120, "
    "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 25624887 milliseconds before timing out.",
    "[E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=96117, "
    "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 25625613 milliseconds before timing out.",
    "[E ProcessGroupNCCL.cpp:458] [Rank 7] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=64088, "
    "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 25625251 milliseconds before timing out.",
)

#: https://github.com/OFA-Sys/OFA/issues/271 (every rank at SeqNum 469508)
OFA_271 = (
    "[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=469508, "
    "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802212 milliseconds before timing out.",
    "[E ProcessGroupNCCL.cpp:737] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=469508, "
    "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802211 milliseconds before timing out.",
    "[E ProcessGroupNCCL.cpp:737] [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=469508, "
    "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802212 milliseconds before timing out.",
)

#: https://github.com/ultralytics/yolov5/issues/4409 (PyTorch 1.9: no SeqNum at all)
YOLOV5_4409 = (
    "[E ProcessGroupNCCL.cpp:566] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(OpType=BROADCAST, "
    "Timeout(ms)=60000) ran for 66853 milliseconds before timing out."
)

# ---------------------------------------------------------------- torchelastic's failure summary

#: https://github.com/lzhxmu/CPPO/issues/6 (root cause SIGKILL, no other failures)
CPPO_6_SIGKILL = (
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    "============================================================",
    "src/open_r1/grpo_gsm.py FAILED",
    "------------------------------------------------------------",
    "Failures:",
    "  <NO_OTHER_FAILURES>",
    "------------------------------------------------------------",
    "Root Cause (first observed failure):",
    "[0]:",
    "  time      : 2025-05-21_15:43:03",
    "  host      : mlxlab115rp2n7682d40d9-20250521025625-6dyyd3-8nir8b-worker",
    "  rank      : 0 (local_rank: 0)",
    "  exitcode  : -9 (pid: 14750)",
    "  error_file: <N/A>",
    "  traceback : Signal 9 (SIGKILL) received by PID 14750",
    "============================================================",
)
CPPO_6_HOST = "mlxlab115rp2n7682d40d9-20250521025625-6dyyd3-8nir8b-worker"

#: https://github.com/huggingface/accelerate/issues/2960 (global rank 10 is local rank 2; SIGABRT; then Slurm's line)
ACCELERATE_2960_SIGABRT = (
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    "=======================================================",
    "train_wrapper.py FAILED",
    "-------------------------------------------------------",
    "Failures:",
    "  <NO_OTHER_FAILURES>",
    "-------------------------------------------------------",
    "Root Cause (first observed failure):",
    "[0]:",
    "  time      : 2024-07-26_10:59:45",
    "  host      : SH-IDC1-10-140-24-95",
    "  rank      : 10 (local_rank: 2)",
    "  exitcode  : -6 (pid: 214033)",
    "  error_file: <N/A>",
    "  traceback : Signal 6 (SIGABRT) received by PID 214033",
    "=======================================================",
    "srun: error: SH-IDC1-10-140-24-95: task 0: Exited with exit code 1",
)
ACCELERATE_2960_HOST = "SH-IDC1-10-140-24-95"

#: https://github.com/open-compass/VLMEvalKit/issues/1131 (`Failures:` entries of other ranks, SIGABRT)
VLMEVALKIT_1131_OTHERS = (
    "Failures:",
    "[1]:",
    "  time      : 2025-07-10_21:46:37",
    "  host      : ip-172-31-21-134.ec2.internal",
    "  rank      : 1 (local_rank: 1)",
    "  exitcode  : -6 (pid: 32051)",
    "  error_file: <N/A>",
    "  traceback : Signal 6 (SIGABRT) received by PID 32051",
    "[2]:",
    "  time      : 2025-07-10_21:46:37",
    "  host      : ip-172-31-21-134.ec2.internal",
    "  rank      : 3 (local_rank: 3)",
    "  exitcode  : -6 (pid: 32053)",
    "  error_file: <N/A>",
    "  traceback : Signal 6 (SIGABRT) received by PID 32053",
    "------------------------------------------------------",
)

#: https://github.com/OEvortex/unsloth/issues/4 (exit code 1, no traceback recorded)
UNSLOTH_4_EXIT1 = (
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    "============================================================",
    "gpu.py FAILED",
    "------------------------------------------------------------",
    "Failures:",
    "  <NO_OTHER_FAILURES>",
    "------------------------------------------------------------",
    "Root Cause (first observed failure):",
    "[0]:",
    "  time      : 2025-08-01_11:36:44",
    "  host      : 192-222-55-138",
    "  rank      : 0 (local_rank: 0)",
    "  exitcode  : 1 (pid: 11377)",
    "  error_file: <N/A>",
    "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
    "============================================================",
)
UNSLOTH_4_HOST = "192-222-55-138"

#: https://github.com/pytorch/pytorch/pull/66182 (the summary with an error file and the traceback in it; the
#: report's sample stops inside the traceback, so only its first lines are used)
PYTORCH_66182_TRACEBACK_HEAD = (
    "Root Cause (first observed failure):",
    "[0]:",
    "  time      : 2021-10-05_17:37:22",
    "  host      : devvm4955.prn0.facebook.com",
    "  rank      : 0 (local_rank: 0)",
    "  exitcode  : 1 (pid: 3296201)",
    "  error_file: /home/kiuk/tmp/elastic/none_3_lsytqe/attempt_0/0/error.json",
    "  traceback :",
    "  Traceback (most recent call last):",
)

# ---------------------------------------------------------------- Python tracebacks of a rank

#: https://github.com/instructlab/training/pull/217 (an application exception, no rank prefix)
INSTRUCTLAB_217_TRACEBACK = (
    "[0] about to throw an error",
    "Traceback (most recent call last):",
    '  File "/home/ec2-user/training/test-error.py", line 12, in <module>',
    "    recurse_and_error(5)",
    '  File "/home/ec2-user/training/test-error.py", line 7, in recurse_and_error',
    "    recurse_and_error(depth - 1)",
    "  [Previous line repeated 2 more times]",
    '  File "/home/ec2-user/training/test-error.py", line 4, in recurse_and_error',
    '    raise ValueError("Oops! Hit a crazy error!")',
    "ValueError: Oops! Hit a crazy error!",
)

#: https://github.com/saforem2/mmm/blob/main/docs/torch-on-aurora.md (a crash report: PyTorch 2.5 prefixes every
#: line of rank 0's traceback with `[rank0]: `; a subset of its frames, in order)
MMM_AURORA_RANK0 = (
    "[rank0]: Traceback (most recent call last):",
    '[rank0]:   File "/lus/flare/projects/Aurora_deployment/foremans/micromamba/envs/anl_2024_12_release_2/lib/'
    'python3.10/runpy.py", line 196, in _run_module_as_main',
    "[rank0]:     return _run_code(code, main_globals, None,",
    '[rank0]:   File "/lus/flare/projects/Aurora_deployment/foremans/micromamba/envs/anl_2024_12_release_2/lib/'
    'python3.10/site-packages/torch/cuda/__init__.py", line 310, in _lazy_init',
    '[rank0]:     raise AssertionError("Torch not compiled with CUDA enabled")',
    "[rank0]: AssertionError: Torch not compiled with CUDA enabled",
)

#: https://github.com/vllm-project/vllm/issues/10453 (rank 1 fails in NCCL: a communication error, not the program's;
#: a subset of its frames, in order)
VLLM_10453_RANK1 = (
    "[rank1]: Traceback (most recent call last):",
    '[rank1]:   File "/vllm-workspace/test.py", line 8, in <module>',
    "[rank1]:     dist.all_reduce(data, op=dist.ReduceOp.SUM)",
    '[rank1]:   File "/usr/local/lib/python3.12/dist-packages/torch/distributed/c10d_logger.py", line 83, in wrapper',
    "[rank1]:     return func(*args, **kwargs)",
    "[rank1]:            ^^^^^^^^^^^^^^^^^^^^^",
    "[rank1]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, "
    "internal error - please report this issue to the NCCL developers, NCCL version 2.21.5",
    "[rank1]: ncclInternalError: Internal check failed.",
)

#: https://github.com/deepinsight/insightface/issues/2163 (two ranks' unprefixed tracebacks interleaved)
INSIGHTFACE_2163_INTERLEAVED = (
    "Traceback (most recent call last):",
    "Traceback (most recent call last):",
    '  File "train.py", line 216, in <module>',
    '  File "train.py", line 216, in <module>',
    "        main(parser.parse_args())main(parser.parse_args())",
    "",
)

# ---------------------------------------------------------------- NCCL WARN lines

#: https://github.com/NVIDIA/nccl/issues/1405 (NCCL 2.2x `status=12`: IBV_WC_RETRY_EXC_ERR)
NCCL_1405_IB = (
    "kp-ddp-worker-0:3468:3905 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer "
    "10.216.210.236<54862> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid "
    "fd00:1148:9000:5000:4:200:3:ff22 remoteGidsfd00:1148:9000:5000:4:200:3:ff1f",
    "kp-ddp-worker-0:3468:3905 [4] NCCL INFO transport/net.cc:1302 -> 6",
    "kp-ddp-worker-0:3468:3905 [4] NCCL INFO proxy.cc:698 -> 6",
    "kp-ddp-worker-0:3468:3905 [4] NCCL INFO proxy.cc:878 -> 6 [Progress Thread]",
)

#: https://github.com/NVIDIA/nccl/issues/928 (older `with error 4, opcode ...` form, IPv6 link-local peers)
NCCL_928_IB = (
    "H100-2:19989:20082 [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer "
    "fe80::966d:ae03:8b:df78%ib0<53249> with error 4, opcode 32564, len 32564, vendor err 81 (Send)",
    "H100-1:9821:9920 [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer "
    "fe80::966d:ae03:8b:df50%ib0<44413> with error 4, opcode 32613, len 32613, vendor err 81 (Send)",
)

#: https://github.com/NVIDIA/nccl-tests/issues/166 (NET/Socket: a named peer closed; a connect failed)
NCCL_TESTS_166 = (
    "ubuntu:39964:40075 [0] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to 10.0.0.2<45763> failed : "
    "Software caused connection abort",
    "ubuntu:39964:40044 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer "
    "node1<57557>",
    "ubuntu:39964:40044 [0] NCCL INFO misc/socket.cc:749 -> 6",
)

#: https://github.com/NVIDIA/nccl/issues/562 (a local verbs call failed)
NCCL_562_VERBS = "hai-a100-3:3778851:3779883 [4] ibvwrap.c:130 NCCL WARN Call to ibv_create_qp failed"

#: https://github.com/NVIDIA/nccl/issues/629 (a peer reset the connection; a CUDA failure inside NCCL)
NCCL_629 = (
    "A03-R28-I49-3-9000018:46841:46987 [0] include/socket.h:428 NCCL WARN Net : Call to recv from "
    "11.127.49.2<36048> failed : Connection reset by peer",
    "A03-R28-I49-2-6000166:104934:104934 [1] init.cc:204 NCCL WARN Cuda failure 'an illegal memory access was "
    "encountered'",
)

#: https://github.com/NVIDIA/nccl/issues/1664 (the plugin's `NET/IBP:` spelling, as the report's title quotes it)
NCCL_1664_IBP_MESSAGE = (
    "NET/IBP:Got completion from peer 7.6.13.83<36315> with status=12 opcode=32698 len=32696 vendor err 129 (Send)"
)

# ---------------------------------------------------------------- CUDA errors

#: https://github.com/jade-hpc-gpu/jade-hpc-gpu.github.io/issues/194 (a node's GPU memory failing)
JADE_194_ECC = (
    "RuntimeError: CUDA error: uncorrectable ECC error encountered",
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be "
    "incorrect.",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1.",
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
)

#: https://github.com/ostris/ai-toolkit/issues/470 (PyTorch 2.5+ names the cudaError enum in its hint)
OSTRIS_470_ECC = (
    "CUDA error: uncorrectable ECC error encountered Search for `cudaErrorECCUncorrectable' in "
    "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information. CUDA kernel "
    "errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect. "
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1 Compile with `TORCH_USE_CUDA_DSA` to enable device-side "
    "assertions."
)

#: https://github.com/MIC-DKFZ/nnUNet/issues/1519 (the report's title)
NNUNET_1519_NVLINK = "RuntimeError: CUDA error: uncorrectable NVLink error detected during the execution"

#: https://github.com/pytorch/pytorch/issues/58155 (the C++ runtime's `what():` line)
PYTORCH_58155_NVLINK_WHAT = "  what():  CUDA error: uncorrectable NVLink error detected during the execution"

#: https://github.com/hao-ai-lab/FastVideo/issues/1008 (the watchdog reports a kernel's failure, a non-default group)
FASTVIDEO_1008_LAUNCH = (
    "[rank9]:[E113 11:43:02.241131296 ProcessGroupNCCL.cpp:1899] [PG ID 5 PG GUID 55(mesh_replicate) Rank 1] "
    "Process group watchdog thread terminated with exception: CUDA error: unspecified launch failure"
)

#: https://github.com/bytedance/flux/issues/40 (illegal memory access, `[PG 0 (default_pg) Rank 0]`)
FLUX_40_ILLEGAL = (
    "[rank0]:[E907 22:34:22.823452114 ProcessGroupNCCL.cpp:1515] [PG 0 (default_pg) Rank 0] Process group watchdog "
    "thread terminated with exception: CUDA error: an illegal memory access was encountered"
)

#: https://github.com/vllm-project/vllm/issues/4108 (older watchdog form of the same error)
VLLM_4108_ILLEGAL = (
    "[E ProcessGroupNCCL.cpp:916] [Rank 0] NCCL watchdog thread terminated with exception: CUDA error: an illegal "
    "memory access was encountered"
)

#: https://github.com/karpathy/nanoGPT/issues/470
NANOGPT_470_ASSERT = "RuntimeError: CUDA error: device-side assert triggered"

#: https://github.com/pytorch/pytorch/issues/16417 (PyTorch's caching allocator: the application's CUDA OOM)
PYTORCH_16417_OOM = (
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 22.00 MiB. GPU 0 has a total capacity of "
    "23.65 GiB of which 11.06 MiB is free. Including non-PyTorch memory, this process has 23.60 GiB memory in use. "
    "Of the allocated memory 22.90 GiB is allocated by PyTorch, and 194.87 MiB is reserved by PyTorch but "
    "unallocated. If reserved but unallocated memory is large try setting "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory "
    "Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
)

#: https://github.com/facebookresearch/detectron2/issues/2580 and https://github.com/AILab-CVC/YOLO-World/issues/385
#: (the older and the newer text of cudaErrorDevicesUnavailable)
DEVICES_UNAVAILABLE = (
    "RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable",
    "RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable",
)

#: https://github.com/deepbeepmeep/Wan2GP/issues/442 (the report's title: NVIDIA names no cause)
WAN2GP_442_UNKNOWN = (
    "RuntimeError: CUDA error: unknown error Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions"
)

#: https://github.com/nagadomi/nunif/issues/702 (cudaErrorInsufficientDriver: the node's state, a driver older than
#: the job's runtime)
NUNIF_702_DRIVER = "RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version"

# ---------------------------------------------------------------- kernel OOM-killer lines (the provider's input)

#: https://github.com/equinor/ert/issues/7797 (`dmesg --time-format iso`; the message after the time)
ERT_7797_OOM = (
    "Out of memory: Killed process 1440763 (perl) total-vm:87033376kB, anon-rss:60356340kB, file-rss:0kB, "
    "shmem-rss:0kB, UID:21417 pgtables:169956kB oom_score_adj:0"
)
#: https://github.com/reportportal/kubernetes/issues/203 (a memory cgroup's OOM kill, with the monotonic bracket)
REPORTPORTAL_203_CGROUP = (
    "[ 7063.247407] Memory cgroup out of memory: Killed process 63214 (uwsgi) total-vm:3149468kB, "
    "anon-rss:164992kB, file-rss:52176kB, shmem-rss:92kB, UID:0 pgtables:1372kB oom_score_adj:986"
)
#: https://github.com/kubernetes/kubernetes/issues/56891 (older kernels: the victim chosen, then the one killed)
KUBERNETES_56891_OLD = (
    "Memory cgroup out of memory: Kill process 24572 (java) score 0 or sacrifice child",
    "Killed process 28438 (java) total-vm:20255636kB, anon-rss:466160kB, file-rss:13684kB",
)
#: https://github.com/ShengcaiLiao/QAConv/issues/19 (the `oom-kill:` summary line names `pid=`; only the
#: `Killed process` line that follows it is counted, so one kill is not read twice)
QACONV_19_SUMMARY = (
    "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,"
    "task_memcg=/user.slice/user-1000.slice/user@1000.service,task=python,pid=698405,uid=1000"
)

#: https://github.com/lmzpai/roboMamba/issues/10 (torchrun's own traceback and summary head after a SIGKILL; a
#: subset of its frames, in order)
ROBOMAMBA_10_LAUNCHER = (
    "E0325 20:57:27.620000 2606 site-packages/torch/distributed/elastic/multiprocessing/api.py:869] failed "
    "(exitcode: -9) local_rank: 5 (pid: 2630) of binary: /root/miniconda3/bin/python",
    "Traceback (most recent call last):",
    '  File "/root/miniconda3/bin/torchrun", line 8, in <module>',
    "    sys.exit(main())",
    "             ^^^^^^",
    '  File "/root/miniconda3/lib/python3.12/site-packages/torch/distributed/launcher/api.py", line 269, in '
    "launch_agent",
    "    raise ChildFailedError(",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    "=====================================================",
    "test.py FAILED",
    "-----------------------------------------------------",
    "Failures:",
    "  <NO_OTHER_FAILURES>",
)

# ---------------------------------------------------------------- more watchdog shapes

#: https://github.com/instructlab/training/pull/520 (`what():` with a default-group marker: global rank 3)
INSTRUCTLAB_520_WHAT = (
    "  what():  [PG ID 0 PG GUID 0(default_pg) Rank 3] Process group watchdog thread terminated with exception: "
    "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, "
    "NumelOut=1, Timeout(ms)=1) ran for 90 milliseconds before timing out."
)

#: https://github.com/huggingface/open-r1/issues/620 (the report wraps this line twice; joined here)
OPEN_R1_620_WHAT = (
    "  what():  [PG ID 0 PG GUID 0(default_pg) Rank 3] Process group watchdog thread terminated with exception: "
    "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4, OpType=BROADCAST, NumelIn=112, "
    "NumelOut=112, Timeout(ms)=1800000) ran for 1800011 milliseconds before timing out."
)

#: https://github.com/NVIDIA/nccl/issues/1730 (256 ranks on 32 nodes; rank 118's lines)
NCCL_1730_RANK118 = (
    "[rank118]:[E603 17:48:01.005271823 ProcessGroupNCCL.cpp:632] [Rank 118] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=2398459, OpType=ALLREDUCE, NumelIn=8652160, NumelOut=8652160, Timeout(ms)=1800000) "
    "ran for 1800068 milliseconds before timing out.",
    "[rank118]:[E603 17:48:01.005538748 ProcessGroupNCCL.cpp:2268] [PG ID 0 PG GUID 0(default_pg) Rank 118]  "
    "failure detected by watchdog at work sequence id: 2398459 PG status: last enqueued work: 2398578, last "
    "completed work: 2398458",
)

#: https://github.com/snowflakedb/ArcticTraining/issues/219 (rank 2 timed out; ranks 7 and 5 report their watchdog
#: stuck in a CUDA/NCCL call and nothing else)
ARCTIC_219 = (
    "[rank7]:[E626 05:14:36.393067540 ProcessGroupNCCL.cpp:1743] [PG ID 0 PG GUID 0(default_pg) Rank 7] "
    "ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued "
    "collectives. This typically indicates a NCCL/CUDA API (e.g., CudaEventDestroy) hang blocking the watchdog, and "
    "could be triggered by another thread holding the GIL inside a CUDA api (for example, CudaEventDestroy), or "
    "other deadlock-prone behaviors.If you suspect the watchdog is not actually stuck and a longer timeout would "
    "help, you can either increase the timeout (TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC) to a larger value or disable the "
    "heartbeat monitor (TORCH_NCCL_ENABLE_MONITORING=0).If either of aforementioned helps, feel free to file an "
    "issue to PyTorch about the short timeout or false positive abort; otherwise, please attempt to debug the hang. ",
    "[rank2]:[E626 05:06:30.929096625 ProcessGroupNCCL.cpp:632] [Rank 2] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=120049, OpType=_ALLGATHER_BASE, NumelIn=16384000, NumelOut=131072000, "
    "Timeout(ms)=1800000) ran for 1800065 milliseconds before timing out.",
)

#: https://github.com/PKU-YuanGroup/UniWorld/issues/46 (a rank's line that reports no record of its own)
UNIWORLD_46_RANK6 = (
    "[rank6]:[E624 04:14:29.224103812 ProcessGroupNCCL.cpp:684] [Rank 6] Some NCCL operations have failed or timed "
    "out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on "
    "corrupted/incomplete data."
)

#: https://github.com/pytorch/pytorch/pull/175254 (newer torchelastic appends the signal's name to `exitcode`)
PYTORCH_175254_EXITCODE = "  exitcode  : -11 (pid: 5277) (SIGSEGV)"

#: The desync report's other statement, as PyTorch's torch/csrc/distributed/c10d/TraceUtils.h
#: (`analyzeMissingRanks`) prints it, with rank 47 filled in: no public log holding it was found.
TRACEUTILS_MISSING_RANKS = (
    "\t - To our best knowledge, ranks [47] are the lagging ranks that caused this timeout. They never joined any "
    "collectives"
)

#: https://github.com/NVIDIA/nccl/issues/905 (the maintainer quotes the line the log was full of: "You seem to have a
#: flapping link")
NCCL_905_PORT_ERROR = "NCCL WARN NET/IB : Got async event : port error"

#: https://github.com/NVIDIA/nccl/issues/230 (an mpirun `--timestamp-output --tag-output` prefix before the host)
NCCL_230_CATASTROPHIC = (
    "2019-06-02T16:13:44.884Z: [1,12]<stdout>:container-e275-1553839402050-12124-01-000057:815:864 [0] "
    "transport/net_ib.cu:80 NCCL WARN NET/IB : Got async event : local catastrophic error"
)
