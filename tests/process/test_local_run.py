"""The README's local run: `make run` itself, as a developer types it, on 127.0.0.1.

With nothing set it serves telemetry on conf/samples and answers the README's curl example as shown; every
ATTRIBUTION_* variable of the environment reaches the service; and it installs requirements.txt only. `make run`
runs in a copy of the checkout, where it makes its own `.venv` as a newcomer's first `make run` does: the suite
never writes into the tree it runs from, nor touches the environment it runs in.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
import requests

from tests.gunicorn_process import BOOT_TIMEOUT_S, ROOT, adapter_env, children, free_port

URL = "/v1/attribution"


#: what a checkout holds that is not the project's own files: not copied
_NOT_COPIED = shutil.ignore_patterns(
    ".git", ".venv", "site", "node_modules", "__pycache__", ".pytest_cache", ".ruff_cache", "build", "*.egg-info"
)


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the project's files, as a fresh clone has them (modification times kept)."""
    copy = tmp_path_factory.mktemp("checkout") / "attribution-adapter"
    shutil.copytree(ROOT, copy, ignore=_NOT_COPIED, symlinks=True)
    return copy


class MakeRun:
    """`make run` started in its own session; gunicorn is make's child and is stopped by its PID."""

    def __init__(self, env: Mapping[str, str], log_path: Path, cwd: Path) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.log_path = log_path
        full_env = adapter_env(
            {"ATTRIBUTION_BIND": f"127.0.0.1:{self.port}", "ATTRIBUTION_METRICS_BIND": f"127.0.0.1:{free_port()}"}
        )
        full_env.update(env)
        self.process = subprocess.Popen(
            ["make", "--no-print-directory", "run"],
            cwd=cwd,
            env=full_env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def output(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def wait_ready(self) -> None:
        # The first `make run` of a tree also installs requirements.txt: allow for that on top of the boot.
        deadline = time.monotonic() + BOOT_TIMEOUT_S + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"make run exited {self.process.returncode}:\n{self.output()}")
            try:
                if requests.get(f"{self.base_url}/healthz", timeout=1).status_code == 200:
                    return
            except requests.ConnectionError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"make run did not serve /healthz in time:\n{self.output()}")

    def post(self, body: object, **kwargs: object) -> requests.Response:
        return requests.post(f"{self.base_url}{URL}", timeout=15, **kwargs, json=body)

    def stop(self) -> None:
        if self.process.poll() is None:
            for pid in children(self.process.pid):  # gunicorn's master: SIGTERM stops its workers, then make returns
                os.kill(pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=40)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)  # make's own session, started above
                self.process.wait(timeout=10)
        self._log.close()


@pytest.fixture
def make_run(tmp_path: Path, checkout: Path) -> Iterator:
    started: list[MakeRun] = []

    def start(env: Mapping[str, str] | None = None) -> MakeRun:
        runner = MakeRun(env or {}, tmp_path / f"make-run-{len(started)}.log", checkout)
        started.append(runner)
        return runner

    yield start
    for runner in started:
        runner.stop()


def _readme_example() -> tuple[dict, dict]:
    """The request of the README's first curl example and the answer the README shows for it."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### The local run", 1)[1]
    curl = re.search(r"```sh\ncurl .*?-d '(.*?)'\n```", section, re.S)
    answer = re.search(r"```json\n(.*?)\n```", section, re.S)
    assert curl and answer
    return json.loads(curl.group(1)), json.loads(answer.group(1))


def test_make_run_answers_the_readme_curl_example_with_the_finding_it_shows(make_run):
    server = make_run()
    server.wait_ready()
    request, shown = _readme_example()
    answer = server.post(request)
    assert answer.status_code == 200
    body = answer.json()
    for key in ("schema_version", "service", "attributions", "unattributed_targets"):
        assert body[key] == shown[key], key
    assert "error" not in body and "error" not in shown
    assert body["attribution_session_id"].startswith("as1.")


def _readme_hang_example() -> tuple[dict, dict]:
    """The request and answer of the README's job-log example (the hang in conf/samples/job-logs)."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("#### A hang, read from the job's own logs", 1)[1]
    curl = re.search(r"```sh\ncurl .*?-d '(.*?)'\n```", section, re.S)
    answer = re.search(r"```json\n(.*?)\n```", section, re.S)
    assert curl and answer
    return json.loads(curl.group(1)), json.loads(answer.group(1))


