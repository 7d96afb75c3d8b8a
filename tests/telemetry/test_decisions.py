"""The decision rules of the job logs and the kernel logs together, end to end through POST /v1/attribution `fast`:
the job's own causes as AllJobResources findings, node state compared across the scope, comparison within the job,
earlier attempts of the workload, and the kernel's driver statuses, SXids and application-fault Xids.

The lines are real (each names its report); scenarios that put lines of several reports together, or give a line
another rank or time, say so.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from providers.base import AttributionRequest, Deadline, FailureContext, Phase, Scope, WorkloadContext
from providers.telemetry.joblog import ReadLimits
from providers.telemetry.joblog.history import EARLIER_BYTES_DIVISOR, MAX_EARLIER_ATTEMPTS, earlier_limits, with_history
from providers.telemetry.joblog.source import FileJobLogSource, JobLogs, job_log_result
from providers.telemetry.window import Window
from tests.joblog import fixtures as fx
from tests.joblog.support import cri, later, write_tree
from tests.joblog.support import logs as parsed
from tests.telemetry.conftest import fast_body, rsyslog
from tests.telemetry.test_job_logs_app import DETECTED, WORKLOAD, _ask, _client, _findings, _kernel, _texts

#: marin-community/marin#7018: NCCL's bootstrap found no socket interface (the cluster's NCCL_SOCKET_IFNAME)
NO_SOCKET = "invalid usage ... Last NCCL warning(error): 'Bootstrap : no socket interface found'"
#: desihub/desitarget#628: Slurm ended the step at its time limit
TIME_LIMIT = "slurmstepd: error: *** STEP 32233190.0 ON nid01934 CANCELLED AT 2020-07-03T02:59:56 DUE TO TIME LIMIT ***"
#: NVIDIA/nccl-tests#264: the fabric manager service was not enabled on the node
NOT_INITIALIZED = "Test CUDA failure common.cu:941 'system not yet initialized'"
#: scitix/sichek#51: GPU1 of the node needed a reset (the driver's own status, in its kernel log)
RESET_REQUIRED = (
    "NVRM: rpcRmApiAlloc_GSP: GspRmAlloc failed: hClient=0xc1d1a616; hParent=0x5c000054; hObject=0x5c00005b; "
    "hClass=0x0000c86f; paramsSize=0x00000170; paramsStatus=0x00000062; status=0x00000062",
    "NVRM: nvAssertOkFailedNoLog: Assertion failed: Reset required [NV_ERR_RESET_REQUIRED] (0x00000062) returned "
    "from status @ kernel_channel.c:2874",
)
#: doitsujin/dxvk#1799: Xid 31 MMU faults of one process (`pid=12890`) on one GPU
XID31 = (
    "NVRM: Xid (PCI:0000:01:00): 31, pid=12890, Ch 00000040, intr 10000000. MMU Fault: ENGINE GRAPHICS "
    "GPCCLIENT_T1_0 faulted @ 0x1_0f0a0000. Fault is of type FAULT_PDE ACCESS_TYPE_READ"
)


def _kernel_lines(node: str, messages: list[str], seconds_before: int = 30) -> list[str]:
    return [rsyslog(DETECTED - timedelta(seconds=seconds_before - i), node, m) for i, m in enumerate(messages)]


def _ask_attempt(root: Path, nodes: list[str], attempts: dict[int, dict[str, list[str]]], ranks: list[int] = (),
                 kernel: dict[str, list[str]] | None = None) -> dict[str, Any]:  # fmt: skip
    """Write each attempt's job-log tree, then ask `fast` for the newest attempt."""
    for node in nodes:
        _kernel(root, node, (kernel or {}).get(node, ()))
    for attempt, files in attempts.items():
        write_tree(root / "jobs", {f"{n}.log": lines for n, lines in files.items()}, WORKLOAD, attempt)
    body = fast_body(nodes, DETECTED.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), ranks, workload_id=WORKLOAD)
    body["workload_context"]["attempt_index"] = max(attempts)  # type: ignore[index]
    answer = _client(root).post("/v1/attribution", json=body)
    assert answer.status_code == 200
    return answer.get_json()


# ---------------------------------------------------------------- the job's own causes


