"""The container image, built by `make image` with buildah and run by podman as a deployment runs it.

The Dockerfile's pinned base cannot be pulled where no container registry is reachable, so the image is built on a
local bookworm made by debootstrap (local_base.py) through the Dockerfile's PYTHON_IMAGE argument; everything else
is the Dockerfile as it is. The container runs with a read-only root filesystem and a tmpfs on /tmp, as its own
non-root user, with the sample telemetry mounted read-only and its two ports published on 127.0.0.1 only. It must
answer /healthz and the README's requests exactly as the README shows, serve metrics, stop cleanly on SIGTERM, and
hold none of the repository's tests, docs, benchmarks or sample files.
"""

from __future__ import annotations

import json
import re
import resource
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from tests.gunicorn_process import ROOT, free_port
from tests.image import local_base

BUILD_TIMEOUT_S = 1500
BOOT_TIMEOUT_S = 60
UID = 10001
SAMPLES_IN_CONTAINER = "/samples"
#: tracked folders and files whose content must never be in the image
NEVER_IN_IMAGE = ("tests/", "docs/", "bench/", "deploy/", "conf/samples/", ".ci/")
NEVER_IN_IMAGE_FILES = ("README.md", "requirements-dev.txt", "Makefile", "Procfile", ".dockerignore", "Dockerfile")
#: what the Dockerfile copies into /app
RUNTIME = ("wsgi.py", "app/", "schemas/", "providers/", "conf/gunicorn.conf.py")


def _run(args: list[str], timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        output = done.stdout[-3000:] + "\n" + done.stderr[-3000:]
        raise AssertionError(f"{' '.join(args)} exited {done.returncode}:\n{output}")
    return done


def _has_cap_sys_resource() -> bool:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> 24 & 1)  # CAP_SYS_RESOURCE is capability 24
    return False


def _ulimits() -> list[str]:
    """podman raises the container's open-file and process limits above the caller's by default, which needs
    CAP_SYS_RESOURCE; without it (inside some sandboxes) the container gets limits the caller can grant."""
    if _has_cap_sys_resource():
        return []
    files = min(resource.getrlimit(resource.RLIMIT_NOFILE)[1], 65536)
    return ["--ulimit", f"nofile={files}:{files}", "--ulimit", "nproc=4096:4096"]


def _tracked() -> list[str]:
    listing = _run(["git", "ls-files"], timeout=60).stdout.splitlines()
    return [p for p in listing if (ROOT / p).is_file()]


@pytest.fixture(scope="module")
def image() -> Iterator[str]:
    base = local_base.ensure()
    tag = "localhost/attribution-adapter:image-test"
    build = subprocess.run(
        ["make", "--no-print-directory", "image", "BUILDER=buildah", f"IMAGE={tag}", f"PYTHON_IMAGE={base}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
    )
    assert build.returncode == 0, f"make image failed:\n{build.stdout[-6000:]}\n{build.stderr[-6000:]}"
    # The build ran on the local base, through the Dockerfile's own argument, and the default stayed the pin.
    assert f"--build-arg PYTHON_IMAGE={base}" in build.stderr + build.stdout
    yield tag


@dataclass
class Container:
    id: str
    port: int
    metrics_port: int

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def logs(self) -> str:
        done = _run(["podman", "logs", self.id], check=False)
        return done.stdout + done.stderr

    def state(self) -> dict:
        return json.loads(_run(["podman", "inspect", self.id]).stdout)[0]["State"]

    def exec(self, *args: str) -> subprocess.CompletedProcess[str]:
        return _run(["podman", "exec", self.id, *args], check=False)


def _start(image: str, env: dict[str, str], volumes: tuple[str, ...] = ()) -> Container:
    port, metrics_port = free_port(), free_port()
    name = f"adapter-image-test-{uuid.uuid4().hex[:8]}"
    args = [
        "podman", "run", "--detach", "--name", name, "--runtime", "runc",
        "--read-only", "--tmpfs", "/tmp",
        *_ulimits(),
        "--publish", f"127.0.0.1:{port}:8000", "--publish", f"127.0.0.1:{metrics_port}:9464",
        "--volume", f"{ROOT / 'conf' / 'samples'}:{SAMPLES_IN_CONTAINER}:ro",
    ]  # fmt: skip
    for volume in volumes:
        args += ["--volume", volume]
    for key, value in env.items():
        args += ["--env", f"{key}={value}"]
    container_id = _run([*args, image]).stdout.strip()
    return Container(container_id, port, metrics_port)


def _wait_ready(container: Container) -> None:
    deadline = time.monotonic() + BOOT_TIMEOUT_S
    while time.monotonic() < deadline:
        if not container.state()["Running"]:
            raise AssertionError(f"the container stopped:\n{container.logs()}")
        try:
            if requests.get(f"{container.base_url}/healthz", timeout=1).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"the container did not serve /healthz in time:\n{container.logs()}")


