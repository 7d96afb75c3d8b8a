"""The job-log rules, each pinned with real lines (see fixtures.py), including the cases where no node is named.

Scenarios put real lines on scope nodes. Where one scenario takes lines from two reports (to get two ranks whose
numbers differ, or a rank on a second node) the test says so; the rule only sees what the lines say.
"""

from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta

import pytest

from providers.base import MAX_EVIDENCE
from providers.telemetry.joblog.patterns import oom_killed_pid
from providers.telemetry.joblog.rules import conclude
from providers.telemetry.joblog.work import OOM_KILL_AFTER, OOM_KILL_BEFORE, SOURCE, JobLogConclusions, OomKill
from tests.joblog import fixtures as fx
from tests.joblog.support import T0, cri, later, logs


def _conclude(
    by_node: Mapping[str, Iterable[str]],
    ranks: Sequence[int] = (),
    oom: Mapping[str, Sequence[OomKill]] | None = None,
    scope: Sequence[str] | None = None,
    max_evidence: int = MAX_EVIDENCE,
) -> JobLogConclusions:
    nodes = list(scope or by_node)
    return conclude(nodes, list(ranks), logs(by_node, nodes), oom, max_evidence=max_evidence)


def _texts(conclusion: object) -> list[str]:
    return [e.message for e in conclusion.evidence]  # type: ignore[attr-defined]


def _strip(lines: Iterable[str]) -> list[str]:
    """The reporter's `[8074x] ` numbering off (it is not part of the log)."""
    return [line.split("] ", 1)[1] if line.startswith("[8074") else line for line in lines]


# ---------------------------------------------------------------- collective timeouts: no node


def test_every_rank_at_the_same_sequence_numbers_singles_no_node_out() -> None:
    lines = _strip(fx.LLAMAFACTORY_7396)
    out = _conclude({"node-a": [lines[0], lines[2]], "node-b": [lines[1], lines[3]]}, ranks=[0, 3, 4])
    assert out.nodes == () and out.job is not None and out.job.category == "collective_timeout"
    texts = _texts(out.job)
    assert texts[0].startswith("3 rank(s) timed out in a collective (sequence number 1580)")
    assert set(lines) <= set(texts) and all(e.source == SOURCE for e in out.job.evidence)
    assert out.placement == {0: "node-a", 4: "node-b", 3: "node-b"}
    assert out.decided_by == ("torch_watchdog_timeout", "torch_watchdog_progress")


@pytest.mark.parametrize("lines", [fx.LLAMAFACTORY_6269, fx.BASICSR_737, fx.OFA_271, fx.NCCL_1730_RANK118])
def test_real_timeouts_where_every_rank_agrees_name_no_node(lines: tuple[str, ...]) -> None:
    out = _conclude({"node-a": lines})
    assert out.nodes == () and out.job is not None and out.job.category == "collective_timeout"


def test_old_logs_with_different_sequence_numbers_but_no_group_name_no_node() -> None:
    # PyTorch 2.1's `[Rank N]` is a rank within some process group, and sequence numbers count per group.
    out = _conclude({"node-a": fx.PYTORCH_118369}, ranks=range(8))
    assert out.nodes == () and out.job is not None and out.job.category == "collective_timeout"
    assert any("sequence numbers" in note and "single no rank out" in note for note in out.notes)
    assert any("carry no global rank" in note for note in out.notes)  # so no rank is called silent either


# ---------------------------------------------------------------- collective hangs: a node


def _guid(line: str) -> str:
    """A PyTorch 2.3 `[PG 1 Rank N]` line in PyTorch 2.5's spelling `[PG ID 1 PG GUID 1 Rank N]` (the group's identity
    named, as LlamaFactory#8261 logs it)."""
    return line.replace("[PG 1 Rank", "[PG ID 1 PG GUID 1 Rank")


def test_a_rank_behind_in_completed_work_points_at_its_node_with_both_lines() -> None:
    # Assembled from two reports whose lines name process group 1 (given here by its GUID): rank 0 completed work
    # 1579 (7396), rank 4 completed 7752 (6269). Rank 0 is behind.
    behind = _guid(_strip(fx.LLAMAFACTORY_7396)[2])
    ahead = _guid(fx.LLAMAFACTORY_6269[3])
    out = _conclude({"node-a": [behind], "node-b": [ahead]}, ranks=[0, 4])
    (finding,) = out.nodes
    assert (finding.node, finding.category) == ("node-a", "collective_hang")
    assert out.decided_by == ("torch_watchdog_progress",)
    texts = _texts(finding)
    assert texts[0] == (
        "rank 0 completed work 1579 of process group 1 while rank 4 completed 7752: rank 0 is behind"
    )
    assert behind in texts and ahead in texts  # theirs and one of the others'
    assert out.job is None


