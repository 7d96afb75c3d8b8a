"""Load machinery: a bounded mixed-request client pool against a real gunicorn, and an RSS sampler from /proc.

Mode: CI by default (12 s, 16 clients); `ATTRIBUTION_LOAD_SECONDS=60` (and optionally `ATTRIBUTION_LOAD_CLIENTS`)
selects a long run. Every loop is bounded in count and in time; only 127.0.0.1 is used.
"""

from __future__ import annotations

import collections
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from tests.gunicorn_process import Gunicorn

LONG_SECONDS = os.environ.get("ATTRIBUTION_LOAD_SECONDS", "").strip()
DURATION_S = float(LONG_SECONDS) if LONG_SECONDS else 12.0
CLIENTS = int(os.environ.get("ATTRIBUTION_LOAD_CLIENTS", "32" if LONG_SECONDS else "16"))
WORKERS = 2
THREADS = 8
#: requests per client at most, whatever the duration: the bound on every client loop
MAX_REQUESTS_PER_CLIENT = 200_000
REQUEST_TIMEOUT_S = 15.0
QUICK_DELAY_MS = 5
SLOW_PROVIDER_DELAY_MS = 400
SLOW_PROVIDER_TIMEOUT_MS = 100
WINDOW = {"start_time": "2026-09-09T12:05:00Z", "end_time": "2026-09-09T12:20:00Z"}
#: the mix: a fast, a slow continuing an earlier fast, an invalid body (422), a provider slower than timeout_ms
MIX = ("fast", "slow", "fast", "invalid", "slow", "slow_provider", "fast", "slow")

SERVER_ENV = {
    "ATTRIBUTION_PROVIDER": "tests.load.provider:from_options",
    "ATTRIBUTION_LOAD_DELAY_MS": str(QUICK_DELAY_MS),
    "ATTRIBUTION_LOAD_SLOW_DELAY_MS": str(SLOW_PROVIDER_DELAY_MS),
    "ATTRIBUTION_WORKERS": str(WORKERS),
    "ATTRIBUTION_THREADS": str(THREADS),
    "ATTRIBUTION_LOG_LEVEL": "warning",
}


def body(client: int, kind: str, session: str | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "schema_version": "0.1.0",
        "workload_id": f"slow-{client}" if kind == "slow_provider" else f"load-{client}",
        "scope": {"nodes": ["worker-01", "worker-02"], "ranks": [0, 1]},
        "failure_context": {"detected_at": "2026-09-09T12:00:00Z", "detection_signal": "application_error"},
        "timeout_ms": SLOW_PROVIDER_TIMEOUT_MS if kind == "slow_provider" else 10000,
        "workload_context": {"workflow_id": "load", "attempt_index": client},
        "phase": "fast",
    }
    if kind == "slow":
        data["phase"] = "slow"
        data["continue_session"] = session
        data["scope"] |= WINDOW
    if kind == "invalid":
        data["timeout_ms"] = "10000"  # a string for an integer: 422
    return data


def check(kind: str, response: requests.Response, session: str | None) -> str | None:
    """None when the answer is the kind expected, else what is wrong."""
    if kind == "invalid":
        if response.status_code != 422 or not isinstance(response.json().get("detail"), list):
            return f"invalid: {response.status_code}"
        return None
    if response.status_code != 200:
        return f"{kind}: {response.status_code}"
    data = response.json()
    if kind == "slow_provider":
        ok = data.get("error", {}).get("type") == "timeout" and data["attributions"] == []
        return None if ok else f"slow_provider: {data.get('error')}"
    if "error" in data or [f["target"]["name"] for f in data["attributions"]] != ["worker-01"]:
        return f"{kind}: {data.get('error')} {data['attributions']}"
    if kind == "slow" and data["attribution_session_id"] != session:
        return "slow: session id changed"
    if kind == "fast" and not data["attribution_session_id"]:
        return "fast: no session"
    if not response.headers.get("X-Request-ID"):
        return f"{kind}: no X-Request-ID"
    return None


@dataclass
class Outcome:
    client: int
    kind: str
    started: float
    ended: float
    status: int | None  # None: no HTTP answer at all (reset, closed, timed out)
    failure: str | None  # the exception's class when there was no answer
    wrong: str | None  # an answer of the wrong kind


class LoadRun:
    """`clients` threads sending the MIX until `stop()` or `seconds`; every outcome recorded."""

    def __init__(self, base_url: str, clients: int, seconds: float, keep_alive: bool = True) -> None:
        self.url = f"{base_url}/v1/attribution"
        self.clients = clients
        self.deadline = time.monotonic() + seconds
        self.keep_alive = keep_alive
        self.outcomes: list[Outcome] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._client, args=(i,), daemon=True) for i in range(clients)]

    def start(self) -> LoadRun:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def join(self) -> list[Outcome]:
        for thread in self._threads:
            thread.join(timeout=REQUEST_TIMEOUT_S + 5)
        assert not any(t.is_alive() for t in self._threads), "a load client did not finish"
        return self.outcomes

    def _client(self, client: int) -> None:
        http = requests.Session()
        headers = {} if self.keep_alive else {"Connection": "close"}
        sessions: collections.deque[str] = collections.deque(maxlen=16)
        try:
            for n in range(MAX_REQUESTS_PER_CLIENT):
                if self._stop.is_set() or time.monotonic() >= self.deadline:
                    return
                kind = MIX[(n + client) % len(MIX)]
                if kind == "slow" and not sessions:
                    kind = "fast"
                session = sessions[0] if kind == "slow" else None
                started = time.monotonic()
                status = failure = wrong = None
                try:
                    response = http.post(
                        self.url, json=body(client, kind, session), headers=headers, timeout=REQUEST_TIMEOUT_S
                    )
                    status = response.status_code
                    wrong = check(kind, response, session)
                    if kind == "fast" and wrong is None:
                        sessions.append(response.json()["attribution_session_id"])
                except requests.RequestException as exc:
                    failure = type(exc).__name__
                with self._lock:
                    self.outcomes.append(Outcome(client, kind, started, time.monotonic(), status, failure, wrong))
        finally:
            http.close()


def rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


class RssSampler:
    """Every second, the RSS (KiB) of the master and of each live worker, until stopped (bounded in count)."""

    def __init__(self, server: Gunicorn, max_samples: int = 4000) -> None:
        self.server = server
        self.samples: list[tuple[float, int, dict[int, int]]] = []  # (time, total, per pid)
        self.max_samples = max_samples
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> RssSampler:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set() and len(self.samples) < self.max_samples:
            pids = [self.server.pid, *sorted(self.server.worker_pids())]
            per_pid = {pid: rss_kib(pid) for pid in pids}
            self.samples.append((time.monotonic(), sum(per_pid.values()), per_pid))
            self._stop.wait(1.0)

    def stop(self) -> list[tuple[float, int, dict[int, int]]]:
        self._stop.set()
        self._thread.join(timeout=5)
        return self.samples