def _remove(container: Container) -> None:
    _run(["podman", "rm", "--force", "--time", "5", container.id], check=False, timeout=60)


SAMPLE_ENV = {
    "ATTRIBUTION_PROVIDER": "telemetry",
    "ATTRIBUTION_KERNEL_LOG_SOURCE": "files",
    "ATTRIBUTION_KERNEL_LOG_DIR": f"{SAMPLES_IN_CONTAINER}/kernel-logs",
    "ATTRIBUTION_EPILOG_DIR": f"{SAMPLES_IN_CONTAINER}/epilog",
    "ATTRIBUTION_JOB_LOG_DIR": f"{SAMPLES_IN_CONTAINER}/job-logs",
}


@pytest.fixture(scope="module")
def container(image: str) -> Iterator[Container]:
    started = _start(image, SAMPLE_ENV)
    try:
        _wait_ready(started)
        yield started
    finally:
        _remove(started)


def _readme_example(heading: str) -> tuple[dict, dict]:
    """The request of the first curl example after `heading` in the README, and the answer shown for it."""
    section = (ROOT / "README.md").read_text().split(heading, 1)[1]
    curl = re.search(r"```sh\ncurl .*?-d '(.*?)'\n```", section, re.S)
    answer = re.search(r"```json\n(.*?)\n```", section, re.S)
    assert curl and answer
    return json.loads(curl.group(1)), json.loads(answer.group(1))


def test_healthz(container: Container) -> None:
    answer = requests.get(f"{container.base_url}/healthz", timeout=5)
    assert answer.status_code == 200 and answer.json() == {"status": "ok"}


def test_the_seed_request_on_the_mounted_samples_answers_as_the_readme_shows(container: Container) -> None:
    request, shown = _readme_example("### The local run")
    answer = requests.post(f"{container.base_url}/v1/attribution", json=request, timeout=15)
    assert answer.status_code == 200
    body = answer.json()
    for key in ("schema_version", "service", "attributions", "unattributed_targets"):
        assert body[key] == shown[key], key
    assert "error" not in body
    assert [(f["target"]["name"], f["error_category"]) for f in body["attributions"]] == [("worker-01", "gpu_off_bus")]


def test_the_job_log_example_reads_the_mounted_job_logs(container: Container) -> None:
    request, shown = _readme_example("#### A hang, read from the job's own logs")
    body = requests.post(f"{container.base_url}/v1/attribution", json=request, timeout=15).json()
    for key in ("attributions", "unattributed_targets"):
        assert body[key] == shown[key], key


def test_bad_input_is_a_422(container: Container) -> None:
    answer = requests.post(f"{container.base_url}/v1/attribution", json={"schema_version": "0.1.0"}, timeout=15)
    assert answer.status_code == 422


def test_the_metrics_port_serves_the_requests_counted(container: Container) -> None:
    requests.get(f"{container.base_url}/healthz", timeout=5)
    metrics = requests.get(f"http://127.0.0.1:{container.metrics_port}/metrics", timeout=5)
    assert metrics.status_code == 200
    counted = re.search(r'^flask_http_request_total\{[^}]*status="200"[^}]*\} ([0-9.]+)$', metrics.text, re.M)
    assert counted and float(counted.group(1)) >= 1, metrics.text[:2000]


def test_it_runs_as_its_non_root_user_on_a_read_only_root(container: Container) -> None:
    # Every process of the container, gunicorn's master and its workers.
    pids = container.exec("sh", "-c", "ls /proc | grep -E '^[0-9]+$'").stdout.split()
    uids = set()
    for pid in pids:
        status = container.exec("cat", f"/proc/{pid}/status").stdout
        found = re.search(r"^Uid:\s+(\d+)\s+(\d+)", status, re.M)
        if found:
            uids.update({int(found.group(1)), int(found.group(2))})
    assert uids == {UID}, uids
    assert container.exec("touch", "/app/written").returncode != 0
    assert "Read-only file system" in container.exec("touch", "/opt/venv/written").stderr
    assert container.exec("touch", "/tmp/written").returncode == 0  # the one writable path
    assert container.exec("touch", f"{SAMPLES_IN_CONTAINER}/kernel-logs/written").returncode != 0


