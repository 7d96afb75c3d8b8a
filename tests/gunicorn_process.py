"""Real gunicorn processes on 127.0.0.1 for the process-level suites, each stopped by its PID (a pytest plugin)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parents[1]
BOOT_TIMEOUT_S = 30.0


#: ports this test process has handed out: the kernel may give a closed probe's port again at once, and two servers
#: of one test (a service port and its metrics port) must never be given the same one
_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A port free on 127.0.0.1 now and not handed out before by this process (at most 64 probes)."""
    for _ in range(64):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port
    raise RuntimeError("no free port on 127.0.0.1 that this test process has not handed out already")


def adapter_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test process's environment without any ATTRIBUTION_* variable, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTRIBUTION_")}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def children(pid: int) -> list[int]:
    """The live children of process `pid`, read from /proc."""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(child) for child in path.read_text().split()] if path.exists() else []


def running(pid: int) -> bool:
    """Whether `pid` is a process that has not ended (a zombie has ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


class Gunicorn:
    """One gunicorn master started with the project's own config and Procfile command."""

    def __init__(self, env: Mapping[str, str], log_path: Path, app: str = "wsgi:app") -> None:
        self.port = free_port()
        self.metrics_port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.metrics_url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        self.log_path = log_path
        self.workers_setting = env.get("ATTRIBUTION_WORKERS", "2")  # may be invalid on purpose in boot tests
        full_env = adapter_env(
            {
                "ATTRIBUTION_BIND": f"127.0.0.1:{self.port}",
                "ATTRIBUTION_METRICS_BIND": f"127.0.0.1:{self.metrics_port}",
                **env,
            }
        )
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", "conf/gunicorn.conf.py", app],
            cwd=ROOT,
            env=full_env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def output(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout_s: float = BOOT_TIMEOUT_S) -> set[int]:
        """Wait until /healthz answers and every worker is forked (healthz can answer before the last one is)."""
        workers = int(self.workers_setting)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"gunicorn exited {self.process.returncode}:\n{self.output()}")
            try:
                healthy = requests.get(f"{self.base_url}/healthz", timeout=1).status_code == 200
            except requests.ConnectionError:
                healthy = False
            pids = self.worker_pids()
            if healthy and len(pids) == workers:
                return pids
            time.sleep(0.05)
        raise AssertionError(
            f"gunicorn did not serve /healthz with {workers} workers within {timeout_s} s:\n{self.output()}"
        )

    def wait_exit(self, timeout_s: float = BOOT_TIMEOUT_S) -> int:
        return self.process.wait(timeout=timeout_s)

    def worker_pids(self) -> set[int]:
        """The master's live children, read from /proc."""
        return set(children(self.pid))

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=40)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        self._log.close()


@pytest.fixture
def start_gunicorn(tmp_path: Path) -> Iterator:
    started: list[Gunicorn] = []

    def start(env: Mapping[str, str]) -> Gunicorn:
        server = Gunicorn(env, tmp_path / f"gunicorn-{len(started)}.log")
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def gunicorn(start_gunicorn: Callable[[Mapping[str, str]], Gunicorn]) -> Callable[[Mapping[str, str]], Gunicorn]:
    """`start(env)`: a real gunicorn with the project config, ready with all its workers, stopped by PID at the end."""

    def start(env: Mapping[str, str]) -> Gunicorn:
        server = start_gunicorn(env)
        server.wait_ready()
        return server

    return start
