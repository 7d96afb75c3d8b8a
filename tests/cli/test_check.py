"""`attribution-adapter check` on the files source: the samples pass, a broken tree fails naming each thing to fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.boot import boot
from app.settings import SettingsError
from providers.base import Deadline
from providers.telemetry.dcgm import results as epilog
from providers.telemetry.dcgm.check import epilog_node
from providers.telemetry.kernel.check import END_LINES
from tests.cli.trees import ROOT, SAMPLES, broken_tree, samples_env

FAILED = "attribution-adapter check: failed: "


def _problems(doc: dict) -> dict[str, str]:
    return {p["where"]: p["severity"] for p in doc["problems"]}


def test_the_samples_pass_with_a_summary_by_default(run_cli):
    result = run_cli(["check"], samples_env())
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[2:5] == [
        "  hosts: 8 (4 in folders, 4 in per-host files); their files: 10 read (10 ok)",
        "  combined files: 1 read (1 ok); hosts named in their lines: 1",
        "  lines span 2026-09-08T06:12:04.006012Z .. 2026-09-09T12:10:00.500700Z",
    ]
    assert "  hosts: 2; results: 2 read (1 fail, 1 pass)" in lines
    assert not any(line.startswith(("  host ", "    ")) for line in lines)  # each host's lines: --verbose
    verbose = run_cli(["check", "--verbose"], samples_env()).stdout.splitlines()
    assert f"({len(verbose) - len(lines) + 1} lines on each host and file: check --verbose)" in lines
    assert result.stdout.endswith("check passed: 0 errors, 0 warnings\n")


def test_the_samples_pass_and_every_host_and_file_is_reported(run_cli):
    result = run_cli(["check", "--verbose"], samples_env())
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    out = result.stdout
    assert out.startswith("settings: valid (ATTRIBUTION_PROVIDER=telemetry")
    for line in (
        "  host worker-01 (folder worker-01/)",
        "    worker-01/kern.log: ok; rfc3339; 2026-09-09T11:40:02.118204Z .. 2026-09-09T12:03:40.770125Z; 8 lines",
        "  host worker-02 (per-host file)",
        "    worker-03/kern.log.1.gz: ok; rfc3339; 2026-09-08T06:12:04.006012Z .. 2026-09-08T23:59:58.023059Z; 3 lines",
        "    worker-06/dmesg.log: ok; dmesg_iso; 2026-09-09T11:41:19.006012Z .. 2026-09-09T12:07:12.120044Z; 6 lines",
        "    worker-01-20260909T121000Z.json: fail; 2026-09-09T12:10:00Z (from the name)",
        "    worker-03/20260909T121200Z.json: pass; 2026-09-09T12:12:00Z (from the name)",
    ):
        assert line in out.splitlines()
    assert "combined kern.log: ok; rfc5424 6, rfc3164 1;" in out
    assert out.endswith("check passed: 0 errors, 0 warnings\n")


def test_the_samples_as_json(run_cli):
    result = run_cli(["check", "--json"], samples_env())
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc["report_version"] == 1 and doc["ok"] is True and doc["checked"] is True
    assert doc["provider"] == {"name": "telemetry", "version": "1"}
    assert doc["problems"] == []
    logs = doc["details"]["kernel_logs"]
    assert logs["source"] == "files"
    assert [(h["name"], h["layout"]) for h in logs["hosts"]] == [
        ("worker-01", "folder"),
        ("worker-02", "file"),
        ("worker-03", "folder"),
        ("worker-05", "folder"),
        ("worker-06", "folder"),
        ("worker-07", "file"),
        ("worker-08", "file"),
        ("worker-12", "file"),
    ]
    worker_03 = next(h for h in logs["hosts"] if h["name"] == "worker-03")
    assert [f["path"] for f in worker_03["files"]] == ["worker-03/kern.log", "worker-03/kern.log.1.gz"]
    gz = worker_03["files"][1]
    assert gz["compressed"] is True and gz["status"] == "ok" and gz["formats"] == {"rfc3339": 3}
    assert gz["first"] == "2026-09-08T06:12:04.006012Z" and gz["last"] == "2026-09-08T23:59:58.023059Z"
    (combined,) = logs["combined"]
    assert combined["path"] == "kern.log" and combined["hosts"] == ["worker-04"]
    assert combined["formats"] == {"rfc3164": 1, "rfc5424": 6}
    results = {h["name"]: [r["status"] for r in h["results"]] for h in doc["details"]["epilog"]["hosts"]}
    assert results == {"worker-01": ["fail"], "worker-03": ["pass"]}


def test_a_broken_tree_fails_naming_each_thing_to_fix(run_cli, tmp_path):
    result = run_cli(["check", "--verbose"], broken_tree(tmp_path))
    assert result.exit_code == 1
    stderr = result.stderr.splitlines()
    assert len(stderr) == 1 and stderr[0].startswith(FAILED), result.stderr
    assert "and 5 more errors above" in stderr[0]
    out = result.stdout
    problems = out[out.index("problems:\n") :]
    for where, says in (
        ("2026-09-09/worker-10/", "the source reads one level only"),
        ("worker-07/dmesg.log", "plain dmesg lines (seconds since boot)"),
        ("worker-08/kern.log.1.gz", "not a readable gzip stream (EOFError)"),
        ("worker-09.log", "no line of its first 64 KiB is in a known format (first unreadable line 1)"),
        ("kern.log", "lines carry no host name"),
        ("worker-07-20260909T121000Z.json", "the epilog result cannot be read"),
    ):
        assert f"  error    {where}: " in problems and says in problems, where
    for where, says in (("loop", "Too many levels of symbolic links"), ("worker-11/kern.log.pipe", "a FIFO")):
        assert f"  warning  {where}: is skipped by the source: {says}" in problems
    # The readable host is reported as readable beside the broken ones.
    assert "    worker-01/kern.log: ok; rfc3339;" in out
    assert out.endswith("check failed: 6 errors, 2 warnings\n")


def test_a_broken_tree_as_json(run_cli, tmp_path):
    result = run_cli(["check", "--json"], broken_tree(tmp_path))
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert doc["ok"] is False
    assert _problems(doc) == {
        "2026-09-09/worker-10/": "error",
        "worker-07/dmesg.log": "error",
        "worker-08/kern.log.1.gz": "error",
        "worker-09.log": "error",
        "kern.log": "error",
        "worker-07-20260909T121000Z.json": "error",
        "loop": "warning",
        "worker-11/kern.log.pipe": "warning",
    }
    files = {f["path"]: f for h in doc["details"]["kernel_logs"]["hosts"] for f in h["files"]}
    assert files["worker-07/dmesg.log"]["status"] == "unknown_format"
    assert files["worker-07/dmesg.log"]["unreadable_lines"] == 3
    assert files["worker-07/dmesg.log"]["first_unreadable_line"] == 1
    assert files["worker-08/kern.log.1.gz"]["status"] == "corrupt"
    assert files["worker-08/kern.log"]["status"] == "ok"
    assert {s["path"]: s["reason"] for s in doc["details"]["kernel_logs"]["skipped"]} == {
        "2026-09-09/worker-10/": "a folder inside a host folder",
        "loop": "Too many levels of symbolic links",
        "worker-11/kern.log.pipe": "a FIFO",
    }
    epilog_hosts = {h["name"]: h["results"] for h in doc["details"]["epilog"]["hosts"]}
    assert epilog_hosts["worker-07"][0]["status"] == "unreadable"


def test_a_directory_with_no_log_file_fails(run_cli, tmp_path):
    (tmp_path / "logs" / "worker-01").mkdir(parents=True)
    env = {"ATTRIBUTION_PROVIDER": "telemetry", "ATTRIBUTION_KERNEL_LOG_SOURCE": "files"}
    result = run_cli(["check"], {**env, "ATTRIBUTION_KERNEL_LOG_DIR": str(tmp_path / "logs")})
    assert result.exit_code == 1
    assert "holds no log file the source reads" in result.stderr
    # Without ATTRIBUTION_EPILOG_DIR every slow answer is insufficient_telemetry: said, but not an error by itself.
    assert "  warning  ATTRIBUTION_EPILOG_DIR: is not set" in result.stdout


def test_host_names_in_lines_that_differ_from_the_folder_are_a_warning(run_cli, tmp_path):
    (tmp_path / "worker-01").mkdir()
    (tmp_path / "worker-01" / "kern.log").write_text(
        "2026-09-09T11:58:12.123481+00:00 gpu17 kernel: NVRM: GPU 0000:91:00.0: GPU has fallen off the bus.\n"
    )
    env = {"ATTRIBUTION_PROVIDER": "telemetry", "ATTRIBUTION_KERNEL_LOG_SOURCE": "files"}
    result = run_cli(["check", "--json"], {**env, "ATTRIBUTION_KERNEL_LOG_DIR": str(tmp_path)})
    assert result.exit_code == 0
    (problem,) = [p for p in json.loads(result.stdout)["problems"] if p["where"] == "worker-01"]
    assert problem["severity"] == "warning" and "gpu17" in problem["message"] and "'worker-01'" in problem["message"]


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({}, "ATTRIBUTION_PROVIDER is not set"),
        ({"ATTRIBUTION_PROVIDER": "telemetry"}, "ATTRIBUTION_KERNEL_LOG_SOURCE is not set"),
        (
            {**samples_env(), "ATTRIBUTION_KERNEL_LOG_DIR": "/nonexistent/logs"},
            "ATTRIBUTION_KERNEL_LOG_DIR='/nonexistent/logs' is not an existing directory",
        ),
        ({**samples_env(), "ATTRIBUTION_WORKERS": "many"}, "ATTRIBUTION_WORKERS='many' is not an integer"),
        (
            {**samples_env(), "ATTRIBUTION_KERNEL_LOG_DIRS": "x"},
            "unknown setting ATTRIBUTION_KERNEL_LOG_DIRS; did you mean ATTRIBUTION_KERNEL_LOG_DIR?",
        ),
        (
            {**samples_env(), "ATTRIBUTION_WORKER": "4"},
            "unknown setting ATTRIBUTION_WORKER; did you mean ATTRIBUTION_WORKERS?",
        ),
    ],
)
def test_wrong_settings_stop_check_as_they_stop_boot(run_cli, env, names):
    result = run_cli(["check"], env)
    assert result.exit_code == 4
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("attribution-adapter check: cannot start: ") and names in line
    # The very message the server's boot stops with: wsgi.py imported under the same settings.
    booting = subprocess.run(
        [sys.executable, "-c", "import wsgi"],
        cwd=ROOT,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("ATTRIBUTION_")}, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert booting.returncode == 4
    assert line.removeprefix("attribution-adapter check: ") in booting.stderr


def test_another_providers_setting_is_a_warning_line_and_check_goes_on(run_cli):
    result = run_cli(["check"], {**samples_env(), "ATTRIBUTION_FACT_ENDPOINT": "http://fact.example"})
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        "attribution-adapter check: warning: setting not read: ATTRIBUTION_FACT_ENDPOINT is a setting of the fact "
        "provider; ATTRIBUTION_PROVIDER=telemetry ignores it"
    ]


def test_boot_is_the_function_both_entries_call():
    with pytest.raises(SettingsError, match="ATTRIBUTION_PROVIDER is not set"):
        boot({})
    booted = boot(samples_env())
    assert booted.provider.name == "telemetry" and booted.server.workers == 2


def test_the_epilog_node_names_check_reports_are_the_reader_s(tmp_path):
    names = [
        "worker-01-20260909T121000Z.json",
        "worker-01-2026-09-09T12:10:00Z.json",
        "worker-01-2026-09-09T12-10-00Z.json",
        "worker-01.json",
        "worker-01-abcd20260909T121000Z.json",
        "worker-01-x.json",
    ]
    for name in names:
        (tmp_path / name).write_text("{}")
    for name in names:
        node = epilog_node(name.removesuffix(".json"))
        other = "some-other-node"
        assert epilog._node_of_file(name.removesuffix(".json"), epilog.NodeNames([node, other])) == node, name


def test_check_reads_a_bounded_amount_of_each_file(run_cli, tmp_path):
    logs = tmp_path / "logs"
    (logs / "worker-01").mkdir(parents=True)
    line = (SAMPLES / "kernel-logs" / "worker-01" / "kern.log").read_text().splitlines()[0] + "\n"
    big = logs / "worker-01" / "kern.log"
    with big.open("w") as f:
        for _ in range(400_000 // len(line) * 100):  # about 40 MB
            f.write(line)
    for n in range(1, 12):
        (logs / "worker-01" / f"kern.log.{n}").write_text(line)
    env = {"ATTRIBUTION_PROVIDER": "telemetry", "ATTRIBUTION_KERNEL_LOG_SOURCE": "files"}
    result = run_cli(["check", "--json"], {**env, "ATTRIBUTION_KERNEL_LOG_DIR": str(logs)})
    assert result.exit_code == 0
    (host,) = json.loads(result.stdout)["details"]["kernel_logs"]["hosts"]
    first = host["files"][0]
    assert first["path"] == "worker-01/kern.log" and first["sampled"] == "head_and_tail"
    # Head and tail only: 128 KiB hold far fewer lines than the file.
    assert first["lines_sampled"] < 128 * 1024 // len(line) + 2
    assert len(host["files"]) == 8 and host["files_not_listed"] == 4
    assert [f["path"] for f in host["files"][:3]] == [
        "worker-01/kern.log",
        "worker-01/kern.log.1",
        "worker-01/kern.log.2",
    ]


def test_the_check_hook_of_a_provider_that_has_none(run_cli):
    result = run_cli(["check"], {"ATTRIBUTION_PROVIDER": "tests.fakes:from_options"})
    assert result.exit_code == 0
    assert "offers no check of what it reads" in result.stdout
    doc = json.loads(run_cli(["check", "--json"], {"ATTRIBUTION_PROVIDER": "tests.fakes:from_options"}).stdout)
    assert doc["checked"] is False and doc["ok"] is True and doc["problems"] == []


def test_a_provider_check_that_breaks_is_one_line_never_a_traceback(run_cli, monkeypatch):
    from tests import fakes

    def broken(self, deadline: Deadline):
        raise RuntimeError("the check fell over")

    monkeypatch.setattr(fakes.FakeProvider, "check", broken, raising=False)
    result = run_cli(["check"], {"ATTRIBUTION_PROVIDER": "tests.fakes:from_options"})
    assert result.exit_code == 1
    assert result.stderr == "attribution-adapter check: failed unexpectedly (RuntimeError: the check fell over)\n"
    assert "Traceback" not in result.output


def test_fact_is_checked_for_construction_only(run_cli):
    fake_pkg = Path(__file__).resolve().parents[1] / "fact" / "fake_pkg"
    sys.path.insert(0, str(fake_pkg))
    try:
        result = run_cli(
            ["check", "--json"], {"ATTRIBUTION_PROVIDER": "fact", "ATTRIBUTION_FACT_ENDPOINT": "http://127.0.0.1:9"}
        )
    finally:
        sys.path.remove(str(fake_pkg))
        sys.modules.pop("fact_client", None)
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc["checked"] is False and doc["provider"]["name"] == "fact"
    assert "cannot be checked without calling it" in doc["summary"]


def test_the_readme_shows_the_real_output_of_check_on_the_broken_tree(run_cli, tmp_path, monkeypatch):
    broken_tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    env = {
        "ATTRIBUTION_PROVIDER": "telemetry",
        "ATTRIBUTION_KERNEL_LOG_SOURCE": "files",
        "ATTRIBUTION_KERNEL_LOG_DIR": "kernel-logs",
        "ATTRIBUTION_EPILOG_DIR": "epilog",
    }
    result = run_cli(["check"], env)
    readme = (ROOT / "README.md").read_text()
    shown = readme.split("ATTRIBUTION_EPILOG_DIR=epilog attribution-adapter check\n", 1)[1].split("```", 1)[0]
    assert result.stdout == shown
    stderr_shown = readme.split("and exits 1 with one line on stderr:\n\n```text\n", 1)[1].split("```", 1)[0]
    assert result.stderr == stderr_shown


def test_the_old_provider_name_is_checked_as_the_new_one_with_one_notice(run_cli):
    old = run_cli(["check", "--json"], {**samples_env(), "ATTRIBUTION_PROVIDER": "kernel_log"})
    new = run_cli(["check", "--json"], samples_env())
    assert old.exit_code == new.exit_code == 0, old.output
    assert old.stderr.splitlines() == [
        "attribution-adapter check: notice: ATTRIBUTION_PROVIDER=kernel_log is the old name of the 'telemetry' "
        "provider and still works; set ATTRIBUTION_PROVIDER=telemetry"
    ]
    assert new.stderr == ""
    assert json.loads(old.stdout) == json.loads(new.stdout)
    assert json.loads(old.stdout)["provider"]["name"] == "telemetry"


def test_a_host_s_long_file_is_sampled_by_its_ends_and_a_head_in_no_format_read_further(run_cli, tmp_path):
    logs = tmp_path / "logs"
    (logs / "worker-01").mkdir(parents=True)
    line = (SAMPLES / "kernel-logs" / "worker-01" / "kern.log").read_text().splitlines()[0] + "\n"
    noise = "a line of an application, in no syslog format at all\n"
    (logs / "worker-01" / "kern.log").write_text(line * 3000)
    # 40 unreadable lines first: more than the first END_LINES lines sampled, so the rest of the head is read, as the
    # source looks for a known line in a file's first 64 KiB
    (logs / "worker-02").mkdir()
    (logs / "worker-02" / "kern.log").write_text(noise * 40 + line * 3000)
    env = {"ATTRIBUTION_PROVIDER": "telemetry", "ATTRIBUTION_KERNEL_LOG_SOURCE": "files"}
    result = run_cli(["check", "--json"], {**env, "ATTRIBUTION_KERNEL_LOG_DIR": str(logs)})
    assert result.exit_code == 0, result.output
    files = {h["name"]: h["files"][0] for h in json.loads(result.stdout)["details"]["kernel_logs"]["hosts"]}
    assert files["worker-01"]["status"] == "ok" and files["worker-01"]["lines_sampled"] == 2 * END_LINES
    assert files["worker-02"]["status"] == "ok" and files["worker-02"]["first_unreadable_line"] == 1
    assert files["worker-02"]["unreadable_lines"] == 40 and files["worker-02"]["lines_sampled"] > 2 * END_LINES


def test_a_rotated_file_out_of_order_is_a_warning(run_cli, tmp_path):
    logs = tmp_path / "logs"
    (logs / "worker-01").mkdir(parents=True)
    lines = (SAMPLES / "kernel-logs" / "worker-01" / "kern.log").read_text().splitlines(keepends=True)
    (logs / "worker-01" / "kern.log").write_text("".join(lines[:2]))  # the newer file starts at 11:40
    (logs / "worker-01" / "kern.log.1").write_text("".join(lines[2:]))  # the older one goes on to 12:03
    env = {"ATTRIBUTION_PROVIDER": "telemetry", "ATTRIBUTION_KERNEL_LOG_SOURCE": "files"}
    result = run_cli(["check"], {**env, "ATTRIBUTION_KERNEL_LOG_DIR": str(logs)})
    assert result.exit_code == 0, result.output
    assert "  warning  worker-01/kern.log.1: holds lines up to 2026-09-09T12:03:40.770125Z, later than the start of " \
           "the newer worker-01/kern.log (2026-09-09T11:40:02.118204Z): the files are out of rotation order" \
           in result.stdout
