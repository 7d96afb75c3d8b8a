"""`pip install .` from a fresh copy of the repository: the console script, its metadata, and each verb run by it."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from tests.cli.test_replay import readme_example, without_ids
from tests.cli.trees import ROOT, SAMPLES, broken_tree, samples_env

SITE = "lib/python3.11/site-packages"


def _dist_info(installed) -> Path:
    (found,) = (installed.venv / SITE).glob("attribution_adapter-*.dist-info")
    return found


def test_the_console_script_entry_and_the_metadata(installed):
    entry_points = (_dist_info(installed) / "entry_points.txt").read_text()
    assert "[console_scripts]\nattribution-adapter = app.cli:main\n" in entry_points
    metadata = (_dist_info(installed) / "METADATA").read_text()
    assert "Version: 0.1.0\n" in metadata
    required = sorted(line.removeprefix("Requires-Dist: ") for line in metadata.splitlines() if "Requires-Dist" in line)
    pinned = sorted(
        line.strip() for line in (ROOT / "requirements.txt").read_text().splitlines() if line and line[0].isalpha()
    )
    assert required == pinned
    site = installed.venv / SITE
    # The package data the code reads at run time, and no tests or configuration beside the packages.
    assert (site / "providers" / "telemetry" / "kernel" / "data" / "xid_catalogue.csv").is_file()
    assert (site / "app" / "openapi_examples.json").is_file()
    assert not (site / "tests").exists() and not (site / "wsgi.py").exists()


def test_check_on_the_samples_passes(installed):
    done = installed.run(["check"], samples_env())
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().endswith("check passed: 0 errors, 0 warnings\n")
    assert done.stderr == b""


def test_check_and_replay_on_the_installed_samples_from_any_directory(installed):
    """`--samples`: the sample telemetry installed with the package, with no setting and outside the checkout."""
    assert (installed.venv / SITE / "app" / "samples" / "kernel-logs" / "worker-01" / "kern.log").is_file()
    done = installed.run(["check", "--samples"], {})
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().endswith("check passed: 0 errors, 0 warnings\n")
    request, answer = readme_example()
    assert json.loads(request) == json.loads((ROOT / "conf" / "samples" / "request.json").read_text())
    done = installed.run(["replay", "--samples"], {})
    assert done.returncode == 0, done.stderr
    assert without_ids(json.loads(done.stdout)) == without_ids(answer)
    # A setting of the environment still wins over the samples' own.
    done = installed.run(["replay", "--samples", "--nodes", "worker-01", "--at", "2026-09-09T12:00:00Z"],
                         {"ATTRIBUTION_KERNEL_LOG_LOOKBACK_SECONDS": "1", "ATTRIBUTION_KERNEL_LOG_GRACE_SECONDS": "0"})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["attributions"] == []


def test_check_on_a_broken_tree_fails_in_one_line(installed, tmp_path):
    done = installed.run(["check"], broken_tree(tmp_path))
    assert done.returncode == 1
    (line,) = done.stderr.decode().splitlines()
    assert line.startswith("attribution-adapter check: failed: ")


def test_replay_of_the_readme_request_prints_the_readme_answer(installed, tmp_path):
    request, answer = readme_example()
    path = tmp_path / "request.json"
    path.write_text(request)
    done = installed.run(["replay", str(path)], samples_env())
    assert done.returncode == 0, done.stderr
    assert without_ids(json.loads(done.stdout)) == without_ids(answer)


def test_openapi_prints_the_checked_in_document(installed):
    done = installed.run(["openapi"])
    assert done.returncode == 0
    assert done.stdout == (ROOT / "docs" / "openapi.json").read_bytes()


def test_help_of_each_verb(installed):
    for verb in ("check", "replay", "openapi"):
        done = installed.run([verb, "--help"])
        assert done.returncode == 0
        assert done.stdout.decode().startswith(f"Usage: attribution-adapter {verb} [OPTIONS]")
    done = installed.run(["nosuch"])
    assert done.returncode == 2
    assert done.stderr.decode() == ("attribution-adapter: No such command 'nosuch'. (see attribution-adapter --help)\n")


def test_replay_keeps_out_of_the_server_s_metrics_directory(installed, tmp_path):
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    request, _ = readme_example()
    done = installed.run(
        ["replay", "-"], {**samples_env(), "PROMETHEUS_MULTIPROC_DIR": str(metrics)}, input=request.encode()
    )
    assert done.returncode == 0, done.stderr
    assert list(metrics.iterdir()) == []


# ---------------------------------------------------------------- odd trees, checked from outside


def test_check_never_crashes_on_odd_trees(installed, tmp_path):
    logs = tmp_path / "logs"
    (logs / "worker-01").mkdir(parents=True)
    shutil.copy(SAMPLES / "kernel-logs" / "worker-01" / "kern.log", logs / "worker-01" / "kern.log")
    os.symlink("/dev/zero", logs / "worker-02.log")  # a device, endless
    os.mkfifo(logs / "worker-03.log")  # nobody ever writes it: opening it for reading must not wait
    (logs / "worker-04").mkdir()
    (logs / "worker-04" / "kern.log").write_bytes(b"")
    (logs / "worker-05.log").write_bytes(os.urandom(300_000))  # binary
    with (logs / "worker-06.log").open("wb") as f:  # huge and sparse: 20 GiB of nothing
        f.truncate(20 * 1024**3)
    (logs / "worker-07.log").write_bytes(b"x" * (3 * 1024 * 1024))  # one endless line
    (logs / "worker-08").mkdir()
    os.symlink("..", logs / "worker-08" / "up")  # a folder linking back up
    os.symlink("worker-09.log", logs / "worker-09.log")  # a link to itself
    os.symlink("missing.log", logs / "worker-10.log")  # a link to nothing
    (logs / os.fsdecode(b"worker-\xff.log")).write_text("not utf-8 in the name\n")
    whole = __import__("gzip").compress(b"\x00" * (64 * 1024 * 1024))  # decompresses to 64 MiB
    (logs / "worker-11").mkdir()
    (logs / "worker-11" / "kern.log.1.gz").write_bytes(whole)
    env = {"ATTRIBUTION_PROVIDER": "telemetry", "ATTRIBUTION_KERNEL_LOG_SOURCE": "files"}
    for args in (["check"], ["check", "--json"]):
        done = installed.run(args, {**env, "ATTRIBUTION_KERNEL_LOG_DIR": str(logs)})
        stderr = done.stderr.decode()
        assert done.returncode == 1, stderr
        assert len(stderr.splitlines()) == 1 and "Traceback" not in stderr
    doc = json.loads(done.stdout)
    problems = {p["where"]: p["severity"] for p in doc["problems"]}
    assert problems["worker-05.log"] == "error"  # binary: no known format
    assert problems["worker-07.log"] == "error"
    assert problems["worker-02.log"] == problems["worker-03.log"] == "warning"  # not regular files: skipped
    assert problems["worker-09.log"] == problems["worker-10.log"] == "warning"
    assert problems["worker-08/up/"] == "error"  # a folder inside a host folder
    files = {f["path"]: f for h in doc["details"]["kernel_logs"]["hosts"] for f in h["files"]}
    assert files["worker-04/kern.log"]["status"] == "empty"
    assert files["worker-06.log"]["size"] == 20 * 1024**3 and files["worker-06.log"]["status"] == "empty"
    assert files["worker-11/kern.log.1.gz"]["sampled"] == "head"  # streamed only up to the bound
    assert files["worker-01/kern.log"]["status"] == "ok"
    assert "worker-\\udcff.log" in done.stdout.decode()


def _without_read_override(installed, logs: Path, refused: Path) -> dict:
    """`check --json` with `refused` unreadable to it. Root reads everything, so as root the check runs without
    the capabilities that override file permissions (util-linux setpriv), as a non-root operator would."""
    refused.chmod(0)
    env = {
        "ATTRIBUTION_PROVIDER": "telemetry",
        "ATTRIBUTION_KERNEL_LOG_SOURCE": "files",
        "ATTRIBUTION_KERNEL_LOG_DIR": str(logs),
    }
    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        assert setpriv, "as root this test needs util-linux's setpriv to drop the read-override capabilities"
        caps = "-dac_override,-dac_read_search"
        prefix = [setpriv, f"--inh-caps={caps}", f"--bounding-set={caps}"]
    try:
        done = installed.run(["check", "--json"], env, prefix=prefix)
    finally:
        refused.chmod(0o755)
    assert done.returncode == 1, done.stderr
    assert len(done.stderr.decode().splitlines()) == 1
    doc = json.loads(done.stdout)
    doc["problems"] = [p for p in doc["problems"] if p["where"] != "ATTRIBUTION_EPILOG_DIR"]  # not set here
    return doc


def test_a_file_the_adapter_may_not_read(installed, tmp_path):
    logs = tmp_path / "logs"
    (logs / "worker-01").mkdir(parents=True)
    shutil.copy(SAMPLES / "kernel-logs" / "worker-01" / "kern.log", logs / "worker-01" / "kern.log")
    shutil.copy(SAMPLES / "kernel-logs" / "worker-01" / "kern.log.1", logs / "worker-01" / "kern.log.1")
    doc = _without_read_override(installed, logs, logs / "worker-01" / "kern.log.1")
    (problem,) = doc["problems"]
    assert problem["where"] == "worker-01/kern.log.1" and problem["severity"] == "error"
    assert "cannot be read (Permission denied)" in problem["message"]


def test_a_host_folder_the_adapter_may_not_list(installed, tmp_path):
    logs = tmp_path / "logs"
    (logs / "worker-01").mkdir(parents=True)
    (logs / "worker-02").mkdir()
    shutil.copy(SAMPLES / "kernel-logs" / "worker-01" / "kern.log", logs / "worker-01" / "kern.log")
    doc = _without_read_override(installed, logs, logs / "worker-02")
    (problem,) = doc["problems"]
    assert problem["where"] == "worker-02/" and "cannot be read (Permission denied)" in problem["message"]
