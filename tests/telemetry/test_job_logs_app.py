"""Job logs beside kernel logs, end to end: POST /v1/attribution `fast` through the Flask test client.

Each scenario writes a job-log tree (`<dir>/<workload_id>/<attempt_index>/<node>.log`) and kernel logs on a temp
directory, built from the real PyTorch 2.x / NCCL / torchelastic / kernel lines of `tests/joblog/fixtures.py`, each
of which names the public report it was taken from. Scenarios that put lines of two reports together say so.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from app import create_app
from app.settings import Settings
from providers.telemetry import TelemetryProvider
from tests.joblog import fixtures as fx
from tests.joblog.support import T0, cri, later, write_tree
from tests.telemetry.conftest import fast_body, rsyslog, write_lines, xid

WORKLOAD = "job-1"
DETECTED = T0 + timedelta(minutes=2)


def _strip(lines: Iterable[str]) -> list[str]:
    """LlamaFactory#7396's `[8074x] ` line numbering off (the reporter's viewer added it)."""
    return [line.split("] ", 1)[1] if line.startswith("[8074") else line for line in lines]


def _kernel(root: Path, node: str, extra: Sequence[str] = ()) -> None:
    """A kernel log for `node` with healthy lines around the failure, plus `extra` lines."""
    healthy = [rsyslog(T0 + timedelta(minutes=m), node, "IPv6: ADDRCONF(NETDEV_CHANGE): ib0: link becomes ready")
               for m in (-10, -5, 0, 1)]
    write_lines(root / "kernel" / f"{node}.log", sorted([*healthy, *extra]))


def _client(root: Path, **extra: str) -> Any:
    (root / "kernel").mkdir(exist_ok=True)
    (root / "jobs").mkdir(exist_ok=True)
    options = {
        "ATTRIBUTION_KERNEL_LOG_SOURCE": "files",
        "ATTRIBUTION_KERNEL_LOG_DIR": str(root / "kernel"),
        "ATTRIBUTION_JOB_LOG_DIR": str(root / "jobs"),
        **extra,
    }
    options = {k: v for k, v in options.items() if v}
    provider = TelemetryProvider.from_options(options)
    return create_app(Settings(provider="telemetry"), provider).test_client()


def _ask(
    root: Path,
    nodes: Sequence[str],
    job_files: Mapping[str, Iterable[str]] | None = None,
    ranks: Sequence[int] = (),
    kernel: Mapping[str, Sequence[str]] | None = None,
    attempt: int = 0,
    **options: str,
) -> dict[str, Any]:
    """Write the trees, then POST a fast request for `nodes` and return the answer's body."""
    for node in nodes:
        _kernel(root, node, (kernel or {}).get(node, ()))
    if job_files:
        write_tree(root / "jobs", {f"{n}.log": lines for n, lines in job_files.items()}, WORKLOAD, attempt)
    client = _client(root, **options)
    body = fast_body(nodes, DETECTED.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), ranks, workload_id=WORKLOAD)
    answer = client.post("/v1/attribution", json=body)
    assert answer.status_code == 200
    return answer.get_json()


def _findings(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(f["target"].get("name", f["target"]["type"]), f["error_category"]) for f in body["attributions"]]


def _texts(finding: dict[str, Any]) -> list[str]:
    return [e["message"] for e in finding["evidence"]]


def _unattributed(body: dict[str, Any]) -> list[str]:
    return [t["name"] for t in body["unattributed_targets"]]


# ---------------------------------------------------------------- collectives