def test_a_configuration_error_the_logs_make_plain_is_the_jobs_with_its_lines(tmp_path: Path) -> None:
    body = _ask(tmp_path, ["node-a", "node-b"], {"node-a": [NO_SOCKET], "node-b": [fx.ARCTIC_219[1]]})
    assert _findings(body) == [("AllJobResources", "configuration")]
    assert NO_SOCKET in _texts(body["attributions"][0])
    assert sorted(body["unattributed_targets"], key=str) == [{"name": "node-a", "type": "Node"},
                                                             {"name": "node-b", "type": "Node"}]  # fmt: skip


def test_the_schedulers_own_action_is_the_jobs_and_explains_the_timeouts_after_it(tmp_path: Path) -> None:
    body = _ask(tmp_path, ["nid01934", "nid01935"], {"nid01934": [TIME_LIMIT], "nid01935": [fx.ARCTIC_219[1]]})
    assert _findings(body) == [("AllJobResources", "scheduler")]
    assert TIME_LIMIT in _texts(body["attributions"][0])


def test_the_jobs_configuration_ranks_above_its_programs_failure(tmp_path: Path) -> None:
    body = _ask(tmp_path, ["node-a", "node-b"], {"node-a": [NO_SOCKET], "node-b": [fx.NANOGPT_470_ASSERT]})
    assert _findings(body) == [("AllJobResources", "configuration")]


# ---------------------------------------------------------------- node state, compared across the scope


def test_node_state_shown_by_one_node_while_the_other_runs_names_that_node(tmp_path: Path) -> None:
    body = _ask(tmp_path, ["node-a", "node-b"], {"node-a": [NOT_INITIALIZED], "node-b": [fx.ARCTIC_219[1]]})
    assert _findings(body) == [("node-a", "gpu_driver")]
    texts = _texts(body["attributions"][0])
    assert texts[0].startswith("node-a shows that it cannot run the job as it is (cudaErrorSystemNotReady) while 1 "
                               "other node(s) of the job whose logs were read do not (node-b)")  # fmt: skip
    assert NOT_INITIALIZED in texts


def test_node_state_shown_by_every_node_read_is_the_jobs_configuration(tmp_path: Path) -> None:
    body = _ask(tmp_path, ["node-a", "node-b"], {"node-a": [NOT_INITIALIZED], "node-b": [NOT_INITIALIZED]})
    assert _findings(body) == [("AllJobResources", "configuration")]
    assert _texts(body["attributions"][0])[0].startswith("every node of the job whose log was read (2: node-a, node-b)")
    # One node of two read: nothing to compare its state with; a daemon of the node's own stack names it.
    one = _ask(tmp_path / "one", ["node-a", "node-b"], {"node-a": [NOT_INITIALIZED]})
    assert _findings(one) == [("node-a", "gpu_driver")]
    assert _texts(one["attributions"][0])[0].startswith("node-a, the only node of the job whose log was read, shows")


def test_a_daemon_not_running_on_a_job_s_only_node_names_it(tmp_path: Path) -> None:
    # NVIDIA/nccl-tests#264: the fabric manager was not running on the one node of the job. No setting of the job
    # stops a daemon of the node, so with nothing to compare with the sign names the node.
    body = _ask(tmp_path, ["node-a"], {"node-a": [NOT_INITIALIZED]})
    assert _findings(body) == [("node-a", "gpu_driver")]
    assert _texts(body["attributions"][0])[0].startswith(
        "node-a, the job's only node, shows that its own stack cannot run the job as it is (cudaErrorSystemNotReady)")


