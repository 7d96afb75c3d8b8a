"""More published PyTorch 2.x / NCCL incident lines, end to end through POST /v1/attribution `fast`.

Each excerpt names the public report it was taken from; host names are replaced by `node-a`/`node-b`. The
helpers are those of `test_job_logs_app.py`.
"""

from __future__ import annotations

from pathlib import Path

from tests.telemetry.test_job_logs_app import _ask, _findings, _texts, _unattributed

#: https://github.com/pytorch/pytorch/issues/113128 (an accelerate/torchrun `[default0]:` prefix before `[rank12]:`,
#: the watchdog reporting a CUDA failure on PyTorch 2.4)
PT_113128_ECC = (
    "[default0]:[rank12]:[E817 17:40:34.227531918 ProcessGroupNCCL.cpp:1515] [PG 0 (default_pg) Rank 12] Process "
    "group watchdog thread terminated with exception: CUDA error: uncorrectable ECC error encountered",
    "[default0]:Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
)

#: https://github.com/kohya-ss/sd-scripts/issues/1434 (PyTorch 2.1 wording: `NCCL watchdog thread terminated`)
KOHYA_1434_ECC = (
    "RuntimeError: CUDA error: uncorrectable ECC error encountered",
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be "
    "incorrect.",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1.",
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
    "",
    "[E ProcessGroupNCCL.cpp:916] [Rank 1] NCCL watchdog thread terminated with exception: CUDA error: uncorrectable "
    "ECC error encountered",
)

#: https://github.com/pytorch/pytorch/issues/126544 (torchelastic's agent: the worker aborted, exitcode -6)
PT_126544_EXIT = (
    "E0517 08:24:03.805000 140617718325696 torch/distributed/elastic/multiprocessing/api.py:826] failed "
    "(exitcode: -6) local_rank: 0 (pid: 970611) of binary: /tmp/venv/bin/python3",
)


def test_an_ecc_error_behind_a_launcher_prefix_and_the_pg_prefix_points_at_its_node(tmp_path: Path) -> None:
    body = _ask(tmp_path, ["node-a", "node-b"], {"node-a": PT_113128_ECC, "node-b": []}, ranks=[12])
    assert _findings(body) == [("node-a", "gpu_memory")]
    assert PT_113128_ECC[0] in _texts(body["attributions"][0])
    assert _unattributed(body) == ["node-b"]


def test_an_ecc_error_the_older_watchdog_repeats_is_one_finding_on_its_node(tmp_path: Path) -> None:
    body = _ask(tmp_path, ["node-a", "node-b"], {"node-a": KOHYA_1434_ECC, "node-b": []}, ranks=[0, 1])
    assert _findings(body) == [("node-a", "gpu_memory")]
    assert KOHYA_1434_ECC[0] in _texts(body["attributions"][0])


def test_the_agents_exitcode_line_alone_never_blames_a_node_for_a_hardware_fault(tmp_path: Path) -> None:
    body = _ask(tmp_path, ["node-a"], {"node-a": PT_126544_EXIT})
    # No root-cause summary names a host: the agent's line alone is not enough to blame node-a.
    assert body["attributions"] == [] and _unattributed(body) == ["node-a"]


#: https://github.com/NVIDIA/nccl/issues/1612 (NCCL 2.2x socketProgress, an mpirun `[0] ` prefix, no host prefix)
NCCL_1612_CLOSED = (
    "[0] misc/socket.cc:71 NCCL WARN socketProgress: Connection closed by remote peer 10.10.1.3<36138>",
    "[0] NCCL INFO misc/socket.cc:80 -> 6",
    "[0] NCCL INFO bootstrap.cc:701 -> 6",
)

#: https://github.com/NVIDIA/nccl-tests/issues/252 (host `kolyoz2` becomes node-b; the IB plugin's completion error)
NCCL_TESTS_252_IB = (
    "node-b:25146:25854 [0] ib_plugin.c:1105 NCCL WARN NET/IB : Got completion from peer 10.0.35.1<49189> with "
    "error 4, opcode 5327, len 5327, vendor err 81 (Send)",
    "node-b:25146:25854 [0] NCCL INFO transport/net.cc:1137 -> 6",
    "node-b:25146:25852 [0] NCCL INFO [Service thread] Connection closed by localRank 0",
)


def test_a_peer_closing_the_socket_names_no_node(tmp_path: Path) -> None:
    # A peer whose process died makes its partners report exactly this: it follows another failure.
    body = _ask(tmp_path, ["node-a", "node-b"], {"node-a": NCCL_1612_CLOSED, "node-b": []})
    assert body["attributions"] == [] and _unattributed(body) == ["node-a", "node-b"]
    assert "node-a: NCCL reported a connection closed or reset by its peer (consequence)" in body["error"]["message"]