def test_a_per_process_group_id_alone_places_no_line_in_a_group() -> None:
    # The same two lines as PyTorch 2.3 wrote them, `[PG 1 Rank N]`: the id is each process's creation counter, so
    # the two lines need not be of one communicator, and their numbers are not compared.
    behind = _strip(fx.LLAMAFACTORY_7396)[2]
    ahead = fx.LLAMAFACTORY_6269[3]
    out = _conclude({"node-a": [behind], "node-b": [ahead]}, ranks=[0, 4])
    assert out.nodes == () and out.job is not None and out.job.category == "collective_timeout"
    assert any("cannot be placed in a group" in note for note in out.notes)


def test_groups_with_one_id_and_different_guids_are_never_compared() -> None:
    # Assembled: the same per-process id 1 on two ranks, but two communicators (their GUIDs differ).
    behind = _strip(fx.LLAMAFACTORY_7396)[2].replace("[PG 1 Rank", "[PG ID 1 PG GUID 7(dp) Rank")
    ahead = fx.LLAMAFACTORY_6269[3].replace("[PG 1 Rank", "[PG ID 1 PG GUID 9(tp) Rank")
    out = _conclude({"node-a": [behind], "node-b": [ahead]}, ranks=[0, 4])
    assert out.nodes == () and out.job is not None and out.job.category == "collective_timeout"


def test_behind_in_the_newer_pg_status_shape_and_equal_work_is_nobody_behind() -> None:
    # Assembled: rank 118 (nccl#1730) completed work 2398458 of the default group, rank 0 (CL-MVSNet#14) 715.
    out = _conclude({"node-a": [fx.NCCL_1730_RANK118[1]], "node-b": [fx.CL_MVSNET_14[0]]}, ranks=[0, 118])
    assert [(f.node, f.category) for f in out.nodes] == [("node-b", "collective_hang")]
    same = _conclude({"node-a": [fx.BASICSR_737[1]], "node-b": [fx.BASICSR_737[3]]}, ranks=[0, 1])
    assert same.nodes == () and same.job is not None  # both completed 807


def test_numbers_of_a_group_that_timed_out_on_point_to_point_work_are_not_compared() -> None:
    # The behind-in-completed-work scenario above, with rank 0's watchdog line naming a SEND: ProcessGroupNCCL
    # numbers point-to-point work with its own counter, so the group's numbers cannot be compared across ranks.
    # No public report found holds such a line; the OpType here is set for the test.
    behind = [_guid(line) for line in _strip(fx.LLAMAFACTORY_7396)]
    send = behind[0].replace("OpType=ALLREDUCE", "OpType=SEND")
    out = _conclude({"node-a": [send, behind[2]], "node-b": [_guid(fx.LLAMAFACTORY_6269[3])]}, ranks=[0, 4])
    assert out.nodes == () and out.job is not None and out.job.category == "collective_timeout"
    assert any("point-to-point work" in note for note in out.notes)


def test_a_rank_behind_in_its_timed_out_sequence_number_points_at_its_node() -> None:
    # Assembled: rank 1 timed out on work 1 of the default group (nccl#1504), rank 3 on work 4 (open-r1#620).
    out = _conclude({"node-a": [fx.NCCL_1504[1]], "node-b": [fx.OPEN_R1_620_WHAT]}, ranks=[1, 3])
    (finding,) = out.nodes
    assert (finding.node, finding.category) == ("node-a", "collective_hang")
    assert fx.NCCL_1504[1] in _texts(finding) and fx.OPEN_R1_620_WHAT in _texts(finding)


def test_the_desync_report_names_the_lagging_rank_and_its_node() -> None:
    # Assembled: rank 7's only line (ArcticTraining#219) on a second node; the desync report (pytorch#152623)
    # names rank 7 of the default group as lagging.
    out = _conclude({"node-a": fx.PYTORCH_152623_DESYNC, "node-b": [fx.ARCTIC_219[0]]}, ranks=[0, 7])
    (finding,) = out.nodes
    assert (finding.node, finding.category) == ("node-b", "collective_hang")
    texts = _texts(finding)
    assert "PyTorch's desync report names rank 7 as lagging" in texts
    assert fx.PYTORCH_152623_DESYNC[4] in texts and fx.ARCTIC_219[0] in texts