def test_a_cuda_failure_of_nccl_s_nvls_transport_is_node_state_unless_its_error_names_a_cause(tmp_path: Path) -> None:
    # NVIDIA/nccl#1488: NVLS's multicast calls fail with `invalid argument` on the node whose fabric manager was
    # restarted without a GPU reset; NCCL's own text for NVLS failures names the fabric manager. node-b ran on.
    nvls = "node-a:12098:12141 [2] transport/nvls.cc:244 NCCL WARN Cuda failure 1 'invalid argument'"
    body = _ask(tmp_path, ["node-a", "node-b"], {"node-a": [nvls], "node-b": [fx.ARCTIC_219[1]]})
    assert _findings(body) == [("node-a", "gpu_driver")]
    texts = _texts(body["attributions"][0])
    assert texts[0].startswith("node-a shows that it cannot run the job as it is (nccl_nvls_cuda_failure)")
    assert texts[1].startswith("a process on node-a reported CUDA's 'invalid argument' from NCCL's check site "
                               "nccl_nvls_cuda_failure: per NCCL")
    assert nvls in texts
    # The same check site failing to allocate memory: the error names its cause, the program's.
    oom = nvls.replace("Cuda failure 1 'invalid argument'", "Cuda failure 2 'out of memory'")
    body = _ask(tmp_path / "oom", ["node-a", "node-b"], {"node-a": [oom], "node-b": [fx.ARCTIC_219[1]]})
    assert _findings(body) == [("AllJobResources", "application")]
    # Elsewhere in NCCL the same `invalid argument` names no node: it has no single cause (a note says so).
    elsewhere = nvls.replace("transport/nvls.cc", "transport/p2p.cc")
    body = _ask(tmp_path / "p2p", ["node-a", "node-b"], {"node-a": [elsewhere], "node-b": [fx.ARCTIC_219[1]]})
    assert [target for target, _ in _findings(body)] == ["AllJobResources"]
    assert "cudaErrorInvalidValue" in body["error"]["message"]


def test_node_state_beside_the_nodes_own_kernel_status_is_the_kernels_finding(tmp_path: Path) -> None:
    # scitix/sichek#51: the job saw devices busy or unavailable; the node's kernel log says the GPU needs a reset.
    body = _ask(tmp_path, ["node-a"], {"node-a": [fx.DEVICES_UNAVAILABLE[0]]},
                kernel={"node-a": _kernel_lines("node-a", list(RESET_REQUIRED))})  # fmt: skip
    assert _findings(body) == [("node-a", "gpu_driver")]
    texts = _texts(body["attributions"][0])
    assert "NV_ERR_RESET_REQUIRED (0x00000062, \"Reset required\"): the GPU needs a reset" in texts[0]
    assert fx.DEVICES_UNAVAILABLE[0] in texts
    assert "error" not in body  # the job log's ambiguous signal is settled by the finding: no note is left


# ---------------------------------------------------------------- comparison within the job


def _illegal_on_rank3_others_wait() -> list[str]:
    """Assembled: rank 3 raises FLUX#40's illegal memory access (its rank put to 3); ranks 0-2 and 4-7 time out
    (ArcticTraining#219's rank-2 line, each given its rank): one node, eight GPUs, the same code."""
    lines = [fx.FLUX_40_ILLEGAL.replace("[rank0]", "[rank3]").replace("Rank 0]", "Rank 3]")]
    lines += [fx.ARCTIC_219[1].replace("[rank2]", f"[rank{r}]").replace("[Rank 2]", f"[Rank {r}]")
              for r in (0, 1, 2, 4, 5, 6, 7)]  # fmt: skip
    return lines


def test_mmu_faults_repeating_on_one_gpu_while_one_rank_alone_fails_name_the_node(tmp_path: Path) -> None:
    kernel = {"node-a": _kernel_lines("node-a", [XID31, XID31.replace("0x1_0f0a0000", "0x1_0f0b0000"), XID31])}
    body = _ask(tmp_path, ["node-a"], {"node-a": _illegal_on_rank3_others_wait()}, ranks=list(range(8)),
                kernel=kernel)  # fmt: skip
    assert _findings(body) == [("node-a", "gpu_hardware")]
    said = _texts(body["attributions"][0])[0]
    assert said.startswith("Xid 31 repeated 3 times on 0000:01:00 of node-a and on no other GPU of the job, while "
                           "rank 3 on node-a raised cudaErrorIllegalAddress and 7 other rank(s)")  # fmt: skip
    assert "possible hardware issue" in said