def test_every_rank_at_the_same_sequence_number_is_one_job_finding_and_no_node(tmp_path: Path) -> None:
    lines = _strip(fx.LLAMAFACTORY_7396)  # ranks 0, 3, 4 at work 1580, completed 1579
    body = _ask(tmp_path, ["node-a", "node-b"], {"node-a": [lines[0], lines[2]], "node-b": [lines[1], lines[3]]},
                ranks=[0, 3, 4])
    assert _findings(body) == [("AllJobResources", "collective_timeout")]
    texts = _texts(body["attributions"][0])
    assert texts[0].startswith("3 rank(s) timed out in a collective (sequence number 1580)")
    assert set(lines) <= set(texts) and {e["source"] for e in body["attributions"][0]["evidence"]} == {"joblog"}
    # Both nodes were looked at (kernel and job logs) and neither is blamed.
    assert _unattributed(body) == ["node-a", "node-b"]
    # PyTorch 2.3's `[PG 1 Rank 3]` names the group by its per-process id only: the answer says its numbers could
    # not be placed in a group.
    assert "watchdog line(s) name their process group only by its per-process id" in body["error"]["message"]


def test_a_rank_behind_in_completed_work_is_a_collective_hang_on_its_node(tmp_path: Path) -> None:
    # Assembled from two reports whose lines name process group 1, here in PyTorch 2.5's spelling with the group's
    # GUID (as LlamaFactory#8261 logs it): rank 0 completed 1579 (LlamaFactory#7396), rank 4 completed 7752
    # (LlamaFactory#6269).
    behind, ahead = (line.replace("[PG 1 Rank", "[PG ID 1 PG GUID 1 Rank")
                     for line in (_strip(fx.LLAMAFACTORY_7396)[2], fx.LLAMAFACTORY_6269[3]))
    body = _ask(tmp_path, ["node-a", "node-b"], {"node-a": [behind], "node-b": [ahead]}, ranks=[0, 4])
    assert _findings(body) == [("node-a", "collective_hang")]
    texts = _texts(body["attributions"][0])
    assert behind in texts and ahead in texts  # its line and one of the others'
    assert body["attributions"][0]["observed_at"] == DETECTED.strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # lines had no time
    assert _unattributed(body) == ["node-b"]


def test_collector_times_no_calendar_holds_in_utc_leave_the_lines_untimed(tmp_path: Path) -> None:
    # The lines of the test above behind a collector's time that names no instant within years 1 to 9999 once in UTC
    # (an offset carries it past either end): the lines are read as lines without a time, not a failed answer.
    behind, ahead = (line.replace("[PG 1 Rank", "[PG ID 1 PG GUID 1 Rank")
                     for line in (_strip(fx.LLAMAFACTORY_7396)[2], fx.LLAMAFACTORY_6269[3]))
    body = _ask(tmp_path, ["node-a", "node-b"], {"node-a": [f"9999-12-31T23:30:00-01:00 {behind}"],
                                                 "node-b": [f"0001-01-01T00:30:00+01:00 {ahead}"]}, ranks=[0, 4])
    assert "error" not in body
    assert _findings(body) == [("node-a", "collective_hang")]
    assert body["attributions"][0]["observed_at"] == DETECTED.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_silent_ranks_of_the_scope_on_a_node_where_none_timed_out_point_at_it(tmp_path: Path) -> None:
    # ArcticTraining#219: rank 2 timed out; rank 7 only reported its watchdog stuck, on another node.
    body = _ask(tmp_path, ["node-a", "node-b"], {"node-a": [fx.ARCTIC_219[1]], "node-b": [fx.ARCTIC_219[0]]},
                ranks=[2, 7])
    assert _findings(body) == [("node-b", "collective_hang")]
    assert fx.ARCTIC_219[0] in _texts(body["attributions"][0]) and fx.ARCTIC_219[1] in _texts(body["attributions"][0])


def test_a_silent_rank_no_line_places_is_never_guessed_onto_a_node(tmp_path: Path) -> None:
    # BasicSR#737 logs ranks 0, 1 and 2; rank 3 of the scope left no line anywhere.
    body = _ask(tmp_path, ["node-a", "node-b"], {"node-a": fx.BASICSR_737}, ranks=[0, 1, 2, 3])
    assert _findings(body) == [("AllJobResources", "collective_timeout")]
    assert body["error"]["type"] == "insufficient_telemetry"
    assert "point at no node: 3" in body["error"]["message"]
    assert _unattributed(body) == ["node-a", "node-b"]