def test_a_lagging_rank_no_log_places_names_no_node() -> None:
    out = _conclude({"node-a": fx.PYTORCH_152623_DESYNC}, ranks=[0, 7])
    assert out.nodes == () and out.job is not None and out.job.category == "collective_timeout"
    assert any("rank 7 is behind or silent" in n and "placed on no node" in n for n in out.notes)


def test_silent_ranks_on_a_node_where_no_rank_timed_out_point_at_it() -> None:
    # Assembled from ArcticTraining#219: rank 2 timed out on one node; rank 7 only reported its watchdog stuck, on
    # another node.
    out = _conclude({"node-a": [fx.ARCTIC_219[1]], "node-b": [fx.ARCTIC_219[0]]}, ranks=[2, 7])
    (finding,) = out.nodes
    assert (finding.node, finding.category) == ("node-b", "collective_hang")
    texts = _texts(finding)
    assert texts[0].startswith("rank 7 on node-b reported no watchdog timeout and no error while 1 other rank")
    assert fx.ARCTIC_219[1] in texts and fx.ARCTIC_219[0] in texts


def test_a_silent_ranks_evidence_shows_the_first_timeout_line_before_any_progress_line() -> None:
    # Rank 0's progress line comes first in scope order, rank 4's timeout on the next node: the timeouts are taken
    # first, so the line shown beside the silent rank 7 (node-c) is rank 4's timeout.
    lines = _strip(fx.LLAMAFACTORY_7396)
    out = _conclude({"node-a": [lines[2]], "node-b": [lines[1]], "node-c": [fx.ARCTIC_219[0]]}, ranks=[0, 4, 7])
    (finding,) = out.nodes
    assert (finding.node, finding.category) == ("node-c", "collective_hang")
    texts = _texts(finding)
    assert texts[0].startswith("rank 7 on node-c reported no watchdog timeout and no error while 2 other rank")
    assert texts[1] == lines[1] and lines[2] not in texts


def test_a_silent_rank_no_log_places_points_at_nothing_and_says_so() -> None:
    out = _conclude({"node-a": fx.BASICSR_737}, ranks=[0, 1, 2, 3])
    assert out.nodes == () and out.job is not None and out.job.category == "collective_timeout"
    assert "1 rank(s) of the scope reported no timeout and no log line places them on a node, so they point at no " \
           "node: 3" in out.notes


def test_a_silent_rank_beside_ranks_that_timed_out_on_its_node_is_not_attributed() -> None:
    # Assembled: rank 6's line (UniWorld#46) on the node where ranks 0, 3 and 4 timed out (LlamaFactory#7396).
    out = _conclude({"node-a": [*_strip(fx.LLAMAFACTORY_7396), fx.UNIWORLD_46_RANK6]}, ranks=[0, 3, 4, 6])
    assert out.nodes == () and out.job is not None and out.job.category == "collective_timeout"
    assert any("not attributed: 6" in n for n in out.notes)


def test_a_rank_seen_on_two_nodes_is_placed_nowhere() -> None:
    lines = _strip(fx.LLAMAFACTORY_7396)
    out = _conclude({"node-a": [lines[0]], "node-b": [lines[2]]}, ranks=[0])
    assert out.placement == {} and out.ambiguous_ranks == (0,)
    assert "1 rank(s) appear in more than one node's log and are placed on no node: 0" in out.notes


# ---------------------------------------------------------------- torchelastic's root cause


def _sigkill(at: float = 0) -> list[str]:
    """CPPO#6's summary as a collector stamps it, `at` seconds after T0."""
    return [cri(line, at=later(at)) for line in fx.CPPO_6_SIGKILL]


def _kernel_kill(at: float) -> OomKill:
    pid = oom_killed_pid(fx.ERT_7797_OOM)
    assert pid is not None
    return OomKill(pid, later(at), fx.ERT_7797_OOM)