def test_mmu_faults_on_two_gpus_are_the_applications(tmp_path: Path) -> None:
    spread = [XID31, XID31.replace("PCI:0000:01:00", "PCI:0000:02:00"), XID31]
    body = _ask(tmp_path, ["node-a"], {"node-a": _illegal_on_rank3_others_wait()}, ranks=list(range(8)),
                kernel={"node-a": _kernel_lines("node-a", spread)})  # fmt: skip
    assert _findings(body) == [("AllJobResources", "application")]
    assert _texts(body["attributions"][0])[0].startswith("Xid 31 ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT")


def _timeouts(ranks: range, at: float) -> list[str]:
    return [cri(fx.ARCTIC_219[1].replace("[rank2]", f"[rank{r}]").replace("[Rank 2]", f"[Rank {r}]"),
                at=later(at)) for r in ranks]  # fmt: skip


def test_the_one_rank_silent_while_its_peers_time_out_on_a_one_node_job_names_the_node(tmp_path: Path) -> None:
    # Assembled from ArcticTraining#219: ranks 0-2 time out (their 1,800 s wait began at 100 s); rank 3 wrote its
    # last line at 10 s and nothing after it.
    last = cri(fx.UNIWORLD_46_RANK6.replace("[rank6]", "[rank3]").replace("[Rank 6]", "[Rank 3]"), at=later(10))
    body = _ask(tmp_path, ["node-a"], {"node-a": [last, *_timeouts(range(3), 1900.065)]}, ranks=[0, 1, 2, 3])
    assert _findings(body) == [("node-a", "collective_hang")]
    assert _texts(body["attributions"][0])[0].startswith(
        "rank 3 on node-a is the only rank of the job that reported no watchdog timeout while the other 3 timed out"
    )
    # The same rank writing after the wait began was running, not stuck: no node.
    busy = cri(fx.UNIWORLD_46_RANK6.replace("[rank6]", "[rank3]").replace("[Rank 6]", "[Rank 3]"), at=later(500))
    running = _ask(tmp_path / "busy", ["node-a"], {"node-a": [busy, *_timeouts(range(3), 1900.065)]},
                   ranks=[0, 1, 2, 3])  # fmt: skip
    assert _findings(running) == [("AllJobResources", "collective_timeout")]
    assert "it wrote lines after their collective began" in running["error"]["message"]


# ---------------------------------------------------------------- earlier attempts


def test_an_earlier_attempts_node_evidence_corroborates_an_ambiguous_signal_now(tmp_path: Path) -> None:
    # Assembled: attempt 0 of node-a ended in jade-hpc-gpu#194's uncorrectable ECC error; attempt 1 of the same
    # node in Wan2GP#442's `unknown error`, which names no node by itself.
    attempts = {0: {"node-a": list(fx.JADE_194_ECC), "node-b": [fx.ARCTIC_219[1]]},
                1: {"node-a": [fx.WAN2GP_442_UNKNOWN], "node-b": [fx.ARCTIC_219[1]]}}  # fmt: skip
    body = _ask_attempt(tmp_path, ["node-a", "node-b"], attempts)
    assert _findings(body) == [("node-a", "gpu_memory")]
    texts = _texts(body["attributions"][0])
    assert texts[0].startswith("node-a: this attempt holds cudaErrorUnknown, which names no node by itself, and "
                               "attempt 0 of the same workload showed gpu_memory on the same node")  # fmt: skip
    assert fx.WAN2GP_442_UNKNOWN in texts and f"attempt 0: {fx.JADE_194_ECC[0]}" in texts
    assert "error" not in body


def test_history_alone_names_no_node(tmp_path: Path) -> None:
    # Attempt 0 of node-a showed the ECC error; attempt 1 holds nothing of node-a: nothing is concluded from it.
    attempts = {0: {"node-a": list(fx.JADE_194_ECC), "node-b": []}, 1: {"node-a": [], "node-b": [NO_SOCKET]}}
    body = _ask_attempt(tmp_path, ["node-a", "node-b"], attempts)
    assert _findings(body) == [("AllJobResources", "configuration")]
    # An ambiguous signal now with nothing before it stays a note.
    alone = _ask_attempt(tmp_path / "alone", ["node-a"], {0: {"node-a": []}, 1: {"node-a": [fx.WAN2GP_442_UNKNOWN]}})
    assert _findings(alone) == [] and "cudaErrorUnknown" in alone["error"]["message"]


