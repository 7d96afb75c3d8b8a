"""Flight-recorder dumps beside kernel and job logs, end to end: POST /v1/attribution `fast` through the Flask test
client, as a caller asks."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

from app import create_app
from app.settings import Settings
from providers.telemetry import TelemetryProvider
from tests.joblog import fixtures as fx
from tests.joblog.support import T0, write_tree
from tests.telemetry.conftest import fast_body, rsyslog, write_lines, xid
from tests.telemetry.flight_recorder.support import FIXTURES, step_job, write_job

WORKLOAD = "job-1"
DETECTED = T0 + timedelta(minutes=2)


def _ask(
    root: Path,
    case: str | Path,
    nodes: list[str],
    ranks: list[int],
    kernel: dict[str, list[str]] | None = None,
    replace: dict[str, bytes] | None = None,
    jobs: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """Write the kernel logs, the dumps of fixture `case` (or of the folder `case`, with `replace`'s files put in) and
    `jobs`' job logs, then POST a fast request for `nodes` and return the answer's body."""
    for node in nodes:
        lines = [
            rsyslog(T0, node, "IPv6: ADDRCONF(NETDEV_CHANGE): ib0: link becomes ready"),
            *(kernel or {}).get(node, []),
        ]
        write_lines(root / "kernel" / f"{node}.log", lines)
    shutil.copytree(FIXTURES / case if isinstance(case, str) else case, root / "fr" / WORKLOAD / "0")
    for name, data in (replace or {}).items():
        (root / "fr" / WORKLOAD / "0" / name).write_bytes(data)
    options = {
        "ATTRIBUTION_KERNEL_LOG_SOURCE": "files",
        "ATTRIBUTION_KERNEL_LOG_DIR": str(root / "kernel"),
        "ATTRIBUTION_FLIGHT_RECORDER_DIR": str(root / "fr"),
    }
    if jobs is not None:
        write_tree(root / "jobs", {f"{n}.log": lines for n, lines in jobs.items()}, WORKLOAD, 0)
        options["ATTRIBUTION_JOB_LOG_DIR"] = str(root / "jobs")
    provider = TelemetryProvider.from_options(options)
    client = create_app(Settings(provider="telemetry"), provider).test_client()
    body = fast_body(nodes, DETECTED.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), ranks, workload_id=WORKLOAD)
    answer = client.post("/v1/attribution", json=body)
    assert answer.status_code == 200
    return answer.get_json()


def _findings(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(f["target"].get("name", f["target"]["type"]), f["error_category"]) for f in body["attributions"]]


def test_a_hang_names_the_node_of_the_rank_the_others_waited_for(tmp_path: Path) -> None:
    body = _ask(tmp_path, "v2.10/groups", ["node-0", "node-1", "node-2"], list(range(6)))
    assert _findings(body) == [("node-2", "collective_hang")]
    evidence = body["attributions"][0]["evidence"]
    assert {e["source"] for e in evidence} == {"flight_recorder"}
    assert evidence[0]["message"].startswith("rank 5 last issued seq")
    assert sorted(t["name"] for t in body["unattributed_targets"]) == ["node-0", "node-1"]


def test_a_node_named_by_an_xid_and_by_the_dumps_carries_both(tmp_path: Path) -> None:
    kernel = {"node-1": [rsyslog(T0 + timedelta(seconds=30), "node-1", xid(79, "GPU has fallen off the bus."))]}
    body = _ask(tmp_path, "v2.10/not_reached", ["node-0", "node-1"], [0, 1, 2, 3], kernel)
    assert _findings(body) == [("node-1", "gpu_off_bus")]
    assert {e["source"] for e in body["attributions"][0]["evidence"]} == {"syslog", "flight_recorder"}


def test_a_mismatch_is_the_jobs_code(tmp_path: Path) -> None:
    body = _ask(tmp_path, "v2.10/mismatch_op", ["node-0", "node-1"], [0, 1, 2, 3])
    assert _findings(body) == [("AllJobResources", "application")]
    assert (
        "operations differ: all_reduce on rank(s) 0, 2, 3; broadcast on rank(s) 1"
        in (body["attributions"][0]["evidence"][0]["message"])
    )


def test_dumps_where_no_one_waits_name_no_node_and_say_so(tmp_path: Path) -> None:
    body = _ask(tmp_path, "v2.10/completed", ["node-0", "node-1"], [0, 1, 2, 3])
    assert body["attributions"] == []
    assert "show no rank waiting for another" in body["error"]["message"]


def test_a_hostile_dump_is_a_note_naming_it_and_blames_no_one(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    command = f"touch {marker}".encode()
    hostile = b"\x80\x02cos\nsystem\nX" + len(command).to_bytes(4, "little") + command + b"\x85R."
    body = _ask(
        tmp_path, "v2.10/not_reached", ["node-0", "node-1"], [0, 1, 2, 3], replace={"node-1/nccl_trace_rank_3": hostile}
    )
    assert not marker.exists()
    # rank 3's dump is not read: its peers' dumps show them waiting for it, but its node is not blamed from a file
    # that could not be read, and the note names the file
    assert body["attributions"] == []
    assert "node-1/nccl_trace_rank_3 was not read as a flight-recorder dump" in body["error"]["message"]


def test_a_job_wide_watchdog_timeout_becomes_a_finding_on_the_node_the_dumps_name(tmp_path: Path) -> None:
    # The job logs alone: every rank timed out at the same sequence number, the job as a whole (test_job_logs_app);
    # the dumps name rank 3's node, which then carries the watchdog lines too.
    lines = list(fx.LLAMAFACTORY_7396)
    jobs = {"node-0": [lines[0], lines[2]], "node-1": [lines[1], lines[3]]}
    body = _ask(tmp_path, "v2.10/not_reached", ["node-0", "node-1"], [0, 1, 2, 3], jobs=jobs)
    assert _findings(body) == [("node-1", "collective_hang")]
    sources = [e["source"] for e in body["attributions"][0]["evidence"]]
    assert sources[0] == "flight_recorder" and "joblog" in sources
    assert any(
        "Watchdog caught collective operation timeout" in e["message"] for e in body["attributions"][0]["evidence"]
    )


def test_a_mismatch_beside_a_node_finding_is_a_note(tmp_path: Path) -> None:
    kernel = {"node-1": [rsyslog(T0 + timedelta(seconds=30), "node-1", xid(79, "GPU has fallen off the bus."))]}
    body = _ask(tmp_path, "v2.10/mismatch_op", ["node-0", "node-1"], [0, 1, 2, 3], kernel)
    assert _findings(body) == [("node-1", "gpu_off_bus")]
    assert "the flight-recorder dumps show collectives that differ between ranks" in body["error"]["message"]


def test_a_node_whose_dumps_were_not_collected_is_not_named_beside_the_culprit(tmp_path: Path) -> None:
    # rank 5 (node-2) stopped; node-0's dumps are not there: its ranks' peers wait for them, but rank 5 holds back
    # their groups, so the answer names node-2 alone and says why ranks 0 and 1 are not named
    node_of = {r: f"node-{r // 2}" for r in range(8)}
    dumps = {r: d for r, d in step_job(5).items() if node_of[r] != "node-0"}
    write_job(tmp_path / "dumps", dumps, node_of)
    body = _ask(tmp_path, tmp_path / "dumps", [f"node-{n}" for n in range(4)], list(range(8)))
    assert _findings(body) == [("node-2", "collective_hang")]
    assert all(e["message"].startswith("rank 5 ") for e in body["attributions"][0]["evidence"])
    assert "rank(s) 0, 1 wrote no flight-recorder dump and are not named" in body["error"]["message"]


def test_a_culprit_without_its_dump_is_named_on_the_one_node_without_dumps(tmp_path: Path) -> None:
    node_of = {r: f"node-{r // 2}" for r in range(8)}
    dumps = {r: d for r, d in step_job(5).items() if node_of[r] != "node-2"}
    write_job(tmp_path / "dumps", dumps, node_of)
    body = _ask(tmp_path, tmp_path / "dumps", [f"node-{n}" for n in range(4)], list(range(8)))
    assert _findings(body) == [("node-2", "collective_hang")]
    assert any(
        e["message"].startswith("rank 5 wrote no flight-recorder dump")
        and e["message"].endswith("its node is the only scope node that left no flight-recorder dump")
        for e in body["attributions"][0]["evidence"]
    )