def test_a_sigkill_the_kernel_shows_as_the_oom_killers_shortly_before_is_host_oom() -> None:
    node = fx.CPPO_6_HOST
    out = _conclude({node: _sigkill()}, oom={node: [_kernel_kill(-20)]})
    (finding,) = out.nodes
    assert (finding.node, finding.category) == (node, "host_oom")
    texts = _texts(finding)
    assert texts[0].startswith(f"torchelastic's root cause: rank 0 on {node} got SIGKILL (pid 14750)")
    assert any("Signal 9 (SIGKILL) received by PID 14750" in t for t in texts)
    kernel = finding.evidence[-1]
    assert kernel.source == "syslog" and kernel.message == fx.ERT_7797_OOM and kernel.observed_at == later(-20)
    assert finding.observed_at == later(-20)


def test_an_oom_kill_matches_by_pid_at_any_time() -> None:
    # No public report holds both lines of one process: the summary's pid is set to the kernel line's here.
    node = fx.CPPO_6_HOST
    summary = [line.replace("14750", "1440763") for line in fx.CPPO_6_SIGKILL]  # no collector time at all
    out = _conclude({node: summary}, oom={node: [_kernel_kill(-3600)]})
    assert [(f.node, f.category) for f in out.nodes] == [(node, "host_oom")]


@pytest.mark.parametrize("at", [-(OOM_KILL_BEFORE.total_seconds() + 1), OOM_KILL_AFTER.total_seconds() + 1])
def test_an_oom_kill_outside_the_window_or_on_another_node_is_not_this_kill(at: float) -> None:
    node = fx.CPPO_6_HOST
    out = _conclude({node: _sigkill()}, oom={node: [_kernel_kill(at)], "other": [_kernel_kill(0)]},
                    scope=[node, "other"])
    # A SIGKILL the kernel log does not explain names no node: it is kept beside the node's own kernel event, if any.
    assert out.nodes == () and out.job is None
    assert f"torchelastic's root cause: rank 0 on {node} was ended by signal 9; a signal names no node by itself" in (
        out.notes
    )
    assert out.unsettled == {node: ("torchelastic_root_cause",)}


def test_a_root_cause_on_a_host_outside_the_scope_names_no_node() -> None:
    out = _conclude({"node-a": fx.CPPO_6_SIGKILL})
    assert out.nodes == () and out.job is None
    assert any("names a host that is not a scope node" in n for n in out.notes)


def test_a_sigabrt_from_the_ranks_own_watchdog_timeout_is_left_to_the_collective_rules() -> None:
    # Assembled: rank 10's watchdog line and the summary whose root cause is rank 10 killed by SIGABRT.
    node = fx.ACCELERATE_2960_HOST
    own_timeout = "[rank10]" + fx.LLAMAFACTORY_6269[0].removeprefix("[rank0]")  # rank 10 times out like rank 0
    out = _conclude({node: [own_timeout, *fx.ACCELERATE_2960_SIGABRT]}, ranks=[10])
    assert out.nodes == () and out.job is not None and out.job.category == "collective_timeout"
    assert any("Root Cause (first observed failure)" in e.message for e in out.context[node])


def test_a_non_zero_exit_with_an_application_traceback_is_the_applications() -> None:
    # Assembled: rank 0's AssertionError traceback (saforem2/mmm) before the exit-1 summary (unsloth#4).
    node = fx.UNSLOTH_4_HOST
    out = _conclude({node: [*fx.MMM_AURORA_RANK0, *fx.UNSLOTH_4_EXIT1]}, ranks=[0])
    assert out.nodes == () and out.job is not None and out.job.category == "application"
    texts = _texts(out.job)
    assert texts[0] == f"torchelastic's root cause: rank 0 on {node} exited after an application exception"
    assert fx.MMM_AURORA_RANK0[-1] in texts and fx.MMM_AURORA_RANK0[0] in texts


def test_a_non_zero_exit_after_an_unprefixed_traceback_of_its_node_is_the_applications() -> None:
    node = fx.UNSLOTH_4_HOST
    out = _conclude({node: [*fx.INSTRUCTLAB_217_TRACEBACK, *fx.ROBOMAMBA_10_LAUNCHER[1:8], *fx.UNSLOTH_4_EXIT1]})
    assert out.job is not None and out.job.category == "application"
    assert fx.INSTRUCTLAB_217_TRACEBACK[-1] in _texts(out.job)  # not torchrun's own ChildFailedError