# ---------------------------------------------------------------- torchelastic's root cause


def _sigkill(at: float = 0) -> list[str]:
    """CPPO#6's SIGKILL summary as a CRI collector stamps it, `at` seconds after T0."""
    return [cri(line, at=later(at)) for line in fx.CPPO_6_SIGKILL]


def test_a_sigkill_the_kernel_log_shows_as_the_oom_killers_is_host_oom(tmp_path: Path) -> None:
    # CPPO#6's root cause (pid 14750); the kernel line is equinor/ert#7797's with its pid set to the summary's.
    node = fx.CPPO_6_HOST
    oom = fx.ERT_7797_OOM.replace("1440763", "14750")
    body = _ask(tmp_path, [node, "node-b"], {node: _sigkill(), "node-b": []},
                kernel={node: [rsyslog(later(-20), node, oom)]})
    assert _findings(body) == [(node, "host_oom")]
    evidence = body["attributions"][0]["evidence"]
    assert _texts(body["attributions"][0])[0].startswith(f"torchelastic's root cause: rank 0 on {node} got SIGKILL")
    kernel = [e for e in evidence if e["source"] == "syslog"]
    assert len(kernel) == 1 and oom in kernel[0]["message"]
    assert body["attributions"][0]["observed_at"] == later(-20).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_a_sigkill_without_the_kernels_oom_kill_names_no_node(tmp_path: Path) -> None:
    node = fx.CPPO_6_HOST
    # The OOM line is logged by a program, not the kernel: anyone can `logger` it, so it does not count.
    fake = rsyslog(later(-20), node, fx.ERT_7797_OOM.replace("1440763", "14750"), tag="python3")
    body = _ask(tmp_path, [node], {node: _sigkill()}, kernel={node: [fake]})
    # A signal is not evidence against a node: without the node's own kernel event it is a note.
    assert body["attributions"] == []
    assert "was ended by signal 9; a signal names no node by itself" in body["error"]["message"]
    assert f"{node}: its job log holds torchelastic_root_cause" in body["error"]["message"]


def test_a_root_cause_on_a_host_outside_the_scope_names_no_node(tmp_path: Path) -> None:
    body = _ask(tmp_path, ["node-a"], {"node-a": fx.CPPO_6_SIGKILL})
    assert body["attributions"] == [] and _unattributed(body) == ["node-a"]
    assert "names a host that is not a scope node" in body["error"]["message"]


def test_a_non_zero_exit_after_an_application_traceback_is_the_applications(tmp_path: Path) -> None:
    # Assembled: rank 0's traceback (saforem2/mmm) before the exit-1 summary (unsloth#4).
    node = fx.UNSLOTH_4_HOST
    body = _ask(tmp_path, [node], {node: [*fx.MMM_AURORA_RANK0, *fx.UNSLOTH_4_EXIT1]}, ranks=[0])
    assert _findings(body) == [("AllJobResources", "application")]
    assert fx.MMM_AURORA_RANK0[-1] in _texts(body["attributions"][0])
    assert _unattributed(body) == [node]


def test_a_non_zero_exit_with_nothing_else_names_no_node(tmp_path: Path) -> None:
    node = fx.UNSLOTH_4_HOST
    body = _ask(tmp_path, [node], {node: fx.UNSLOTH_4_EXIT1})
    assert body["attributions"] == [] and "an exit names no node by itself" in body["error"]["message"]


def test_a_non_zero_exit_beside_the_nodes_own_kernel_event_is_that_events_finding(tmp_path: Path) -> None:
    # Corroboration: the exit that names no node by itself stands beside the node's Xid 79 in the window.
    node = fx.UNSLOTH_4_HOST
    kernel_line = rsyslog(later(-30), node, xid(79, rest="pid='<unknown>', name=<unknown>, GPU has fallen off the "
                                                     "bus."))
    body = _ask(tmp_path, [node], {node: fx.UNSLOTH_4_EXIT1}, kernel={node: [kernel_line]})
    assert _findings(body) == [(node, "gpu_off_bus")]
    assert any("Root Cause (first observed failure)" in t for t in _texts(body["attributions"][0]))


