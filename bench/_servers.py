"""Shared by the benchmarks: gunicorn processes on free 127.0.0.1 ports (stopped by PID) and a load generator."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

#: a kernel log of one line, an Xid 79 on worker-01: the small log of the throughput and profile benchmarks
ONE_LINE = (
    "2026-09-09T11:58:00.000000+00:00 worker-01 kernel: NVRM: Xid (PCI:0000:07:00): 79, GPU has fallen off the bus.\n"
)

#: in the README's request, the failure time that a varied body replaces (`with_failure_time`)
DETECTED_AT = b'"2026-09-09T12:00:00Z"'

ROOT = Path(__file__).resolve().parents[1]
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) process `pid` has used so far, from /proc; OSError where it cannot be read."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def base_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTRIBUTION_")}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env.update(extra)
    return env


class Server:
    """A gunicorn master started with `args` (cwd = repo root); `stop()` sends SIGTERM to its PID."""

    def __init__(self, args: list[str], env: dict[str, str], port: int, log: Path) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self._log = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", *args], cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT
        )

    def wait_ready(self, path: str = "/healthz", workers: int = 2, timeout_s: float = 30.0) -> None:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if self.process.poll() is not None:
                raise SystemExit(f"gunicorn exited {self.process.returncode}; see {self._log.name}")
            try:
                with urllib.request.urlopen(self.url + path, timeout=1) as response:  # noqa: S310 - loopback
                    if response.status == 200 and len(self.worker_pids()) >= workers:
                        return
            except OSError:
                pass
            time.sleep(0.1)
        raise SystemExit(f"gunicorn did not become ready in {timeout_s} s; see {self._log.name}")

    def worker_pids(self) -> list[int]:
        """The PIDs of the master's live children: its workers."""
        pid = self.process.pid
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]

    def worker_cpu(self) -> dict[int, float]:
        """CPU seconds (user + system) each live worker has used so far, by PID."""
        return {child: cpu_seconds(child) for child in self.worker_pids()}

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=40)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        self._log.close()


def start_adapter(env: dict[str, str], log: Path, workers: int = 2, threads: int = 8) -> Server:
    """The Adapter with the project's own config, `gunicorn -c conf/gunicorn.conf.py wsgi:app`."""
    port, metrics = free_port(), free_port()
    full = base_env(
        {
            "ATTRIBUTION_BIND": f"127.0.0.1:{port}",
            "ATTRIBUTION_METRICS_BIND": f"127.0.0.1:{metrics}",
            "ATTRIBUTION_WORKERS": str(workers),
            "ATTRIBUTION_THREADS": str(threads),
            "ATTRIBUTION_LOG_LEVEL": "warning",
            **env,
        }
    )
    server = Server(["-c", "conf/gunicorn.conf.py", "wsgi:app"], full, port, log)
    server.wait_ready(workers=workers)
    return server


def start_bare(log: Path, workers: int = 2, threads: int = 8) -> Server:
    """bench/bare_app.py under the same worker settings as conf/gunicorn.conf.py (gthread, keep-alive 5, preload)."""
    port = free_port()
    args = [
        "--bind", f"127.0.0.1:{port}", "--workers", str(workers), "--worker-class", "gthread",
        "--threads", str(threads), "--keep-alive", "5", "--timeout", "330", "--preload", "--no-control-socket",
        "bench.bare_app:app",
    ]  # fmt: skip
    server = Server(args, base_env({}), port, log)
    server.wait_ready(workers=workers)
    return server


@dataclass
class LoadResult:
    seconds: float
    latencies_ms: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    error_types: dict[str, int] = field(default_factory=dict)  # `error.type` of 200 answers
    failures: int = 0  # no HTTP answer

    @property
    def rate(self) -> float:
        return len(self.latencies_ms) / self.seconds if self.seconds else 0.0

    def pct(self, q: float) -> float:
        if not self.latencies_ms:
            return float("nan")
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]

    def line(self) -> str:
        return (
            f"{self.rate:9.1f} req/s  p50 {self.pct(50):8.2f} ms  p99 {self.pct(99):8.2f} ms  "
            f"n={len(self.latencies_ms)} statuses={self.statuses} errors={self.error_types} no-answer={self.failures}"
        )


def run_load(port: int, body: bytes, clients: int, seconds: float, warmup_s: float = 1.0) -> LoadResult:
    """`clients` threads, each on its own keep-alive connection, POSTing `body` for `seconds` (after a warm-up)."""
    result = LoadResult(seconds)
    lock = threading.Lock()
    start_at = time.monotonic() + warmup_s
    stop_at = start_at + seconds
    headers = {"Content-Type": "application/json"}

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        local: list[float] = []
        statuses: dict[int, int] = {}
        errors: dict[str, int] = {}
        failures = 0
        for _ in range(10_000_000):
            now = time.monotonic()
            if now >= stop_at:
                break
            try:
                conn.request("POST", "/v1/attribution", body=body, headers=headers)
                response = conn.getresponse()
                payload = response.read()
            except (OSError, http.client.HTTPException):
                failures += now >= start_at
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                continue
            if now < start_at:
                continue
            local.append((time.monotonic() - now) * 1000)
            statuses[response.status] = statuses.get(response.status, 0) + 1
            if response.status == 200 and b'"error"' in payload:
                kind = json.loads(payload).get("error", {}).get("type", "?")
                errors[kind] = errors.get(kind, 0) + 1
        conn.close()
        with lock:
            result.latencies_ms.extend(local)
            result.failures += failures
            for k, v in statuses.items():
                result.statuses[k] = result.statuses.get(k, 0) + v
            for k, v in errors.items():
                result.error_types[k] = result.error_types.get(k, 0) + v

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=warmup_s + seconds + 60)
    return result


def summarize(values: list[float]) -> str:
    ordered = sorted(values)
    p = lambda q: ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]  # noqa: E731
    return f"mean {statistics.fmean(values):8.3f} ms  p50 {p(50):8.3f} ms  p99 {p(99):8.3f} ms  (n={len(values)})"


def request_body(nodes: list[str], ranks: list[int], timeout_ms: int = 10000) -> dict:
    return {
        "schema_version": "0.1.0",
        "workload_id": "bench",
        "scope": {"nodes": nodes, "ranks": ranks},
        "failure_context": {"detected_at": "2026-09-09T12:00:00Z", "detection_signal": "application_error"},
        "timeout_ms": timeout_ms,
        "workload_context": {"workflow_id": "bench", "attempt_index": 0},
        "phase": "fast",
    }


def with_failure_time(body: bytes, microseconds: int) -> bytes:
    """The README's request `body` with its failure time `microseconds` after 12:00:00 (below a second): a request
    that asks about a window of its own, which no answer kept for another request serves."""
    return body.replace(DETECTED_AT, b'"2026-09-09T12:00:00.%06dZ"' % microseconds)