def test_a_non_zero_exit_after_a_communication_error_names_no_node() -> None:
    node = fx.UNSLOTH_4_HOST
    rank0 = [line.replace("[rank1]", "[rank0]") for line in fx.VLLM_10453_RANK1]  # as rank 0 printed it
    out = _conclude({node: [*rank0, *fx.UNSLOTH_4_EXIT1]}, ranks=[0])
    assert out.nodes == () and out.job is None
    assert any("failed in communication" in n for n in out.notes)


def test_a_non_zero_exit_with_nothing_else_names_no_node() -> None:
    node = fx.UNSLOTH_4_HOST
    out = _conclude({node: fx.UNSLOTH_4_EXIT1})
    assert out.nodes == () and out.job is None
    assert (
        f"torchelastic's root cause: rank 0 on {node} ended with exit code 1 and no traceback says why; an exit names "
        "no node by itself"
    ) in out.notes
    assert any("Root Cause (first observed failure)" in e.message for e in out.context[node])


def test_other_failures_place_ranks_but_conclude_nothing() -> None:
    node = "ip-172-31-21-134.ec2.internal"
    out = _conclude({node: fx.VLMEVALKIT_1131_OTHERS})
    assert out.nodes == () and out.job is None and out.placement == {1: node, 3: node}


# ---------------------------------------------------------------- NCCL network errors


def test_an_infiniband_completion_error_names_no_node_by_itself() -> None:
    # Status 12 (retry exceeded) means the two NICs could not talk: per NCCL's maintainers as often a GID index,
    # routing or RoCE setting as a link (nccl#1170, pytorch#81628), and a path has two ends.
    out = _conclude({"kp-ddp-worker-0": fx.NCCL_1405_IB})
    assert out.nodes == () and out.job is None
    assert (
        "kp-ddp-worker-0: NCCL reported an InfiniBand work completion with an error status (ambiguous): it names no "
        "node by itself"
    ) in out.notes
    # the row of the wording the line has (NCCL v2.21.5-1's `NET/IB : Got completion from peer %s with status=%d ...`)
    assert out.unsettled == {"kp-ddp-worker-0": ("nccl_net_ib_got_completion_from_peer_with",)}
    assert fx.NCCL_1405_IB[0] in [e.message for e in out.context["kp-ddp-worker-0"]]


def test_an_infiniband_port_event_of_the_nodes_own_device_names_it() -> None:
    host = "container-e275-1553839402050-12124-01-000057"
    out = _conclude({"gpu-1": [fx.NCCL_905_PORT_ERROR], host: [fx.NCCL_230_CATASTROPHIC]}, scope=["gpu-1", host])
    assert [(f.node, f.category) for f in out.nodes] == [("gpu-1", "network"), (host, "network")]
    assert _texts(out.nodes[0]) == [
        "NCCL on gpu-1 reported an InfiniBand port error or fatal device event", fx.NCCL_905_PORT_ERROR
    ]


def test_a_failed_connect_and_a_closed_socket_name_no_node() -> None:
    # A peer that closed the connection may have died; a connect that failed may be a firewall or a wrong interface.
    out = _conclude({"ubuntu": fx.NCCL_TESTS_166}, scope=["ubuntu", "node1"])
    assert out.nodes == () and out.job is None
    assert "ubuntu: NCCL reported a failed connection to a peer (ambiguous): it names no node by itself" in out.notes
    assert out.unsettled == {"ubuntu": ("nccl_socket_connect_failed",)}


def test_a_nodes_own_failure_explains_network_errors_on_other_nodes() -> None:
    # Assembled: one node's GPU memory fails (jade#194); a peer reports its connection reset (nccl#629).
    out = _conclude({"gpu-1": fx.JADE_194_ECC, "gpu-2": [fx.NCCL_629[0]]})
    assert [(f.node, f.category) for f in out.nodes] == [("gpu-1", "gpu_memory")]
    assert fx.NCCL_629[0] in [e.message for e in out.context["gpu-2"]]
    closed = "gpu-2: NCCL reported a connection closed or reset by its peer (consequence): it names no node by itself"
    assert closed in out.notes


# ---------------------------------------------------------------- CUDA errors