def test_make_run_answers_the_readme_hang_example_from_the_sample_job_logs(make_run):
    server = make_run()
    server.wait_ready()
    request, shown = _readme_hang_example()
    body = server.post(request).json()
    for key in ("schema_version", "service", "attributions", "unattributed_targets", "error"):
        assert body[key] == shown[key], key
    assert [(f["target"]["name"], f["error_category"]) for f in body["attributions"]] == [
        ("worker-08", "collective_hang")
    ]
    # The job-log default gives way to a setting of the environment like every other: without job logs the
    # kernel logs of these nodes hold nothing, and nobody is blamed.
    server.stop()
    plain = make_run({"ATTRIBUTION_JOB_LOG_DIR": ""})
    plain.wait_ready()
    body = plain.post(request).json()
    assert body["attributions"] == [] and [t["name"] for t in body["unattributed_targets"]] == [
        "worker-07", "worker-08"
    ]


def test_make_run_passes_every_attribution_variable_of_the_environment_through(make_run, tmp_path):
    # A log tree of one node the samples do not have: only this directory can give it a finding.
    tree = tmp_path / "logs"
    tree.mkdir()
    sample = (ROOT / "conf" / "samples" / "kernel-logs" / "worker-01" / "kern.log").read_text()
    (tree / "gpu-node-7.log").write_text(sample.replace("worker-01", "gpu-node-7"))
    server = make_run({"ATTRIBUTION_KERNEL_LOG_DIR": str(tree), "ATTRIBUTION_MAX_BODY_BYTES": "2048"})
    server.wait_ready()
    request, _ = _readme_example()
    request["scope"]["nodes"] = ["gpu-node-7"]
    body = server.post(request).json()
    assert [f["target"] for f in body["attributions"]] == [{"type": "Node", "name": "gpu-node-7"}]
    # The samples' own node is not in this tree any more: the default gave way.
    request["scope"]["nodes"] = ["worker-01"]
    body = server.post(request).json()
    assert body["attributions"] == [] and body["error"]["type"] == "insufficient_telemetry"
    # A setting of the service itself, not of the provider, arrives too.
    request["workload_id"] = "x" * 256
    request["scope"]["nodes"] = [f"node-{i:03d}" for i in range(200)]
    assert len(json.dumps(request)) > 2048
    assert server.post(request).status_code == 413


def test_make_run_installs_requirements_txt_only_and_builds_the_compiled_parts():
    plan = subprocess.run(
        ["make", "--no-print-directory", "-n", "-B", "run"],
        cwd=ROOT,
        env=adapter_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    installs = [line for line in plan.splitlines() if "pip install" in line]
    assert installs, plan
    for line in installs:  # the runtime's requirements, and the pinned tools that build the compiled parts
        words = line.split()
        files = [words[i + 1] for i, word in enumerate(words) if word == "-r"]
        assert files == ["requirements.txt", "requirements-build.txt"], line
    assert "requirements-dev.txt" not in plan
    assert any(line.endswith("setup.py -q build_ext --inplace") for line in plan.splitlines()), plan


def test_the_readme_slow_example_pastes_as_is_and_continues_the_fast_session(make_run):
    """The README's two-command slow example, run by bash as pasted (only the address changed to this server's)."""
    server = make_run()
    server.wait_ready()
    readme = (ROOT / "README.md").read_text()
    section = readme.split("The slow phase continues a session", 1)[1]
    script = re.search(r"```sh\n(SESSION=.*?)\n```", section, re.S)
    assert script is not None
    done = subprocess.run(
        ["bash", "-c", script.group(1).replace("http://127.0.0.1:8000", server.base_url)],
        capture_output=True, timeout=60, check=True,
    )
    body = json.loads(done.stdout)
    assert [(f["target"]["name"], f["error_category"]) for f in body["attributions"]] == [("worker-01", "gpu_memory")]
    assert [f["source"] for f in body["attributions"][0]["evidence"]] == ["dcgm"]
    assert body["unattributed_targets"] == [{"type": "Node", "name": "worker-03"}]
    assert body["attribution_session_id"].startswith("as1.")


def test_the_readme_example_session_id_is_one_the_service_issues_for_that_request():
    """The id shown in the README's first answer opens, for the seed's request, at the time it was issued."""
    from app.sessions import SessionCodec
    from app.settings import SESSION_TTL
    from providers.telemetry import TelemetryProvider
    from tests.telemetry.conftest import make_request

    _, shown = _readme_example()
    session_id = shown["attribution_session_id"]
    payload = json.loads(base64.urlsafe_b64decode(session_id.split(".")[1] + "=="))
    request = make_request(["worker-01"])
    codec = SessionCodec(TelemetryProvider.session_identity, int(SESSION_TTL.default))  # type: ignore[arg-type]
    assert codec.open(session_id, request, now=payload["t"]) == {"v": 1}
