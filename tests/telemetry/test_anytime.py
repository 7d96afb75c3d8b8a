"""Answers by the deadline with what is known: a finding already established is never lost to a bare `timeout`.

The provider keeps its own deadline a little before the request's (`answer_by`). A large scope over per-host files
is read in parts; job logs node by node. When the deadline comes, the parts and nodes read before it stand, and the
answer's `insufficient_telemetry` names what was not read; those nodes are neither blamed nor cleared.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import providers.telemetry.provider as provider_module
from app import create_app
from app.settings import Settings
from providers.base import Deadline
from providers.telemetry import TelemetryProvider
from providers.telemetry.kernel.sources.files import FileSource
from providers.telemetry.provider import answer_by, scope_parts
from tests.joblog import fixtures as fx
from tests.telemetry.conftest import DETECTED, at, fast_body, healthy_lines, rsyslog, write_lines, xid

NODES = [f"node-{i}" for i in range(6)]


def _tree(root: Path) -> None:
    """Six nodes with kernel logs around the failure; node-0 lost a GPU (Xid 79)."""
    for node in NODES:
        lines = healthy_lines(node, at(-20), at(5))
        if node == "node-0":
            lines.append(rsyslog(at(-1), node, xid(79, "GPU has fallen off the bus.")))
            lines.sort()
        write_lines(root / node / "kern.log", lines)


def _stall_after_first_scan(monkeypatch: pytest.MonkeyPatch, seconds: float) -> list[list[str]]:
    """The files source reads the first part, then the machine stalls for `seconds` (the deadline passes)."""
    real = FileSource.scan
    scanned: list[list[str]] = []

    def scan(self, collector, deadline, trace, **kwargs):  # type: ignore[no-untyped-def]
        real(self, collector, deadline, trace, **kwargs)
        scanned.append(list(collector.nodes))
        if len(scanned) == 1:
            time.sleep(seconds)

    monkeypatch.setattr(FileSource, "scan", scan)
    return scanned


def test_the_deadline_in_a_large_scope_keeps_the_finding_and_names_the_nodes_not_read(tmp_path, monkeypatch):
    _tree(tmp_path / "logs")
    monkeypatch.setattr(provider_module, "PART_NODES", 2)
    # The request has 3 s; the provider keeps 0.3 s of them to answer, so its own deadline is 2.7 s away.
    scanned = _stall_after_first_scan(monkeypatch, 2.8)
    provider = TelemetryProvider.from_options(
        {"ATTRIBUTION_KERNEL_LOG_SOURCE": "files", "ATTRIBUTION_KERNEL_LOG_DIR": str(tmp_path / "logs")},
    )
    client = create_app(Settings(provider="telemetry"), provider).test_client()
    body = fast_body(NODES, DETECTED.isoformat())
    body["timeout_ms"] = 3000
    started = time.monotonic()
    answer = client.post("/v1/attribution", json=body)
    assert time.monotonic() - started < 3.0
    assert answer.status_code == 200
    data = answer.get_json()
    assert scanned == [["node-0", "node-1"]]  # the parts after the stall were never started
    assert [(f["target"]["name"], f["error_category"]) for f in data["attributions"]] == [("node-0", "gpu_off_bus")]
    # Read and clean: cleared. Not read: neither blamed nor cleared, and named.
    assert data["unattributed_targets"] == [{"type": "Node", "name": "node-1"}]
    assert data["error"]["type"] == "insufficient_telemetry"
    assert data["error"]["message"] == (
        "the deadline came before the kernel logs of 4 of 6 nodes were read: node-2, node-3, node-4, node-5"
    )


def test_with_time_enough_the_parts_give_the_answer_of_one_read(tmp_path, monkeypatch):
    _tree(tmp_path / "logs")
    options = {"ATTRIBUTION_KERNEL_LOG_SOURCE": "files", "ATTRIBUTION_KERNEL_LOG_DIR": str(tmp_path / "logs")}
    body = fast_body(NODES, DETECTED.isoformat())
    whole = create_app(Settings(provider="telemetry"), TelemetryProvider.from_options(options)).test_client()
    expected = whole.post("/v1/attribution", json=body).get_json()
    monkeypatch.setattr(provider_module, "PART_NODES", 2)
    parted = create_app(Settings(provider="telemetry"), TelemetryProvider.from_options(options)).test_client()
    got = parted.post("/v1/attribution", json=body).get_json()
    for key in ("attributions", "unattributed_targets"):
        assert got[key] == expected[key]
    assert "error" not in got and "error" not in expected


def test_nothing_read_by_the_deadline_is_a_timeout(tmp_path, monkeypatch):
    _tree(tmp_path / "logs")
    monkeypatch.setattr(provider_module, "PART_NODES", 2)

    def never(self, collector, deadline, trace, **kwargs):  # type: ignore[no-untyped-def]
        time.sleep(deadline.remaining() + 0.01)
        raise provider_module.ProviderTimeoutError("reading the kernel logs did not finish in time")

    monkeypatch.setattr(FileSource, "scan", never)
    provider = TelemetryProvider.from_options(
        {"ATTRIBUTION_KERNEL_LOG_SOURCE": "files", "ATTRIBUTION_KERNEL_LOG_DIR": str(tmp_path / "logs")},
    )
    client = create_app(Settings(provider="telemetry"), provider).test_client()
    body = fast_body(NODES, DETECTED.isoformat())
    body["timeout_ms"] = 300
    data = client.post("/v1/attribution", json=body).get_json()
    assert data["error"]["type"] == "timeout" and data["attributions"] == []


def test_job_logs_read_before_the_deadline_stand_beside_the_kernel_finding(tmp_path, monkeypatch):
    """Job logs are read node by node after the kernel windows: the deadline in the middle keeps what was read."""
    _tree(tmp_path / "logs")
    jobs = tmp_path / "jobs" / "12345" / "0"
    jobs.mkdir(parents=True)
    for node in NODES:
        (jobs / f"{node}.log").write_text("[rank0]: step 10 loss 1.0\n")
    import providers.telemetry.joblog.files as job_files

    real = job_files._read_node
    calls: list[str] = []

    def read_node(node, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(node)
        out = real(node, *args, **kwargs)
        if len(calls) == 2:
            time.sleep(2.8)  # past the provider's own deadline (2.7 s of the 3 s)
        return out

    monkeypatch.setattr(job_files, "_read_node", read_node)
    provider = TelemetryProvider.from_options({
        "ATTRIBUTION_KERNEL_LOG_SOURCE": "files",
        "ATTRIBUTION_KERNEL_LOG_DIR": str(tmp_path / "logs"),
        "ATTRIBUTION_JOB_LOG_DIR": str(tmp_path / "jobs"),
    })
    client = create_app(Settings(provider="telemetry"), provider).test_client()
    body = fast_body(NODES, DETECTED.isoformat())
    body["timeout_ms"] = 3000
    data = client.post("/v1/attribution", json=body).get_json()
    assert calls == ["node-0", "node-1"]
    assert [(f["target"]["name"], f["error_category"]) for f in data["attributions"]] == [("node-0", "gpu_off_bus")]
    assert data["error"]["type"] == "insufficient_telemetry"
    assert "the deadline came before the job logs of 4 of 6 node(s) with files were read: node-2, node-3" in (
        data["error"]["message"]
    )


def test_the_provider_keeps_a_share_of_the_time_to_answer() -> None:
    now = time.monotonic()
    assert answer_by(Deadline(now + 10)).expires_at == pytest.approx(now + 10 - 0.5, abs=0.01)
    assert answer_by(Deadline(now + 1)).expires_at == pytest.approx(now + 1 - 0.1, abs=0.01)
    assert answer_by(Deadline(now - 1)).expires_at == pytest.approx(now - 1, abs=0.01)
    # The rules over a large scope need longer: 100 us a node, at most a quarter of the time left.
    assert answer_by(Deadline(now + 10), 16_384).expires_at == pytest.approx(now + 10 - 1.638, abs=0.01)
    assert answer_by(Deadline(now + 10), 1_000).expires_at == pytest.approx(now + 10 - 0.5, abs=0.01)
    assert answer_by(Deadline(now + 2), 16_384).expires_at == pytest.approx(now + 2 - 0.5, abs=0.01)
    assert answer_by(Deadline(now - 1), 16_384).expires_at == pytest.approx(now - 1, abs=0.01)


def test_parts_keep_nodes_that_share_a_short_name_together() -> None:
    """A short name and its FQDN stand in one part, so that each part maps host names as the whole scope does."""
    nodes = ["a-1", "b-1", "a-1.rack", "c-1", "d-1", "b-1.rack", "e-1"]
    assert scope_parts(nodes, 3) == [["a-1", "a-1.rack"], ["b-1", "b-1.rack", "c-1"], ["d-1", "e-1"]]
    assert scope_parts(nodes, 100) == [["a-1", "a-1.rack", "b-1", "b-1.rack", "c-1", "d-1", "e-1"]]


def test_no_job_wide_conclusion_when_the_deadline_left_nodes_unread(tmp_path, monkeypatch):
    """Every rank read timed out at one sequence number, but two nodes' logs were not read: the culprit may be
    there, so the job as a whole is not concluded; the answer says why."""
    import providers.telemetry.joblog.files as job_files
    from tests.joblog.support import write_tree
    from tests.telemetry.test_job_logs_app import DETECTED as JOB_DETECTED
    from tests.telemetry.test_job_logs_app import WORKLOAD, _client, _kernel, _strip

    lines = _strip(fx.LLAMAFACTORY_7396)  # ranks 0, 3, 4 at work 1580: no rank singled out
    nodes = ["node-a", "node-b", "node-c", "node-d"]
    for node in nodes:
        _kernel(tmp_path, node)
    write_tree(tmp_path / "jobs", {"node-a.log": [lines[0], lines[2]], "node-b.log": [lines[1], lines[3]],
                                   "node-c.log": ["x"], "node-d.log": ["y"]}, WORKLOAD, 0)
    real = job_files._read_node

    def read_node(node, *args, **kwargs):  # type: ignore[no-untyped-def]
        out = real(node, *args, **kwargs)
        if node == "node-b":
            time.sleep(2.8)  # past the provider's own deadline (2.7 s of the 3 s)
        return out

    monkeypatch.setattr(job_files, "_read_node", read_node)
    body = fast_body(nodes, JOB_DETECTED.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), [0, 3, 4], workload_id=WORKLOAD)
    body["timeout_ms"] = 3000
    data = _client(tmp_path).post("/v1/attribution", json=body).get_json()
    assert data["attributions"] == []
    # Read whole and clean: cleared; the two whose job logs were not read: neither blamed nor cleared.
    assert [t["name"] for t in data["unattributed_targets"]] == ["node-a", "node-b"]
    assert data["error"]["type"] == "insufficient_telemetry"
    message = data["error"]["message"]
    assert "the deadline came before the job logs of 2 of 4 node(s) with files were read: node-c, node-d" in message
    assert ("no rank of the nodes read is singled out (collective_timeout), but the job logs of 2 node(s) were not "
            "read, so the job as a whole is not concluded") in message