def test_an_ib_completion_error_with_the_plugins_file_name_names_no_node(tmp_path: Path) -> None:
    body = _ask(tmp_path, ["node-a", "node-b"], {"node-a": [], "node-b": NCCL_TESTS_252_IB})
    # The completion error is read (a note says so), but the NICs that could not talk have two ends.
    assert body["attributions"] == [] and _unattributed(body) == ["node-a", "node-b"]
    assert "node-b: NCCL reported an InfiniBand work completion with an error status" in body["error"]["message"]
    # The local service thread's `Connection closed by localRank 0` is NCCL shutting down, not a second error.
    assert "connection closed or reset by its peer" not in body["error"]["message"]


#: https://github.com/open-mmlab/mmsegmentation/issues/3106 (a summary with two other failures before the root cause,
#: all SIGABRT on one host; host `neptun.informatik.uni-kl.de` becomes node-a; the excerpt ends at the root cause's
#: `error_file` line, as the report's quote does)
MMSEG_3106_SUMMARY = (
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    "========================================================",
    "tools/train.py FAILED",
    "--------------------------------------------------------",
    "Failures:",
    "[1]:",
    "  time      : 2023-06-14_22:36:10",
    "  host      : node-a",
    "  rank      : 1 (local_rank: 1)",
    "  exitcode  : -6 (pid: 2385923)",
    "  error_file: <N/A>",
    "  traceback : Signal 6 (SIGABRT) received by PID 2385923",
    "[2]:",
    "  time      : 2023-06-14_22:36:10",
    "  host      : node-a",
    "  rank      : 2 (local_rank: 2)",
    "  exitcode  : -6 (pid: 2385924)",
    "  error_file: <N/A>",
    "  traceback : Signal 6 (SIGABRT) received by PID 2385924",
    "--------------------------------------------------------",
    "Root Cause (first observed failure):",
    "[0]:",
    "  time      : 2023-06-14_22:36:10",
    "  host      : node-a",
    "  rank      : 0 (local_rank: 0)",
    "  exitcode  : -6 (pid: 2385922)",
    "  error_file: <N/A>",
)


def test_a_summary_with_several_failures_names_the_root_cause_but_no_node(tmp_path: Path) -> None:
    body = _ask(tmp_path, ["node-a", "node-b"], {"node-a": MMSEG_3106_SUMMARY, "node-b": []})
    # SIGABRT with no traceback is an exit: it names no node by itself, and the answer says which rank it was.
    assert body["attributions"] == [] and _unattributed(body) == ["node-a", "node-b"]
    message = body["error"]["message"]
    assert "torchelastic's root cause: rank 0 on node-a ended with SIGABRT and no traceback says why" in message
    # node-b's job log is empty: nothing of it was left unread, so the answer does not say so.
    assert "beyond the read bound" not in message


def test_an_empty_job_log_is_not_reported_as_output_beyond_the_read_bound(tmp_path: Path) -> None:
    body = _ask(tmp_path, ["node-a", "node-b"], {"node-a": [], "node-b": []})
    assert body["attributions"] == [] and "error" not in body
    # A non-empty log over the per-node bound still is.
    cut = _ask(tmp_path / "cut", ["node-a"], {"node-a": ["x" * 100] * 30},
               ATTRIBUTION_JOB_LOG_MAX_NODE_BYTES="1024")
    assert "older output of 1 node(s) lies beyond the read bound" in cut["error"]["message"]


#: https://github.com/pytorch/pytorch/pull/64241 (the abort message with its original reason, as the PR shows it)
PT_64241_ABORT = (
    "NCCL communicator was aborted on rank 1. Original reason for failure was: Work: WorkNCCL(OpType=ALLREDUCE, "
    "TensorShape=[1], Timeout(ms)=2000) timed out in call to wait().",
)

#: https://github.com/hiyouga/LlamaFactory/issues/163 (accelerate's `stderr: ` prefix, PyTorch 1.x logger wording)
LF_163_EXIT = (
    "stderr: ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 7 (pid: 153932) "
    "of binary: /home/panww/miniconda3/tools/bin/python",
)


def test_an_aborted_communicator_is_a_consequence_and_names_no_node(tmp_path: Path) -> None:
    body = _ask(tmp_path, ["node-a", "node-b"], {"node-a": PT_64241_ABORT, "node-b": []}, ranks=[1])
    assert body["attributions"] == [] and _unattributed(body) == ["node-a", "node-b"]


def test_the_agents_failed_line_behind_a_stderr_prefix_alone_names_no_node(tmp_path: Path) -> None:
    body = _ask(tmp_path, ["node-a"], {"node-a": LF_163_EXIT})
    assert body["attributions"] == [] and _unattributed(body) == ["node-a"]