def test_ports_are_published_on_loopback_only(container: Container) -> None:
    inspect = json.loads(_run(["podman", "inspect", container.id]).stdout)[0]
    bindings = inspect["HostConfig"]["PortBindings"]
    assert {key: [b["HostIp"] for b in value] for key, value in bindings.items()} == {
        "8000/tcp": ["127.0.0.1"],
        "9464/tcp": ["127.0.0.1"],
    }


def test_the_journal_source_reads_mounted_journal_files(image: str, tmp_path: Path) -> None:
    # The sample journals, made by the samples' own command; read in the image by the pinned cysystemd wheel.
    made = subprocess.run(
        ["sh", str(ROOT / "conf" / "samples" / "journal" / "make-journals.sh"), str(tmp_path / "journal")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    for path in (tmp_path / "journal").iterdir():
        path.chmod(0o644)  # the container's user is not the owner
    env = {**SAMPLE_ENV, "ATTRIBUTION_KERNEL_LOG_SOURCE": "journal", "ATTRIBUTION_JOURNAL_DIR": "/journal"}
    started = _start(image, env, (f"{tmp_path / 'journal'}:/journal:ro",))
    try:
        _wait_ready(started)
        request, shown = _readme_example("### The local run")
        body = requests.post(f"{started.base_url}/v1/attribution", json=request, timeout=15).json()
        for finding in shown["attributions"]:
            for evidence in finding["evidence"]:
                evidence["source"] = "journal"
        assert body["attributions"] == shown["attributions"]
        assert body["unattributed_targets"] == [] and "error" not in body
    finally:
        _remove(started)


def test_sigterm_stops_it_cleanly(image: str) -> None:
    started = _start(image, SAMPLE_ENV)
    try:
        _wait_ready(started)
        _run(["podman", "kill", "--signal", "TERM", started.id])
        done = _run(["podman", "wait", started.id], timeout=60)
        assert done.stdout.strip() == "0", started.logs()
        logs = started.logs()
        assert "Shutting down: Master" in logs, logs
        assert not started.state()["OOMKilled"]
    finally:
        _remove(started)


def test_the_image_holds_the_runtime_and_no_test_doc_or_sample_file(image: str) -> None:
    # Listed as root, so that no folder is left unread.
    listing = _run(
        ["podman", "run", "--rm", "--read-only", "--user", "0:0", *_ulimits(), "--entrypoint", "find", image,
         "/", "-xdev", "(", "-path", "/proc", "-o", "-path", "/sys", ")", "-prune", "-o", "-type", "f", "-print"],
        timeout=120,
    ).stdout.splitlines()  # fmt: skip
    files = set(listing)
    tracked = _tracked()
    # /app holds exactly the runtime files the Dockerfile copies (and their compiled bytecode), and each compiled part
    # the build stage made (setup.py) beside its source, once; the build stage's environment and sources stay behind.
    in_app = {p[len("/app/") :] for p in files if p.startswith("/app/") and "/__pycache__/" not in p}
    expected = {p for p in tracked if p.startswith(RUNTIME) or p in RUNTIME}
    built = {p for p in in_app if p.endswith(".so")}
    sources = sorted(p for p in tracked if p.startswith("providers/") and p.endswith(".c"))
    assert len(sources) == 7 and sorted(p.split(".")[0] for p in built) == [p[: -len(".c")] for p in sources], built
    assert in_app - built == expected
    assert not any(f.startswith(("/opt/build/", "/build/")) for f in files)
    # Nowhere a copy could have put it is a test, doc, benchmark, manifest or sample file of the repository (the
    # system's and the installed packages' own files aside: Debian's Python has a Makefile of its own).
    ours = [f for f in files if not f.startswith(("/usr/", "/opt/venv/lib/", "/var/lib/", "/etc/"))]
    for path in tracked:
        if path.startswith(NEVER_IN_IMAGE) or path in NEVER_IN_IMAGE_FILES:
            assert not any(f.endswith("/" + path) for f in ours), path
    # Nor any test tool: the virtual environment holds requirements.txt only.
    site = [f for f in files if f.startswith("/opt/venv/lib/")]
    assert site, "no virtual environment in the image"
    for tool in ("pytest", "hypothesis", "schemathesis", "ruff", "responses"):
        assert not any(f"/site-packages/{tool}/" in f for f in site), tool
    user = json.loads(_run(["podman", "image", "inspect", image]).stdout)[0]["Config"]["User"]
    assert user == f"{UID}:{UID}"