def test_node_evidence_now_takes_an_earlier_attempts_ambiguous_lines_of_the_node(tmp_path: Path) -> None:
    attempts = {0: {"node-a": [fx.WAN2GP_442_UNKNOWN]}, 1: {"node-a": list(fx.JADE_194_ECC)}}
    body = _ask_attempt(tmp_path, ["node-a"], attempts)
    assert _findings(body) == [("node-a", "gpu_memory")]
    texts = _texts(body["attributions"][0])
    assert any(t.startswith("node-a: attempt 0 of the same workload held cudaErrorUnknown") for t in texts)
    assert f"attempt 0: {fx.WAN2GP_442_UNKNOWN}" in texts


# ---------------------------------------------------------------- kernel: SXids and application-fault Xids


def test_a_non_fatal_sxid_the_guide_says_stalls_nvlink_traffic_names_the_node(tmp_path: Path) -> None:
    # leptonai/gpud#338's SXid 12028 line (`Data {...}`, no word) and the same code as the driver prints it with one.
    lines = ["nvidia-nvswitch1: SXid (PCI:0000:84:00.0): 12028, Non-fatal, Link 44 egress non-posted PRIV error",
             "nvidia-nvswitch1: SXid (PCI:0000:84:00.0): 12028, Data {0x000001c0, 0x00bd5c8a, 0x00000500, "
             "0x00000064, 0x00000000, 0x40008000, 0x5a001100, 0x00000000, 0x00000000}"]  # fmt: skip
    body = _ask(tmp_path, ["gpu21"], kernel={"gpu21": _kernel_lines("gpu21", lines)})
    assert _findings(body) == [("gpu21", "nvswitch")]


def test_xid_43_is_the_jobs_with_nvidias_meaning(tmp_path: Path) -> None:
    line = "NVRM: Xid (PCI:0000:3b:00): 43, pid=2751, name=python, Ch 00000008"
    body = _ask(tmp_path, ["gpu30"], kernel={"gpu30": _kernel_lines("gpu30", [line])})
    assert _findings(body) == [("AllJobResources", "application")]
    said = _texts(body["attributions"][0])[0]
    assert said.startswith("Xid 43 ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR (GPU stopped processing; NVIDIA's "
                           "resolution IGNORE/CONTACT_SUPPORT): NVIDIA: logged when a user application hits a "
                           "software induced fault")  # fmt: skip
    assert body["unattributed_targets"] == [{"name": "gpu30", "type": "Node"}]


def test_earlier_attempts_are_read_within_their_share_of_the_bytes_and_the_time(tmp_path: Path) -> None:
    limits = ReadLimits(node_bytes=4096, request_bytes=65536)
    each = earlier_limits(limits, MAX_EARLIER_ATTEMPTS)
    assert each.request_bytes * MAX_EARLIER_ATTEMPTS <= limits.request_bytes // EARLIER_BYTES_DIVISOR
    assert each.node_bytes <= each.request_bytes
    # An ECC error in attempt 0, `unknown error` now: with no time left, attempt 0 is not read, and the answer says so.
    write_tree(tmp_path, {"node-a.log": list(fx.JADE_194_ECC)}, WORKLOAD, 0)
    request = AttributionRequest(WORKLOAD, Scope(("node-a",), ()), FailureContext(DETECTED, "application_error"),
                                 10000, WorkloadContext("w", 1), Phase.FAST)  # fmt: skip

    current = job_log_result(request, ["node-a"], JobLogs(parsed({"node-a": [fx.WAN2GP_442_UNKNOWN]}), ()), {}, 8)
    window = Window(DETECTED - timedelta(minutes=30), DETECTED + timedelta(minutes=5))
    late = with_history(current, FileJobLogSource(tmp_path), request, window, Deadline(0.0), None, 8)
    assert late.history.nodes == () and late.history.attempts == ()
    assert "the time kept for earlier attempts ran out before attempt 0 was read" in late.notes
    read = with_history(current, FileJobLogSource(tmp_path), request, window, Deadline.after_ms(10_000), None, 8)
    assert [(c.node, c.category) for c in read.history.nodes] == [("node-a", "gpu_memory")]
