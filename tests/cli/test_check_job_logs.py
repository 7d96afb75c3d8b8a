"""`attribution-adapter check` with a job-log directory: readable, laid out, files per workload attempt."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.trees import SAMPLES, samples_env


def test_the_sample_job_logs_are_listed_per_workload_and_attempt(run_cli):
    env = {**samples_env(), "ATTRIBUTION_JOB_LOG_DIR": str(SAMPLES / "job-logs")}
    result = run_cli(["check"], env)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert f"job logs: {SAMPLES / 'job-logs'}" in lines
    assert "  workload 67890 attempt 0: 2 file(s) of 2 node(s) (worker-07, worker-08)" in lines
    assert "  workload 67891 attempt 0: 1 file(s) of 1 node(s) (worker-12)" in lines
    assert result.stdout.endswith("check passed: 0 errors, 0 warnings\n")
    doc = json.loads(run_cli(["check", "--json"], env).stdout)
    found = {(w["workload_id"], w["attempt_index"]): w["nodes"] for w in doc["details"]["job_logs"]["workloads"]}
    assert found[("67890", 0)] == ["worker-07", "worker-08"] and found[("12345", 0)] == ["worker-01"]


def test_a_job_log_tree_laid_out_wrongly_is_reported_item_by_item(run_cli, tmp_path: Path):
    jobs = tmp_path / "jobs"
    (jobs / "job-1" / "0").mkdir(parents=True)
    (jobs / "job-1" / "0" / "gpu-1.log").write_text("x\n")
    (jobs / "job-1" / "0" / "gpu-1.txt").write_text("x\n")  # not <node>.log
    (jobs / "job-1" / "latest").mkdir()  # not an attempt index
    (jobs / "job-2" / "1").mkdir(parents=True)  # an attempt without files
    (jobs / "gpu-3.log").write_text("x\n")  # a node file where a workload folder belongs
    result = run_cli(["check", "--json"], {**samples_env(), "ATTRIBUTION_JOB_LOG_DIR": str(jobs)})
    doc = json.loads(result.stdout)
    problems = {p["where"]: (p["severity"], p["message"]) for p in doc["problems"]}
    assert problems["job-1/0/gpu-1.txt"][0] == "warning" and "not <node>.log" in problems["job-1/0/gpu-1.txt"][1]
    assert "not an attempt folder" in problems["job-1/latest"][1]
    assert "a file, not a workload folder" in problems["gpu-3.log"][1]
    assert "holds no <node>.log file" in problems["job-2/1/"][1]
    found = {(w["workload_id"], w["attempt_index"]): w["files"] for w in doc["details"]["job_logs"]["workloads"]}
    assert found == {("job-1", 0): 1, ("job-2", 1): 0}