@pytest.mark.parametrize(
    ("lines", "category"),
    [
        (fx.JADE_194_ECC, "gpu_memory"),
        ([fx.OSTRIS_470_ECC], "gpu_memory"),
        ([fx.NNUNET_1519_NVLINK], "nvlink"),
        ([fx.PYTORCH_58155_NVLINK_WHAT], "nvlink"),
    ],
)
def test_hardware_meaning_cuda_errors_point_at_the_node(lines: list[str], category: str) -> None:
    out = _conclude({"gpu-1": lines, "gpu-2": [_strip(fx.LLAMAFACTORY_7396)[0]]})
    assert [(f.node, f.category) for f in out.nodes] == [("gpu-1", category)]
    assert "per NVIDIA" in _texts(out.nodes[0])[0] and out.job is None


@pytest.mark.parametrize(
    "line",
    [fx.FLUX_40_ILLEGAL, fx.VLLM_4108_ILLEGAL, fx.NCCL_629[1], fx.NANOGPT_470_ASSERT, fx.PYTORCH_16417_OOM,
     fx.FASTVIDEO_1008_LAUNCH],
)
def test_programming_cuda_errors_point_at_the_application(line: str) -> None:
    out = _conclude({"gpu-1": [line], "gpu-2": [fx.NCCL_629[0]]})
    assert out.nodes == () and out.job is not None and out.job.category == "application"
    assert line in _texts(out.job)
    assert fx.NCCL_629[0] in [e.message for e in out.context["gpu-2"]]


def test_a_cuda_error_nvidia_gives_no_cause_for_is_context_only() -> None:
    out = _conclude({"gpu-1": [fx.WAN2GP_442_UNKNOWN, fx.DEVICES_UNAVAILABLE[0]]})
    assert out.nodes == () and out.job is None
    assert [e.message for e in out.context["gpu-1"]] == [fx.WAN2GP_442_UNKNOWN, fx.DEVICES_UNAVAILABLE[0]]


@pytest.mark.parametrize("line", fx.DEVICES_UNAVAILABLE)
def test_devices_busy_or_unavailable_names_no_node_by_itself(line: str) -> None:
    # The job's own processes sharing an exclusive-process GPU give the same error on a healthy node
    # (nanoGPT#116, machin#25): without a kernel event of the node it stays unsettled.
    out = _conclude({"gpu-1": [line], "gpu-2": [fx.NCCL_629[0]]})
    assert out.nodes == () and out.job is None
    assert line in [e.message for e in out.context["gpu-1"]]
    assert any(n.startswith("gpu-1: ") and "cudaErrorDevicesUnavailable" in n for n in out.notes)


# ---------------------------------------------------------------- bounds, scope and shape


def test_evidence_is_bounded_distinct_events_first() -> None:
    repeated = [fx.JADE_194_ECC[0]] * 50 + [fx.NNUNET_1519_NVLINK]
    out = _conclude({"h": repeated}, max_evidence=3)
    texts = _texts(out.nodes[0])
    assert len(texts) == 3 and texts[1] == fx.JADE_194_ECC[0]
    assert texts[2].startswith("a process on h reported cudaErrorNvlinkUncorrectable")  # not a repeat of the ECC line
    full = _conclude({"h": [*fx.JADE_194_ECC, fx.NNUNET_1519_NVLINK, fx.NCCL_905_PORT_ERROR] * 3})
    messages = _texts(full.nodes[0])
    assert len(messages) == len(set(messages)) <= MAX_EVIDENCE
    with pytest.raises(ValueError):
        _conclude({"h": []}, max_evidence=MAX_EVIDENCE + 1)


def test_only_scope_nodes_are_ever_named_and_logs_of_others_are_ignored() -> None:
    out = conclude(["gpu-1"], [], logs({"gpu-1": [], "intruder": fx.JADE_194_ECC}, ["gpu-1", "intruder"]))
    assert out.nodes == () and out.job is None and out.context == {}


def test_notes_carry_no_log_text() -> None:
    out = _conclude({"node-a": [*fx.PYTORCH_118369, *fx.CPPO_6_SIGKILL]}, ranks=range(8))
    joined = " ".join(out.notes)
    assert out.notes and "Watchdog" not in joined and "SIGKILL" not in joined and "14750" not in joined


def test_conclusions_carry_collector_times() -> None:
    lines = [cri(line, at=later(i)) for i, line in enumerate(fx.BASICSR_737)]
    out = _conclude({"node-a": lines})
    assert out.job is not None and out.job.observed_at == T0
    assert all(e.observed_at is None or e.observed_at >= T0 for e in out.job.evidence)
    assert T0 + timedelta(seconds=1) in {e.observed_at for e in out.job.evidence}
