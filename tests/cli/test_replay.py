"""`attribution-adapter replay`: a request in, exactly the service's answer out, with no server."""

from __future__ import annotations

import json
import re
from typing import Any

from app import create_app
from app.boot import boot
from tests.cli.trees import ROOT, broken_tree, samples_env

SESSION_ID = re.compile(r"^as1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$")


def readme_example() -> tuple[str, dict[str, Any]]:
    """The README's local-run request (the first curl's body) and the answer the README shows for it."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### The local run") :]
    request = re.search(r"-d '(\{.*?\})'", section, re.DOTALL).group(1)  # type: ignore[union-attr]
    answer = re.search(r"```json\n(.*?)```", section, re.DOTALL).group(1)  # type: ignore[union-attr]
    return request, json.loads(answer)


def without_ids(body: dict[str, Any]) -> dict[str, Any]:
    """The body less what differs on every call, after checking those are there and well formed."""
    body = dict(body)
    assert re.fullmatch(r"[0-9a-f]{32}", body.pop("request_id"))
    assert SESSION_ID.match(body.pop("attribution_session_id"))
    return body


def test_replay_of_the_readme_request_prints_the_readme_answer(run_cli, tmp_path):
    request, answer = readme_example()
    (tmp_path / "request.json").write_text(request)
    result = run_cli(["replay", str(tmp_path / "request.json")], samples_env())
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert without_ids(json.loads(result.stdout)) == without_ids(answer)


def test_replay_prints_the_very_bytes_the_service_sends(run_cli, tmp_path):
    request, _ = readme_example()
    (tmp_path / "request.json").write_text(request)
    printed = run_cli(["replay", str(tmp_path / "request.json")], samples_env()).stdout_bytes
    booted = boot(samples_env())
    app = create_app(booted.settings, booted.provider)
    sent = app.test_client().post("/v1/attribution", data=request, headers={"Content-Type": "application/json"})
    app.extensions["attribution_adapter"].service.close()
    # The same bytes but for the two ids that differ on every call.
    ids = re.compile(rb'"(request_id|attribution_session_id)":"[^"]*"')
    assert ids.sub(b"", printed) == ids.sub(b"", sent.get_data())
    assert printed.endswith(b"}\n")


def test_flags_build_the_same_request(run_cli, tmp_path):
    request, _ = readme_example()
    (tmp_path / "request.json").write_text(request)
    from_file = json.loads(run_cli(["replay", str(tmp_path / "request.json")], samples_env()).stdout)
    flags = [
        "replay",
        "--nodes",
        "worker-01",
        "--at",
        "2026-09-09T12:00:00Z",
        "--phase",
        "fast",
        "--workload-id",
        "12345",
        "--workflow-id",
        "training-example",
    ]
    result = run_cli(flags, samples_env())
    assert result.exit_code == 0
    assert without_ids(json.loads(result.stdout)) == without_ids(from_file)


def test_a_request_on_stdin(run_cli):
    request, answer = readme_example()
    result = run_cli(["replay", "-"], samples_env(), input=request)
    assert result.exit_code == 0
    assert without_ids(json.loads(result.stdout)) == without_ids(answer)


def test_slow_continues_a_fast_replay_s_session(run_cli):
    fast = run_cli(["replay", "--nodes", "worker-01,worker-03", "--at", "2026-09-09T12:00:00Z"], samples_env())
    session = json.loads(fast.stdout)["attribution_session_id"]
    slow = run_cli(
        [
            "replay",
            "--nodes",
            "worker-01, worker-03",
            "--at",
            "2026-09-09T12:00:00Z",
            "--phase",
            "slow",
            "--continue-session",
            session,
            "--start",
            "2026-09-09T12:05:00Z",
            "--end",
            "2026-09-09T12:20:00Z",
        ],
        samples_env(),
    )
    assert slow.exit_code == 0
    body = json.loads(slow.stdout)
    assert body["attribution_session_id"] == session
    assert [(f["target"]["name"], f["error_category"]) for f in body["attributions"]] == [("worker-01", "gpu_memory")]
    assert body["unattributed_targets"] == [{"type": "Node", "name": "worker-03"}]


def test_a_request_the_contract_refuses_prints_the_422_body_and_fails(run_cli):
    result = run_cli(["replay", "--nodes", "worker-01", "--at", "2026-09-09T12:00:00", "--ranks", "1,1"], samples_env())
    assert result.exit_code == 1
    problems = json.loads(result.stdout)["detail"]
    assert {tuple(p["loc"]) for p in problems} == {
        ("body", "failure_context", "detected_at"),
        ("body", "scope", "ranks", 1),  # the repeated rank
    }
    assert result.stderr == "attribution-adapter replay: the service answered HTTP 422 (the body is on stdout)\n"


def test_a_body_over_the_limit_gets_the_service_s_413(run_cli, tmp_path):
    request, _ = readme_example()
    (tmp_path / "big.json").write_text(request + " " * 2048)
    result = run_cli(["replay", str(tmp_path / "big.json")], {**samples_env(), "ATTRIBUTION_MAX_BODY_BYTES": "1024"})
    assert result.exit_code == 1
    assert json.loads(result.stdout) == {"detail": "Request body is larger than the configured limit"}
    assert "HTTP 413" in result.stderr


def test_a_broken_tree_answers_insufficient_telemetry_and_the_warnings_name_the_files(run_cli, tmp_path):
    result = run_cli(
        ["replay", "--nodes", "worker-07,worker-08", "--at", "2026-09-09T12:00:00Z"], broken_tree(tmp_path)
    )
    assert result.exit_code == 0
    body = json.loads(result.stdout)
    # worker-08's readable file holds a finding, which stands; worker-07's only file is skipped, and the cut .gz
    # leaves worker-08 uncertain, so neither node is called clean.
    assert [f["target"]["name"] for f in body["attributions"]] == ["worker-08"]
    assert body["unattributed_targets"] == []
    assert body["error"]["type"] == "insufficient_telemetry"
    logs = [json.loads(line) for line in result.stderr.splitlines()]  # the service's own JSON log lines
    messages = " ".join(entry["message"] for entry in logs)
    assert "worker-07/dmesg.log" in messages and "worker-08/kern.log.1.gz" in messages
    assert {entry["level"] for entry in logs} == {"warning"}


def test_usage_mistakes_are_one_line(run_cli, tmp_path):
    (tmp_path / "r.json").write_text("{}")
    cases = {
        ("replay",): "give REQUEST.json, or --nodes and --at",
        ("replay", str(tmp_path / "r.json"), "--nodes", "a"): "not both (--nodes given)",
        ("replay", "--nodes", "a", "--at", "x", "--ranks", "one"): "--ranks must be integers",
        ("replay", str(tmp_path / "missing.json")): "cannot read",
        ("replay", "--phase", "medium"): "'medium' is not one of 'fast', 'slow'",
    }
    for args, says in cases.items():
        result = run_cli(list(args), samples_env())
        assert result.exit_code == 2, args
        (line,) = result.stderr.splitlines()
        assert line.startswith("attribution-adapter replay: ") and says in line, line
        assert line.endswith("(see attribution-adapter replay --help)")
        assert result.stdout == ""


def test_wrong_settings_stop_replay(run_cli):
    result = run_cli(["replay", "--nodes", "a", "--at", "2026-09-09T12:00:00Z"], {"ATTRIBUTION_PROVIDER": "nosuch"})
    assert result.exit_code == 4
    assert result.stderr.startswith("attribution-adapter replay: cannot start: ATTRIBUTION_PROVIDER='nosuch'")


def test_openapi_prints_the_checked_in_document_without_settings(run_cli):
    result = run_cli(["openapi"])
    assert result.exit_code == 0
    assert result.stdout_bytes == (ROOT / "docs" / "openapi.json").read_bytes()


def test_help_and_version(run_cli):
    for verb in ("check", "replay", "openapi"):
        result = run_cli([verb, "--help"])
        assert result.exit_code == 0 and f"Usage: attribution-adapter {verb}" in result.stdout
    assert run_cli(["--version"]).stdout == "attribution-adapter 0.1.0\n"
    bare = run_cli([])
    assert bare.exit_code == 2 and "Commands:" in bare.stderr