# ---------------------------------------------------------------- NCCL network and CUDA errors


def test_nccl_network_errors_name_no_node_unless_the_nodes_own_port_failed(tmp_path: Path) -> None:
    body = _ask(tmp_path, ["kp-ddp-worker-0", "kp-ddp-worker-1"], {"kp-ddp-worker-0": fx.NCCL_1405_IB})
    assert body["attributions"] == [] and _unattributed(body) == ["kp-ddp-worker-0", "kp-ddp-worker-1"]
    assert "kp-ddp-worker-0: its job log holds nccl_net_ib_got_completion_from_peer_with" in body["error"]["message"]
    port = _ask(tmp_path / "port", ["gpu-1", "gpu-2"], {"gpu-1": [fx.NCCL_905_PORT_ERROR]})
    assert _findings(port) == [("gpu-1", "network")] and _unattributed(port) == ["gpu-2"]


def test_a_line_in_dockers_shape_nested_deeper_than_json_is_read_is_a_plain_line(tmp_path: Path) -> None:
    # A line that starts as Docker's json-file record (`{"log":`) with brackets nested 16,000 deep made the JSON
    # decoder raise RecursionError, and the request failed: it is a line of text, and the node's own port error after
    # it is read.
    deep = '{"log":' + "[" * 16000
    body = _ask(tmp_path, ["gpu-1", "gpu-2"], {"gpu-1": [deep, fx.NCCL_905_PORT_ERROR]})
    assert _findings(body) == [("gpu-1", "network")]


def test_a_cuda_hardware_error_points_at_the_node_a_programming_error_at_the_application(tmp_path: Path) -> None:
    body = _ask(tmp_path / "ecc", ["gpu-1", "gpu-2"], {"gpu-1": fx.JADE_194_ECC})
    assert _findings(body) == [("gpu-1", "gpu_memory")]
    body = _ask(tmp_path / "illegal", ["gpu-1", "gpu-2"], {"gpu-1": [fx.FLUX_40_ILLEGAL], "gpu-2": [fx.NCCL_629[0]]})
    assert _findings(body) == [("AllJobResources", "application")]
    assert fx.FLUX_40_ILLEGAL in _texts(body["attributions"][0])


# ---------------------------------------------------------------- merging with the kernel logs


def test_a_node_with_a_kernel_event_and_job_log_evidence_gets_one_finding_with_the_kernel_category(
    tmp_path: Path,
) -> None:
    # The kernel says the GPU fell off the bus; the node's job log shows NCCL's network errors (nccl#1405).
    node = "kp-ddp-worker-0"
    kernel_line = rsyslog(later(-30), node, xid(79, bus="0000:91:00", rest="pid='<unknown>', name=<unknown>, "
                                                 "GPU has fallen off the bus."))
    body = _ask(tmp_path, [node, "kp-ddp-worker-1"], {node: fx.NCCL_1405_IB}, kernel={node: [kernel_line]})
    (finding,) = body["attributions"]
    assert (finding["target"]["name"], finding["error_category"]) == (node, "gpu_off_bus")
    sources = [e["source"] for e in finding["evidence"]]
    assert sources[0] == "syslog" and "joblog" in sources and sources.index("joblog") > sources.index("syslog")
    assert fx.NCCL_1405_IB[0] in _texts(finding)


def test_a_kernel_finding_on_one_node_leaves_other_nodes_symptoms_out(tmp_path: Path) -> None:
    # The GPU of node-a fell off the bus; node-b's NCCL connection was reset by its peer (nccl#629): a symptom.
    kernel_line = rsyslog(later(-30), "node-a", xid(79, rest="pid='<unknown>', name=<unknown>, GPU has fallen off "
                                                       "the bus."))
    body = _ask(tmp_path, ["node-a", "node-b"], {"node-b": [fx.NCCL_629[0]]}, kernel={"node-a": [kernel_line]})
    assert _findings(body) == [("node-a", "gpu_off_bus")]
    assert _unattributed(body) == ["node-b"]


