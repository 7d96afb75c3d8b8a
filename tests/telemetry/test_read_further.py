"""A node whose share of the job-log bound holds no decisive line is read further back; one that still holds none is
said, and never folded into a conclusion about the job as a whole.

The scenario is the hang PyTorch's watchdog reports: four nodes with one rank each, every rank's progress line at the
end of its training output, the hung rank's (on node-c) one work behind the others'. The hung rank then prints a
stack dump (faulthandler's shape, no marker of the signal table in it), and torchelastic's summary of its SIGABRT
follows (CPPO#6's lines, the signal changed): the summary alone does not settle node-c, whose rank has no watchdog,
progress or error line in what was read. With `ATTRIBUTION_JOB_LOG_MAX_REQUEST_BYTES` at 512 KiB, each node's share
is 112 KiB (an eighth of the bound kept back for reading further back). Requests go through the Flask test client,
with `scope.ranks` empty.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from providers.telemetry.joblog.signals import signals_in
from tests.joblog import fixtures as fx
from tests.telemetry.test_job_logs_app import _ask, _findings, _texts, _unattributed

NODES = ["node-a", "node-b", "node-c", "node-d"]
KIB = 1024
BOUND = {"ATTRIBUTION_JOB_LOG_MAX_REQUEST_BYTES": str(512 * KIB)}


def _progress(rank: int, work: int) -> str:
    # PyTorch 2.5's progress line (LlamaFactory#7396's, with the GUID spelling of LlamaFactory#8261)
    return (
        f"[rank{rank}]:[E321 02:07:08.465224069 ProcessGroupNCCL.cpp:1664] [PG ID 0 PG GUID 0(default_pg) Rank "
        f"{rank}] Exception (either an error or timeout) detected by watchdog at work: {work}, last enqueued NCCL "
        f"work: {work + 2}, last completed NCCL work: {work - 1}."
    )


def _training(rank: int, size: int) -> list[str]:
    line = f"[rank{rank}]: step 1234 loss 2.345 lr 1.2e-05 grad_norm 0.97 tokens/s 31337 " + "." * 40
    return [line] * (size // (len(line) + 1))


def _dump(rank: int, size: int) -> list[str]:
    lines = [f"[rank{rank}]: Thread 0x00007f3a9c1f6700 (most recent call first):"]
    frame = f'[rank{rank}]:   File "/usr/lib/python3.10/threading.py", line 320 in wait'
    lines += [frame] * (size // (len(frame) + 1))
    return lines


def _job(dump: int) -> dict[str, list[str]]:
    logs = {}
    for rank, node in enumerate(NODES):
        behind = node == "node-c"
        logs[node] = [*_training(rank, 200 * KIB), _progress(rank, 1579 if behind else 1580)]
        if behind:
            summary = [line.replace(fx.CPPO_6_HOST, node).replace("rank      : 0 ", f"rank      : {rank} ")
                       .replace("Signal 9 (SIGKILL)", "Signal 6 (SIGABRT)").replace("-9 (pid", "-6 (pid")
                       for line in fx.CPPO_6_SIGKILL]
            logs[node] += [*_dump(rank, dump), *summary]
    return logs


def _ask_job(root: Path, dump: int) -> dict[str, Any]:
    job = _job(dump)
    assert not any(signals_in(line) for line in job["node-c"][-1000:-16])  # the dump holds no signal of the table
    return _ask(root, NODES, job, ranks=[], **BOUND)


def test_a_node_whose_share_is_a_stack_dump_is_read_further_back_and_named(tmp_path: Path) -> None:
    body = _ask_job(tmp_path, 150 * KIB)
    assert _findings(body) == [("node-c", "collective_hang")]
    assert _progress(2, 1579) in _texts(body["attributions"][0])
    assert _unattributed(body) == ["node-a", "node-b", "node-d"]


def test_a_node_with_no_decisive_line_within_the_bound_is_named_and_the_job_not_concluded(tmp_path: Path) -> None:
    body = _ask_job(tmp_path, 400 * KIB)  # beyond its share and the bytes kept back
    # The other three ranks agree with each other: alone they would make a job-wide collective timeout, but node-c,
    # whose log was read without a line that decides, may be the culprit: no finding, and both reasons said.
    assert body["attributions"] == []
    assert body["error"]["type"] == "insufficient_telemetry"
    message = body["error"]["message"]
    assert (
        "within the read bound of the job logs of 1 node(s), some rank that wrote there has no watchdog, progress or "
        "error line, and older output was not read: node-c"
    ) in message
    assert (  # (the message is cut at the contract's bound here)
        "no rank of the nodes read is singled out (collective_timeout), but what was read of the job logs of 1 "
        "node(s) holds no watchdog, progress or error line"
    ) in message
    # Every node was looked at and none got a finding; the notes say why node-c is not cleared.
    assert _unattributed(body) == NODES


def test_a_job_whose_every_node_reports_is_concluded_as_before(tmp_path: Path) -> None:
    job = {node: [*_training(rank, 20 * KIB), _progress(rank, 1580)] for rank, node in enumerate(NODES)}
    body = _ask(tmp_path, NODES, job, ranks=[], **BOUND)
    assert _findings(body) == [("AllJobResources", "collective_timeout")]
    assert _unattributed(body) == NODES


def test_a_tail_settles_when_every_rank_that_wrote_there_has_a_line_that_decides() -> None:
    from tests.joblog.support import parse

    training = _training(0, 2 * KIB) + _training(1, 2 * KIB)
    assert not parse(training).settled  # ranks 0 and 1 wrote, nothing decides
    assert not parse([*training, _progress(0, 1580)]).settled  # rank 1 has no line of its own
    assert parse([*training, _progress(0, 1580), _progress(1, 1580)]).settled
    # torchelastic's entry for rank 1 says it ended (SIGKILL), not why
    summary = [line.replace("rank      : 0 ", "rank      : 1 ") for line in fx.CPPO_6_SIGKILL]
    assert not parse([*training, _progress(0, 1580), *summary]).settled
    # without rank prefixes, any record settles the tail; nothing does not
    assert parse(["training step 3", fx.NCCL_905_PORT_ERROR]).settled and not parse(["training step 3"]).settled
