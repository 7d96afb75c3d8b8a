"""`attribution-adapter check` with a flight-recorder directory: per node the dumps, versions, ranks, time span, and
the files that could not be read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.cli.trees import samples_env
from tests.telemetry.flight_recorder.support import FIXTURES


def test_dumps_are_reported_per_node_with_versions_ranks_and_unreadable_files(run_cli, tmp_path: Path):
    root = tmp_path / "fr"
    shutil.copytree(FIXTURES / "v2.10" / "groups", root / "job-1" / "0")
    shutil.copytree(FIXTURES / "v1.4" / "behind", root / "job-2" / "3")
    (root / "job-1" / "0" / "node-1" / "nccl_trace_rank_3").write_bytes(b"\x80\x02cos\nsystem\n.")
    env = {**samples_env(), "ATTRIBUTION_FLIGHT_RECORDER_DIR": str(root)}
    summary = run_cli(["check"], env).stdout.splitlines()
    assert "  workload job-1 attempt 0: 5 dump(s) of 3 node(s)" in summary
    assert not any(line.startswith("    node-2:") for line in summary)  # a node's own line: --verbose
    result = run_cli(["check", "--verbose"], env)
    lines = result.stdout.splitlines()
    assert f"flight-recorder dumps: {root}" in lines
    assert "  workload job-1 attempt 0: 5 dump(s) of 3 node(s)" in lines
    assert any(line.startswith("    node-2: 2 dump(s), ranks 4,5, version 2.10, entries 20") for line in lines)
    assert "  workload job-2 attempt 3: 4 dump(s) of 2 node(s)" in lines
    doc = json.loads(run_cli(["check", "--json"], env).stdout)
    attempts = {
        (a["workload_id"], a["attempt_index"]): a["nodes"] for a in doc["details"]["flight_recorder"]["attempts"]
    }
    assert attempts[("job-2", 3)]["node-0"]["versions"] == ["1.4"]
    assert attempts[("job-1", 0)]["node-1"]["ranks"] == [2]
    assert "GLOBAL" in attempts[("job-1", 0)]["node-1"]["unreadable"][0]
    problems = {p["where"]: p["message"] for p in doc["problems"]}
    assert "not a pickle of plain data" in problems["job-1/0/node-1/nccl_trace_rank_3"]


def test_an_attempt_folder_named_in_other_digits_is_not_an_attempt(run_cli, tmp_path: Path):
    # The dump layout's attempt folder is the attempt index in ASCII digits. A folder named `²` (a digit to
    # `str.isdigit`, none to `int`) stopped `check` with a traceback; `٣` (which `int` reads) was listed as attempt 3.
    root = tmp_path / "fr"
    shutil.copytree(FIXTURES / "v2.10" / "groups", root / "job-1" / "0")
    (root / "job-1" / "\u00b2").mkdir()
    (root / "job-1" / "\u0663").mkdir()
    env = {**samples_env(), "ATTRIBUTION_FLIGHT_RECORDER_DIR": str(root)}
    doc = json.loads(run_cli(["check", "--json"], env).stdout)
    attempts = [(a["workload_id"], a["attempt_index"]) for a in doc["details"]["flight_recorder"]["attempts"]]
    assert attempts == [("job-1", 0)]