def test_an_ambiguous_cuda_error_is_settled_by_the_nodes_kernel_event_in_the_window(tmp_path: Path) -> None:
    # bigscience tr11-176B chronicles, 2022-03-21: "CUDA error: unknown error" when one of the GPUs crashed. NVIDIA
    # names no cause for it: with the node's Xid 79 in the window the event decides, the job-log line beside it.
    unknown = "[default3]:  what():  CUDA error: unknown error"
    kernel_line = rsyslog(later(-30), "node-a", xid(79, rest="pid='<unknown>', name=<unknown>, GPU has fallen off "
                                                         "the bus."))
    body = _ask(tmp_path, ["node-a", "node-b"], {"node-a": [unknown], "node-b": []}, kernel={"node-a": [kernel_line]})
    assert _findings(body) == [("node-a", "gpu_off_bus")]
    assert unknown in _texts(body["attributions"][0])
    # Without the event it names no node, and the answer says which node holds it.
    alone = _ask(tmp_path / "alone", ["node-a", "node-b"], {"node-a": [unknown], "node-b": []})
    assert alone["attributions"] == []
    assert "node-a: its job log holds cudaErrorUnknown, which name no node without the node's own kernel event" in (
        alone["error"]["message"]
    )


def test_job_logs_read_and_not_understood_are_said(tmp_path: Path) -> None:
    # bigscience tr11-176B chronicles, 2022-04-30: the run hung in eval with no error line at all.
    lines = [
        "[default7]:valid loss at iteration 45000 | lm loss value: 2.327091E+00 | lm loss PPL: 1.024808E+01 |",
    ]
    body = _ask(tmp_path, ["node-a", "node-b"], {"node-a": lines, "node-b": []})
    assert body["attributions"] == []
    assert body["error"]["message"].endswith(
        "the job logs of 1 node(s) were read and no failure signal in them was understood"
    )


def test_a_kernel_job_event_and_a_job_log_job_conclusion_make_one_job_finding(tmp_path: Path) -> None:
    # Xid 13 points at the application; the job log shows an illegal memory access (flux#40).
    kernel_line = rsyslog(later(-30), "gpu-1", xid(13, rest="pid=1234, name=python, Graphics Exception"))
    body = _ask(tmp_path, ["gpu-1"], {"gpu-1": [fx.FLUX_40_ILLEGAL]}, kernel={"gpu-1": [kernel_line]})
    (finding,) = body["attributions"]
    assert finding["target"] == {"type": "AllJobResources"} and finding["error_category"] == "application"
    assert [e["source"] for e in finding["evidence"]][0] == "syslog" and fx.FLUX_40_ILLEGAL in _texts(finding)


def test_without_job_log_settings_the_answer_is_the_kernel_logs_alone(tmp_path: Path) -> None:
    node = fx.UNSLOTH_4_HOST
    with_jobs = _ask(tmp_path, [node], {node: fx.JADE_194_ECC})
    without = _ask(tmp_path, [node], ATTRIBUTION_JOB_LOG_DIR="")
    assert _findings(with_jobs) == [(node, "gpu_memory")]
    assert without["attributions"] == [] and _unattributed(without) == [node] and "error" not in without


def test_an_attempt_without_job_logs_says_so_and_answers_from_the_kernel_logs(tmp_path: Path) -> None:
    body = _ask(tmp_path, ["node-a"], {"node-a": fx.UNSLOTH_4_EXIT1}, attempt=3)  # logs of another attempt
    assert body["attributions"] == [] and _unattributed(body) == ["node-a"]
    assert body["error"] == {
        "type": "insufficient_telemetry", "message": "no job-log folder for this workload attempt"
    }


def test_only_scope_nodes_are_named_and_files_of_other_hosts_are_never_read(tmp_path: Path) -> None:
    body = _ask(tmp_path, ["gpu-1"], {"gpu-1": [], "intruder": fx.JADE_194_ECC})
    assert body["attributions"] == [] and _unattributed(body) == ["gpu-1"]


def test_a_node_with_job_logs_but_no_kernel_lines_is_looked_at_and_the_gap_is_said(tmp_path: Path) -> None:
    (tmp_path / "kernel").mkdir()
    write_tree(tmp_path / "jobs", {"gpu-1.log": fx.JADE_194_ECC}, WORKLOAD)
    client = _client(tmp_path)
    body = client.post("/v1/attribution", json={
        "schema_version": "0.1.0", "workload_id": WORKLOAD, "scope": {"nodes": ["gpu-1", "gpu-2"], "ranks": []},
        "failure_context": {"detected_at": "2026-09-09T12:00:00Z", "detection_signal": "application_error"},
        "timeout_ms": 10000, "workload_context": {"workflow_id": "w", "attempt_index": 0}, "phase": "fast",
    }).get_json()
    assert _findings(body) == [("gpu-1", "gpu_memory")]
    assert body["error"]["message"].startswith("no kernel log lines for 2 of 2 nodes in the window")


def test_the_byte_bound_per_node_keeps_only_the_tail(tmp_path: Path) -> None:
    # The ECC error lies before 4 KiB of ordinary output: with a 1 KiB bound per node it is not read.
    filler = ["[rank0]: step 1 loss 0.25 " + "x" * 100] * 40
    body = _ask(tmp_path, ["gpu-1"], {"gpu-1": [*fx.JADE_194_ECC, *filler]}, ATTRIBUTION_JOB_LOG_MAX_NODE_BYTES="1024")
    assert body["attributions"] == []
    assert "older output of 1 node(s) lies beyond the read bound" in body["error"]["message"]
    full = _ask(tmp_path / "full", ["gpu-1"], {"gpu-1": [*fx.JADE_194_ECC, *filler]})
    assert _findings(full) == [("gpu-1", "gpu_memory")]


def test_no_job_log_text_reaches_the_services_own_logs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    folder = tmp_path / "jobs" / WORKLOAD / "0"
    folder.mkdir(parents=True)
    (folder / "gpu-1.log.1.gz").write_bytes(b"not gzip at all " + fx.JADE_194_ECC[0].encode())  # corrupt
    with caplog.at_level(logging.DEBUG):
        body = _ask(tmp_path, ["gpu-1"], {"gpu-1": [fx.NCCL_905_PORT_ERROR]})
    assert _findings(body) == [("gpu-1", "network")]
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "skipped job-log file job-1/0/gpu-1.log.1.gz" in logged
    assert "ECC" not in logged and "NCCL WARN" not in logged and "Connection reset" not in logged


def test_a_workload_id_or_node_name_that_could_leave_the_directory_reads_nothing(tmp_path: Path) -> None:
    # A job log one level up that a `..` workload id would reach; the request must not read it.
    write_tree(tmp_path, {"gpu-1.log": fx.JADE_194_ECC}, "outside")
    (tmp_path / "jobs").mkdir()
    _kernel(tmp_path, "gpu-1")
    client = _client(tmp_path)
    for workload, nodes in (("../outside", ["gpu-1"]), ("..", ["gpu-1"]), (WORKLOAD, ["../outside/0/gpu-1"])):
        answer = client.post("/v1/attribution", json={
            "schema_version": "0.1.0", "workload_id": workload, "scope": {"nodes": nodes, "ranks": []},
            "failure_context": {"detected_at": "2026-09-09T12:00:00Z", "detection_signal": "application_error"},
            "timeout_ms": 10000, "workload_context": {"workflow_id": "w", "attempt_index": 0}, "phase": "fast",
        })
        assert answer.status_code == 200
        body = answer.get_json()
        assert body["attributions"] == [], workload
        assert "job-log" in body["error"]["message"]
